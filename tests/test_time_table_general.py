"""A second table of English time expressions as people write them in chat, with its own
observation days (none shared with ``test_dates_table.py``), written from how a careful reader
resolves each one: weekday arithmetic said on different days of the week, weeks and weekends,
words for days, months and years with and without a tense, ranges, counts in words and digits,
written and numeric dates, casing and abbreviations, and words that name no time at all.

Each row: the observation day, the sentence, and the expected interval as inclusive days
``first..last`` (one day alone for a single day) or ``unresolvable: <reason>`` where a careful
reader would not pick one interval. Every row holds exactly one time expression.
"""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import assert_means

from hermes_trove.dates import resolve_occurrences

THU = "2025-03-06"  # a Thursday; ISO week 2025-03-03..2025-03-09; February 2025 has 28 days
SAT = "2025-07-19"  # a Saturday; ISO week 2025-07-14..2025-07-20
MON = "2025-11-03"  # a Monday; ISO week 2025-11-03..2025-11-09, three days after Halloween
FRI = "2026-01-02"  # a Friday; ISO week 2025-12-29..2026-01-04, across the turn of the year
TUE = "2025-06-10"  # a Tuesday; ISO week 2025-06-09..2025-06-15

UNCLEAR = "unresolvable: weekday or day without last/this/next and unclear tense"
VAGUE = "unresolvable: vague quantity"
VAGUE_REF = "unresolvable: vague reference"
APPROX = "unresolvable: approximate quantity"
SEASON = "unresolvable: season (hemisphere-dependent)"
UNSTATED = "unresolvable: relative to an unstated reference"
MOVABLE = "unresolvable: holiday whose date moves with the year or the country"
ORDER = "unresolvable: day/month order ambiguous"

TABLE = [
    # -- weekday arithmetic: last/this/next, abbreviations and casing ----------------------------
    (THU, "We grabbed drinks last Friday.", "2025-02-28"),
    (THU, "LAST FRIDAY was wild", "2025-02-28"),
    (THU, "last friday i finally quit", "2025-02-28"),
    (THU, "saw him last Thu", "2025-02-27"),
    (THU, "last Weds we had a quiz", "2025-03-05"),
    (THU, "it's next Thurs", "2025-03-13"),
    (THU, "this Fri works", "2025-03-07"),
    (THU, "this past Tuesday", "2025-03-04"),
    (THU, "Friday before last we went bowling", "2025-02-21"),
    (THU, "the Thursday before last", "2025-02-20"),
    (SAT, "last Sunday we had a barbecue", "2025-07-13"),
    (SAT, "this past Monday", "2025-07-14"),
    (SAT, "the Saturday before last", "2025-07-05"),
    (MON, "last Monday", "2025-10-27"),
    (MON, "next Tuesday", "2025-11-04"),
    (MON, "this Friday", "2025-11-07"),
    (MON, "two Saturdays ago", "2025-10-25"),
    (FRI, "last Tuesday", "2025-12-30"),
    (FRI, "next Friday", "2026-01-09"),
    (FRI, "this Monday", "2025-12-29"),
    (TUE, "Friday before last", "2025-05-30"),
    # -- a bare weekday: the tense decides, and the day it is said on decides the distance ------------
    (SAT, "We had pizza on Friday.", "2025-07-18"),  # said on a Saturday: yesterday
    (MON, "We went bowling on Friday.", "2025-10-31"),  # said on a Monday: three days back
    (SAT, "I'll send it over on Friday.", "2025-07-25"),
    (MON, "I'll call you on Friday.", "2025-11-07"),
    (THU, "I went to the dentist on Monday.", "2025-03-03"),
    (THU, "I'm seeing the dentist on Monday.", "2025-03-10"),  # an arrangement
    (THU, "We're going to the zoo on Saturday.", "2025-03-08"),
    (TUE, "She texted me Sunday night.", "2025-06-08"),
    (TUE, "We're driving up Thursday morning.", "2025-06-12"),
    (FRI, "On Wednesday we stayed in.", "2025-12-31"),
    (MON, "Friday the band played till 2am.", "2025-10-31"),  # "the band" is no day of a month
    (THU, "Pics from Saturday", UNCLEAR),  # no verb, no tense
    (THU, "Ran my first 5k on Sunday!!", "2025-03-02"),  # a chat's dropped "I"
    (THU, "Visited my parents on Sun.", "2025-03-02"),
    (THU, "Spent the weekend at the lake", "2025-03-01..2025-03-02"),
    (THU, "Heading to the coast Saturday", "2025-03-08"),  # a chat's dropped "I'm" before a motion
    (THU, "Moving to Denver in May", "2025-05-01..2025-05-31"),
    (THU, "Off to Paris on Monday!", "2025-03-10"),
    (THU, "Driving home on Sunday was awful", "2025-03-02"),  # "was" tells it was a past drive
    (THU, "He dozed off to sleep on Monday", "2025-03-03"),
    # -- weeks and weekends -------------------------------------------------------------------------
    (THU, "last week", "2025-02-24..2025-03-02"),
    (THU, "I was swamped the week before last", "2025-02-17..2025-02-23"),
    (THU, "last weekend", "2025-03-01..2025-03-02"),
    (THU, "2 weekends ago we went skiing", "2025-02-22..2025-02-23"),
    (THU, "the weekend before last", "2025-02-22..2025-02-23"),
    (THU, "over the past two weeks", "2025-02-21..2025-03-06"),
    (SAT, "the weekend before last", "2025-07-05..2025-07-06"),
    (SAT, "We're at the lake this weekend.", "2025-07-19..2025-07-20"),
    (SAT, "over the past two weeks", "2025-07-06..2025-07-19"),
    (MON, "this past weekend", "2025-11-01..2025-11-02"),
    (MON, "last weekend", "2025-11-01..2025-11-02"),
    (MON, "What are you up to this weekend?", "2025-11-08..2025-11-09"),
    (MON, "We went camping this weekend.", "2025-11-01..2025-11-02"),  # said on a Monday, in the past
    (MON, "next week", "2025-11-10..2025-11-16"),
    (MON, "a week from today", "2025-11-10"),
    (FRI, "last week", "2025-12-22..2025-12-28"),
    (FRI, "My classes restart in 2 weeks.", "2026-01-12..2026-01-18"),  # a "re-" timetable verb is one too
    (TUE, "the week before last", "2025-05-26..2025-06-01"),
    (TUE, "We hiked on the weekend.", "2025-06-07..2025-06-08"),
    (THU, "last wknd", "2025-03-01..2025-03-02"),
    (THU, "the Sunday before", UNSTATED),
    # -- words for days ---------------------------------------------------------------------------------
    (THU, "day before yesterday I lost my keys", "2025-03-04"),
    (THU, "Three days ago I quit smoking.", "2025-03-03"),
    (THU, "4 days ago", "2025-03-02"),
    (THU, "twenty-one days ago", "2025-02-13"),
    (THU, "yesterday evening", "2025-03-05"),
    (THU, "yesterday morning", "2025-03-05"),
    (THU, "Tonight we're going out", "2025-03-06"),
    (THU, "I ran into her earlier today", "2025-03-06"),
    (THU, "this afternoon", "2025-03-06"),
    (THU, "see you tmrw", "2025-03-07"),
    (THU, "Tomorrow morning I fly out", "2025-03-07"),
    (MON, "the day before yesterday", "2025-11-01"),
    (MON, "We'll know in two days.", "2025-11-05"),
    (FRI, "yesterday", "2026-01-01"),
    (FRI, "a couple days ago", VAGUE),
    (THU, "a few days back", VAGUE),
    (THU, "the other night", VAGUE_REF),
    (THU, "a couple of weeks ago", VAGUE),
    # -- months and years ---------------------------------------------------------------------------
    (THU, "last month", "2025-02-01..2025-02-28"),
    (THU, "We went to Lisbon in May.", "2024-05-01..2024-05-31"),  # said in March: last year's May
    (THU, "We're going to Lisbon in May.", "2025-05-01..2025-05-31"),
    (SAT, "We went to Lisbon in May.", "2025-05-01..2025-05-31"),  # said in July: this year's
    (SAT, "We'll go back in May.", "2026-05-01..2026-05-31"),
    (THU, "We moved in early June.", "2024-06-01..2024-06-10"),
    (THU, "We're moving in early June.", "2025-06-01..2025-06-10"),
    (THU, "it all started in mid-2022", "2022-05-01..2022-08-31"),  # a year in thirds of four months
    (THU, "at the end of last year", "2024-09-01..2024-12-31"),
    (FRI, "at the end of last year", "2025-09-01..2025-12-31"),
    (THU, "two months back", "2025-01-01..2025-01-31"),
    (THU, "18 months ago", "2023-09-01..2023-09-30"),
    (THU, "a year ago", "2024-01-01..2024-12-31"),
    (THU, "a decade ago", "2015-01-01..2015-12-31"),  # ten years back, as "ten years ago"
    (THU, "eleven months ago", "2024-04-01..2024-04-30"),
    (THU, "two and a half years ago", "2022-09-01..2022-09-30"),  # thirty months back
    (THU, "the year before last", "2023-01-01..2023-12-31"),
    (SAT, "earlier this month", "2025-07-01..2025-07-19"),
    (SAT, "mid-July", "2025-07-11..2025-07-20"),
    (SAT, "the end of June", "2025-06-21..2025-06-30"),
    (SAT, "the first week of July", "2025-07-01..2025-07-07"),
    (MON, "late October", "2025-10-21..2025-10-31"),
    (FRI, "last month", "2025-12-01..2025-12-31"),
    (FRI, "last year", "2025-01-01..2025-12-31"),
    (FRI, "We were in Oslo in December.", "2025-12-01..2025-12-31"),
    (FRI, "two years ago", "2024-01-01..2024-12-31"),
    (TUE, "a year ago", "2024-01-01..2024-12-31"),
    (THU, "back in Sept", "2024-09-01..2024-09-30"),
    (THU, "in the summer", SEASON),
    (THU, "last spring", SEASON),
    (SAT, "this past winter", SEASON),
    # -- holidays ---------------------------------------------------------------------------------------
    (THU, "We saw my parents over Christmas.", "2024-12-25"),
    (MON, "We went trick-or-treating on Halloween.", "2025-10-31"),
    (MON, "last Christmas", "2024-12-25"),
    (FRI, "We stayed in on New Year's Eve.", "2025-12-31"),
    (FRI, "this past Christmas", "2025-12-25"),
    (MON, "on Good Friday", MOVABLE),
    (THU, "the Sunday before Easter", MOVABLE),
    # -- ranges ---------------------------------------------------------------------------------------
    (THU, "We traveled between May and July.", "2024-05-01..2024-07-31"),
    (THU, "I was sick from Tuesday till Thursday.", "2025-03-04..2025-03-06"),
    (THU, "We were in Rome March 3 to 5.", "2025-03-03..2025-03-05"),
    (TUE, "I was away from the 2nd to the 6th.", "2025-06-02..2025-06-06"),
    (TUE, "between March and April", "2025-03-01..2025-04-30"),
    (TUE, "over the past 3 days", "2025-06-08..2025-06-10"),
    (TUE, "over the last fortnight", "2025-05-28..2025-06-10"),
    (THU, "I was off Mon-Wed", "2025-03-03..2025-03-05"),  # a dash joins two weekdays or months
    (THU, "I was off Monday\u2013Wednesday", "2025-03-03..2025-03-05"),
    (THU, "I'm off Mon-Wed next week", "2025-03-10..2025-03-12"),
    (THU, "we traveled Jan\u2013Feb", "2025-01-01..2025-02-28"),
    (THU, "we traveled May thru July", "2024-05-01..2024-07-31"),
    (THU, "I'm off Mon thru Fri", "2025-03-10..2025-03-14"),
    (THU, "we were away from March 3rd to the 5th", "2025-03-03..2025-03-05"),  # the end takes its start's month
    (THU, "we lived there 2019-2021", "2019-01-01..2021-12-31"),
    (THU, "we were there 2019\u20132021", "2019-01-01..2021-12-31"),
    # -- ordinal and written dates -----------------------------------------------------------------
    (THU, "I paid the rent on the 3rd.", "2025-03-03"),
    (THU, "on the 21st of last month", "2025-02-21"),
    (THU, "We signed the lease on March 3.", "2025-03-03"),
    (THU, "we met on 3rd March", "2025-03-03"),
    (THU, "we met on the 3rd of March", "2025-03-03"),
    (THU, "the party was on Sept 12", "2024-09-12"),
    (THU, "the party was on Sept. 12th", "2024-09-12"),
    (THU, "I flew home Feb 14", "2025-02-14"),
    (THU, "I was in Boston on 3/14.", "2024-03-14"),  # 14 can be no month; 14 March this year is ahead
    (THU, "I was in Boston on 6/7.", ORDER),  # 6 July or 7 June
    # -- chat spellings and short forms -----------------------------------------------------------
    (THU, "yday was rough", "2025-03-05"),
    (THU, "Tonite is pizza night", "2025-03-06"),
    (THU, "I'll ring you tmr", "2025-03-07"),
    (THU, "on tues I went to the gym", "2025-03-04"),  # "tues", "thurs", "weds" are no other word
    (THU, "Thurs night we watched a film", "2025-02-27"),
    (THU, "on Sat we watched a film", "2025-03-01"),  # "Sat", "Sun", "Mon", "Wed" alone need "on"
    (THU, "we moved here in Jan", "2025-01-01..2025-01-31"),
    (SAT, "I'll be away until Aug", "2025-08-01..2025-08-31"),
    (THU, "last yr", "2024-01-01..2024-12-31"),  # as "last year", not the past twelve months
    (THU, "next yr we're going to Peru", "2026-01-01..2026-12-31"),
    (THU, "last wk", "2025-02-24..2025-03-02"),
    (THU, "last mth", "2025-02-01..2025-02-28"),
    (THU, "2 wknds ago", "2025-02-22..2025-02-23"),
    (THU, "we met last wensday", "2025-03-05"),  # common misspellings of day and month names
    (THU, "I went there on thurday", "2025-02-27"),
    (THU, "I went there in Febuary", "2025-02-01..2025-02-28"),
    (THU, "I was so tired yesturday", "2025-03-05"),
    # -- counts in words, compounds, multiples and halves --------------------------------------------
    (THU, "forty five days ago", "2025-01-20"),
    (THU, "thirty two years ago I moved here", "1993-01-01..1993-12-31"),
    (THU, "I turned thirty two years ago", "2023-01-01..2023-12-31"),  # an age ends at the tens: two years back
    (THU, "ninety days ago", "2024-12-06"),
    (THU, "a hundred days ago", "2024-11-26"),
    (THU, "two decades ago", "2005-01-01..2005-12-31"),
    (THU, "a century ago", "1925-01-01..1925-12-31"),
    (THU, "a few decades ago", VAGUE),
    (THU, "over the past twenty-one days", "2025-02-14..2025-03-06"),
    (THU, "in the last decade", "2015-03-07..2025-03-06"),
    (THU, "the past fortnight", "2025-02-21..2025-03-06"),
    (THU, "a month and a half ago", APPROX),  # half of a month names no calendar unit
    (THU, "a week and a half ago", APPROX),
    (THU, "I'll be back in two and a half weeks", APPROX),
    (THU, "2-3 days ago", APPROX),  # a range of counts: somewhere between
    (THU, "two or three days ago", APPROX),
    (THU, "5 to 10 years ago", APPROX),
    (THU, "a year or two ago", APPROX),
    (THU, "a week or so ago", APPROX),
    (THU, "the other evening", VAGUE_REF),
    (THU, "I was ill last fortnight", "unresolvable: the one before this one, or the past one up to now"),
    (THU, "we lived there last decade", "unresolvable: the one before this one, or the past one up to now"),
    # -- holidays named without a date of their own ---------------------------------------------------
    (THU, "What did you do for New Year's?", "2024-12-31..2025-01-01"),  # its eve and its day
    (FRI, "We had friends over for New Year's.", "2025-12-31..2026-01-01"),
    (THU, "at New Year we went to Edinburgh", "2024-12-31..2025-01-01"),
    (THU, "we had a big family dinner at Xmas", "2024-12-25"),
    (FRI, "on xmas eve we stayed in", "2025-12-24"),
    (FRI, "what did you do on NYE?", "2025-12-31"),
    (THU, "on St. Patrick's Day we went out", "2024-03-17"),
    (SAT, "on April Fools' Day he pranked me", "2025-04-01"),
    # -- a weekday "(just) gone" is the last one ----------------------------------------------------
    (THU, "on Sunday just gone we had a picnic", "2025-03-02"),
    (MON, "Monday gone I saw her", "2025-10-27"),
    (THU, "the weekend just gone", "2025-03-01..2025-03-02"),
    (THU, "we went mid-Jan", "2025-01-11..2025-01-20"),
    # -- "this <weekday>" is this week's, unless the tense points the other way ------------------------
    (SAT, "We'll meet this Monday.", "2025-07-21"),  # this week's Monday is gone: the coming one
    (SAT, "I'll see you this Friday", "2025-07-25"),
    (MON, "We met this Sunday.", "2025-11-02"),  # this week's Sunday is ahead: the one just gone
    (MON, "What are you doing this Sunday?", "2025-11-09"),
    # -- days of a month spelled out, beside the month ---------------------------------------------
    (THU, "on March the first", "2025-03-01"),
    (THU, "on the first of March", "2025-03-01"),
    (THU, "the twenty-first of February", "2025-02-21"),
    (FRI, "we left on December twenty first", "2025-12-21"),
    (THU, "in March first we went to Rome", "2025-03-01..2025-03-31"),  # "first" as "at first"
    (THU, "at the end of Jan we moved", "2025-01-21..2025-01-31"),
    (MON, "My son is two years old now.", "2025-11-03"),  # a state at the moment of speaking
    (MON, "Rent was due on the 1st.", "2025-11-01"),
    (FRI, "I got it on the 30th.", "2025-12-30"),
    (FRI, "on 12/27/2025", "2025-12-27"),
]


@pytest.mark.parametrize(("observed", "text", "expected"), TABLE, ids=[f"{row[0]} {row[1]}" for row in TABLE])
def test_time_expression_means_its_interval(observed, text, expected):
    assert_means(observed, text, expected)


NAME_NO_TIME = [
    "I'm 30 years old.",  # an age
    "My son is two years old.",
    "I'm twenty-one years old.",
    "I work 5 days a week.",  # a rate
    "We train three times a week.",
    "I call my mom every Monday.",  # a habit
    "We play tennis every other Sunday.",
    "Mondays are the worst.",
    "I go to yoga on Tuesdays.",
    "It was a week-long trip.",  # a duration that qualifies a noun
    "I signed up for a two-day workshop.",
    "We booked a 3-day weekend package.",
    "The store is open 24/7.",
    "I work 9 to 5.",
    "May I ask you something?",  # the modal, not the month
    "I may be late.",
    "One day I'll visit Japan.",  # an indefinite day
    "Have a nice day!",
    "I'll be there in a second.",
    "I grabbed some Black Friday deals.",  # a name qualifying a noun
    "My New Year's resolution is to run more.",
    "a new year begins",
    "I got a card from Jan.",  # a name: a short month alone needs "in", "until"...
    "Sat down and cried.",
    "I go there on wensdays.",  # a habit, misspelled or not
    "April Fools jokes are so dumb.",
    "Read pages 3-5 first.",
    "20-30 people came.",  # a range of counts with no unit of time
    "I invited two or three friends.",
    "It took me a decade to learn.",  # a length of time, with no "ago"
    "My 3-year-old son loves trains.",
    "We take a two-week vacation every summer.",
    "Most Fridays we order pizza.",
    "It was the first of many.",
    "The Sun was out all day.",
    "Day by day it gets easier.",
    "It takes two weeks to heal.",  # a length of time
    "The course lasts six months.",
]


@pytest.mark.parametrize("text", NAME_NO_TIME)
def test_words_that_name_no_time_claim_nothing(text):
    found = resolve_occurrences(text, datetime.fromisoformat(THU).replace(hour=15, tzinfo=UTC))
    assert [o.to_dict() for o in found] == []


@pytest.mark.parametrize(("text", "expressions"), [
    ("I carried it up from March 3rd to the 5th floor", ["from March 3rd"]),  # "the 5th floor" ends no run
    ("we were away from Feb 20th to the 31st", ["from Feb 20th"]),  # February has no 31st
    ("scores went 2021-2019", []),  # a run of years goes forward
])
def test_a_run_whose_end_is_no_day_keeps_only_its_start(text, expressions):
    found = resolve_occurrences(text, datetime.fromisoformat(THU).replace(hour=15, tzinfo=UTC))
    assert [o.expression for o in found] == expressions


def test_the_table_is_large_and_new():
    from test_dates_table import TABLE as FIRST

    assert len(TABLE) + len(NAME_NO_TIME) >= 120
    assert len({(observed, text) for observed, text, _ in TABLE}) == len(TABLE)
    first_days = {observed for observed, _, _ in FIRST}
    assert not first_days & {observed for observed, _, _ in TABLE}
