"""A read-only view over one message's tokens for the expression matchers, and the Hit they return.

Token lookups that tolerate running off either end, tense lookup, month and weekday names
with their capitalisation rules, and builders for day/week/month/year hits relative to the
observation day. No grammar lives here (expressions.py owns it).
"""
from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta

from . import intervals as iv
from . import lexicon as lx
from .lexicon import Token
from .tense import sentence_tense

_PLURAL_PARTS = frozenset(part + "s" for part in lx.PARTS_OF_DAY)
STORY_REACH = 60  # tokens before a sentence read for a past cue of the story it continues
# A tag closing a statement: ", right?", ", hasn't it?", ", didn't you?"
_TAG_WORDS = frozenset({"right", "yeah", "yes", "no", "eh", "huh", "correct", "innit", "ok", "okay"})
_CLAUSE_VERBS = frozenset({"is", "was", "will", "'s", "falls", "fell"})  # after a time: it is a clause's subject
_NOUN_LEADS = frozenset({"to", "at", "after", "a", "the", "my", "our", "your", "his", "her", "their"})
_FUNCTION_WORDS = lx.PARTS_OF_DAY | {"and", "or", "to", "on", "of", "from", "until", "till", "through", "then", "next",
                                     "last", "this", "too", "instead", "again"}
# words that may follow a short weekday or month alone ("on Sat we went", "until Sept I was"): no noun or verb
_AFTER_SHORT_DAY = frozenset({"i", "we", "you", "he", "she", "they", "it", "at", "by", "for", "with", "but", "so",
                              "if", "as", "or", "is", "was", "works", "after", "before", "around", "when", "maybe",
                              "instead"})
# words before a past sentence's time that put it ahead of the telling: reported words, a plan, a supposition
_PLAN_IN_PAST = frozenset({"if", "supposed", "meant", "thought", "hoping", "hoped", "planned", "planning", "said",
                           "told", "going", "coming", "would", "could", "should"})
# weekdays in the names of things, not days ("Sunday school", "Saturday Night Live", "Cyber Monday")
_NAMED_THINGS = frozenset({("sunday", "school"), ("sunday", "best"), ("saturday", "night", "live"), ("cyber", "monday"),
                           ("super", "tuesday"), ("ash", "wednesday"), ("maundy", "thursday"), ("holy", "thursday"),
                           ("palm", "sunday"), ("easter", "sunday"), ("easter", "monday"), ("shrove", "tuesday")})
# states a day leaves behind: before "after"/"from" the day it points back to
_AFTERMATH = frozenset({"tired", "exhausted", "sore", "recovering", "hungover", "wiped", "drained", "knackered",
                        "aching", "achy", "shattered", "still", "buzzing", "broke", "sunburnt", "sunburned", "full",
                        "stuffed"})
_NOT_SUBJECT = frozenset({"the", "a", "an", "my", "our", "your", "his", "her", "their", "this", "that", "of", "in",
                          "on", "at", "to", "for", "with", "and", "or", "all", "many", "some", "few", "two", "three"})
_NOT_VERBS = frozenset({"this", "always", "perhaps", "sometimes", "plus", "thus", "yes", "was", "has", "does", "its",
                        "hers", "ours", "yours", "theirs", "less", "unless", "news", "days", "weeks", "years",
                        "months"})
# words after a plural subject that are no plain verb of the simple present
_NOT_PLAIN = frozenset({"are", "were", "will", "would", "could", "should", "can", "might", "must", "have", "had", "all",
                        "both", "also", "just", "really", "and", "here", "there", "still", "usually", "always", "never",
                        "now", "then", "too", "to", "of", "in", "on", "at", "from", "with", "for", "the", "a"})
# two words that put a past clause in a stretch of life, as a habit ("growing up", "back then", "used to")
_HABIT_PAIRS = frozenset({("growing", "up"), ("back", "then"), ("used", "to"), ("as", "kids"), ("those", "days")})
_AFTERMATH_REACH = 6  # words from a state's "after"/"from" to the time ("from the long drive on Sunday")
_NOUN_PHRASE_REACH = 6  # words read after a weekday qualifying a noun for its clause's verb
_CLAUSE_ENDS = frozenset({".", ",", "!", "?", ";", ":", "and", "but", "so", "because", "when", "if", "that"})
_PRESENT_VERBS = frozenset({"is", "are", "has", "have", "does", "do", "will", "can", "'s", "gets", "get", "starts",
                            "begins", "runs", "opens", "closes", "looks", "sounds", "seems"})
_WH = frozenset({"what", "when", "where", "who", "why", "how", "which"})
_TAG_SUBJECTS = frozenset({"it", "you", "we", "they", "he", "she", "i", "there", "that"})
_TAG_VERBS = frozenset({"is", "isn't", "was", "wasn't", "are", "aren't", "were", "weren't", "has", "hasn't", "have",
                        "haven't", "had", "hadn't", "do", "don't", "does", "doesn't", "did", "didn't", "will", "won't",
                        "can", "can't", "would", "wouldn't", "shall", "shan't"})


def _goes_on(token: Token | None, also_not: frozenset[str]) -> bool:
    """``token`` is a lower-case word that is no function word nor one of ``also_not``: a noun or a verb."""
    return token is not None and token.text.isalpha() and token.text.islower() and \
        token.low not in _FUNCTION_WORDS and token.low not in also_not


@dataclass(frozen=True, slots=True)
class Hit:
    """What a matcher claims: tokens up to ``stop`` and a day interval or an unresolved reason."""

    stop: int  # index one past the last token of the expression
    first: date | None = None
    end: date | None = None
    granularity: str | None = None
    reason: str | None = None

    @property
    def days(self) -> tuple[date, date]:
        """First and last day of a resolved hit."""
        assert self.first is not None and self.end is not None
        return self.first, self.end - iv.DAY


class TokenCursor:
    """``standalone``: the tokens are a time phrase on its own (a tool's period argument), not a
    sentence: month and weekday names need no capital letter and a phrase without a tense cue
    reads as past (recall asks about what already happened)."""

    def __init__(self, tokens: list[Token], today: date, *, standalone: bool = False,
                 now: datetime | None = None) -> None:
        self.tokens = tokens
        self.today = today
        self.now = now  # the observation's instant (aware UTC) when known: hours and minutes need it
        self.standalone = standalone
        self.sentences: dict[int, tuple[int, int]] = {}
        for index, token in enumerate(tokens):
            first, _ = self.sentences.get(token.sentence, (index, index))
            self.sentences[token.sentence] = (first, index + 1)

    def tok(self, index: int) -> Token | None:
        return self.tokens[index] if 0 <= index < len(self.tokens) else None

    def low(self, index: int) -> str:
        token = self.tok(index)
        return token.low if token is not None else ""

    def base(self, index: int) -> str:
        token = self.tok(index)
        return token.base if token is not None else ""

    def touching(self, index: int) -> bool:
        """Token ``index + 1`` follows token ``index`` with nothing between them ("1.5", "'90s")."""
        left, right = self.tok(index), self.tok(index + 1)
        return left is not None and right is not None and left.end == right.start

    def in_question(self, index: int) -> bool:
        """The sentence holding token ``index`` ends with a question mark and no tag: "It's been a
        year, hasn't it?" and "We met in May, right?" state a thing and ask only to confirm it."""
        first, end = self.sentences[self.tokens[index].sentence]
        last = end - 1
        if self.low(last) != "?":
            return False
        if self.low(first) in _TAG_VERBS or self.low(first) in _WH:  # "Where are you now, huh?" asks
            return True
        if self.low(last - 1) in _TAG_WORDS and self.low(last - 2) == ",":
            return False
        return not (self.low(last - 1) in _TAG_SUBJECTS and self.low(last - 2).replace("\u2019", "'") in _TAG_VERBS
                    and self.low(last - 3) == ",")

    def tense(self, begin: int, end: int | None = None) -> str:
        """"past", "future" or "unclear" for the expression at tokens ``begin..end`` (see tense). With no
        cue, a bound ("until Monday", "by Friday") lies ahead, being a state lasting from now or a
        deadline, unless a past story or a "now" ends it; a time after "since" lies behind."""
        first, last = self.sentences[self.tokens[begin].sentence]
        tense = sentence_tense(self.tokens, first, last, begin, min(end or begin + 1, last), plans=True)
        planned, tense = tense == "plan", "unclear" if tense == "plan" else tense  # "he said he'd be back by Sunday"
        at = begin - 1  # the word before the time's own: "since (the) 3rd", "until June 30"
        while at > first and at > begin - 4 and (self.low(at) in ("the", "of") or self.month_at(at) is not None
                                                 or lx.day_number(self.tok(at)) is not None):
            at -= 1
        lead = self.low(at)
        ranged = any(self.low(back) == "from" and (self.low(back + 1)[:1].isdigit() or self.month_at(back + 1)
                                                  or self.weekday_at(back + 1, abbreviations=False) is not None)
                     for back in range(max(first, at - 5), at))  # "from 3 June until 7 June": a run, no bound
        if "since" in (lead, self.low(begin)) and self.low(min(end or begin + 1, last)) not in _CLAUSE_VERBS:
            return "past"  # not "since Monday is a holiday", where "since" gives a reason
        if tense == "unclear" and self._aftermath(first, begin):
            return "past"  # "so tired after Saturday", "sore from the gym on Saturday": what it left behind
        near = self.tokens[max(first, begin - lx.CUE_REACH):min(last, begin + lx.CUE_REACH)]  # its sentence only
        if tense == "unclear" and not self.standalone and lead in ("until", "till", "by") and not (ranged or planned) \
                and not self._told_in_past(first) and "now" not in (t.low for t in near):
            return "future"
        return "past" if tense == "unclear" and self.standalone else tense

    def _aftermath(self, first: int, begin: int) -> bool:
        """A state a day leaves behind, then "after" or "from", then the time, in one phrase ("so tired after
        Saturday", "still sore from Sunday's run", "exhausted from the move on Sunday")."""
        for at in range(begin - 1, max(first, begin - _AFTERMATH_REACH) - 1, -1):
            if self.low(at) in _CLAUSE_ENDS:
                return False
            if self.low(at) in ("after", "from"):
                return any(self.low(back) in _AFTERMATH for back in range(max(first, at - 3), at))
        return False

    def habitual(self, index: int) -> bool:
        """A frequency word ("always", "usually", "every") in the clause of token ``index`` (not past a
        "but" or ";") with no past form in it: "in May we always plant tomatoes" is a habit."""
        first, last = self.sentences[self.tokens[index].sentence]
        lo = max([at + 1 for at in range(max(first, index - lx.CUE_REACH), index) if self.low(at) in ("but", ";")]
                 + [first, index - lx.CUE_REACH])
        hi = min([at for at in range(index + 1, min(last, index + lx.CUE_REACH)) if self.low(at) in ("but", ";")]
                 + [last, index + lx.CUE_REACH])
        words = [self.low(at) for at in range(lo, hi)]
        return any(w in lx.FREQUENCY for w in words) and not any(lx.past_form(w) for w in words) or \
            self._generic(index)

    def _generic(self, index: int) -> bool:
        """A time opening its sentence ("In August ...") whose clause says in the simple present what happens
        then, with no tense cue ("In August the city empties out", "in April it rains a lot"): a habit of
        every such month, or a plan; no past one."""
        first, last = self.sentences[self.tokens[index].sentence]
        if index - first > 1 or index > first and self.low(first) not in ("in", "during", "throughout") or \
                self.tense(index) != "unclear":
            return False
        for at in range(index + 1, min(last, index + lx.CUE_REACH)):
            low, before = self.low(at), self.low(at - 1)
            if low in _CLAUSE_ENDS and low != ",":
                return False
            if (lx.s_form(low) and low not in _NOT_VERBS
                    or low in ("is", "are") and at > index + 1) and before.isalpha() and before not in _NOT_SUBJECT:
                return True  # "the city empties", "it rains", "the weather here is perfect"
            plural = before in ("we", "they", "you", "people") or before.endswith("s") and len(before) > 3 and \
                self.low(at - 2) in ("the", "my", "our", "your", "their", "all")
            if plural and low.isalpha() and low not in _NOT_PLAIN and not (lx.past_form(low) or low.endswith("ing")):
                return True  # "the days get so short", "we go skiing"
        return False

    def _told_in_past(self, first: int) -> bool:
        """A past cue in the sentences just before token ``first`` (``STORY_REACH`` tokens): the
        message tells a story, so a bound without a cue of its own ("no wifi until Sunday") is in it."""
        return any(lx.past_form(t.low) for t in self.tokens[max(0, first - STORY_REACH):first])

    def month_at(self, index: int) -> int | None:
        """Month number of a month-name token; verb-like names ("may", "march") and abbreviations
        need a capital letter (unless standalone). Context (a day, a year, a preposition) is the
        caller's job."""
        token = self.tok(index)
        if token is None:
            return None
        low, named = token.low, token.capitalised or self.standalone
        if low in lx.MONTHS:
            return lx.MONTHS[low] if (low not in lx.VERB_MONTHS or named) else None
        if low in lx.MONTH_ABBREVIATIONS and named:
            return lx.MONTH_ABBREVIATIONS[low]
        return None

    def weekday_at(self, index: int, *, abbreviations: bool) -> int | None:
        """The weekday token ``index`` names; none before a plural part of the day ("on Sunday
        mornings", "Monday nights"), which is a habit, as "on Sundays" is, nor one qualifying a noun."""
        token = self.tok(index)
        if token is None:
            return None
        if token.low in lx.WEEKDAYS:
            weekday = lx.WEEKDAYS[token.low]
        elif token.low in lx.WEEKDAY_ABBREVIATIONS and (
                token.low in lx.PLAIN_WEEKDAY_ABBREVIATIONS or (token.capitalised or self.standalone) and (
                    abbreviations or self.low(index - 1) == "on" and self.short_name_alone(index))):
            weekday = lx.WEEKDAY_ABBREVIATIONS[token.low]
        elif token.base in lx.WEEKDAYS and token.base != token.low:  # "Sunday's run": that day's, a noun after it
            return lx.WEEKDAYS[token.base] if _goes_on(self.tok(index + 1), lx.ARTICLES) else None
        else:
            return None
        return None if self.low(index + 1) in _PLURAL_PARTS or self._names_thing(index) else weekday

    def plan_in_past(self, index: int) -> bool:
        """A word before ``index`` in its sentence tells of a plan or a supposition, not what happened: "she said
        she was coming this Friday", "we were supposed to meet this Saturday", "what if we went this Sunday?"."""
        first, _ = self.sentences[self.tokens[index].sentence]
        return any(self.low(at) in _PLAN_IN_PAST or self.low(at).endswith("'d") for at in range(first, index))

    def short_name_alone(self, index: int) -> bool:
        """A short weekday or month alone after its lead word ("on Sat", "until Jan") is a time only written as a
        name, not in capitals ("did well on SAT math"), and not before a noun it qualifies ("a fortune on Sun
        loungers") or a verb it is the subject of ("until Jan gets back", a person)."""
        token = self.tok(index)
        return token is not None and not token.text.isupper() and self.ends_phrase(index + 1)

    def ends_phrase(self, index: int) -> bool:
        """No noun or verb goes on the phrase before ``index``: it holds the end, punctuation, a number, a function
        word or a pronoun ("on March first we went", not "March the first time", "May the fourth be with you")."""
        return not _goes_on(self.tok(index), _AFTER_SHORT_DAY)

    def _names_thing(self, index: int) -> bool:
        """A weekday in a name ("Sunday school", "Saturday Night Live", "Cyber Monday") or between a word that
        opens a noun phrase and a lower-case word that is no function word ("went to Sunday school", "the
        Monday blues", "our Friday meeting") names a kind of thing, no day; unless "the" opens the clause
        with it and the clause goes on in the past ("The Monday meeting was long": that meeting, that day)."""
        words = (self.low(index - 1), self.low(index), self.low(index + 1), self.low(index + 2))
        if words[1:] in _NAMED_THINGS or words[1:3] in _NAMED_THINGS or words[:2] in _NAMED_THINGS:
            return True
        after = index + 1 + (self.low(index + 1) in lx.PARTS_OF_DAY)  # "our Tuesday night trivia team"
        if not (self.low(index - 1) in _NOUN_LEADS and _goes_on(self.tok(after), lx.AFTER_NTH)):
            return False
        return not (self.low(index - 1) == "the" and self._opens_clause(index - 1) and self._past_after(index + 1)
                    and not self._kinds_recalled(index, self.low(after)))

    def _kinds_recalled(self, index: int, noun: str) -> bool:
        """A plural noun after the weekday ("the Friday meetings were"), or a habit in the sentence ("always",
        "growing up", "back then", "used to"): every such day's, no one day."""
        if lx.s_form(noun):
            return True
        first, last = self.sentences[self.tokens[index].sentence]
        words = [self.low(at) for at in range(first, last)]
        pairs = set(zip(words, words[1:], strict=False))
        return any(w in lx.FREQUENCY for w in words) or bool(pairs & _HABIT_PAIRS)

    def greeting(self, index: int) -> bool:
        """"happy" at ``index`` greets ("Happy Friday!", "and a happy Halloween to you"): it opens its clause or
        follows "a" or a wish; not "I'm so happy Friday is here", where it says how one feels."""
        token = self.tok(index)
        return token is not None and token.low == "happy" and (self.sentences[token.sentence][0] == index or
                                                               self.low(index - 1) in (",", "and", "a", "wishing"))

    def _opens_clause(self, index: int) -> bool:
        token = self.tok(index)
        return token is not None and (self.sentences[token.sentence][0] == index or self.low(index - 1) in
                                      (",", "and", "but", "so"))

    def _past_after(self, index: int) -> bool:
        """The first verb after the noun phrase at ``index`` (within a few words, in its clause) is a past form
        ("meeting was long", "brunch at Mia's was amazing", "game went to overtime")."""
        for at in range(index, index + _NOUN_PHRASE_REACH):
            low = self.low(at)
            if low in _CLAUSE_ENDS:
                return False
            if low in _PRESENT_VERBS or lx.past_form(low):
                return lx.past_form(low)
        return False

    def born(self, index: int) -> bool:
        """"born" right before the time phrase that ends before ``index`` ("I was born on the 4th of July"): a
        birth, whose year is not this one's."""
        at = index - 1
        while at > 0 and (self.low(at) in ("on", "in", "the", "of", "a") or self.low(at)[:1].isdigit() or
                          self.low(at) in lx.MONTHS or self.low(at) in lx.WEEKDAYS or self.low(at) in lx.PARTS_OF_DAY):
            at -= 1
        return self.low(at) == "born"

    def tensed_weekend(self, begin: int, stop: int) -> Hit | None:
        """The weekend the tense at ``begin..stop`` points to: the last one begun or the next to begin."""
        tense = self.tense(begin, stop)
        if tense == "unclear":
            return None
        saturday = iv.weekday_before(self.today, 5) if tense == "past" else iv.weekday_after(self.today - iv.DAY, 5)
        return Hit(stop, saturday, saturday + 2 * iv.DAY, "day")

    def skip_part_of_day(self, index: int) -> int:
        return index + 1 if self.low(index) in lx.PARTS_OF_DAY else index

    def day(self, stop: int, offset: int) -> Hit:
        return self.day_hit(stop, self.today + timedelta(days=offset))

    @staticmethod
    def day_hit(stop: int, day: date) -> Hit:
        return Hit(stop, *iv.day_span(day), "day")

    def offset(self, stop: int, unit: str, count: int, base: date | None = None) -> Hit | None:
        """The calendar unit ``count`` units away from the one holding ``base`` (the observation day
        unless given): a day, ISO week, weekend, month or year."""
        base = base or self.today
        try:
            if unit == "day":
                return self.day_hit(stop, base + timedelta(days=count))
            if unit == "week":
                return Hit(stop, *iv.week_span(base, count), "week")
            if unit == "weekend":
                return Hit(stop, *iv.weekend_span(base, count), "day")
            if unit == "month":
                first = iv.add_months(iv.month_start(base), count)
                return Hit(stop, first, iv.add_months(first, 1), "month")
            return Hit(stop, *iv.year_span(base.year + count), "year")
        except (ValueError, OverflowError):
            return None

    def exact(self, stop: int, day: date, unit: str, count: int) -> Hit | None:
        """The day ``count`` units (a weekend counts as a week) from ``day``: "a week from Friday"."""
        try:
            if unit in ("month", "year"):
                return self.day_hit(stop, iv.shift_months(day, count * (12 if unit == "year" else 1)))
            return self.day_hit(stop, day + timedelta(days=count * (1 if unit == "day" else 7)))
        except (ValueError, OverflowError):
            return None

    def around(self, stop: int, unit: str, count: int, anchor: Hit) -> Hit | None:
        """``count`` units before (negative) or after a stated day or run of days, counted from its
        near edge like "N units ago" from today; weekends after it start with the first Saturday
        after it ("the weekend after Monday 3 July" is 8-9 July)."""
        first, last = anchor.days
        if unit != "weekend" or count <= 0:
            return self.offset(stop, unit, count, first if count <= 0 else last)
        saturday = iv.weekday_after(last, 5) + iv.WEEK * (count - 1)
        return Hit(stop, saturday, saturday + timedelta(days=2), "day")
