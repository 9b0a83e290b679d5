"""The English time-expression grammar: finds expressions in a message and resolves each one
to a ``[first_day, end_day)`` interval against the observation day, or to an unresolved reason.

A left-to-right scan over lexicon tokens; at each token every matcher may claim a run of
tokens and the longest claim wins, so the work is linear in the text. Each claim comes back
as an ``Occurrence``; which text to read and against what time is occurrence.py's job.
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from . import counts, holidays, parts, present, ranges, spans, written
from . import intervals as iv
from . import lexicon as lx
from .cursor import Hit, TokenCursor

VAGUE = "vague reference"
VAGUE_QUANTITY = "vague quantity"
APPROXIMATE = "approximate quantity"
SEASON = "season (hemisphere-dependent)"
NO_REFERENCE = "relative to an unstated reference"
UNCLEAR_TENSE = lx.UNCLEAR_TENSE
DAY_MONTH_ORDER = "day/month order ambiguous"
HABIT = "a habit, not one time"

_NOT_FROM_NOW = frozenset({"had", "hadn't", "hasn't", "haven't", "not", "never"})  # "it hasn't been a week since"
_SINGULAR = frozenset({"week", "month", "year", "fortnight", "decade", "century"})
_DAY_LEADS = frozenset({"on", "by", "until", "till", "since"})  # "by the 20th": a bare ordinal needs one
_VAGUE_BY_FIRST: dict[str, list[tuple[str, ...]]] = {}  # "the" -> ("the", "other", "day"), ...
for _phrase in lx.VAGUE_PHRASES:
    _VAGUE_BY_FIRST.setdefault(_phrase[0], []).append(_phrase)
MAX_COUNT = {"day": 3660, "week": 520, "weekend": 520, "month": 1200, "year": 200}
_TRIGGERS = frozenset(
    {"the", "day", "last", "past", "this", "next", "on", "a", "an",
     "recently", "lately", "long", "not", "in", "for", "over", "during", "through", "throughout", "more", "less",
     "between", "earlier", "later"}
    | lx.YEAR_CONTEXT | lx.APPROXIMATORS | lx.VAGUE_QUANTITIES | set(lx.NUMBER_WORDS)
    | set(lx.MONTHS) | set(lx.MONTH_ABBREVIATIONS) | set(lx.WEEKDAYS) | set(lx.WEEKDAY_ABBREVIATIONS)
    | lx.SEASONS | set(lx.ORDINALS) | lx.HOLIDAY_LEADS | {"half"} | set(counts.TENS) | set(lx.DAY_WORDS)
    | holidays.TRIGGERS | spans.TRIGGERS | present.TRIGGERS
)


@dataclass(frozen=True)
class Occurrence:
    """One time expression at ``text[span[0]:span[1]]``. Resolved: ``start``/``end`` (aware UTC,
    ``[start, end)``) and ``granularity`` (day/week/month/year) are set; otherwise ``unresolved``
    says why."""

    expression: str
    span: tuple[int, int]
    start: datetime | None = None
    end: datetime | None = None
    granularity: str | None = None
    unresolved: str | None = None

    @property
    def resolved(self) -> bool:
        return self.unresolved is None

    def to_dict(self) -> dict[str, str]:
        if self.start is None or self.end is None or self.granularity is None:
            return {"expression": self.expression, "unresolved": self.unresolved or VAGUE}
        return {"expression": self.expression, "start": iv.iso_z(self.start), "end": iv.iso_z(self.end),
                "granularity": self.granularity}


def find_expressions(text: str, today: date, *, standalone: bool = False, limit: int | None = None,
                     now: datetime | None = None) -> list[Occurrence]:
    """Every time expression of ``text`` (the first ``limit`` when given), in order, resolved against
    the observation day ``today`` (and its instant ``now``, which counts of hours need).

    ``standalone``: ``text`` is a time phrase on its own ("last tuesday", "in march"), as a tool's
    period argument is: names need no capital, a bare month needs no preposition and a phrase
    without a tense cue reads as past (see ``TokenCursor``)."""
    return _Scanner(text, today, standalone=standalone, now=now).run(limit)


def _out_of_range(stop: int, unit: str, count: int) -> Hit | None:
    """A count of none of a unit names no time; a count past the bound says so."""
    return Hit(stop, reason=f"more than {MAX_COUNT[unit]} {unit}s") if count > 0 else None


class _Scanner:
    """Left-to-right scan: at each token every matcher may claim a run of tokens; the longest wins."""

    def __init__(self, text: str, today: date, *, standalone: bool = False, now: datetime | None = None) -> None:
        self.text, self.tokens = text, lx.tokenize(text)
        self.c = TokenCursor(self.tokens, today, standalone=standalone, now=now)
        self.nested = False  # reading the stated day of a relation or the end of a range: no deeper
        self.loose = functools.partial(self._anchor, days=False)  # any resolved time, not only a day
        # ranges: "between A and B"; parts: "the first week of June"; present: "right now", "currently"
        self.matchers: tuple[Callable[[int], Hit | None], ...] = (
            self._part, self._day_word, self._ago, self._qualified, self._the, self._date,
            self._weekday, self._vague, self._season, functools.partial(ranges.run, self.c, anchor=self.loose),
            functools.partial(parts.nth_of_month, self.c, anchor=self.loose),
            lambda at: holidays.holiday(self.c, at, nested=self.nested), self._span,
            functools.partial(present.now, self.c))

    def run(self, limit: int | None = None) -> list[Occurrence]:
        found: list[Occurrence] = []
        index, count = 0, len(self.tokens)
        while index < count and (limit is None or len(found) < limit):
            token = self.tokens[index]
            if token.base not in _TRIGGERS and not token.low[:1].isdigit():
                index += 1
                continue
            best = self._longest(index)
            if best is None:
                index += 1
                continue
            found.append(self._match(index, best))
            index = best.stop
        return found

    def _longest(self, index: int) -> Hit | None:
        """The longest claim at ``index`` (the first of equal ones); a day off the calendar claims nothing."""
        best: Hit | None = None
        for matcher in self.matchers:
            try:
                hit = matcher(index)
            except (ValueError, OverflowError):
                continue
            if hit is not None and (best is None or hit.stop > best.stop):
                best = hit
        return best

    def _inner(self, at: int) -> Hit | None:
        """The longest claim at ``at``, read as a relation's stated day or a range end: never nested."""
        if self.nested:
            return None
        self.nested = True
        hit = self._longest(at)
        self.nested = False
        return hit

    def _anchor(self, at: int, *, days: bool = True) -> Hit | None:
        """The resolved time a relation ("the week before May 3") or a range end names at ``at``:
        days only unless ``days`` is False; read with month context."""
        hit = self._inner(at)
        if hit is None or hit.first is None or (days and hit.granularity != "day"):
            return None
        return hit

    def _refused(self, at: int) -> Hit | None:
        """An expression at ``at`` that names a time it cannot resolve (a movable holiday), read as a
        relation's stated day: the relation is refused with its reason rather than split."""
        hit = self._inner(at)
        return hit if hit is not None and hit.first is None and hit.reason is not None else None

    def _match(self, index: int, hit: Hit) -> Occurrence:
        span = self.tokens[index].start, self.tokens[hit.stop - 1].end
        expression = self.text[span[0]:span[1]]
        if hit.first is None or hit.end is None or hit.granularity is None:
            return Occurrence(expression, span, unresolved=hit.reason or VAGUE)
        return Occurrence(expression, span, *iv.utc_bounds(hit.first, hit.end), hit.granularity)

    # ---- matchers (each returns the longest expression starting at ``index`` or None) --------
    def _part(self, index: int) -> Hit | None:
        """A part of a month or year ("early May", "the end of last month"), or the rest of this one
        on either side of today ("earlier this week"): ``parts``."""
        return parts.part_of(self.c, index, self.loose) or parts.rest_of(self.c, index) \
            or parts.wished_weekend(self.c, index)

    def _span(self, index: int) -> Hit | None:
        """Quarters, decades, "in '22", "13.05.2024", "on 5/13", ISO and d/m/y dates: ``spans``."""
        return spans.quarter(self.c, index) or spans.decade(self.c, index) or spans.dotted(self.c, index) \
            or spans.slash_day(self.c, index, DAY_MONTH_ORDER) or spans.short_year(self.c, index) \
            or spans.numeric(self.c, index, DAY_MONTH_ORDER)

    def _day_word(self, index: int) -> Hit | None:
        """today/tonight/yesterday/tomorrow (+ morning...), the day before yesterday / after tomorrow."""
        base = self.c.base(index)
        if base in lx.DAY_WORDS and not (base != self.c.low(index) and self.c.low(index + 1) == "news" and self.c.base(
                index - 1) in ("that", "it", "is", "was", "be", "old")):  # "that's yesterday's news": stale, no day
            return self.c.day(self.c.skip_part_of_day(index + 1), lx.DAY_WORDS[base])
        at = index + 1 if base == "the" else index
        if self.c.low(at) == "day" and (pair := (self.c.low(at + 1), self.c.base(at + 2))) in (
                ("before", "yesterday"), ("after", "tomorrow")):
            return self.c.day(at + 3, -2 if pair[0] == "before" else 2)
        return None

    def _ago(self, index: int) -> Hit | None:
        """"3 days ago", "a year ago", "in two weeks" (future sentences only), "for a month now" (its start),
        "a week on Tuesday" (a week after the coming Tuesday),
        "it's been a year since" (a year ago); vague ("a few") and approximate ("about") ones are unresolved."""
        at, approximate, onset, anchor = index, False, self.c.low(index) == "for", None
        at += onset
        if self.c.low(at) in lx.APPROXIMATORS or (self.c.low(at) in ("more", "less") and self.c.low(at + 1) == "than"):
            approximate = True
            at += 2 if self.c.low(at + 1) == "than" else 1
        future_form = not approximate and not onset and self.c.low(at) == "in"
        at += future_form
        half = self.c.low(at) == "half" and self.c.low(at + 1) in lx.ARTICLES  # "half a year ago"
        at += half
        vague, read = False, counts.read(self.c, at)
        count = None if read is None else read.value
        if self.c.low(at)[:1].isdigit() and self.c.low(at - 1) in (".", ",") and self.c.low(at - 2).isdigit() \
                and self.c.touching(at - 2) and self.c.touching(at - 1):
            return None  # "1.5 years ago": a decimal count names no calendar unit
        if self.c.low(at) in lx.ARTICLES and self.c.low(at + 1) in lx.VAGUE_QUANTITIES:
            vague, at = True, at + 2
        elif self.c.low(at) in lx.VAGUE_QUANTITIES:
            vague, at = True, at + 1
        elif read is not None:  # "2-3 days ago", "two or three": somewhere between, so approximate
            at, approximate = read.stop, approximate or read.ranged
        else:
            return None
        if vague and self.c.low(at) == "of":
            at += 1
        (unit, count), low = counts.unit_at(self.c, at, count), self.c.low(at)
        weekday = lx.WEEKDAYS.get(low[:-1]) if low.endswith("s") else None  # "two Fridays ago"
        if self.c.low(at) in lx.CLOCK_UNITS:  # "3 hours ago", "in ten minutes"
            if onset or (future_form and self.c.tense(index, at + 1) != "future"):
                return None
            reason = VAGUE_QUANTITY if vague else APPROXIMATE if approximate else None
            return counts.clock_ago(self.c, at, count, reason, future=future_form)
        if unit is None and weekday is None:
            return None
        if half:  # half a year is six months; half of any other unit names no calendar unit
            unit, count, approximate = ("month", 6, approximate) if unit == "year" else (unit, count, True)
        plus_half = [self.c.low(at + i) for i in (1, 2, 3)] == ["and", "a", "half"] and count is not None
        at += 3 * plus_half
        if count is not None and (plus_half or (read is not None and read.half)):  # "a year and a half": 18 months
            unit, count, approximate = ("month", 12 * count + 6, approximate) if unit == "year" else (unit, count, True)
        if counts.unit_or_count(self.c, at + 1):  # "a year or two ago", "a week or so ago"
            approximate, at = True, at + 2
        after = self.c.low(at + 1)
        if onset:
            if after != "now":
                return None
            stop, sign = at + 2, -1
        elif future_form:
            if after == "ago" or self.c.tense(index, at + 1) != "future":
                return None
            stop, sign = at + 1, 1
        elif after in ("ago", "back") and self.c.base(at + 2) in ("today", "yesterday") and not (onset or future_form):
            stop, sign = at + 3, -1  # "a year ago today", "a week ago yesterday": that very day
            anchor = self.c.day(stop, -(self.c.base(at + 2) == "yesterday"))
        elif after in ("ago", "back") and self.c.low(at + 2) == "this" and unit in ("day", "week", "month", "year") \
                and self.c.low(at + 3) in ("week", "weekend", "month"):
            stop = at + 4  # "two years ago this month": that month of that year
            anchor = self.c.exact(stop, self.c.today, unit, -(count or 1))
            if anchor is None or anchor.first is None:
                return None
            return self.c.offset(stop, self.c.low(at + 3), 0, anchor.first) if not (vague or approximate) else \
                Hit(stop, reason=VAGUE_QUANTITY if vague else APPROXIMATE)
        elif after in ("ago", "back") and unit == "year" and self.c.low(at + 2) == "in" and count is not None \
                and (month := self.c.month_at(at + 3)) is not None and not approximate \
                and lx.year_number(self.c.tok(at + 4)) is None:  # not "two years ago in June 2020"
            return Hit(at + 4, *iv.month_span(self.c.today.year - count, month), "month")  # "5 years ago in June"
        elif after in ("ago", "back"):
            stop, sign = at + 2, -1
        elif after == "from" and self.c.low(at + 2) == "now":
            stop, sign = at + 3, 1
        elif after == "from" and not (onset or future_form) and (anchor := self._anchor(at + 2)) is not None:
            stop, sign = anchor.stop, 1  # "a week from Friday", "two days from today": that very day
        elif after in ("before", "after") and (anchor := self._anchor(at + 2)) is not None:
            stop, sign = anchor.stop, -1 if after == "before" else 1
        elif after == "on" and unit == "week" and (named := self.c.weekday_at(at + 2, abbreviations=False)) is not None:
            stop, sign = self.c.skip_part_of_day(at + 3), 1  # "a week on Tuesday": a week after the coming Tuesday
            anchor = self.c.day_hit(stop, iv.weekday_after(self.c.today, named))
        elif after in ("before", "after", "later", "earlier", "prior"):
            return Hit(at + 2, reason=NO_REFERENCE)
        elif after == "since" and self.c.low(index - 1) == "been" and self._since_now(index, at + 2):
            stop, sign = at + 2, -1  # "it's been a year since I moved": a year ago
        else:
            return None
        if vague or approximate:
            return Hit(stop, reason=VAGUE_QUANTITY if vague else APPROXIMATE)
        assert count is not None
        bound_unit = unit or "week"  # N weekdays are bounded like N weeks
        if not 1 <= count <= MAX_COUNT[bound_unit]:
            return _out_of_range(stop, bound_unit, count)
        if weekday is not None:  # "two Fridays ago": the second Friday back
            if onset or future_form:
                return None
            first, last = anchor.days if anchor is not None else (self.c.today, self.c.today)
            day = (iv.weekday_before(first, weekday) - iv.WEEK * (count - 1) if sign < 0
                   else iv.weekday_after(last, weekday) + iv.WEEK * (count - 1))
            return self.c.day_hit(stop, day)
        assert unit is not None
        if anchor is not None and after in ("ago", "back", "from", "on"):
            return self.c.exact(stop, anchor.days[0], unit, sign * count)
        if anchor is not None:
            return self.c.around(stop, unit, sign * count, anchor)
        return self.c.offset(stop, unit, sign * count)

    def _qualified(self, index: int) -> Hit | None:
        """last/this/next (+ "this past", "this coming") + night, unit, weekday, month or season;
        "past N units" (without "the") is a rolling window like "the past N units"."""
        word = self.c.low(index)
        if word not in ("last", "this", "next", "past") or self.c.low(index - 1) in lx.POSSESSIVE_BLOCKERS:
            return None
        if word == "past":  # "past 3 days", "past week"; not "past years" (no count) or "walked past the"
            counted = counts.read(self.c, index + 1, article=False) is not None
            return self._rolling(index, index + 1) if counted or self.c.low(index + 1) in _SINGULAR else None
        step, at = written.STEP[word], index + 1
        if word == "this" and self.c.low(at) in ("past", "coming"):
            step, at = (-1 if self.c.low(at) == "past" else 1), at + 1
        target = lx.UNIT_SHORT.get(self.c.base(at), self.c.base(at))  # "last yr" is last year
        if target in ("night", "evening") and step == -1:
            return self.c.day(at + 1, -1)
        if target in lx.PARTS_OF_DAY and word == "this":
            return self.c.day(at + 1, 0)
        if target == "weekend" and word == "this" and step == 0 and self.c.tense(index, at + 1) == "past":
            step = -1 if iv.weekend_span(self.c.today)[0] > self.c.today else 0  # the weekend already begun
        if target == "weekend" and self.c.low(index + 1) == "coming":  # "this coming weekend": the next to begin
            saturday = iv.weekday_after(self.c.today, 5)
            return Hit(at + 1, saturday, saturday + 2 * iv.DAY, "day")
        if target == "week":  # "last week (on) Tuesday": that day of that week
            day_at = at + 2 if self.c.low(at + 1) == "on" else at + 1
            weekday = self.c.weekday_at(day_at, abbreviations=False)
            if weekday is not None:
                return self._day_of_week(self.c.skip_part_of_day(day_at + 1), step, weekday)
        if target in ("week", "month", "year", "weekend"):
            return self.c.offset(at + 1, target, step)
        weekday = self.c.weekday_at(at, abbreviations=True)
        if weekday is not None:
            stop = self.c.skip_part_of_day(at + 1)
            if step and (named := written.qualified_nth(self.c, stop, weekday, step)):  # "last Tuesday the 7th"
                return named
            if step < 0:
                return self.c.day_hit(stop, iv.weekday_before(self.c.today, weekday))
            day = iv.week_start(self.c.today) + timedelta(days=weekday)
            if step > 0 or day < self.c.today and self.c.tense(index, stop) == "future":  # "we'll meet this Monday"
                return self.c.day_hit(stop, iv.weekday_after(self.c.today, weekday))  # said on a Saturday: ahead
            # "we met this Sunday" said on a Monday: the one gone, if nearer than the one ahead and not a plan ("she
            # said she was coming this Friday"); a tool's period has no tense of its own
            past = (day - self.c.today).days > 3 and not self.c.standalone and self.c.tense(index, stop) == "past" \
                and not self.c.plan_in_past(index)
            return self.c.day_hit(stop, iv.weekday_before(self.c.today, weekday) if past else day)
        month = self.c.month_at(at)
        if month is not None:
            year = self.c.today.year if step == 0 else iv.month_year(self.c.today, month, forward=step > 0, strict=True)
            return Hit(at + 1, *iv.month_span(year, month), "month")
        if target in lx.SEASONS:
            return Hit(at + 1, reason=SEASON)
        if word == "last" and target in counts.MULTIPLES:
            return Hit(at + 1, reason=counts.LAST_MULTIPLE)  # "last decade": the 2010s, or the past ten years?
        if word == "last" or (word == "this" and step < 0):
            return self._rolling(index, at)
        return None

    def _the(self, index: int) -> Hit | None:
        """Phrases opening with "the": rolling windows, "the week before last" / "after next", "the weekend",
        the day/week/weekend/weekday before, after or of a stated day ("the Friday before May 3"),
        and offsets from an unstated reference ("the day before")."""
        if self.c.low(index) != "the":
            return None
        word, unit = self.c.low(index + 1), lx.UNITS.get(self.c.low(index + 1))
        if word in ("past", "last"):
            if self.c.low(index + 2) == "weekend" and self.c.low(index + 3) != "of":
                return self.c.offset(index + 3, "weekend", -1)  # "the past weekend" is last weekend
            return self._rolling(index, index + 2)
        if word in ("next", "following", "previous", "prior") and (
                lx.UNITS.get(self.c.low(index + 2)) or self.c.base(index + 2) in lx.PARTS_OF_DAY or (word in (
                    "following", "previous") and self.c.weekday_at(index + 2, abbreviations=False) is not None)):
            return Hit(index + 3, reason=NO_REFERENCE)  # "the next day", "the previous evening", "the following Monday"
        relation, weekday = self.c.low(index + 2), self.c.weekday_at(index + 1, abbreviations=False)
        named = weekday is not None or word in ("day", "week", "weekend", "month", "year")
        # a weekday is counted from any stated time ("the Friday before last week"); a unit from a day
        anchor = self._anchor(index + 3, days=weekday is None) if named and relation in ("before", "after", "of") \
            else None
        week = written.week_named(self.c, index + 2) if weekday is not None and relation == "of" else None
        if weekday is not None and week is not None:  # "the Tuesday of last week"
            return self._day_of_week(week[1], week[0], weekday)
        if weekday is not None and anchor is not None and relation != "of":
            first, last = anchor.days
            day = iv.weekday_before(first, weekday) if relation == "before" else iv.weekday_after(last, weekday)
            return self.c.day_hit(anchor.stop, day)
        if (relation, self.c.low(index + 3)) in (("before", "last"), ("after", "next")) and \
                not self._names_time(index + 4):
            if weekday is not None:  # "the Friday before last": the Friday before last Friday
                return self.c.day_hit(index + 4, iv.weekday_before(self.c.today, weekday) - iv.WEEK
                                      if relation == "before" else iv.weekday_after(self.c.today, weekday) + iv.WEEK)
            if word in ("night", "evening") and relation == "before":
                return self.c.day(index + 4, -2)
        if word in ("night", "evening") and relation == "before" and (night := self._anchor(index + 3)) is not None:
            return self.c.day_hit(night.stop, night.days[0] - iv.DAY)  # "the night before May 3": 2 May
        if word in ("night", "evening") and relation in ("before", "after"):
            return Hit(index + 3, reason=NO_REFERENCE)  # "the night before", "the evening after"
        if named and anchor is None and relation in ("before", "after", "of") and \
                (refused := self._refused(index + 3)) is not None:  # "the Monday after Easter", "the week of Easter"
            return Hit(refused.stop, reason=refused.reason)
        if weekday is not None and relation in ("before", "after"):
            return Hit(index + 3, reason=NO_REFERENCE)  # "the Wednesday before" (before what?)
        if word not in ("day", "week", "weekend", "month", "year") or unit is None:
            return None
        if anchor is not None and relation == "of" and unit == "weekend":  # the nearest weekend, or the next
            forward = self.c.tense(index, anchor.stop) == "future"
            return Hit(anchor.stop, *iv.nearest_weekend(anchor.days[0], forward=forward), "day") \
                if anchor.days[0] == anchor.days[1] else None
        if anchor is not None and (relation != "of" or unit in ("week", "month")):
            return self.c.around(anchor.stop, unit, {"before": -1, "after": 1, "of": 0}[relation], anchor)
        if (relation, self.c.low(index + 3)) in (("before", "last"), ("after", "next")) and unit != "day":
            return self.c.offset(index + 4, unit, -2 if relation == "before" else 2)  # "the week after next"
        if relation in ("before", "after"):
            return Hit(index + 3, reason=NO_REFERENCE)
        if unit in ("week", "weekend") and self.c.low(index + 2 + (self.c.low(index + 2) == "just")) == "gone":
            return self.c.offset(index + 3 + (self.c.low(index + 2) == "just"), unit, -1)  # "the weekend just gone"
        if unit == "weekend" and relation != "of":  # "the weekend of the 4th" is no bare weekend
            return self.c.tensed_weekend(index, index + 2)
        return None

    def _names_time(self, at: int) -> bool:
        """Whether the token at ``at`` is a unit, weekday or month ("the Friday before last week")."""
        return self.c.base(at) in lx.UNITS or self.c.weekday_at(at, abbreviations=False) is not None or \
            self.c.month_at(at) is not None

    def _rolling(self, index: int, at: int) -> Hit | None:
        """"(the) past/last [N] days|weeks|months|years": N units of days ending with the observation day."""
        read, vague = counts.read(self.c, at, article=False), self.c.low(at) in lx.VAGUE_QUANTITIES
        if self.c.low(at) in lx.ARTICLES and self.c.low(at + 1) in lx.VAGUE_QUANTITIES:
            at, vague = at + 1, True
        unit_at = read.stop if read is not None else at + vague
        unit_at += vague and self.c.low(unit_at) == "of"  # "the last couple of days"
        unit, count = counts.unit_at(self.c, unit_at, read.value if read is not None else 1)
        if unit is None or unit == "weekend" or self.c.low(unit_at + 1) in ("of", "before", "after"):
            return None
        if read is None and not vague and unit == "day":
            return None
        stop = unit_at + 1
        if vague or (read is not None and (read.half or read.ranged)):  # "the past 2-3 days"
            return Hit(stop, reason=VAGUE_QUANTITY if vague else APPROXIMATE)
        assert count is not None
        if not 1 <= count <= MAX_COUNT[unit]:
            return _out_of_range(stop, unit, count)
        if unit in ("day", "week"):
            back = self.c.today - timedelta(days=count * (7 if unit == "week" else 1))
        else:
            back = iv.shift_months(self.c.today, -count * (12 if unit == "year" else 1))
        return Hit(stop, back + iv.DAY, self.c.today + iv.DAY, "day")

    def _date(self, index: int) -> Hit | None:
        """Written dates: "3 July 2023", "the 3rd of July", "July 3rd, 2023", "June 2023",
        "in May", "in 2022", "the summer of 2022" (-> 2022), "on the 15th" (tense rule)."""
        at, context = index, False
        if self.c.low(at) == "on":
            at += 1
        elif self.c.low(at) in lx.YEAR_CONTEXT:
            context, at = True, at + 1
            if self.c.low(at) == "-":
                at += 1
        if self.c.weekday_at(at, abbreviations=False) is not None:
            after = at + 2 if self.c.low(at + 1) == "," else at + 1
            dated = self._written_date(after, context=False)
            return dated if dated is not None and dated.first is not None else None
        context = context or self.c.standalone or self.nested
        moved = self.c.low(index - 1) == "to" and ranges.changes(self.c, index - 1, 8) and \
            self.c.low(index + 2) in lx.AFTER_NTH  # "moved it to the 28th", not "changed to the 2nd option"
        return self._written_date(at, context=context, on=self.c.low(index) in _DAY_LEADS or moved)

    def _written_date(self, at: int, *, context: bool, on: bool = False) -> Hit | None:
        start_the = self.c.low(at) == "the"
        day_at = at + 1 if start_the else at
        day = lx.day_number(self.c.tok(day_at))
        spelled = counts.spelled_ordinal_day(self.c, day_at) if start_the and day is None else None
        if spelled is not None and self.c.low(spelled[1]) == "of" and (month := self.c.month_at(spelled[1] + 1)):
            return written.day_month(self.c, spelled[1] + 2, month, spelled[0])  # "the first of March"
        if day is not None:
            run = written.day_run(self.c, day_at + 1, day)  # "13-15 May"
            month_at = run[0] if run else day_at + 1
            month_at += self.c.low(month_at) == "of"
            month = self.c.month_at(month_at)
            if month is not None:
                return written.day_month(self.c, month_at + 1, month, day, run[1] if run else day)
            step = written.STEP.get(self.c.low(month_at))
            if month_at > day_at + 1 and step is not None and self.c.low(month_at + 1) == "month":
                first = iv.add_months(iv.month_start(self.c.today), step)  # "the 15th of last month"
                return self.c.day_hit(month_at + 2, first.replace(day=day))
            if [self.c.low(day_at + i) for i in (1, 2, 3)] in (["of", "every", "month"], ["of", "each", "month"]):
                return Hit(day_at + 4, reason=HABIT)  # "on the 15th of every month"
            ordinal = not self.c.low(day_at).isdigit()
            if on and start_the and ordinal and self.c.low(day_at + 1) not in lx.NTH_NOUNS:  # not "the 4th floor"
                if self.c.born(day_at + 1):
                    return Hit(day_at + 1, reason=lx.BIRTH)  # "I was born on the 28th": in some month
                tense = self.c.tense(day_at)
                if tense == "unclear":
                    return Hit(day_at + 1, reason=UNCLEAR_TENSE)
                found = iv.day_of_month_date(self.c.today, day, forward=tense == "future")
                return self.c.day_hit(day_at + 1, found) if found else None
            return None
        month = self.c.month_at(at)
        if month is not None:
            day_at = at + 1 + (self.c.low(at + 1) == "." and self.c.low(at) in lx.MONTH_ABBREVIATIONS)  # "Jan. 5"
            day_at += self.c.low(day_at) == "the"  # "January the 5th"
            day = lx.day_number(self.c.tok(day_at))
            if day is None and (self.c.low(day_at - 1) == "the" or self.c.low(at - 1) in _DAY_LEADS) and \
                    (spelled := counts.spelled_ordinal_day(self.c, day_at)) and self.c.ends_phrase(spelled[1]):
                return written.day_month(self.c, spelled[1], month, spelled[0])  # "on March first", "May the third"
            if day is not None and lx.UNITS.get(self.c.low(day_at + 1)) is None and self.c.low(day_at + 1) != ":":
                run = written.day_run(self.c, day_at + 1, day)  # "May 13-15"
                return written.day_month(self.c, run[0] if run else day_at + 1, month, day, run[1] if run else day)
            year_at = at + 2 if self.c.low(at + 1) in (",", ".", "of") else at + 1
            year = lx.year_number(self.c.tok(year_at))
            if year is not None:
                return Hit(year_at + 1, *iv.month_span(year, month), "month")
            year_at = at + 2 if self.c.low(at + 1) == "of" else at + 1  # "March (of) last year"
            year = written.relative_year(self.c, year_at)
            if year is not None:
                return Hit(year_at + 2, *iv.month_span(year, month), "month")
            short = self.c.low(at - 1 - (self.c.low(at - 1) == "-")) in lx.SHORT_MONTH_LEADS  # "in Sept", "mid-Jan"
            if context and (self.c.low(at) in lx.MONTHS or self.nested or short and self.c.short_name_alone(at)):
                forward = self.c.tense(at) == "future"
                if not (forward or self.nested or self.c.standalone) and self.c.habitual(at):
                    return Hit(at + 1, reason=HABIT)  # "in May we always plant tomatoes"
                if self.c.born(at + 1):
                    return Hit(at + 1, reason=lx.BIRTH)  # "she was born in August": in some year
                year = iv.month_year(self.c.today, month, forward=forward, strict=False)
                return Hit(at + 1, *iv.month_span(year, month), "month")
            return None
        season_at = at + 1 if start_the else at
        if self.c.low(season_at) in lx.SEASONS:
            year_at = season_at + 2 if self.c.low(season_at + 1) == "of" else season_at + 1
            year = lx.year_number(self.c.tok(year_at))
            return Hit(year_at + 1, *iv.year_span(year), "year") if year is not None else None
        year = lx.year_number(self.c.tok(at))
        if context and year is not None and not start_the:
            return Hit(at + 1, *iv.year_span(year), "year")
        return None

    def _weekday(self, index: int) -> Hit | None:
        """A weekday with no last/this/next: resolved by the sentence's tense, else unresolved."""
        at = index + 1 if self.c.low(index) == "on" else index
        weekday = self.c.weekday_at(at, abbreviations=False)
        if weekday is not None and self.c.greeting(at - 1):  # "Happy Friday!": a greeting on that day
            return self.c.day_hit(at + 1, self.c.today) if self.c.today.weekday() == weekday else None
        if weekday is None or self.c.low(at - 1) in ("every", "good", "black", "each", "a", "any", "other"):
            return None
        stop = self.c.skip_part_of_day(at + 1)
        if self.c.low(stop) == "gone" or (self.c.low(stop), self.c.low(stop + 1)) == ("just", "gone"):
            return self.c.day_hit(stop + 1 + (self.c.low(stop) == "just"), iv.weekday_before(self.c.today, weekday))
        week = written.week_named(self.c, stop)
        if week is not None:  # "Tuesday (of) last week"
            return self._day_of_week(week[1], week[0], weekday)
        relation = (self.c.low(stop), self.c.low(stop + 1))
        if relation in (("before", "last"), ("after", "next")) and not self._names_time(stop + 2):
            day = iv.weekday_before(self.c.today, weekday) if relation[0] == "before" else \
                iv.weekday_after(self.c.today, weekday)  # "Monday before last": the one before last Monday
            return self.c.day_hit(stop + 2, day + iv.WEEK * (1 if relation[0] == "after" else -1))
        nth = written.nth_after(self.c, stop)
        stop += 2 if nth is not None else 0  # "Tuesday the 7th": the nearest 7th that is a Tuesday
        tense = self.c.tense(at, stop)
        if tense == "unclear":
            return Hit(stop, reason=UNCLEAR_TENSE)
        forward = tense == "future"
        if nth is not None and (dated := iv.weekday_month_day(self.c.today, weekday, nth, forward=forward)):
            return self.c.day_hit(stop, dated)
        day = iv.weekday_after(self.c.today, weekday) if forward else iv.weekday_before(self.c.today, weekday)
        return self.c.day_hit(stop, day)

    def _day_of_week(self, stop: int, step: int, weekday: int) -> Hit:
        """``weekday`` of the ISO week ``step`` weeks from the observation's."""
        return self.c.day_hit(stop, iv.week_start(self.c.today) + iv.WEEK * step + timedelta(days=weekday))

    def _vague(self, index: int) -> Hit | None:
        """"recently", "lately", "a while ago", "the other day"...: no time to resolve."""
        for phrase in _VAGUE_BY_FIRST.get(self.c.low(index), ()):
            if all(self.c.low(index + offset) == word for offset, word in enumerate(phrase)):
                return Hit(index + len(phrase), reason=VAGUE)
        return None

    def _season(self, index: int) -> Hit | None:
        """"in (the) summer", "over the winter": a season without a year stays unresolved."""
        if self.c.low(index) not in ("in", "over", "during", "through", "throughout"):
            return None
        at = index + 2 if self.c.low(index + 1) == "the" else index + 1
        return Hit(at + 1, reason=SEASON) if self.c.low(at) in lx.SEASONS else None

    def _since_now(self, index: int, after: int) -> bool:
        """"been N units since" counts from now: not after "had", a negation, in a question, or before a time."""
        lead = {self.c.low(at).replace("\u2019", "'") for at in range(index - 4, index - 1)}  # "hasn't even been"
        if lead & _NOT_FROM_NOW or any(word.endswith("'d") for word in lead) or self.c.in_question(index):
            return False
        return (stated := self._inner(after)) is None or stated.first is None
