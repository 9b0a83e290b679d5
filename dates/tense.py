"""Which way a sentence points in time: the tense cue nearest to a time expression.

``sentence_tense`` reads the cues of one sentence around an expression: past forms, future words,
a present progressive of an arrangement, a timetable's present, modals, "would", "going to"; no cue or a
tie is "unclear".
"""
from __future__ import annotations

from . import lexicon as lx
from .lexicon import Token

_FUTURE_WORDS = frozenset({
    "will", "won't", "shall", "gonna", "tomorrow", "tmrw", "tomorow", "tommorow", "next", "soon", "upcoming", "plan",
    "plans", "planning", "planned", "hoping", "intend", "intending", "let's", "lets", "forward", "wait", "dreading",
})

# Irregular pasts (lexicon.PAST_WORDS) that are also participles: after a present "be" a state ("it's meant to rain",
# "the tickets are sold out", "I'm fed up"), as an -ed word is
_PARTICIPLES = frozenset({"sold", "built", "fought", "hung", "led", "fed", "dug", "shook", "struck", "sought", "meant",
                          "hid", "understood", "dealt", "swept", "lost", "left", "kept", "held", "caught", "paid",
                          "tied", "dyed", "owed", "bred", "eyed"})  # "I'm tied up on Friday": busy then


def sentence_tense(tokens: list[Token], first: int, last: int, begin: int, end: int, *, plans: bool = False) -> str:
    """"past", "future" or "unclear" for the expression ``tokens[begin:end]``: the tense cue nearest
    to it within its sentence ``tokens[first:last]`` (and CUE_REACH tokens) decides; no cue, or a
    tie, is "unclear". An arrangement's cue (a progressive, a timetable, "have") counts only for a
    time in its own clause: "I'm editing the video we shot on Sunday" arranges nothing on Sunday."""
    if _narrated(tokens[end:min(last, end + 2 * lx.CUE_REACH)]) and not any(
            t.low in _FUTURE_WORDS or t.low in lx.FREQUENCY or t.low.replace("\u2019", "'").endswith("'ll")
            for t in tokens[first:last]):  # not "she always texts on Friday and asks": a habit
        return "past"  # "so my boss calls me on Friday and says...": a story told in the present
    for distance in range(1, min(lx.CUE_REACH, max(begin - first, last - end)) + 1):
        found = set()
        for index in (begin - distance, end - 1 + distance):
            cue = _cue(tokens, index, first, last) if first <= index < last else None
            if (cue in ("scheduled", "be", "timetable", "held") or cue == "progressive" and tokens[index].low in (
                    "have", "has")) and _habit_words(tokens, first, last):
                cue = None  # "my mum always phones on Sunday", "my parents always come on Sunday": a habit
            if cue in ("progressive", "scheduled", "held"):  # the time after it in its clause, or opening that clause
                placed = _arranged(tokens[index + 1:begin]) if index < begin else \
                    _opens_clause(tokens, first, begin, end, index)
                tail = tokens[end:min(last, end + lx.CUE_REACH)]
                unplaced = "past" if cue == "held" else None  # "I've got photos from Saturday": got them then
                cue = "future" if placed and not _told_in_present(tail) and not (
                    cue == "scheduled" and _finite_after(tail)) else unplaced
            if cue == "prospective":
                tail = tokens[end:min(last, end + 2 * lx.CUE_REACH)]
                asked = tokens[last - 1].low == "?"
                cue = "future" if _offered(tokens, index, first, tail, asked) else "past" if _how_it_went(tail) \
                    else "future" if asked and _ours(tokens, index, first) and _arranging(tail) else "plan"
            if cue == "be":  # "my interview is on Tuesday": a present "be" before the time states a schedule
                between = tokens[index + 1:begin]  # the time itself, or its subject ("is the game on Sunday")
                state = tokens[index].low.replace("\u2019", "'") in _PERSONAL_BE and between and \
                    lx.past_form(between[0].low) and _cue(tokens, index + 1, first, last) is None  # "we're closed"
                held = _arranged(between) and not any(lx.past_form(t.low) or t.low in _SAME_IN_PAST
                                                      for t in between[1 if state else 0:])
                held = held or _available(between, inverted=index > first or tokens[last - 1].low == "?")
                cue = "future" if index < begin and (all(_in_time_phrase(t.low) for t in between) or held) and \
                    not _told_in_present(tokens[end:min(last, end + lx.CUE_REACH)]) or \
                    index == end and tokens[index].low == "is" and _dated_subject(tokens, first, begin, end) else None
            if cue == "change":  # "moved the meeting (from Thursday) to Friday": the new date lies ahead
                lead = tokens[begin - 1 - (tokens[begin - 1].low == "the")].low  # "to (the 28th)"
                cue = "future" if index < begin <= index + _ARRANGED_REACH and lead in ("to", "until", "till") and \
                    not any(t.low in _CLAUSE_BREAKS for t in tokens[index:begin]) and \
                    not _how_it_went(tokens[end:min(last, end + 2 * lx.CUE_REACH)], overdue=False) else "past"
            if cue == "modal":
                cue = "future" if _modal_time(tokens, index, begin, end, first) else None
            if cue == "recalled" and _thanked(tokens, index, first) and "advance" in (
                    t.low for t in tokens[max(first, index - 3):index]):
                cue = "future"  # "thanks in advance for Saturday": for what is still to come
            if cue == "recalled":  # "thanks for asking about Saturday": a topic, not the thing done
                cue = None if begin > first and tokens[begin - 1].low in _TIED or _offered_ahead(
                    tokens[index + 1:begin]) else "past"
            if cue == "timetable" and index >= end and any(t.low in _SUBORDINATE for t in tokens[end:index]):
                cue = None  # "bring the photos from Sunday when you come": a later clause's own time
            if cue == "request":  # "send me the pics from Saturday": a thing of that day, not when it is asked for
                cue = None if begin > first and tokens[begin - 1].low in _TIED else "future"
            if cue is not None:
                found.add(cue)
        if "timetable" in found:  # a schedule yields to a past as near: "departs on the 2nd but we flew"
            found.discard("timetable")
            found |= set() if "past" in found else {"future"}
        if len(found) == 1:  # "plan" (a plan seen from the past, its outcome untold) only when asked for
            tense = found.pop()
            return "unclear" if tense == "plan" and not plans else tense
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


def _opens_clause(tokens: list[Token], first: int, begin: int, end: int, index: int) -> bool:
    """A time before a progressive opens its clause when only the subject and "be" stand between ("In
    September we're getting a puppy", "On Friday, my parents are flying in"); past a comma, only one whose
    own clause has no tense cue before it (not "we had the party on Saturday, Jo brings a cake")."""
    words, at = [t.low for t in tokens[end:index] if t.low != ","], begin
    while at > first and tokens[at - 1].low not in _CLAUSE_OPENERS:
        at -= 1
    if index - end > len(words) and any(_cue(tokens, cue, first, begin) for cue in range(at, begin)):
        return False
    return len(words) <= 4 and not any(w in _NOT_ARRANGED and w not in _SUBJECTS or lx.past_form(w) for w in words)


def _finite_after(tail: list[Token]) -> bool:
    """A verb after the time in its clause ("the photos on Friday were great"): the -s word was a plural noun."""
    for token in tail:
        if token.low in _CLAUSE_BREAKS or token.low in (".", "and"):
            return False
        if token.low in ("is", "are", "was", "were", "will", "has", "have", "had") or lx.past_form(token.low):
            return True
    return False


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
    words = [t.low for at, t in enumerate(between) if not (t.low == "-" and 0 < at < len(between) - 1 and  # a hyphen
             between[at - 1].end == t.start and t.end == between[at + 1].start)]  # in a word: "parent-teacher"
    # the time's own words when the caller points inside it: "on 12", "on the 4th of" before "June"
    while words and (_in_time_phrase(words[-1]) or (words[-1] == "of" and words[-2:-1] and words[-2][:1].isdigit())):
        words.pop()
    if len(words) >= 2 and words[-1] == "of" and words[-2] in _PART_OF:
        words.pop()
        while words and (words[-1] in _PART_OF or words[-1] in _TIME_LEADS):
            words.pop()
    # "for" before a bare noun is the act's purpose ("meeting Sarah for coffee"), before "the"/"a" a thing
    return len(words) <= _ARRANGED_REACH and not any(
        w in _NOT_ARRANGED and not (w == "for" and words[at + 1:at + 2] and words[at + 1] not in _DETERMINERS)
        for at, w in enumerate(words))


_SUBJECTS = frozenset({"i", "we", "you", "they", "he", "she"})
_OWNERS = frozenset({"the", "my", "our", "your", "his", "her", "their"})  # before a noun subject
# "I leave on Friday", "we arrive on the 3rd": a personal subject's timetable
_SCHEDULED_BASE = frozenset({"leave", "depart", "start", "begin", "arrive", "land", "fly", "finish", "open", "close",
                             "come", "return", "graduate", "retire", "run"})
_RESTARTS = frozenset({"start", "starts", "open", "opens", "launch", "launches", "run", "runs", "begin", "begins"})
# a present -s of these after a noun subject names a routine, not one scheduled event ("our team trains on Tuesday")
_ROUTINES = frozenset({"trains", "practices", "practises", "golfs", "works", "swims", "teaches", "coaches",
                       "rehearses", "volunteers", "bowls", "jogs", "preaches", "studies"})
# plural nouns not ending in -s
_PLURALS = frozenset({"children", "people", "men", "women", "folk", "police", "staff", "family", "team", "crew"})
# after "have" these make a perfect or a need ("we have been", "I have never"), not a thing arranged
_NOT_HELD = frozenset({"been", "had", "got", "gotten", "ever", "always", "not", "just", "to"})
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
_PERFECT_PARTICIPLES = frozenset({"already", "never", "gone", "done", "seen", "taken", "given", "eaten", "known",
                                  "written", "driven", "flown", "spoken", "broken", "chosen", "forgotten", "gotten",
                                  "fallen", "begun", "ridden"})  # "I'd gone", "she'd already left"
# Verbs whose past is their plain form: after "he", "she", "it" they can only be past ("she quit on Tuesday")
_SAME_IN_PAST = frozenset({"quit", "put", "cut", "set", "hit", "let", "shut", "hurt", "cost", "split", "spread", "bet",
                           "burst", "upset", "read"})
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
    if before[-1] in _QUANTIFIERS or before[-1].isdigit() or before[-1] in lx.NUMBER_WORDS:  # "a few runs"
        return False
    if tokens[index].low == "due":  # "rent is due", "the baby's due"; not "was due", "due date"
        return (before[-1] in ("is", "are") or before[-1].endswith("'s")) and after != "date"
    if before[-1] in _TIMETABLE_SUBJECTS:
        return True
    return before[-1] not in _DETERMINERS and any(w in _DETERMINERS for w in before[:-1])


# Modals before a plain verb point ahead ("I might go on Saturday", "can you come on Monday?"); before
# "have" they point back ("I should have called on Sunday"). Lower-case "may" only: "May" is a month.
_MODALS = frozenset({"can", "can't", "cannot", "might", "must", "should", "shouldn't", "may", "hope", "hopefully",
                     "wanna", "gotta"})
_BACK_MODALS = _MODALS | {"would", "could", "couldn't", "wouldn't", "mustn't"}
_HAVE_GOT = frozenset({"'ve", "i've", "we've", "you've", "they've", "have", "has", "he's", "she's"})
_NOT_INVERTED = frozenset({"hope", "hopefully"})  # "hope you have fun": never "hope you have (done)"
_NEEDS = frozenset({"need", "needs", "have", "has", "want", "wants"})  # with "to": "I have to work on Saturday"
_TIED = frozenset({"about", "from", "of", "since", "regarding"})  # "about Saturday": a topic, not the modal's time


# a subject naming a day, not an event: "today is the 15th", "my favorite day of the week is Friday"
_NO_SCHEDULE = frozenset({"today", "tomorrow", "yesterday", "tonight", "it", "date", "day", "week", "month", "year",
                          "season"})


def _in_time_phrase(low: str) -> bool:
    """A lead word, number or month name of a time phrase ("on", "the", "June" in "is on June 4")."""
    return low in _TIME_LEADS or low[:1].isdigit() or low in lx.MONTHS


# after a plan seen from the past, words that say its time has gone by without it ("..., still nothing")
_OVERDUE = frozenset({"couldn't", "still", "yet", "hasn't", "haven't", "never"})


def _how_it_went(tail: list[Token], *, overdue: bool = True) -> bool:
    """A plan seen from the past ("she said she would call on Monday"), or a moved date ("we moved it to
    Friday and it went fine"), is past once a clause after it, joined by "but", "and" or "so", says in the
    past how it went ("but never did", "but it fell through"); a plan also when a word after it says its
    time went by without it ("..., still nothing", "and nothing yet"; a "still" that opens its clause, not
    "is that still ok?"), or a question after it asks where its result is ("..., where is it?")."""
    words = [t.low for t in tail]
    joined = next((at for at, word in enumerate(words) if word in ("but", "and", "so", "yet")), len(words))
    asked = f" {' '.join(words)} ".replace("where's", "where is")
    return any(lx.past_form(word) for word in words[joined:]) or overdue and (any(word in _OVERDUE and not (
        word == "still" and (at and words[at - 1] not in (",", "and", "but", "so") or words[at + 1:at + 2] and
                             words[at + 1] in _CONFIRMING)) for at, word in enumerate(words))
        or any(f" where {be} {it} " in asked for be in ("is", "are") for it in ("it", "they", "that", "he", "she")))


def _offered(tokens: list[Token], index: int, first: int, tail: list[Token], asked: bool) -> bool:
    """"I could come over on Thursday if you want", "we could meet on Saturday if it's nice": the speaker's
    (or listener's) "could"/"would" with an "if" after the time that holds no past is an offer for later.
    So is the speaker's own "was hoping"/"was going to" (a polite present) before such an "if" or in a
    sentence that asks with no past after the time ("we were hoping to see you on Thursday, still on?")."""
    low = tokens[index].low.replace("\u2019", "'")
    before = [tokens[at].low for at in range(max(first, index - 2), index)]
    offer = low in ("i'd", "we'd", "you'd") or (low in ("could", "would") and before[-1:] in (["i"], ["we"], ["you"]))
    polite = before in (["i", "was"], ["we", "were"])
    words = [t.low for t in tail]
    if "if" in words and (offer or polite):
        return not any(lx.past_form(w) for w in words[words.index("if"):])
    return polite and asked and not any(lx.past_form(w) for w in words)


_CLAUSE_BREAKS = frozenset({",", ";", ":", "but", "because", "although", "though"})
# words opening a clause of its own time after the time ("... from Sunday when you come")
_SUBORDINATE = frozenset({"when", "whenever", "if", "once", "before", "after", "until", "till", "unless"})


def _modal_time(tokens: list[Token], index: int, begin: int, end: int, first: int) -> bool:
    """The modal at ``index`` governs the time at ``begin:end``: the time is no topic ("can you come on
    Monday", not "I need to tell you about Saturday") and shares its clause ("It snowed on April 2nd, can
    you believe it" is no plan), unless the time opens the sentence ("On Saturday, we can go")."""
    lead = begin
    while lead > first and tokens[lead - 1].low in _TIME_LEADS:
        lead -= 1
    between = tokens[index + 1:lead] if index < begin else tokens[end:index]
    if lead > first and tokens[lead - 1].low in _TIED:
        return False
    return lead == first or not any(t.low in _CLAUSE_BREAKS for t in between)


def _cue(tokens: list[Token], index: int, first: int, last: int) -> str | None:
    low = tokens[index].low.replace("\u2019", "'")
    after = tokens[index + 1].low if index + 1 < last else ""
    then = tokens[index + 2].low if index + 2 < last else ""  # "would you have": a question's perfect
    if (low in _BACK_MODALS and "have" in (after, then if after in _SUBJECTS and low not in _NOT_INVERTED else "")) or \
            (low[-3:] == "'ve" and low[:-3] in _BACK_MODALS):
        return "past"
    if low in ("hope", "hopefully") and any(lx.past_form(t.low) for t in tokens[index + 1:min(last, index + 4)]):
        return None  # "hope Tuesday went well": a wish about a past, its verb speaks
    if low in _MODALS and (low != "may" or tokens[index].text == "may") or (low in _NEEDS and after == "to"):
        return "modal"
    before = tokens[index - 1].low.replace("\u2019", "'") if index > first else ""
    if low in _FUTURE_WORDS and (before in ("had", "was", "were") or before.endswith("'d")):
        return "prospective"  # "we had planned to leave on Friday", "I was hoping to"
    asked = index > first or tokens[last - 1].low == "?"  # "is the meeting on Thursday?"
    contracted = low == "there's" or low.endswith("'s") and after in ("on", "in", "at") and not any(  # "the party's
        t.low in ("at", "to", "from", "round") for t in tokens[max(first, index - 2):index])  # on", not "at Jo's on"
    if (low in ("is", "are", "isn't", "aren't") and asked or low in _PERSONAL_BE or contracted) and \
            not any(t.low in _NO_SCHEDULE for t in tokens[max(first, index - 4):index]):
        return "be"
    if low == "go" and after == "back" or low == "get" and after in ("here", "there", "back", "home", "in"):
        low = "return"  # "I go back to work on Monday", "my grandparents get here on Saturday": a return, an arrival
    if low.startswith("re") and low[2:] in _RESTARTS:
        low = low[2:]  # the "re-" form of a start is a timetable verb too: "restarts", "reopen", "relaunches"
    if low in _SCHEDULED and _timetable(tokens, index, first, after) or low in _SCHEDULED_BASE and (before in (
            "i", "we", "you", "they") or _noun_subject(tokens, index, first, plural=True)) and after != "to" \
            and not after.endswith("ing"):
        return "timetable"  # "we leave on Friday", "my parents arrive on Friday"
    modal_before = index - 2 >= first and tokens[index - 2].low in _BACK_MODALS | {"did", "didn't"}  # "did you have"
    if low == "got" and before in _HAVE_GOT and after == "to":
        return "modal"  # "I've got to work on Saturday": as "I have to"
    if low == "got" and before in _HAVE_GOT and after not in _NOT_HELD and not lx.past_form(after):
        return "held"  # "I've got a big presentation on Monday": held, as "I have" is
    if low.endswith("ing") and before in ("of", "about") and index - 2 >= first and tokens[index - 2].low in \
            ("thinking", "considering", "planning"):
        return "future"  # "I'm thinking of going to the lake on Saturday": a plan
    if low in ("have", "has") and (before in _SUBJECTS or _noun_subject(tokens, index, first, plural=low == "have")) \
            and not (modal_before or after in _NOT_HELD
                                                               or after in _PERFECT_PARTICIPLES or lx.past_form(after)):
        return "progressive"  # "we have a team dinner on Thursday": held like an arrangement
    if low == "next" and (before == "the" or after == "to"):
        return None  # "the next day" counts from the story's time, "next to" is a place
    if low == "see" and after in ("you", "ya") and before in ("", ",", "ok", "okay", "so", "then") or \
            low in ("works", "work", "suits", "suit") and before in lx.WEEKDAYS:
        return "future"  # "See you Friday then!", "does Friday work for you?": a leave-taking, a day agreed on
    if low in _FUTURE_WORDS or low.endswith("'ll") or low == "off" and after == "to" and before in ("", "i'm", "we're"):
        return "future"  # "Off to Paris on Monday!": a chat's leaving, as "heading to" is
    going_to_verb = after == "to" and index + 2 < last and tokens[index + 2].low not in _DETERMINERS
    if low == "going" and going_to_verb:  # not "going to the concert", a motion
        # "been going to pottery" is a habit; "was going to" a plan seen from the past
        return None if before == "been" else "prospective" if before in ("was", "were") else "future"
    if low in ("would", "wouldn't", "could") or low.endswith("'d"):  # a time after another past
        if after in _WISH or (after == "you" and tokens[last - 1].low == "?"):
            return "future"  # "I'd love to", "could you water my plants on Friday?": a wish, a request
        past = low.endswith("'d") and (lx.past_form(after) or after in _PERFECT_PARTICIPLES)
        return "past" if past else "prospective"
    if low in ("remember", "remembered") and after in _RECALLED or low == "for" and _thanked(tokens, index, first):
        return "recalled"  # "remember the storm on Tuesday?", "thanks for the dinner (for helping me) on Saturday"
    asked_to = index == first and tokens[last - 1].low != "?" and (low in _REQUESTS or low == "have" and after in (
        "fun", "a", "an"))  # "Say hi to your mom on Sunday!", "Have fun on Saturday!"
    if asked_to:
        return "request"
    if low == "luck" and before == "good" or low == "remember" and after == "to" or low == "know" and before == "me" \
            and index - 2 >= first and tokens[index - 2].low == "let":
        return "future"  # "good luck with the exam on Thursday!", "remember to", "let me know", "say hi on Sunday"
    if low == "couldn't" and after not in _SUBJECTS and after != "be" and not any(
            t.low == "if" for t in tokens[first:last]):
        return "past"  # "sorry I couldn't make it on Saturday"; not "couldn't you come...?", "couldn't be", "if"
    if low in _SAME_IN_PAST and before in ("he", "she", "it"):
        return "past"  # "she quit", "it cost": a present would take -s
    if low.endswith("ing") and len(low) >= 5 and low not in _ING_NOW and _progressive(tokens, index, first):
        return "progressive"
    if _scheduled_present(tokens, index, first, low):
        return "scheduled"  # "the museum reopens on Friday": a present of one event names its schedule
    if not lx.past_form(low):
        return None
    if before == "have" and index - 2 >= first and tokens[index - 2].low.replace("\u2019", "'") in _FUTURE_PERFECT:
        return "future"  # "I'll have finished it by Friday": done by a time ahead
    if low.startswith(lx.CHANGE_STEMS):
        return "change"
    # "the shop is closed", "I'm booked", "it's meant to rain": a state now, not a past event
    return None if (low.endswith("ed") and low not in lx.PAST_WORDS or low in _PARTICIPLES) and index > first and \
        tokens[index - 1].low.replace("\u2019", "'") in _BE_NOW else "past"


_PERSONAL_BE = frozenset({"am", "i'm", "we're", "you're", "they're"})  # "I'm away on Friday": a state then
_FUTURE_PERFECT = frozenset({"will", "won't", "shall", "i'll", "we'll", "you'll", "they'll", "he'll", "she'll"})
_PRONOUNS = frozenset({"it", "this", "that", "who", "what", "which", "nobody", "nothing", "none", "everyone",
                       "everybody", "everything", "someone", "somebody", "something", "anyone", "anybody", "anything"})
_CLAUSE_OPENERS = frozenset({",", "and", "but", "so", "that", "because", "if", "when"})


def _habit_words(tokens: list[Token], first: int, last: int) -> bool:
    """A frequency word ("always", "usually", "never") in the sentence, not in "as always"."""
    return any(t.low in lx.FREQUENCY and not (at > first and tokens[at - 1].low == "as")
               for at, t in enumerate(tokens[first:last], first))


def _noun_subject(tokens: list[Token], index: int, first: int, *, plural: bool) -> bool:
    """The words before ``index`` are a noun subject opening its clause: a determiner such as "my" or "the", at
    most three words (a hyphen may join them: "my in-laws") and, when ``plural``, a plural noun last ("my
    parents", "the kids"; "our guests")."""
    noun = tokens[index - 1].low if index > first else ""
    if not noun.isalpha() or noun in _DETERMINERS or noun in _SUBJECTS or noun in _PRONOUNS:
        return False
    if plural and not (noun in _PLURALS or lx.s_form(noun) and noun not in _NOT_TOLD):
        return False
    for lead in range(index - 2, max(first, index - 5) - 1, -1):
        if tokens[lead].low in _OWNERS:
            return lead == first or tokens[lead - 1].low in _CLAUSE_OPENERS
        if not (tokens[lead].base.isalpha() or tokens[lead].low == "-") or tokens[lead].low in _DETERMINERS:
            return False  # "my daughter's school", "my in-laws"
    return False


def _scheduled_present(tokens: list[Token], index: int, first: int, low: str) -> bool:
    """A present -s verb after a clause-opening noun phrase of one or two words ("the museum reopens", "our
    new neighbour moves in"); a pronoun's ("she works") is as often a habit, and so is a routine's verb ("our
    team trains", "the band practices")."""
    if not lx.s_form(low) or low in _NOT_TOLD or low in _ROUTINES:
        return False
    name = tokens[index - 1].low if index > first and tokens[index - 1].text[:1].isupper() else "i"
    named = name not in _SUBJECTS and name not in _DETERMINERS and name not in lx.WEEKDAYS and name not in lx.MONTHS \
        and name not in _PRONOUNS  # "Nobody works on Sunday", "Who works on Saturday?": a pronoun's, maybe a habit
    for lead in (index - 1, index - 2, index - 3):  # "Dad retires", "the museum reopens"
        if lead >= first and (tokens[lead].low in _DETERMINERS if lead < index - 1 else named) and \
                (lead == first or tokens[lead - 1].low in _CLAUSE_OPENERS) and not any(
                t.low in _DETERMINERS or not t.base.isalpha() or lx.past_form(t.low) for t in tokens[lead + 1:index]):
            return True
    return False


def _progressive(tokens: list[Token], index: int, first: int) -> bool:
    """An -ing verb after a present "be" with a personal subject: "I'm moving", "we are flying", "are you
    coming" (a word such as "also" may stand between), or "going" opening its sentence. Not "it's":
    "it's raining" is weather now."""
    at = index - 1
    if at > first and tokens[at].low in _ING_ADVERBS:
        at -= 1
    if at < first:  # "Going to the dentist Thursday", "Heading to the coast Saturday": "I'm" dropped in a chat
        return tokens[index].low in _ARRIVING
    be = tokens[at].low.replace("\u2019", "'")
    if be in ("i'm", "we're", "you're", "they're", "he's", "she's"):
        return True
    if be.endswith("'s") and be not in _NOT_SOMEONES and tokens[index].low in _ARRIVING:
        return True  # "Mom's coming on Friday", "Jake's leaving on Sunday"; not "Mom's cooking" (a noun)
    if be in ("am", "are", "is"):  # "we are flying", "the plumber is coming", "my parents are visiting"
        return at > first and (tokens[at - 1].low in _SUBJECTS or at - 1 > first and tokens[at - 2].low in _OWNERS)
    return be in _SUBJECTS and at > first and tokens[at - 1].low in ("am", "are", "is")


# Words of being free or away at a time: "are you free on Saturday?", "we're on vacation from June 10"
_AVAILABLE = frozenset({"free", "busy", "around", "available", "home", "off", "away", "back", "town", "vacation",
                        "holiday", "holidays", "leave", "call", "duty"})
_AVAILABLE_WITH = frozenset({"still", "also", "both", "all", "in", "on", "out", "of", "at", "from", "between", "to",
                             "until", "till", "through", "and"})


def _available(between: list[Token], *, inverted: bool) -> bool:
    """Between a present "be" and a time only words of being free, busy or away ("are you free on",
    "we're on vacation from", "is she around on"): a state at that time, so a schedule. A question's
    subject ("are you") may stand first."""
    words = [t for t in between if not _in_time_phrase(t.low)]  # the time's own words when pointed inside it
    if inverted and words and words[0].low in _SUBJECTS:
        words = words[1:]
    if [t.low for t in between[-4:]] in (["we", "still", "on", "for"], ["you", "still", "on", "for"]):
        return True  # "are we still on for Wednesday?": a plan that stands
    return any(t.low in _AVAILABLE for t in words) and all(t.low in _AVAILABLE or t.low in _AVAILABLE_WITH
                                                           for t in words)


# a plain verb opening a sentence that is no question asks for something later ("Say hi to your mom on Sunday!")
_REQUESTS = frozenset({"say", "tell", "bring", "call", "text", "send", "enjoy", "give", "meet", "join", "grab", "pick",
                       "drop", "come", "don't", "dont"})
# after "remember" these open a thing recalled ("remember the storm on Tuesday?"); "remember to" is a task ahead
_RECALLED = frozenset({"the", "when", "how", "our", "my", "your", "his", "her", "their", "that's"})
_NOT_SOMEONES = frozenset({"it's", "that's", "what's", "there's", "here's", "who's", "where's", "how's", "let's",
                           "he's", "she's"})
# -ing verbs of coming and going: after a name's "'s" ("Mom's coming") a progressive, not a possessive's noun
_ARRIVING = frozenset({"coming", "going", "flying", "driving", "visiting", "leaving", "arriving", "moving", "heading",
                       "staying", "starting", "getting", "dropping", "popping"})
# -s verbs a story told in the present goes on with after "and" ("and says", "and asks me")
_NARRATING = frozenset({"says", "asks", "tells", "yells", "shouts", "screams", "whispers", "texts", "hands", "grabs"})
_NARRATOR_SUBJECTS = frozenset({"he", "she", "they", "i", "we"})


def _narrated(tail: list[Token]) -> bool:
    """After the time, "and" goes on with a verb of telling in the present ("calls me on Friday and says",
    "and he asks") or with "who/what do I see": a story told in the present, so a past."""
    words = [t.low for t in tail]
    for at, word in enumerate(words[:-1]):
        if word != "and":
            continue
        rest = words[at + 1:at + 5]
        if rest[0] in _NARRATOR_SUBJECTS:
            rest = rest[1:]
        elif rest[0] in _TELLING_DETERMINERS:  # "and my boss says"
            rest = rest[2:]
        if rest[:1] and rest[0] in _NARRATING or rest[:3] in (["who", "do", "i"], ["what", "do", "i"]):
            return True
    return False


def _ours(tokens: list[Token], index: int, first: int) -> bool:
    """The plan at ``index`` ("you'd", "you would", "we'd") is the listener's or ours."""
    low = tokens[index].low.replace("\u2019", "'")
    return low in ("you'd", "we'd") or low in ("would", "were", "was") and index > first and \
        tokens[index - 1].low in ("you", "we")


# after "still" in a question these ask whether a plan stands ("..., still on?", "still good?"), not what is overdue
_CONFIRMING = frozenset({"on", "good", "ok", "okay", "fine", "happening", "set", "cool", "a", "coming", "going", "up"})
# a question after a plan reported in the past that arranges it ("..., where should we meet?", "want to grab lunch?")
_ARRANGING = frozenset({"should", "shall", "want", "wanna", "what", "where", "which", "how"})


def _arranging(tail: list[Token]) -> bool:
    """A later clause of the question arranges the plan, with no past in it: it still lies ahead."""
    words = [t.low for t in tail]
    joined = next((at for at, word in enumerate(words) if word in (",", "so")), None)
    return joined is not None and not any(lx.past_form(w) for w in words) and any(
        w in _ARRANGING or w == "still" and words[at + 1:at + 2] and words[at + 1] in _CONFIRMING
        for at, w in enumerate(words[joined:], joined))


# -ing verbs whose "to" points ahead: "thanks for offering to drive on Friday" thanks for a promise
_PROMISING = frozenset({"offering", "agreeing", "volunteering", "promising", "deciding", "planning"})


def _offered_ahead(between: list[Token]) -> bool:
    """Between a thanks' "for" and the time, a thing for that time ("the invite for Saturday") or a promise
    ("offering to drive on Friday"): the time may lie ahead, so the thanks says nothing of its tense."""
    words = [t.low for t in between]
    return words[-1:] == ["for"] or any(w in _PROMISING and words[at + 1:at + 2] == ["to"]
                                        for at, w in enumerate(words))


def _thanked(tokens: list[Token], index: int, first: int) -> bool:
    """"thanks (again, so much) for", "thank you for": the "for" at ``index`` names a thing done."""
    words = [t.low for t in tokens[max(first, index - 3):index]]
    return "thanks" in words or "thx" in words or "thank" in words and "you" in words


def _dated_subject(tokens: list[Token], first: int, begin: int, end: int) -> bool:
    """A dated time opening its sentence, only its own words before it, as the subject of a present "is" ("The
    first weekend of June is my brother's wedding", "June 8 is my birthday"): the next such time. Not a bare
    weekday ("Saturday is my favorite day" may say what every Saturday is)."""
    return not any(t.low in lx.WEEKDAYS for t in tokens[begin:end]) and all(
        _in_time_phrase(t.low) or t.low in _PART_OF or t.low == "of" for t in tokens[first:begin])
