"""The English words occurrence.py reads: tokens, numbers, month and weekday names, past forms.

``tokenize`` splits text into word/number/punctuation tokens in one linear regex pass and
marks sentence boundaries; ``past_form`` says whether a word is a past. Which way a sentence
points in time is read by ``tense``. Tables only; no dates are computed here.
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
BIRTH = "a birth date without its year"
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
    "febuary": 2, "feburary": 2,  # misspelled as often as not
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
            "sunday": 6,
            "tuseday": 1, "wensday": 2, "wendsday": 2, "wednsday": 2, "thurday": 3, "thursay": 3,
            "saterday": 5}  # common misspellings
WEEKDAY_ABBREVIATIONS = {"mon": 0, "tue": 1, "tues": 1, "wed": 2, "weds": 2, "thu": 3, "thur": 3, "thurs": 3,
                         "fri": 4, "sat": 5, "sun": 6}
# short weekday names that are no other English word: a day in any case, alone ("on tues", "Thurs night");
# other short names ("Fri", and "Mon", "Wed", "Sat", "Sun", words too) alone need a capital and "on" ("on Sat")
PLAIN_WEEKDAY_ABBREVIATIONS = frozenset({"tue", "tues", "weds", "thu", "thur", "thurs"})
# words before a short month name alone ("back in Sept", "until Aug"); not "from", "by", "of" or "since",
# which come before a name as often ("a card from Jan", "since Jan left")
SHORT_MONTH_LEADS = frozenset({"in", "during", "until", "till", "early", "mid", "late"})
# words for days and their chat spellings: the offset from the observation day
DAY_WORDS = {"today": 0, "tonight": 0, "tonite": 0, "yesterday": -1, "yday": -1, "yesturday": -1, "yesteday": -1,
             "tomorrow": 1, "tmrw": 1, "tmr": 1, "tmw": 1, "tomorow": 1, "tommorow": 1, "tommorrow": 1}
VAGUE_PHRASES = (("recently",), ("lately",), ("not", "long", "ago"), ("long", "ago"), ("a", "while", "ago"),
                 ("a", "while", "back"), ("some", "time", "ago"), ("a", "long", "time", "ago"), ("the", "other", "day"),
                 ("the", "other", "week"), ("the", "other", "weekend"), ("the", "other", "night"),
                 ("the", "other", "evening"), ("the", "other", "morning"), ("the", "other", "afternoon"))
FREQUENCY = frozenset({"always", "usually", "normally", "typically", "generally", "often", "sometimes", "every",
                       "each", "never"})  # in a clause with no past form: a habit ("in May we always plant tomatoes")
SEASONS = frozenset({"spring", "summer", "fall", "autumn", "winter"})
# verbs that move a date ("moved the meeting to Friday", "postponed", "pushed back"): the new date is ahead
CHANGE_STEMS = ("mov", "push", "postpon", "reschedul", "chang", "shift", "bump", "switch", "delay", "brought")
PARTS_OF_DAY = frozenset({"morning", "afternoon", "evening", "night"})
UNITS = {"day": "day", "days": "day", "week": "week", "weeks": "week", "weekend": "weekend",
         "weekends": "weekend", "month": "month", "months": "month", "year": "year", "years": "year",
         "wk": "week", "wks": "week", "mos": "month", "mth": "month", "mths": "month", "yr": "year", "yrs": "year",
         "wknd": "weekend", "wknds": "weekend", "wkend": "weekend", "wkends": "weekend"}
# a unit's short forms after last/this/next ("last yr" is last year, as "last wk" is last week)
UNIT_SHORT = {"wk": "week", "yr": "year", "mth": "month", "wknd": "weekend", "wkend": "weekend"}
CLOCK_UNITS = {"hour": 3600, "hours": 3600, "hr": 3600, "hrs": 3600,  # seconds each: "3 hours ago"
               "minute": 60, "minutes": 60, "min": 60, "mins": 60}
ORDINALS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "last": -1}  # a week or weekend of a month
# Holidays on one date every year, by the words naming them (a possessive 's dropped: "year's" -> "year").
FIXED_HOLIDAYS = {
    ("christmas", "eve"): (12, 24), ("christmas", "day"): (12, 25), ("christmas",): (12, 25),
    ("boxing", "day"): (12, 26), ("new", "year", "eve"): (12, 31), ("new", "years", "eve"): (12, 31),
    ("new", "year", "day"): (1, 1), ("new", "years", "day"): (1, 1), ("halloween",): (10, 31),
    ("valentine", "day"): (2, 14), ("valentines", "day"): (2, 14),
    ("new", "year"): (1, 1),  # "for New Year's" alone: its eve and its day
    ("xmas",): (12, 25), ("xmas", "eve"): (12, 24), ("xmas", "day"): (12, 25), ("nye",): (12, 31),
    ("st", "patrick", "day"): (3, 17), ("st", ".", "patrick", "day"): (3, 17), ("saint", "patrick", "day"): (3, 17),
    ("april", "fool", "day"): (4, 1), ("april", "fools", "day"): (4, 1), ("april", "fools", "'", "day"): (4, 1),
    ("april", "fools"): (4, 1),
}
# names that also name other things ("a new year begins", "April Fools jokes"): dates only after a lead word
LEAD_ONLY_HOLIDAYS = frozenset({("new", "year"), ("april", "fools")})
# Holidays whose date moves from year to year or differs between countries: named, never guessed.
MOVABLE_HOLIDAYS = (("thanksgiving",), ("easter",), ("mother", "day"), ("mothers", "day"), ("father", "day"),
                    ("fathers", "day"), ("labor", "day"), ("labour", "day"), ("memorial", "day"), ("good", "friday"),
                    ("black", "friday"), ("cyber", "monday"))
# A one-word holiday name is a date only after one of these ("at Christmas", not "a Christmas tree").
HOLIDAY_LEADS = frozenset({"on", "at", "for", "over", "around", "during", "since", "until", "till", "before",
                           "after", "by", "last", "this", "next", "past"})
POSSESSIVE_BLOCKERS = frozenset({"the", "my", "your", "his", "her", "our", "their", "its", "a", "at", "very"})

PAST_WORDS = frozenset({
    "was", "were", "did", "had", "went", "got", "came", "saw", "made", "took", "met", "ran", "told",
    "said", "gave", "left", "bought", "found", "felt", "thought", "began", "won", "lost", "sent",
    "spent", "brought", "caught", "taught", "wrote", "drove", "flew", "ate", "drank", "slept", "kept",
    "held", "heard", "knew", "paid", "stood", "sang", "swam", "threw", "wore", "woke", "broke", "chose",
    "fell", "forgot", "became", "ago", "yesterday", "yday", "yesturday", "yesteday", "didn't", "wasn't", "weren't",
    "hadn't", "been",
    # irregular pasts that no present, name or common noun shares ("read", "set", "quit" are presents too;
    # "Drew", "Rose", "Lent", "Sat", "a shot" are names, a season, a day, a noun)
    "sold", "built", "fought", "rode", "grew", "hung", "led", "fed", "dug", "shook", "stole", "struck", "spoke",
    "sought", "meant", "hid", "fled", "overcame", "forgave", "understood", "dealt", "swept", "wept", "crept",
    "leapt", "knelt", "froze", "blew", "bled", "sped", "bred",
    # -ed pasts shorter than the -ed rule's five letters
    "died", "owed", "sued", "dyed", "tied", "lied", "eyed", "aced",
})
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
                       "before", "when", "so", "but", "instead"})
# Nouns an ordinal counts ("on the 4th floor", "on the 2nd try", "on the 3rd day of the trip"): no day of a month
NTH_NOUNS = frozenset({
    "floor", "floors", "time", "times", "try", "attempt", "day", "night", "morning", "evening", "week", "month", "year",
    "grade", "place", "round", "lap", "page", "level", "step", "row", "chapter", "inning", "hole", "anniversary",
    "birthday", "edition", "generation", "century", "story", "storey", "date", "question", "episode", "season",
    "game", "match", "half", "quarter", "mile", "lesson", "class", "session", "visit", "trip", "street", "avenue",
    "run", "go", "shot", "take", "lane", "stop", "hour", "minute", "leg", "stage", "set", "part", "book", "film",
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


def s_form(low: str) -> bool:
    """A lower-case word of four letters or more ending in a plain -s: a plural noun or a present -s verb
    by its form ("parents", "trains"), not "-ss", "-us" or a possessive "'s"."""
    return len(low) > 3 and low.endswith("s") and not low.endswith(("ss", "us", "'s"))


def past_form(low: str) -> bool:
    """A lower-case word read as a past-tense cue: a listed past form, or a verb-like ``-ed`` word."""
    return low in PAST_WORDS or (len(low) >= 5 and low.endswith("ed") and low not in _ED_NOT_PAST)


def number_value(token: Token | None, *, allow_article: bool = True) -> int | None:
    """The integer a token spells ("3", "three", and "a"/"an" when allowed), else None."""
    low = token.low if token is not None else ""
    if low.isdigit() and len(low) <= 4:
        return int(low)
    return NUMBER_WORDS.get(low, 1 if allow_article and low in ARTICLES else None)


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


def ordinal_day(token: Token | None) -> int | None:
    """A day of the month written as a digit ordinal ("5th"), else None: a bare "5" may count anything."""
    return day_number(token) if token is not None and token.low[-2:] in ("st", "nd", "rd", "th") else None


def year_number(token: Token | None) -> int | None:
    """A four-digit year between 1000 and 2999."""
    if token is None or len(token.low) != 4 or not token.low.isdigit():
        return None
    value = int(token.low)
    return value if 1000 <= value <= 2999 else None
