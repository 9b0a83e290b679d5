"""Occurrence time: the time expressions a message contains, resolved against when it was said.

``resolve_occurrences(text, observed_at)`` returns one ``Occurrence`` per expression, in
text order: a UTC ``[start, end)`` interval with a granularity, or an unresolved reason when
the words do not pin a time down. Observation time is an input; it is reported only where the
words name it ("today", "right now"), never for a message that names no time. Pure,
deterministic, no model. The grammar lives in expressions.py; the passes over its readings that
look across expressions in anaphora.py (times counted from an earlier one) and corrections.py (times
the speaker takes back, and a plot's times).
"""
from __future__ import annotations

from collections.abc import Mapping
from datetime import date, datetime
from typing import Any

from . import anaphora, corrections, present
from . import intervals as iv
from . import lexicon as lx
from .expressions import Occurrence, find_expressions

MAX_SCAN_CHARS = 20_000

RULES = """\
- Calendar arithmetic uses the UTC date of the observation; weeks are ISO weeks (Monday first).
- "last/next <weekday>": the nearest such day strictly before/after the observation day; "this <weekday>":
  that day of the observation's ISO week, unless the sentence's tense points the other way: already gone in a
  future sentence ("we'll meet this Monday" said on a Saturday) it is the coming one, still ahead in a past
  one ("we met this Sunday" said on a Monday) the one gone when that is the nearer of the two and no plan or
  supposition is told ("she said she was coming this Friday", "we were supposed to meet this Sunday": ahead).
- "<weekday> the <nth>" ("Tuesday the 7th", an ordinal followed by the end of the clause or a word such as
  "I", "we", "at") is the nearest such day of a month that falls on that weekday: on or before the observation
  day, on or after it in a sentence about the future; unclear tense leaves it unresolved. "The 7th grade",
  "the 2nd half" and "the 4 of us" leave the weekday alone. "last (next) Tuesday the 7th" is the nearest such
  day before (after) the observation day, at most a month away; none that near means the weekday and the day
  disagree (unresolved).
- A weekday before a plural part of the day ("on Sunday mornings") is a habit and claims nothing; so does one
  qualifying a noun, after "to", "at", "after", an article or a possessive and before a lower-case word that
  is no function word ("went to Sunday school", "the Monday blues", "our Tuesday night trivia team": a part of
  the day may stand between), unless "the" opens its clause and the clause goes on in the past ("The Monday
  meeting was long": the last Monday) of one thing, not a plural ("the Friday meetings were") nor a habit
  ("always", "growing up", "back then"); so does one in a name ("Sunday school", "Saturday Night Live", "Cyber
  Monday"). A weekday's possessive ("after Friday's shift") is that day, by the tense rule.
- A weekday with no last/this/next ("on Friday") follows the tense of its sentence, read from the tense cue
  nearest to it (went, -ed, was / will, 'll, going to, plan, next...): past -> the nearest one strictly
  before, future -> strictly after; no cue or a tie -> unresolved. "on (by, until, since) the 15th" follows
  the same rule; an ordinal counting a noun ("on the 4th floor") is no day. Besides past and future words,
  tense.py reads as future what arranges a time: a present progressive or "have" whose clause the time belongs
  to ("I'm moving in March", "we have a dinner on Thursday"), a timetable's present ("the flight departs",
  "the museum reopens"), a present "be" of a schedule or of being free or away ("my interview is on Tuesday",
  "I'm off on Friday"), a modal before a plain verb, a wish, request, offer or leave-taking ("see you
  Friday"); and as past a modal before "have", a plan seen from the past whose outcome a later clause tells, a
  story told in the present ("... on Friday and says"), a thing thanked for or remembered. Each cue there
  carries its examples and the words that cancel it (a habit's "always", a new clause, a topic's "about"). A
  time after "until", "till" or "by" in a sentence with no cue lies ahead ("I'm off until Monday"), unless the
  sentences before tell a past story or a "now" ends it; a time after "since" lies behind (not "since Monday
  is a holiday", a reason).
- A month without a year resolves to the most recent such month not after the observation month, or to the
  next one not before it when the nearest tense cue is future. A day and month without a year follow the same
  rule at day precision. A birth ("born on July 4th", "born in August", "born on Christmas Day") is in a year
  its words do not give: unresolved. A month alone takes the year of the time just before it that lies within
  one year ("In 2022 we lived in Denver. In March we moved"; after a month of a later number, the next year:
  "November 2021 ... in January"), a day alone ("on the 10th") the month of one within one month (after a
  later single day, the next month), a weekday alone or a run of two the week named before it in its sentence,
  only such weekdays between ("Last week I saw her on Monday": 6 May; "Next week I'm off on Thursday"); not
  against the tense, and into the past only from a clause with a past cue and no present "be" or future word
  ("built in 1890; in October they're closing it"; "Last week was rough, on Monday I'm starting fresh"). A
  month alone in a clause with a frequency word ("always", "usually", "every") and no past form is a habit
  ("in May we always plant tomatoes"): unresolved; so is "the 15th of every month", and a month opening a
  sentence whose clause, with no tense cue, says in the simple present what happens then ("In August the city
  empties out", "In November the days get short").
- "for N units now" (an ongoing state) resolves to its start, like "N units ago"; so does "it's been N units
  since" (not "it had been", which counts from another past, nor a negation, a question, or "since" a stated
  time: "it's been two years since Christmas 2021" is Christmas 2021). A decimal count ("1.5 years ago") names
  no calendar unit. A tag (", hasn't it?", ", right?") makes no question.
- "last <month>" is the latest such month strictly before the observation month; "next <month>" the earliest
  strictly after.
- "last week/month/year" and "N weeks/months/years ago" are whole calendar units (ISO week, month, year); "the
  past N days/weeks" is a rolling window of days ending with the observation day (like the period "Nd"),
  granularity "day".
- "the day/week/weekend/<weekday> before (after) X", "N units before (after) X" and "the week (weekend) of X",
  with X a stated day ("May 3", "last Friday", "yesterday"; "the weekend of X" is the weekend nearest X, from
  a Monday or Tuesday the one before): days count from X's near edge, weeks, months and years are whole
  calendar units counted from X's; the weekend before X is the last Saturday and Sunday ending before it, the
  weekend after X the first one after it. "the week/weekend/month/year before last" ("after next") is two
  units back (ahead).
- "between A and B", "from A to/until/through B": the start of A to the end of B; a bare weekday B is the
  first one on or after A, and a bare weekday A (also with no "from": "I'm away Monday to Wednesday",
  "Mon-Wed", not in a habit: "Jan-Feb is always slow") follows the tense rule; two months with no "from" need
  the same joiners or a dash ("Jan–Mar"), two years a dash and the later year second ("2019-2021", a bare run
  only closing its phrase and after no counted noun: not "a 2019-2021 Honda", "pages 2019-2021"); a bare
  ordinal after a day ends the run in that day's month ("from March 3rd to the 5th"); "thru" is "through"; a
  range that ends before it starts is two expressions. After a past or -ing verb that moves a date ("moved",
  "postponed", "pushed", "rescheduled", "changed") "from A to B" is the new date B alone, and a time right
  after such a verb's "to"/"until" lies ahead ("the meeting moved from Thursday to Friday", "we moved the
  dinner to Saturday") unless a clause after it says in the past how it went ("we moved it to Friday and it
  went fine"); so does a bare ordinal after that "to" ending its phrase ("moved my appointment to the 28th").
  Two bare ordinals ("from the 2nd to the 5th") are days of one month: past -> the latest such run ending on
  or before the observation day, future -> the first beginning after it; unclear -> unresolved.
- A weekend is Saturday and Sunday: a 2-day interval with granularity "day". "last weekend" is the weekend of
  the previous ISO week; "N weekends ago" counts back N ISO weeks; "this coming weekend" is the first one to
  begin after the observation day.
- "last night" is the day before the observation day; "tonight" the observation day.
- "(have, had, enjoy) a nice (good, great...) weekend" is the weekend its sentence's tense points to: the
  first to begin on or after the observation day, or the last to begin before it.
- Words for the moment of speaking ("right now", "currently", "at the moment", "now" closing a clause with no
  past "was"/"had"/"did") and "just" for the recent past ("I've just moved", "I just got back"; not "I just
  wanted", where it means "simply") name the observation day; none does in a question, and "just" gives way to
  a past or vague time its sentence names ("I just got back on May 3").
- "the next day", "the following Monday", "two days later", and "the day after" closing its clause count from
  the expression just before them when it is a resolved time ("We married on June 1st. The next day we flew":
  2 June), as "the day after June 1st" would, unless the result lies after the observation day in a sentence
  neither about the future nor reporting a plan ("agreed to meet the following Saturday"), or before it in one
  about the future, or that time is what something is about ("a documentary about July 20, 1969", "the events
  of 9 May 2001"; not "the morning of May 3") or a date of a past year in a present sentence ("the film is set
  on 25 December 1914"). Otherwise they stay unresolved, except "the previous Monday", the last Monday before
  the observation day.
- Vague or approximate quantities ("a few days ago", "about a year ago"), seasons (hemisphere- dependent),
  "recently", and offsets from an unstated reference ("the day before my birthday", or "the week before" with
  no time before it) stay unresolved with a reason, as do counts past the bounds (3660 days, 520 weeks or
  weekends, 1200 months, 200 years). Numeric dates like 3/4/2023 are unresolved unless one part is > 12. A day
  past the calendar's ends (year 1, 9999) claims nothing.
- "(the) <weekday> before last" ("after next") is the one before the last such weekday (after the next); "N
  <weekday>s ago" the Nth such day strictly before; a fortnight is two weeks, a decade ten years, a century a
  hundred; "half a year ago" six months back, "N and a half years" 12N+6 months, half of any other unit
  approximate. Counts are digits or words, compounds of tens ("twenty-one", "forty five": never the "one"
  alone; without a hyphen after a word of age, "I turned thirty two years ago", the tens are the age) and
  hundreds ("a hundred days ago"); a range of counts ("2-3 days ago", "two or three", "a year or two ago", "a
  week or so ago") is approximate. "last fortnight" and "last decade" may be the one before this one or the
  past one up to now: unresolved; "the past (last) fortnight" is the rolling fourteen days.
- Short forms: "yr", "wk", "mth", "wknd" after last/this/next are the unit ("last yr" is last year); "yday",
  "tmrw", "tmr", "tonite" are the day words ("that's yesterday's news" is stale news, no day); "tues",
  "thurs", "weds" (no other English word) are weekdays in any case, "Fri", "Sat", "Sun", "Mon", "Wed" alone
  only capitalised after "on"; a short month name alone ("back in Sept") after "in", "during", "until",
  "till", "early", "mid" or "late" (not "from Jan", a name as often), or as a relation's stated time ("the end
  of Jan"). Alone, neither is written in capitals ("on SAT math") nor followed by a lower-case word that is no
  function word: a noun it qualifies or a verb it is the subject of ("on Sun loungers", "until Jan gets
  back"). A "re-" form of a start is a timetable verb ("my classes restart in 2 weeks"). A weekday, "the week"
  or "the weekend" "(just) gone" is the last one ("on Sunday just gone"). A day of a month spelled out
  ("first" to "thirty-first") is read only beside its month: "the first of March", "March the first", "on
  March first" (not "in March first we...", nor before a noun or verb: "March the first time", "May the fourth
  be with you").
- "the first/second/third/fourth/last week of <month>" is days 1-7, 8-14, 15-21, 22-28 or the month's last
  seven days; the nth (last) weekend of a month its nth (last) Saturday and the Sunday after.
- Holidays on one date every year (lexicon.FIXED_HOLIDAYS: Christmas, Halloween, "Xmas", "NYE"...) resolve
  like a day and month; one-word names need a lead word ("at Christmas") or a year. "New Year's" and "April
  Fools" alone need one too; "New Year's" alone is its eve and its day ("for New Year's"). With no lead word
  before a plural noun and no past verb after it ("Valentine's Day cards are a scam") a fixed one names no
  day. "Happy Halloween!" is the observation day when it is that holiday, else no day. Holidays whose date
  moves or differs by country (Easter, Good Friday, Black Friday) stay unresolved; with no lead word before a
  noun ("Black Friday deals") they claim nothing.
- "<weekday> (of) last/this/next week" is that day of that ISO week; "the nth (last) <weekday> of <month>" the
  month's nth (last) such day; "N units from X" and "N units ago today (yesterday)" that very day; "N weeks on
  <weekday>" N weeks after the coming such day ("a week on Tuesday" said on Sunday the 19th is the 28th); "N
  units ago this week (month)" the week (month) holding that day; "N years ago in June" that June; "a year and
  a half ago" 18 months back; "from Monday to Friday last week" those days of that week; "N hours/minutes ago"
  the day of that instant.
- Early/beginning, mid/middle and late/end of a month are days 1-10, 11-20 and 21 to its end; of a year
  January-April, May-August and September-December; a bare month part after the observation day in a sentence
  not about the future is last year's ("we met in late May", said on 15 May). "earlier (later) this
  week/month/year" runs from the unit's start to the observation day (from it to the unit's end). "May 13-15"
  is the run of days.
- A quarter is three months from January, April, July or October ("Q3 2023", "the second quarter of last
  year", "last quarter"); without a year it follows the month rule; "the last quarter of 2023" is its fourth;
  one "of" anything but a year ("the first quarter of the game") claims nothing. A decade is ten years from a
  year ending in 0 ("the 1990s", "the '90s", "the nineties"; two digits or a word need "the" and no measure
  before them: "temperatures were in the 90s"), the latest such one begun; early/mid/late take its first four,
  middle three or last three years; "the 1900s" (a century that has ended) stays unresolved. "in '22" and
  "class of '98" are the latest such year. "13.05.2024" is day-first; "on 5/13" (a lead word is needed)
  follows the day-and-month rule.
- A time after "in the book/film/movie/show/story..." and a comma or a clause's subject, in that sentence, is
  the plot's, not the calendar's: unresolved ("in the book the hero leaves on the 3rd").
- A time the speaker takes back ("on Thursday, no wait, Friday", "it wasn't last week, it was two weeks ago",
  "see you Thursday! oh wait, Friday": only correction words between them) is unresolved; the later one
  stands. A bare day or month name as the replacement ("on the 20th, or rather the 21st") takes the corrected
  time's month (year).
- Only the first MAX_SCAN_CHARS characters of a message are read.
"""

def resolve_occurrences(text: str, observed_at: datetime | int | float, *, limit: int | None = None,
                        max_chars: int = MAX_SCAN_CHARS) -> list[Occurrence]:
    """Time expressions of ``text`` (its first ``max_chars`` characters, at most MAX_SCAN_CHARS; the
    first ``limit`` expressions when given) resolved against ``observed_at`` (aware datetime or
    epoch seconds). See RULES for how ambiguous wording is treated."""
    now = iv.as_utc(observed_at)
    head = text[:max(0, min(int(max_chars), MAX_SCAN_CHARS))] if isinstance(text, str) else ""
    # the post-passes may drop "just" claims: read a few more than asked, then cut
    found = find_expressions(head, now.date(), limit=None if limit is None else 2 * limit + 2, now=now)
    found = anaphora.resolve(head, _settled(head, found, now.date()), now.date())
    return corrections.taken_back(head, corrections.plot_times(head, found))[:limit]


def _settled(text: str, found: list[Occurrence], today: date) -> list[Occurrence]:
    """``found`` without the "just" claims (``present.recent_past``) that share their sentence (no
    ``.;!?`` or line break between them) with a past or vague expression: "I just got back on May 3"
    is May 3; "I just booked my flight for next Friday" keeps both."""
    def stays(i: int, occ: Occurrence) -> bool:
        if not present.recent_past(occ.expression):
            return True
        for other in found[max(0, i - 1):i] + found[i + 1:i + 2]:
            if present.recent_past(other.expression) or (other.start is not None and other.start.date() > today):
                continue
            left, right = sorted((occ.span, other.span))
            if not lx.SENTENCE_BREAK.search(text, left[1], right[0]):
                return False
        return True

    return [occ for i, occ in enumerate(found) if stays(i, occ)]


MAX_REPORTED = 12


def occurrences_for(row: Any, *, limit: int = MAX_REPORTED, max_chars: int = MAX_SCAN_CHARS) -> list[dict[str, str]]:
    """The ``to_dict()`` occurrences of one stored row (its first ``max_chars`` characters), at most
    ``limit`` (the scan stops there), resolved against
    the row's own time: a message (``content``, ``created_at``) or a summary node
    (``summary``, observed at ``latest_at``). Mappings with those keys work too. A row
    without a usable time or text gives ``[]``; unresolved expressions keep their reason."""
    def field(name: str) -> Any:
        return row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)

    text = field("content")
    observed = field("created_at")
    if text is None:
        text, observed = field("summary"), field("latest_at") or field("created_at")
    if not isinstance(text, str) or not text or isinstance(observed, bool) \
            or not isinstance(observed, (int, float, datetime)):
        return []
    try:
        found = resolve_occurrences(text, observed, limit=max(0, int(limit)), max_chars=max_chars)
    except (OverflowError, OSError, ValueError):
        return []
    return [o.to_dict() for o in found]
