"""The English words occurrence.py reads: tokens, numbers, month and weekday names, tense cues.

``tokenize`` splits text into word/number/punctuation tokens in one linear regex pass and
marks sentence boundaries; ``sentence_tense`` reports past/future cues of one sentence.
Tables only; no dates are computed here.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

# Alternatives are single character-class runs or fixed shapes: linear on any input.
_TOKEN = re.compile(
    r"\d{4}-\d{2}-\d{2}(?!\d)|\d{4}-\d{2}(?![\d-])|\d{1,2}/\d{1,2}/\d{2,4}(?!\d)"
    r"|\d+(?:st|nd|rd|th)?|[A-Za-z]+(?:['\u2019][A-Za-z]+)?|[^\sA-Za-z\d]"
)
_SENTENCE_END = frozenset(".!?;")
SENTENCE_BREAK = re.compile(r"[.!?;\n]")  # where a sentence ends in raw text (the tokenizer's ends, and line breaks)
UNCLEAR_TENSE = "weekday or day without last/this/next and unclear tense"
CUE_REACH = 15  # tokens searched on each side for a tense cue; keeps the scan linear

NUMBER_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14,
    "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50,
}
ARTICLES = frozenset({"a", "an"})
VAGUE_QUANTITIES = frozenset({"few", "several", "couple", "some", "many", "handful", "bunch"})
APPROXIMATORS = frozenset({"about", "around", "roughly", "approximately", "almost", "nearly", "over",
                           "approx", "circa", "maybe", "like"})

MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7,
    "august": 8, "september": 9, "october": 10, "november": 11, "december": 12,
}
MONTH_ABBREVIATIONS = {
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}
# Month names that are also common English words: they need a capital letter as well as context.
VERB_MONTHS = frozenset({"may", "march"})
MONTH_CONTEXT = frozenset({"in", "of", "since", "during", "until", "till", "by", "from", "through",
                           "throughout", "early", "mid", "late"})
YEAR_CONTEXT = MONTH_CONTEXT | {"year"}

WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5,
            "sunday": 6}
WEEKDAY_ABBREVIATIONS = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "thu": 3, "thur": 3, "thurs": 3,
                         "fri": 4, "sat": 5, "sun": 6}
VAGUE_PHRASES = (("recently",), ("lately",), ("not", "long", "ago"), ("long", "ago"), ("a", "while", "ago"),
                 ("a", "while", "back"), ("some", "time", "ago"), ("a", "long", "time", "ago"), ("the", "other", "day"),
                 ("the", "other", "week"))
SEASONS = frozenset({"spring", "summer", "fall", "autumn", "winter"})
PARTS_OF_DAY = frozenset({"morning", "afternoon", "evening", "night"})
UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "weekend": "weekend",
         "weekends": "weekend", "month": "month", "months": "month", "year": "year", "years": "year",
         "wk": "week", "wks": "week", "mos": "month", "mths": "month", "yr": "year", "yrs": "year"}
FORTNIGHTS = frozenset({"fortnight", "fortnights"})  # two weeks each
CLOCK_UNITS = {"hour": 3600, "hours": 3600, "hr": 3600, "hrs": 3600,  # seconds each: "3 hours ago"
               "minute": 60, "minutes": 60, "min": 60, "mins": 60}
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1}  # a week or weekend of a month
# Holidays on one date every year, by the words naming them (a possessive 's dropped: "year's" -> "year").
FIXED_HOLIDAYS = {
    ("christmas", "eve"): (12, 24), ("christmas", "day"): (12, 25), ("christmas",): (12, 25),
    ("boxing", "day"): (12, 26), ("new", "year", "eve"): (12, 31), ("new", "years", "eve"): (12, 31),
    ("new", "year", "day"): (1, 1), ("new", "years", "day"): (1, 1), ("halloween",): (10, 31),
    ("valentine", "day"): (2, 14), ("valentines", "day"): (2, 14),
}
# Holidays whose date moves from year to year or differs between countries: named, never guessed.
MOVABLE_HOLIDAYS = (("thanksgiving",), ("easter",), ("mother", "day"), ("mothers", "day"), ("father", "day"),
                    ("fathers", "day"), ("labor", "day"), ("labour", "day"), ("memorial", "day"))
# A one-word holiday name is a date only after one of these ("at Christmas", not "a Christmas tree").
HOLIDAY_LEADS = frozenset({"on", "at", "for", "over", "around", "during", "since", "until", "till", "before",
                           "after", "by", "last", "this", "next", "past"})
POSSESSIVE_BLOCKERS = frozenset({"the", "my", "your", "his", "her", "our", "their", "its", "a", "at", "very"})

_PAST_WORDS = frozenset({
    "was", "were", "did", "had", "went", "got", "came", "saw", "made", "took", "met", "ran", "told",
    "said", "gave", "left", "bought", "found", "felt", "thought", "began", "won", "lost", "sent",
    "spent", "brought", "caught", "taught", "wrote", "drove", "flew", "ate", "drank", "slept", "kept",
    "held", "heard", "knew", "paid", "stood", "sang", "swam", "threw", "wore", "woke", "broke", "chose",
    "fell", "forgot", "became", "ago", "yesterday", "didn't", "wasn't", "weren't", "hadn't", "been",
    # irregular pasts that no present, name or common noun shares ("read", "set", "quit" are presents too;
    # "Drew", "Rose", "Lent", "Sat", "a shot" are names, a season, a day, a noun)
    "sold", "built", "fought", "rode", "grew", "hung", "led", "fed", "dug", "shook", "stole", "struck", "spoke",
    "sought", "meant", "hid", "fled", "overcame", "forgave", "understood", "dealt", "swept", "wept", "crept",
    "leapt", "knelt", "froze", "blew",
})
# Of those, the ones that are also participles: after a present "be" a state ("it's meant to rain",
# "the tickets are sold out", "I'm fed up"), as an -ed word is
_PARTICIPLES = frozenset({"sold", "built", "fought", "hung", "led", "fed", "dug", "shook", "struck", "sought", "meant",
                          "hid", "understood", "dealt", "swept", "lost", "left", "kept", "held", "caught", "paid"})
# Words ending in -ed that are usually adjectives (or not verbs) and so say nothing about tense.
_ED_NOT_PAST = frozenset({
    "need", "feed", "seed", "speed", "bed", "red", "indeed", "embed", "proceed", "succeed", "exceed",
    "breed", "weed", "shed", "bleed", "greed", "excited", "interested", "tired", "pleased", "thrilled",
    "scared", "worried", "supposed", "used", "bored", "amazed", "stressed", "relaxed", "motivated",
    "determined", "prepared", "dedicated", "talented", "advanced", "detailed", "limited", "related",
    "based", "located", "complicated", "planned", "hundred", "sacred", "naked", "wicked", "blessed",
    "focused", "married", "engaged", "obsessed", "involved", "inspired", "overwhelmed", "delighted",
})
# What may follow "Tuesday the 7th" for the 7th to be a day (not "the 7th grade", "the 2nd half", "the
# 3rd and 4th graders", "the 2nd to last race", or "the 3rd of June", which names its month); a comma
# counts unless a number follows it ("the 1st, 2nd and 3rd place")
AFTER_NTH = frozenset({"", ".", ",", "!", "?", ";", ":", ")", "i", "we", "you", "he", "she", "they", "my", "our",
                       "at", "in", "was", "is", "will", "i'll", "we'll", "i'm", "we're", "for", "with", "after",
                       "before", "when", "so", "but"})
# Nouns an ordinal counts ("on the 4th floor", "on the 2nd try", "on the 3rd day of the trip"): no day of a month
NTH_NOUNS = frozenset({
    "floor", "floors", "time", "times", "try", "attempt", "day", "night", "morning", "evening", "week", "month", "year",
    "grade", "place", "round", "lap", "page", "level", "step", "row", "chapter", "inning", "hole", "anniversary",
    "birthday", "edition", "generation", "century", "story", "storey", "date", "question", "episode", "season",
    "game", "match", "half", "quarter", "mile", "lesson", "class", "session", "visit", "trip", "street", "avenue",
    "run", "go", "shot", "take", "lane", "stop", "hour", "minute", "leg", "stage", "set", "part", "book", "film",
})
_FUTURE_WORDS = frozenset({
    "will", "won't", "shall", "gonna", "tomorrow", "next", "soon", "upcoming", "plan", "plans",
    "planning", "planned", "hoping", "intend", "intending", "let's", "lets", "forward", "wait",
})


@dataclass(frozen=True, slots=True)
class Token:
    text: str
    low: str
    start: int
    end: int
    sentence: int

    @property
    def base(self) -> str:
        """Lower-case text without a possessive ``'s`` ("year's" -> "year")."""
        low = self.low
        return low[:-2] if low.endswith(("'s", "\u2019s")) else low

    @property
    def capitalised(self) -> bool:
        return self.text[:1].isupper()


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    sentence = 0
    last_end = 0
    for match in _TOKEN.finditer(text):
        piece = match.group()
        if "\n" in text[last_end:match.start()]:
            sentence += 1
        tokens.append(Token(piece, piece.lower(), match.start(), match.end(), sentence))
        if piece in _SENTENCE_END:
            sentence += 1
        last_end = match.end()
    return tokens


def sentence_tense(tokens: list[Token], first: int, last: int, begin: int, end: int) -> str:
    """"past", "future" or "unclear" for the expression ``tokens[begin:end]``: the tense cue nearest
    to it within its sentence ``tokens[first:last]`` (and CUE_REACH tokens) decides; no cue, or a
    tie, is "unclear". A progressive ("I'm moving in March") is an arrangement, so future, when the
    time follows it in its clause with at most its object between ("I'm taking the kids to the zoo on
    Saturday"); a time before it ("So on Saturday I'm walking the dog and...") is a story told in the
    present, and one after a comma, a new subject or a word that ties it to a thing ("a photo I'm
    sharing from the concert on Friday", "I'm editing the video we shot on Sunday", "the pics of our
    trip in March") is not the arrangement's; such a progressive is no cue."""
    for distance in range(1, min(CUE_REACH, max(begin - first, last - end)) + 1):
        found = set()
        for index in (begin - distance, end - 1 + distance):
            cue = _cue(tokens, index, first, last) if first <= index < last else None
            if cue == "progressive":
                cue = "future" if index < begin and _arranged(tokens[index + 1:begin]) \
                    and not _told_in_present(tokens[end:min(last, end + CUE_REACH)]) else None
            if cue is not None:
                found.add(cue)
        if len(found) == 1:
            return found.pop() or "unclear"
        if len(found) > 1:
            return "unclear"
    return "unclear"


# Between a progressive and a time, any of these ties the time to a thing, a span or another clause,
# not to when the arranged act happens ("the photos from Saturday", "the video we shot on Sunday").
_NOT_ARRANGED = frozenset({"from", "about", "since", "of", "after", "for", "on", "that", "which", "who", "where",
                           "when", "and", "but", "or", "so", "then", "i", "we", "you", "he", "she", "they", "it",
                           ",", ";", ":", "-", "(", ")"})
_ARRANGED_REACH = 8  # tokens from the -ing verb to the time, its object included


_TELLING = frozenset({"he", "she", "it", "this", "that"})  # a subject; a determiner's noun comes first
_TELLING_DETERMINERS = frozenset({"my", "his", "her", "our", "their", "the", "a", "some"})
_NOT_TOLD = frozenset({"is", "was", "has", "does", "its", "this", "his", "hers", "yes", "plus", "thus", "us"})


def _told_in_present(tail: list[Token]) -> bool:
    """After the time, "and" opens a clause whose verb is a simple present of the third person ("and my
    boss walks in", "and she just bolts"): the sentence tells a story in the present ("so I'm sitting
    there on Monday and my boss walks in"), and its progressive arranges nothing."""
    words = [t.low for t in tail]
    for at, word in enumerate(words[:-1]):
        subject = words[at + 1]
        if word != "and" or subject not in _TELLING and subject not in _TELLING_DETERMINERS:
            continue
        start = at + 2 + (subject in _TELLING_DETERMINERS)  # past the determiner's noun
        for verb in words[start:start + 2]:  # an adverb may stand before it ("she just bolts")
            if len(verb) > 3 and verb.endswith("s") and not verb.endswith("ss") and verb not in _NOT_TOLD:
                return True
    return False


# Words that open a time phrase ("on the 28th", "the first week of June"), read back from the time
_TIME_LEADS = frozenset({"on", "in", "at", "during", "for", "by", "until", "till", "the", "this", "next"})
_PART_OF = frozenset({"week", "weekend", "month", "end", "beginning", "start", "middle", "rest", "first", "second",
                      "third", "fourth", "last", "the"})


def _arranged(between: list[Token]) -> bool:
    """The tokens between a progressive and a time (the time phrase's own opening words aside: "on the",
    "the first week of") leave the time in the progressive's clause, as the when of the arranged act."""
    words = [t.low for t in between]
    while words and words[-1] in _TIME_LEADS:
        words.pop()
    if len(words) >= 2 and words[-1] == "of" and words[-2] in _PART_OF:
        words.pop()
        while words and (words[-1] in _PART_OF or words[-1] in _TIME_LEADS):
            words.pop()
    return len(words) <= _ARRANGED_REACH and not any(w in _NOT_ARRANGED for w in words)

_SUBJECTS = frozenset({"i", "we", "you", "they", "he", "she"})
# adverbs that may stand in a progressive of an arrangement ("we're also flying"); not "still" or
# "finally", which make it an ongoing state ("I'm still healing after the surgery in April")
_ING_ADVERBS = frozenset({"also", "really", "actually", "definitely", "probably", "all", "both", "just", "only",
                          "officially"})
# -ing words that, after "be", name a state or a quality now, not an arrangement ("I'm feeling better")
_ING_NOW = frozenset({
    "feeling", "thinking", "wondering", "trying", "loving", "enjoying", "missing", "hoping", "looking", "being",
    "struggling", "dealing", "recovering", "living", "waiting", "saying",
    "telling", "asking", "amazing", "boring", "interesting", "exciting", "annoying", "confusing", "exhausting",
    "relaxing", "surprising", "disappointing", "frustrating", "inspiring", "fascinating", "overwhelming",
    "charming", "stunning", "rewarding", "challenging", "worrying", "nothing", "something", "anything",
    "everything", "kidding", "joking",
})
# Present forms that name a timetable ("the flight departs on May 28", "my lease ends in August")
_SCHEDULED = frozenset({"departs", "leaves", "starts", "begins", "ends", "opens", "closes", "renews", "expires",
                        "arrives", "lands", "runs", "finishes", "launches", "airs", "premieres", "turns", "due"})
# Present "be" before an -ed word: a state now ("it's closed"); not "he's", "she's", often "has" ("he's moved")
_BE_NOW = frozenset({"is", "are", "am", "i'm", "we're", "you're", "they're", "it's", "that's", "isn't", "aren't"})
_WISH = frozenset({"like", "love", "prefer", "rather"})  # "I'd love to come on Saturday": a future wish


_DETERMINERS = frozenset({"the", "my", "our", "your", "his", "her", "their", "its", "a", "an", "this", "that"})
_TIMETABLE_SUBJECTS = frozenset({"it", "he", "she", "this", "that", "which"})
_QUANTIFIERS = frozenset({"few", "couple", "lot", "lots", "many", "some", "several", "more", "most", "no", "any", "all",
                          "both", "long", "short", "loose", "home", "fall", "autumn", "dead", "ski", "sprint"})


def _timetable(tokens: list[Token], index: int, first: int, after: str) -> bool:
    """A timetable word used as a verb with a subject: "the flight departs", "my lease ends", "it lands",
    "rent is due". Not a plural noun ("the leaves", "loose ends", "took turns", "home runs": nothing
    or a determiner right before it) nor "due to", nor "was due", whose "was" speaks."""
    before = [tokens[i].low.replace("\u2019", "'") for i in range(max(first, index - 3), index)]
    if not before or after == "to" or after.endswith("ing"):  # "it starts pouring": no timetable
        return False
    if before[-1] in _QUANTIFIERS or before[-1].isdigit() or before[-1] in NUMBER_WORDS:  # "a few runs"
        return False
    if tokens[index].low == "due":  # "rent is due", "the baby's due"; not "was due", "due date"
        return (before[-1] in ("is", "are") or before[-1].endswith("'s")) and after != "date"
    if before[-1] in _TIMETABLE_SUBJECTS:
        return True
    return before[-1] not in _DETERMINERS and any(w in _DETERMINERS for w in before[:-1])


def _cue(tokens: list[Token], index: int, first: int, last: int) -> str | None:
    low = tokens[index].low.replace("\u2019", "'")
    after = tokens[index + 1].low if index + 1 < last else ""
    if low in _FUTURE_WORDS or low.endswith("'ll") or (low in _SCHEDULED and _timetable(tokens, index, first, after)):
        return "future"
    if low == "going" and after == "to":  # "been going to pottery" is a habit; "was going to" a plan that fell
        before = tokens[index - 1].low if index > first else ""
        return None if before == "been" else "unclear" if before in ("was", "were") else "future"
    if low == "would" or low == "wouldn't" or low.endswith("'d"):  # "would" places a time after another past
        if after in _WISH:
            return "future"
        return "past" if low.endswith("'d") and (past_form(after) or after in ("already", "never")) else "unclear"
    if low.endswith("ing") and len(low) >= 5 and low not in _ING_NOW and _progressive(tokens, index, first):
        return "progressive"
    if not past_form(low):
        return None
    # "the shop is closed", "I'm booked", "it's meant to rain": a state now, not a past event
    return None if (low.endswith("ed") and low not in _PAST_WORDS or low in _PARTICIPLES) and index > first and \
        tokens[index - 1].low.replace("\u2019", "'") in _BE_NOW else "past"


def _progressive(tokens: list[Token], index: int, first: int) -> bool:
    """An -ing verb after a present "be" with a personal subject: "I'm moving", "we are flying", "are you
    coming" (a word such as "also" may stand between). Not "it's": "it's raining" is weather now."""
    at = index - 1
    if at > first and tokens[at].low in _ING_ADVERBS:
        at -= 1
    if at < first:
        return False
    be = tokens[at].low.replace("\u2019", "'")
    if be in ("i'm", "we're", "you're", "they're", "he's", "she's"):
        return True
    if be in ("am", "are", "is"):
        return at > first and tokens[at - 1].low in _SUBJECTS
    return be in _SUBJECTS and at > first and tokens[at - 1].low in ("am", "are", "is")


def past_form(low: str) -> bool:
    """A lower-case word read as a past-tense cue: a listed past form, or a verb-like ``-ed`` word."""
    return low in _PAST_WORDS or (len(low) >= 5 and low.endswith("ed") and low not in _ED_NOT_PAST)


def number_value(token: Token | None, *, allow_article: bool = True) -> int | None:
    """The integer a token spells ("3", "three", and "a"/"an" when allowed), else None."""
    if token is None:
        return None
    low = token.low
    if low.isdigit() and len(low) <= 4:
        return int(low)
    if low in NUMBER_WORDS:
        return NUMBER_WORDS[low]
    if allow_article and low in ARTICLES:
        return 1
    return None


def day_number(token: Token | None) -> int | None:
    """A day of the month written as digits, optionally ordinal ("3", "3rd"), 1..31."""
    if token is None:
        return None
    low = token.low
    digits = low[:-2] if low[-2:] in ("st", "nd", "rd", "th") else low
    if not digits.isdigit() or len(digits) > 2:
        return None
    value = int(digits)
    return value if 1 <= value <= 31 else None


def year_number(token: Token | None) -> int | None:
    """A four-digit year between 1000 and 2999."""
    if token is None or len(token.low) != 4 or not token.low.isdigit():
        return None
    value = int(token.low)
    return value if 1000 <= value <= 2999 else None
