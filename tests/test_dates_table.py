"""A table of English time expressions and the intervals they mean, written from the rules a
person would state for them (weekday arithmetic, "the week before X", counts of units ago,
month and year context, ranges), not from any benchmark.

Each row: the observation day (when the sentence was said), the sentence, and the expected
interval as inclusive days ``first..last`` (one day alone for a single day), or
``unresolvable: <reason>``. Every row holds exactly one time expression.
"""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import assert_means

from hermes_trove.dates import resolve_occurrences

WED = "2024-05-15"  # a Wednesday; ISO week 2024-05-13..2024-05-19
MON_13 = "2024-05-13"  # its Monday
SUN = "2023-07-09"  # a Sunday; ISO week 2023-07-03..2023-07-09
NEW_YEAR = "2024-01-01"  # a Monday
SAT = "2022-10-15"  # a Saturday; ISO week 2022-10-10..2022-10-16
LEAP = "2024-03-01"  # a Friday, the day after 29 February
SUN_19 = "2024-05-19"  # a Sunday: its coming Tuesday is the 21st
MOVABLE = "unresolvable: holiday whose date moves with the year or the country"
UNCLEAR = "unresolvable: weekday or day without last/this/next and unclear tense"
PLOT = "unresolvable: time inside a story (a book, film or show)"
BIRTH = "unresolvable: a birth date without its year"

TABLE = [
    # -- words for days --------------------------------------------------------------------
    (WED, "I went there yesterday.", "2024-05-14"),
    (WED, "we eat out today", "2024-05-15"),
    (WED, "see you tonight", "2024-05-15"),
    (WED, "I'll call tomorrow", "2024-05-16"),
    (WED, "Last night was loud", "2024-05-14"),
    (WED, "this morning I ran", "2024-05-15"),
    (WED, "yesterday afternoon was slow", "2024-05-14"),
    (WED, "the day before yesterday", "2024-05-13"),
    (WED, "we leave the day after tomorrow", "2024-05-17"),
    (NEW_YEAR, "I went out yesterday", "2023-12-31"),
    (NEW_YEAR, "the day before yesterday", "2023-12-30"),
    (LEAP, "it snowed yesterday", "2024-02-29"),
    # -- last/next/this + weekday: nearest strictly before/after; "this" = the same ISO week ---
    (WED, "We went hiking last Friday.", "2024-05-10"),
    (WED, "last Wednesday", "2024-05-08"),
    (WED, "last Tuesday", "2024-05-14"),
    (WED, "last Sat", "2024-05-11"),
    (WED, "last Sunday", "2024-05-12"),
    (WED, "next Tuesday", "2024-05-21"),
    (WED, "next Wednesday", "2024-05-22"),
    (WED, "next Thursday", "2024-05-16"),
    (WED, "this Monday", "2024-05-13"),
    (WED, "this Sunday", "2024-05-19"),
    (WED, "this past Sunday", "2024-05-12"),
    (WED, "this past Monday", "2024-05-13"),
    (WED, "this coming Friday", "2024-05-17"),
    (WED, "last Friday night", "2024-05-10"),
    (WED, "last Monday", "2024-05-13"),
    (WED, "last Thursday", "2024-05-09"),
    (WED, "last Saturday", "2024-05-11"),
    (WED, "next Monday", "2024-05-20"),
    (WED, "next Friday", "2024-05-17"),
    (WED, "next Saturday", "2024-05-18"),
    (WED, "next Sunday", "2024-05-19"),
    (WED, "this Tuesday", "2024-05-14"),
    (WED, "this Wednesday", "2024-05-15"),
    (WED, "this Thursday", "2024-05-16"),
    (WED, "this Friday", "2024-05-17"),
    (WED, "this Saturday", "2024-05-18"),
    (SUN, "last Sunday", "2023-07-02"),
    (SUN, "last Saturday", "2023-07-08"),
    (SUN, "next Monday", "2023-07-10"),
    (SUN, "this Monday", "2023-07-03"),
    (SUN, "this Saturday", "2023-07-08"),
    (NEW_YEAR, "last Friday", "2023-12-29"),
    (NEW_YEAR, "next Monday", "2024-01-08"),
    (NEW_YEAR, "this Sunday", "2024-01-07"),
    (LEAP, "last Thursday", "2024-02-29"),
    # -- a bare weekday follows its sentence's tense: past -> strictly before, future -> after --
    (WED, "I saw her on Monday.", "2024-05-13"),
    (WED, "I'll see her on Monday.", "2024-05-20"),
    (WED, "She called on Wednesday", "2024-05-08"),
    (WED, "Monday morning I went running", "2024-05-13"),
    (SUN, "On Saturday we went to the beach", "2023-07-08"),
    (SUN, "I will visit on Sunday", "2023-07-16"),
    (WED, "Me and Sam on Friday", UNCLEAR),  # a caption: no tense cue
    (WED, "Friday works for me", "2024-05-17"),  # a day agreed on for a plan
    (WED, "Does Friday work for you?", "2024-05-17"),
    (WED, "See you Friday then!", "2024-05-17"),  # a leave-taking opening its clause
    (WED, "Great, see you on Tuesday then", "2024-05-21"),
    (WED, "Did I see you on Friday?", "2024-05-10"),  # "see" after a subject: no leave-taking
    # -- weeks are ISO weeks (Monday first); N weeks ago counts back whole weeks --------------
    (WED, "last week", "2024-05-06..2024-05-12"),
    (WED, "this week", "2024-05-13..2024-05-19"),
    (WED, "next week", "2024-05-20..2024-05-26"),
    (WED, "a week ago", "2024-05-06..2024-05-12"),
    (WED, "three weeks ago", "2024-04-22..2024-04-28"),
    (WED, "the week before last", "2024-04-29..2024-05-05"),
    (NEW_YEAR, "last week", "2023-12-25..2023-12-31"),
    (SUN, "this week", "2023-07-03..2023-07-09"),
    (WED, "the week after next", "2024-05-27..2024-06-02"),
    (NEW_YEAR, "a week ago", "2023-12-25..2023-12-31"),
    (NEW_YEAR, "two weeks ago", "2023-12-18..2023-12-24"),
    (NEW_YEAR, "We will start in two weeks", "2024-01-15..2024-01-21"),
    # -- weekends are Saturday and Sunday ------------------------------------------------------
    (WED, "last weekend", "2024-05-11..2024-05-12"),
    (WED, "this past weekend", "2024-05-11..2024-05-12"),
    (WED, "next weekend", "2024-05-25..2024-05-26"),
    (WED, "two weekends ago", "2024-05-04..2024-05-05"),
    (WED, "the weekend before last", "2024-05-04..2024-05-05"),
    (WED, "we hiked over the weekend", "2024-05-11..2024-05-12"),
    (SAT, "last weekend", "2022-10-08..2022-10-09"),
    (SAT, "this past weekend", "2022-10-08..2022-10-09"),
    (SAT, "We went camping this weekend", "2022-10-15..2022-10-16"),
    (SAT, "two weekends ago", "2022-10-01..2022-10-02"),
    (SAT, "next weekend", "2022-10-22..2022-10-23"),
    (SAT, "last Saturday", "2022-10-08"),
    (WED, "the weekend after next", "2024-06-01..2024-06-02"),
    (NEW_YEAR, "last weekend", "2023-12-30..2023-12-31"),
    (NEW_YEAR, "two weekends ago", "2023-12-23..2023-12-24"),
    (NEW_YEAR, "next weekend", "2024-01-13..2024-01-14"),
    (NEW_YEAR, "this weekend", "2024-01-06..2024-01-07"),
    (SAT, "next Saturday", "2022-10-22"),
    (SAT, "this Saturday", "2022-10-15"),
    # -- N days/months/years ago, and counts forward in future sentences ------------------------
    (WED, "3 days ago", "2024-05-12"),
    (WED, "a day ago", "2024-05-14"),
    (WED, "two days ago", "2024-05-13"),
    (WED, "two months ago", "2024-03-01..2024-03-31"),
    (WED, "a year ago", "2023-01-01..2023-12-31"),
    (WED, "five years ago", "2019-01-01..2019-12-31"),
    (WED, "I'll be back in two weeks", "2024-05-27..2024-06-02"),
    (WED, "two weeks from now", "2024-05-27..2024-06-02"),
    (WED, "We will leave in 3 days", "2024-05-18"),
    (WED, "I've played chess for two years now", "2022-01-01..2022-12-31"),
    (NEW_YEAR, "two months ago", "2023-11-01..2023-11-30"),
    (WED, "I'll see you in a week", "2024-05-20..2024-05-26"),
    (WED, "a month from now", "2024-06-01..2024-06-30"),
    (WED, "three days from now", "2024-05-18"),
    (NEW_YEAR, "three days ago", "2023-12-29"),
    (NEW_YEAR, "a year ago", "2023-01-01..2023-12-31"),
    (LEAP, "a month ago", "2024-02-01..2024-02-29"),
    # -- calendar months and years ------------------------------------------------------------
    (WED, "last month", "2024-04-01..2024-04-30"),
    (WED, "this month", "2024-05-01..2024-05-31"),
    (WED, "next month", "2024-06-01..2024-06-30"),
    (WED, "last year", "2023-01-01..2023-12-31"),
    (WED, "earlier this year", "2024-01-01..2024-05-15"),  # up to the observation day
    (NEW_YEAR, "last month", "2023-12-01..2023-12-31"),
    (WED, "the month after next", "2024-07-01..2024-07-31"),
    (WED, "the year before last", "2022-01-01..2022-12-31"),
    (NEW_YEAR, "last year", "2023-01-01..2023-12-31"),
    (LEAP, "last month", "2024-02-01..2024-02-29"),
    # -- a month without a year: the latest not after this month (the next one, in the future) --
    (WED, "in March", "2024-03-01..2024-03-31"),
    (WED, "in May", "2024-05-01..2024-05-31"),
    (WED, "in June", "2023-06-01..2023-06-30"),
    (WED, "I will go to Paris in June", "2024-06-01..2024-06-30"),
    (WED, "last March", "2024-03-01..2024-03-31"),
    (WED, "last May", "2023-05-01..2023-05-31"),
    (WED, "next March", "2025-03-01..2025-03-31"),
    (WED, "next June", "2024-06-01..2024-06-30"),
    (WED, "this June", "2024-06-01..2024-06-30"),
    (WED, "mid-June", "2023-06-11..2023-06-20"),  # a month in thirds: 1-10, 11-20, 21-end
    (WED, "early March", "2024-03-01..2024-03-10"),
    (WED, "late May", "2023-05-21..2023-05-31"),  # this May's end is still ahead
    (NEW_YEAR, "in December", "2023-12-01..2023-12-31"),
    (NEW_YEAR, "last December", "2023-12-01..2023-12-31"),
    (NEW_YEAR, "next December", "2024-12-01..2024-12-31"),
    (LEAP, "in February", "2024-02-01..2024-02-29"),
    (WED, "in January", "2024-01-01..2024-01-31"),
    (WED, "in December", "2023-12-01..2023-12-31"),
    (WED, "next January", "2025-01-01..2025-01-31"),
    (WED, "last January", "2024-01-01..2024-01-31"),
    (WED, "this December", "2024-12-01..2024-12-31"),
    (WED, "We will move in September", "2024-09-01..2024-09-30"),
    # -- a month or season with its year; a year with a preposition ----------------------------
    (WED, "March 2022", "2022-03-01..2022-03-31"),
    (WED, "in March of 2022", "2022-03-01..2022-03-31"),
    (WED, "September, 2023", "2023-09-01..2023-09-30"),
    (WED, "In Jan 2023 we left", "2023-01-01..2023-01-31"),
    (WED, "in 2021", "2021-01-01..2021-12-31"),
    (WED, "in 1999", "1999-01-01..1999-12-31"),
    (WED, "since 2019", "2019-01-01..2019-12-31"),
    (WED, "late 2022", "2022-09-01..2022-12-31"),  # a year in thirds of four months
    (WED, "early 2023", "2023-01-01..2023-04-30"),
    (WED, "the summer of 2022", "2022-01-01..2022-12-31"),
    (WED, "in spring 2021", "2021-01-01..2021-12-31"),
    # -- written dates; a day and month without a year follow the month rule ---------------------
    (WED, "the 5th of May", "2024-05-05"),
    (WED, "May 5th", "2024-05-05"),
    (WED, "on 5 June", "2023-06-05"),
    (WED, "June 5th, 2021", "2021-06-05"),
    (WED, "on Friday, May 10", "2024-05-10"),
    (WED, "3 July 2023", "2023-07-03"),
    (LEAP, "on 29 February", "2024-02-29"),
    # -- "on the Nth": the nearest such day of a month, by tense ---------------------------------
    (WED, "I met him on the 5th", "2024-05-05"),
    (WED, "I met him on the 15th", "2024-04-15"),
    (WED, "We fly out on the 20th, can't wait", "2024-05-20"),
    (WED, "on the 5th", "unresolvable: weekday or day without last/this/next and unclear tense"),
    # -- numeric dates ----------------------------------------------------------------------
    (WED, "2024-02-29", "2024-02-29"),
    (WED, "2023-06", "2023-06-01..2023-06-30"),
    (WED, "on 13/4/2023", "2023-04-13"),
    (WED, "on 4/13/2023", "2023-04-13"),
    (WED, "on 31/12/2023", "2023-12-31"),
    (WED, "on 3/4/2023", "unresolvable: day/month order ambiguous"),
    # -- rolling windows of days ending with the observation day -------------------------------
    (WED, "in the past week", "2024-05-09..2024-05-15"),
    (WED, "over the last two days", "2024-05-14..2024-05-15"),
    (LEAP, "in the past week", "2024-02-24..2024-03-01"),
    (LEAP, "the last 3 days", "2024-02-28..2024-03-01"),
    # -- the day/week/weekend/weekday before or after a stated day ------------------------------
    (WED, "We moved the week before May 3", "2024-04-22..2024-04-28"),
    (WED, "We met the weekend before May 3", "2024-04-27..2024-04-28"),
    (WED, "the day before May 3, 2024", "2024-05-02"),
    (WED, "the day after July 4, 2023", "2023-07-05"),
    (WED, "the Friday before May 20, 2024", "2024-05-17"),
    (WED, "the Sunday before 3 July 2023", "2023-07-02"),
    (WED, "the Saturday after 3 July 2023", "2023-07-08"),
    (WED, "the weekend after 3 July 2023", "2023-07-08..2023-07-09"),
    (WED, "the weekend before Sunday, May 12, 2024", "2024-05-04..2024-05-05"),
    (WED, "the week after 3 July 2023", "2023-07-10..2023-07-16"),
    (WED, "the week of May 6, 2024", "2024-05-06..2024-05-12"),
    (WED, "two days before May 10, 2024", "2024-05-08"),
    (WED, "a week before 3 July 2023", "2023-06-26..2023-07-02"),
    (WED, "two weeks after 1 June 2024", "2024-06-10..2024-06-16"),
    (WED, "the day before last Friday", "2024-05-09"),
    (WED, "the day after yesterday", "2024-05-15"),
    (WED, "the week before my birthday", "unresolvable: relative to an unstated reference"),
    (WED, "the day before", "unresolvable: relative to an unstated reference"),
    (WED, "the next day", "unresolvable: relative to an unstated reference"),
    (WED, "the following week", "unresolvable: relative to an unstated reference"),
    (WED, "three days later", "unresolvable: relative to an unstated reference"),
    (WED, "two weeks earlier", "unresolvable: relative to an unstated reference"),
    # -- ranges: from the start of the first end to the end of the second ------------------------
    (WED, "between May 3 and May 9", "2024-05-03..2024-05-09"),
    (WED, "I was off from Monday to Wednesday", "2024-05-13..2024-05-15"),
    (WED, "I'll be away between Monday and Wednesday", "2024-05-20..2024-05-22"),
    (WED, "from March to May", "2024-03-01..2024-05-31"),
    (WED, "from yesterday to today", "2024-05-14..2024-05-15"),
    (WED, "from 2024-05-01 to 2024-05-03", "2024-05-01..2024-05-03"),
    (SUN, "from June 3 to June 7", "2023-06-03..2023-06-07"),
    (SUN, "from 3 June until 7 June", "2023-06-03..2023-06-07"),
    (SAT, "between last Monday and Thursday", "2022-10-10..2022-10-13"),
    # -- vague, approximate and hemisphere-dependent words stay unresolved --------------------
    (WED, "a couple of days ago", "unresolvable: vague quantity"),
    (WED, "a few weeks ago", "unresolvable: vague quantity"),
    (WED, "several months ago", "unresolvable: vague quantity"),
    (WED, "these last few days", "unresolvable: vague quantity"),
    (WED, "about two weeks ago", "unresolvable: approximate quantity"),
    (WED, "nearly a year ago", "unresolvable: approximate quantity"),
    (WED, "more than a month ago", "unresolvable: approximate quantity"),
    (WED, "recently", "unresolvable: vague reference"),
    (WED, "a while ago", "unresolvable: vague reference"),
    (WED, "the other day", "unresolvable: vague reference"),
    (WED, "some time ago", "unresolvable: vague reference"),
    (WED, "5000 days ago", "unresolvable: more than 3660 days"),
    (WED, "300 years ago", "unresolvable: more than 200 years"),
    (WED, "over the last 2000 weeks", "unresolvable: more than 520 weeks"),
    (WED, "last summer", "unresolvable: season (hemisphere-dependent)"),
    (WED, "in the winter", "unresolvable: season (hemisphere-dependent)"),
    # -- "the <weekday> before last / after next", and "N <weekday>s ago" ------------------------
    (WED, "the Friday before last", "2024-05-03"),
    (WED, "the Tuesday before last", "2024-05-07"),
    (WED, "the Wednesday before last", "2024-05-01"),
    (SUN, "the Sunday before last", "2023-06-25"),
    (NEW_YEAR, "the Saturday before last", "2023-12-23"),
    (WED, "the Monday after next", "2024-05-27"),
    (WED, "the night before last", "2024-05-13"),
    (WED, "two Fridays ago", "2024-05-03"),
    (WED, "three Sundays ago", "2024-04-28"),
    (SAT, "two Saturdays ago", "2022-10-01"),
    (WED, "two Fridays before May 3", "2024-04-19"),
    (WED, "a few Mondays ago", "unresolvable: vague quantity"),
    # -- a fortnight is two weeks --------------------------------------------------------------
    (WED, "a fortnight ago", "2024-04-29..2024-05-05"),
    (NEW_YEAR, "two fortnights ago", "2023-12-04..2023-12-10"),
    (WED, "We will meet in a fortnight", "2024-05-27..2024-06-02"),
    # -- "the past weekend" is last weekend ------------------------------------------------------
    (WED, "the past weekend", "2024-05-11..2024-05-12"),
    (SAT, "the past weekend", "2022-10-08..2022-10-09"),
    # -- a month of last/this/next year ----------------------------------------------------------
    (WED, "in March of last year", "2023-03-01..2023-03-31"),
    (WED, "March last year", "2023-03-01..2023-03-31"),
    (WED, "in June of next year", "2025-06-01..2025-06-30"),
    (WED, "in October this year", "2024-10-01..2024-10-31"),
    # -- the nth (or last) week or weekend of a month ----------------------------------------------
    (WED, "the first week of May", "2024-05-01..2024-05-07"),
    (WED, "the second week of April", "2024-04-08..2024-04-14"),
    (WED, "the last week of April", "2024-04-24..2024-04-30"),
    (WED, "the last week of February", "2024-02-23..2024-02-29"),
    (WED, "the fourth week of February", "2024-02-22..2024-02-28"),
    (WED, "the first week of last month", "2024-04-01..2024-04-07"),
    (WED, "the first weekend of May", "2024-05-04..2024-05-05"),
    (WED, "the last weekend of April", "2024-04-27..2024-04-28"),
    (WED, "the third weekend of March 2023", "2023-03-18..2023-03-19"),
    (SUN, "the last weekend of June", "2023-06-24..2023-06-25"),
    # -- holidays on one date every year; movable ones are named, not guessed ------------------------
    (WED, "last Christmas", "2023-12-25"),
    (WED, "on Christmas Eve", "2023-12-24"),
    (WED, "We will celebrate on Christmas Day", "2024-12-25"),
    (WED, "this Christmas", "2024-12-25"),
    (WED, "next Halloween", "2024-10-31"),
    (WED, "last New Year's Eve", "2023-12-31"),
    (NEW_YEAR, "on New Year's Day", "2024-01-01"),
    (NEW_YEAR, "last New Year's Day", "2023-01-01"),
    (WED, "Valentine's Day 2023", "2023-02-14"),
    (WED, "for Valentine's Day he cooked", "2024-02-14"),
    (WED, "on Thanksgiving", MOVABLE),
    (WED, "last Easter", MOVABLE),
    (WED, "on Mother's Day", MOVABLE),
    (WED, "We left the day after Christmas", "2023-12-26"),
    (WED, "the weekend before Halloween", "2023-10-28..2023-10-29"),
    (WED, "on Christmas morning", "2023-12-25"),
    (WED, "this past Christmas", "2023-12-25"),
    (WED, "we will eat this coming Christmas", "2024-12-25"),
    (WED, "Christmas 2022 was fun", "2022-12-25"),
    # -- common abbreviations of units ------------------------------------------------------------
    (WED, "2 wks ago", "2024-04-29..2024-05-05"),
    (WED, "a yr ago", "2023-01-01..2023-12-31"),
    (WED, "3 mths ago", "2024-02-01..2024-02-29"),
    (WED, "We met the other week", "unresolvable: vague reference"),
    # -- half a year; a day of a relative month; a day and month of a relative year -------------------
    (WED, "half a year ago", "2023-11-01..2023-11-30"),
    (WED, "We will move in half a year", "2024-11-01..2024-11-30"),
    (WED, "half a month ago", "unresolvable: approximate quantity"),
    (WED, "on the 15th of last month", "2024-04-15"),
    (WED, "the 3rd of this month", "2024-05-03"),
    (NEW_YEAR, "the 20th of last month", "2023-12-20"),
    (WED, "on May 3rd last year", "2023-05-03"),
    (WED, "3 May last year", "2023-05-03"),
    (WED, "the 2nd week of May", "2024-05-08..2024-05-14"),
    (WED, "the 1st weekend of June", "2023-06-03..2023-06-04"),
    # -- a weekday of a named week: that day of that ISO week, whatever the tense ------------------
    (WED, "we met on Tuesday last week", "2024-05-07"),
    (WED, "we met last week on Tuesday", "2024-05-07"),
    (WED, "last week Thursday was busy", "2024-05-09"),
    (WED, "Friday of last week", "2024-05-10"),
    (WED, "we will meet the Tuesday of next week", "2024-05-21"),
    (WED, "Monday next week", "2024-05-20"),
    (WED, "it opens Sunday this week", "2024-05-19"),
    (SUN, "we met on Monday last week", "2023-06-26"),
    (NEW_YEAR, "Friday of last week", "2023-12-29"),
    # -- counts from a stated day, and "ago today": that very day ---------------------------------
    (WED, "I'll call you a week from Friday", "2024-05-24"),
    (WED, "we will meet one week from today", "2024-05-22"),
    (WED, "three days from tomorrow", "2024-05-19"),
    (WED, "we married a year ago today", "2023-05-15"),
    (WED, "we met a week ago today", "2024-05-08"),
    (LEAP, "a month ago today", "2024-02-01"),
    (WED, "we met the night before", "unresolvable: relative to an unstated reference"),
    (WED, "we met the night before May 3", "2024-05-02"),
    # -- parts of a month (1-10, 11-20, 21 to its end) or a year (four months each) ---------------
    (WED, "we met in early May", "2024-05-01..2024-05-10"),
    (WED, "I'll see you in late May", "2024-05-21..2024-05-31"),
    (WED, "we met in late May 2024", "2024-05-21..2024-05-31"),
    (WED, "we went in mid June", "2023-06-11..2023-06-20"),
    (WED, "we went in the middle of June", "2023-06-11..2023-06-20"),
    (WED, "at the end of last month", "2024-04-21..2024-04-30"),
    (WED, "at the start of next month we move", "2024-06-01..2024-06-10"),
    (WED, "the end of the month", "2024-05-21..2024-05-31"),
    (WED, "at the beginning of the year", "2024-01-01..2024-04-30"),
    (WED, "it happened early last year", "2023-01-01..2023-04-30"),
    (WED, "it happened late last year", "2023-09-01..2023-12-31"),
    (LEAP, "the end of February", "2024-02-21..2024-02-29"),
    # -- the rest of this unit on either side of today (today belongs to both) -------------------
    (WED, "I quit earlier this month", "2024-05-01..2024-05-15"),
    (WED, "earlier this week", "2024-05-13..2024-05-15"),
    (WED, "I'll quit later this month", "2024-05-15..2024-05-31"),
    (WED, "later this year", "2024-05-15..2024-12-31"),
    (WED, "I saw him earlier today", "2024-05-15"),
    # -- a relation to a day that cannot be resolved is refused whole, not split into a wrong day -----
    (WED, "I started the job the Monday after Easter", MOVABLE),
    (WED, "we left the week after Thanksgiving", MOVABLE),
    (WED, "we had dinner the previous evening", "unresolvable: relative to an unstated reference"),
    (WED, "the next morning we left", "unresolvable: relative to an unstated reference"),
    (WED, "it happened in the last couple of days", "unresolvable: vague quantity"),
    # -- written days: an abbreviation's full stop, "the" before the day, a run of days of one month --
    (WED, "we met on Jan. 5", "2024-01-05"),
    (WED, "we met on January the 5th", "2024-01-05"),
    (WED, "we were away May 13-15", "2024-05-13..2024-05-15"),
    (WED, "we were away 13-15 May", "2024-05-13..2024-05-15"),
    (WED, "we were away May 13–15, 2023", "2023-05-13..2023-05-15"),
    (WED, "we were away from 13 to 15 May", "2024-05-13..2024-05-15"),
    (WED, "I'll be away June 3-7", "2024-06-03..2024-06-07"),
    # -- the nth or last weekday of a month; a weekday before or after nothing stated -------------
    (WED, "the first Monday of June", "2023-06-05"),
    (WED, "the last Friday of last month", "2024-04-26"),
    (WED, "the second Tuesday in March", "2024-03-12"),
    (WED, "the fourth Sunday of May 2024", "2024-05-26"),
    (WED, "the first weekend in May", "2024-05-04..2024-05-05"),
    (WED, "I finished it the Wednesday before", "unresolvable: relative to an unstated reference"),
    (WED, "a week ago yesterday", "2024-05-07"),
    (WED, "the Friday before last week", "2024-05-03"),  # the Friday before last week began
    (WED, "the Monday after next month", "2024-07-01"),
    # -- hours and minutes: the day of the instant (said at 15:00) ------------------------------------
    (WED, "I pushed the fix an hour ago", "2024-05-15"),
    (WED, "I pushed the fix 10 minutes ago", "2024-05-15"),
    (WED, "the job died 48 hours ago", "2024-05-13"),
    (WED, "I'll push it in 20 hours", "2024-05-16"),
    (WED, "a few hours ago", "unresolvable: vague quantity"),
    (WED, "about 3 hours ago", "unresolvable: approximate quantity"),
    # -- quarters: three months from January, April, July or October; without a year by tense ------
    (WED, "we closed the round in Q3 2023", "2023-07-01..2023-09-30"),
    (WED, "Q4 of last year was slow", "2023-10-01..2023-12-31"),
    (WED, "the first quarter of 2023", "2023-01-01..2023-03-31"),
    (WED, "the last quarter of 2023", "2023-10-01..2023-12-31"),
    (WED, "the 2nd quarter of next year", "2025-04-01..2025-06-30"),
    (WED, "sales fell last quarter", "2024-01-01..2024-03-31"),
    (WED, "in the last quarter we hired two people", "2024-01-01..2024-03-31"),
    (WED, "this quarter is busy", "2024-04-01..2024-06-30"),
    (WED, "next quarter we will launch", "2024-07-01..2024-09-30"),
    (NEW_YEAR, "last quarter was quiet", "2023-10-01..2023-12-31"),
    (WED, "back in Q1 we moved offices", "2024-01-01..2024-03-31"),
    (WED, "we shipped it in Q3", "2023-07-01..2023-09-30"),  # not begun yet this year: last year's
    (WED, "we will ship it in Q3", "2024-07-01..2024-09-30"),
    # -- decades: ten years from a year ending in 0 -----------------------------------------------
    (WED, "music from the 1990s", "1990-01-01..1999-12-31"),
    (WED, "back in the 90s", "1990-01-01..1999-12-31"),
    (WED, "in the '60s", "1960-01-01..1969-12-31"),
    (WED, "in the eighties", "1980-01-01..1989-12-31"),
    (WED, "the 20s have been strange", "2020-01-01..2029-12-31"),  # the latest begun: this decade
    (WED, "the 30s were hard", "1930-01-01..1939-12-31"),
    (WED, "in the late 90s", "1997-01-01..1999-12-31"),
    (WED, "I grew up in the 90s.", "1990-01-01..1999-12-31"),  # a decade, whatever its sentence's tense
    (WED, "Temperatures were in the 90s on Friday.", "2024-05-10"),  # a measure in the 90s: no decade
    (WED, "I was born on July 4th.", BIRTH),  # a birth: its year is not the message's
    (WED, "She was born in August.", BIRTH),
    (WED, "I was born on the 28th.", BIRTH),  # a day alone: its month and year are not given
    (WED, "My mother was born on the 12th of October.", BIRTH),
    (WED, "My grandmother was born on Christmas Day.", BIRTH),
    (WED, "My grandmother was born on Christmas Day 1931.", "1931-12-25"),
    (WED, "My son was born on 3 May 2019.", "2019-05-03"),  # a stated year
    (WED, "He was born in March 1950.", "1950-03-01..1950-03-31"),
    (WED, "My birthday is on July 4th.", "2024-07-04"),  # a birthday recurs: the next one
    (WED, "the mid-80s", "1984-01-01..1986-12-31"),
    (WED, "the early 2010s", "2010-01-01..2013-12-31"),
    (WED, "in the 2000s", "2000-01-01..2009-12-31"),  # a century still under way: the decade
    (WED, "houses built in the 1900s", "unresolvable: decade or century (a year ending in 00)"),
    # -- a day written with dots is day-first; a day and month with a slash need a lead word -------
    (WED, "the invoice is dated 13.05.2024", "2024-05-13"),
    (WED, "it was due 3.5.2024", "2024-05-03"),
    (WED, "it was due 03.05.24", "2024-05-03"),
    (WED, "we met on 5/13", "2024-05-13"),
    (WED, "they paid on 12/12", "2023-12-12"),
    (WED, "I will pay by 31/12", "2024-12-31"),
    (WED, "it has been down since 3/4", "unresolvable: day/month order ambiguous"),
    # -- a year by its last two digits after a lead word: the latest such year ------------------------
    (WED, "we moved in '22", "2022-01-01..2022-12-31"),
    (WED, "she was in the class of '98", "1998-01-01..1998-12-31"),
    (WED, "back in \u201908 it was cheap", "2008-01-01..2008-12-31"),
    (WED, "music from '80s bands", "1980-01-01..1989-12-31"),
    # -- words for the moment of speaking name the observation day, like "today" ----------------------
    (WED, "I'm going kayaking right now.", "2024-05-15"),
    (WED, "We're currently on a road trip!", "2024-05-15"),
    (WED, "she is at the beach at the moment", "2024-05-15"),
    (WED, "I'm in Porto now.", "2024-05-15"),
    (WED, "we're going to try that now!", "2024-05-15"),
    (WED, "I just got back from a trip to Canada.", "2024-05-15"),
    (WED, "We've just moved into a new flat", "2024-05-15"),
    (WED, "I just signed with a new team!", "2024-05-15"),
    (WED, "She called just now", "2024-05-15"),
    (WED, "I've just been promoted!", "2024-05-15"),
    (WED, "she has only just left", "2024-05-15"),
    (WED, "I've just got back from Rome", "2024-05-15"),
    (WED, "I just got a new car!", "2024-05-15"),
    (WED, "At the moment, I'm in Paris.", "2024-05-15"),
    (NEW_YEAR, "I just finished my first marathon", "2024-01-01"),
    (WED, "I just got back last week from Rome.", "2024-05-06..2024-05-12"),  # the week says when
    # -- "this coming weekend" is the next one to begin; "it's been N units since" is N units ago --------
    (WED, "I'll visit my mom this coming weekend.", "2024-05-18..2024-05-19"),
    (SAT, "we fly out this coming weekend", "2022-10-22..2022-10-23"),
    (WED, "It's been a year since I moved to Boston.", "2023-01-01..2023-12-31"),
    (WED, "It has been two weeks since we talked.", "2024-04-29..2024-05-05"),
    (WED, "It's been 3 days since my last cigarette", "2024-05-12"),
    (WED, "It's been about a year since I moved", "unresolvable: approximate quantity"),
    # -- "N units ago this week/month": the week or month holding that day; a year and a half is 18 months --
    (WED, "We met 2 years ago this month.", "2022-05-01..2022-05-31"),
    (WED, "I got the job a year ago this week", "2023-05-15..2023-05-21"),
    (WED, "I did it three months ago this week", "2024-02-12..2024-02-18"),
    (WED, "We met about 2 years ago this month", "unresolvable: approximate quantity"),
    (WED, "I started it a year and a half ago.", "2022-11-01..2022-11-30"),
    (WED, "I've been painting for a year and a half now", "2022-11-01..2022-11-30"),
    # -- "<weekday> the <nth>": the nearest such day that falls on that weekday; "the weekend of X" ---------
    (WED, "I got my new phone on Tuesday the 7th.", "2024-05-07"),
    (WED, "We left on Friday the 3rd.", "2024-05-03"),
    (WED, "on Friday the 13th I stayed home", "2023-10-13"),
    (WED, "I'll see you on Friday the 31st.", "2024-05-31"),
    (WED, "We went to the beach on the weekend of May 4th.", "2024-05-04..2024-05-05"),
    (WED, "The weekend of May 8 we went hiking.", "2024-05-11..2024-05-12"),
    (WED, "I was in Hawaii the week of Thanksgiving.", MOVABLE),
    # -- a run of weekdays of a named week; "N years ago in <month>" ------------------------------------
    (WED, "From Monday to Friday last week I was sick.", "2024-05-06..2024-05-10"),
    (WED, "between Tuesday and Thursday next week I will be away", "2024-05-21..2024-05-23"),
    (WED, "It was 5 years ago in June.", "2019-06-01..2019-06-30"),
    (WED, "two years ago in March we met", "2022-03-01..2022-03-31"),
    # -- from a second review: the nearest weekend, near misses of "<weekday> the <nth>", "since" ----------
    (WED, "We had a party the weekend of Christmas.", "2023-12-23..2023-12-24"),  # a Monday
    (WED, "We went to the lake the weekend of May 6th.", "2024-05-04..2024-05-05"),  # a Monday: the one before
    (WED, "We got engaged a year ago this weekend!", "2023-05-20..2023-05-21"),
    (WED, "On Saturday the 2nd half of the game was awful.", "2024-05-11"),  # "2nd half" is no day
    (WED, "On Tuesday the 7th grade class went to the museum.", "2024-05-14"),
    (WED, "On Saturday the 4 of us went camping.", "2024-05-11"),
    (WED, "It's been two years since Christmas 2021.", "2021-12-25"),  # "since" a stated time
    (WED, "He started the previous Monday.", "2024-05-13"),  # no time before it: the last Monday
    (WED, "I'm doing well now.", "2024-05-15"),
    (WED, "I was sick but I'm fine now.", "2024-05-15"),
    (WED, "I just saw your message.", "2024-05-15"),
    # -- from a third review ---------------------------------------------------------------------------
    (WED, "My flight was delayed, but I just landed!", "2024-05-15"),  # the past is another clause
    (WED, "I had a long day, I just got home.", "2024-05-15"),
    (WED, "We've just had a baby!", "2024-05-15"),
    (WED, "We just talked about it.", "2024-05-15"),
    (WED, "I had a cat, I have a dog now.", "2024-05-15"),
    (WED, "I didn't like it at first but I love it now.", "2024-05-15"),
    (WED, "From Monday morning to Friday evening last week I was sick.", "2024-05-06..2024-05-10"),
    (WED, "From Monday to Friday last week.", "2024-05-06..2024-05-10"),
    (WED, "On Friday the 3rd and 4th graders went out.", "2024-05-10"),  # "the 3rd and 4th": grades
    (WED, "On Saturday the 2nd to last race was fun.", "2024-05-11"),
    (WED, "On Sunday the 1st, 2nd and 3rd place winners got medals.", "2024-05-12"),
    (WED, "On Tuesday the 7th, I went out.", "2024-05-07"),
    (MON_13, "The weekend of May 13th we'll relax.", "2024-05-18..2024-05-19"),  # the future: not the one before
    (WED, "We'll fly out the previous Monday.", "unresolvable: relative to an unstated reference"),
    # -- the present progressive of an arrangement, timetables, "would" -------------------------------
    (NEW_YEAR, "I'm moving in March.", "2024-03-01..2024-03-31"),  # an arrangement: not the March gone
    (NEW_YEAR, "I'm starting a new job in February.", "2024-02-01..2024-02-29"),
    (WED, "Are you coming to the wedding in July?", "2024-07-01..2024-07-31"),
    (WED, "We're celebrating our anniversary on Saturday.", "2024-05-18"),
    (WED, "I'm flying to New York on the 28th.", "2024-05-28"),
    (WED, "We're getting married on New Year's Eve.", "2024-12-31"),
    (WED, "I'm going on Saturday.", "2024-05-18"),
    (WED, "I'm sending you the photos from Saturday.", UNCLEAR),  # a thing's time, not the act's
    (WED, "Here's a photo I'm sharing from the concert on Friday.", UNCLEAR),  # "from" stands between
    (WED, "I'm editing the video we shot on Sunday.", UNCLEAR),  # a new subject: another clause's time
    (WED, "I'm sharing a few pics of the wedding on the 4th.", UNCLEAR),  # the wedding's day, not the sharing's
    (WED, "I'm still healing after my knee surgery in April.", "2024-04-01..2024-04-30"),  # ongoing, not arranged
    (WED, "So on Saturday I'm walking the dog and she just bolts.", UNCLEAR),  # a story told in the present
    (WED, "In September we're getting a puppy.", "2024-09-01..2024-09-30"),  # a time opening its clause
    (WED, "On Friday we're driving to the coast.", "2024-05-17"),
    (WED, "On Tuesday, my brother is moving to Leeds.", "2024-05-21"),
    (WED, "In July my parents are flying in from Lima.", "2024-07-01..2024-07-31"),
    (WED, "I'm walking the dog on Sunday and she just bolts after a squirrel.", UNCLEAR),  # "and she bolts"
    (WED, "So I'm sitting there on Monday and my boss walks in.", UNCLEAR),
    (WED, "We're celebrating our anniversary on Saturday and my parents are coming.", "2024-05-18"),
    (WED, "I'm having surgery on the 21st.", "2024-05-21"),
    (WED, "I stood next to her on Sunday.", "2024-05-12"),  # "next to" is a place, no future
    (WED, "She quit her job on Tuesday without telling anyone.", "2024-05-14"),  # no -s: a past
    (WED, "My phone died on Saturday so I couldn't text you.", "2024-05-11"),  # a short -ed past
    (WED, "It cost us a fortune on Saturday.", "2024-05-11"),
    (WED, "They quit on Tuesday.", UNCLEAR),  # a plural subject leaves the form open
    (WED, "Did you end up going to the concert on Saturday?", "2024-05-11"),  # "going to the ...": a motion
    (WED, "Are you going to my party on Saturday?", "2024-05-18"),  # still an arrangement
    (WED, "I'm going to my cousin's wedding on June 22", "2024-06-22"),  # a progressive of motion: arranged
    (WED, "Going to the dentist Thursday morning ugh", "2024-05-16"),  # its "I'm" dropped
    (WED, "I'm seeing the consultant on 12 June", "2024-06-12"),  # the date's own words are no object
    (WED, "I'm having surgery on the 4th of June", "2024-06-04"),
    (WED, "Going to the gym on Monday was a mistake", "2024-05-13"),
    (WED, "I'm meeting Sarah for coffee on Friday.", "2024-05-17"),  # "for" before a bare noun: a purpose
    (WED, "I'm saving for the trip in March.", "2024-03-01..2024-03-31"),  # "for the trip": the trip's time
    (WED, "The plumber is coming Thursday morning.", "2024-05-16"),  # a noun subject arranges too
    (WED, "We have a team dinner on Thursday.", "2024-05-16"),  # a present "have": held like an arrangement
    (WED, "She has a recital on Friday.", "2024-05-17"),
    (WED, "I have photos from Saturday.", UNCLEAR),
    (WED, "Our flight got cancelled due to the storm on Friday.", "2024-05-10"),  # "due to" is no timetable
    (WED, "My paper was due on Friday and I finished it at 3am.", "2024-05-10"),  # "was" speaks
    (WED, "Rent is due on the 1st.", "2024-06-01"),
    (WED, "The baby's due in September.", "2024-09-01..2024-09-30"),
    (WED, "We raked the leaves on Saturday.", "2024-05-11"),  # a plural noun, not "leaves" of a timetable
    (WED, "We took turns carrying the baby in June.", "2023-06-01..2023-06-30"),
    (WED, "On the 3rd we're walking around the Colosseum and it starts pouring.", UNCLEAR),  # "starts" + -ing
    (WED, "We did a few runs on Sunday.", "2024-05-12"),  # "a few runs": a noun, "did" speaks
    (WED, "We took the kids to see the fall leaves in April.", "2024-04-01..2024-04-30"),
    (WED, "It's meant to rain on Friday.", UNCLEAR),  # a participle after "is": no past
    (WED, "The tickets are sold out for Saturday.", UNCLEAR),
    (WED, "We had a great time at the cabin. No wifi until Sunday lol.", UNCLEAR),  # a bound inside a past story
    (WED, "Austin until March, now Denver.", "2024-03-01..2024-03-31"),  # "now" ends the bound
    (WED, "I'm still thinking about Saturday, it was great.", "2024-05-11"),
    (WED, "I'm reading the book I bought in March.", "2024-03-01..2024-03-31"),  # the nearer past decides
    (WED, "It's raining like it did in March.", "2024-03-01..2024-03-31"),
    (WED, "Your flight departs on May 28 at 7:40.", "2024-05-28"),  # a timetable's present
    (WED, "My lease ends in August.", "2024-08-01..2024-08-31"),
    (WED, "The museum reopens on Friday.", "2024-05-17"),  # any present -s of one event after a noun subject
    (WED, "Our landlord inspects the flat on Monday.", "2024-05-20"),
    (WED, "The committee meets again in July.", "2024-07-01..2024-07-31"),
    (WED, "Work is slow, so the gym reopens on Monday.", "2024-05-20"),
    (WED, "Dad retires in September.", "2024-09-01..2024-09-30"),  # a name opening the clause is a subject too
    (WED, "Term starts on the 3rd.", "2024-06-03"),
    (WED, "Sarah flies back on Friday, so the flat is free.", "2024-05-17"),
    (WED, "The photos on Friday were amazing.", "2024-05-10"),  # a verb after the time: "photos" is a noun
    (WED, "We had the party on Saturday, Jo brings a cake.", "2024-05-11"),  # a cue before it: the time is its clause's
    (WED, "After work on Friday, my parents are flying in.", "2024-05-17"),  # no cue before it: it opens the next
    (WED, "In three days we leave for Spain.", "2024-05-18"),  # a personal subject's timetable
    (WED, "I start at the new place on the 3rd.", "2024-06-03"),
    (WED, "We start to pack on Friday.", UNCLEAR),  # "start to": no timetable
    (WED, "The flight departs on the 2nd but we flew out a day late.", "2024-05-02"),  # a past as near wins
    (WED, "My interview is on Tuesday, wish me luck!", "2024-05-21"),  # "is" before the time: a schedule
    (WED, "The concert is in August.", "2024-08-01..2024-08-31"),
    (WED, "My sister's wedding is June 22nd.", "2024-06-22"),
    (WED, "The wedding is on the 25th.", "2024-05-25"),
    (WED, "The photo is from Saturday.", UNCLEAR),
    (WED, "What time is the game on Sunday?", "2024-05-19"),  # its subject may stand between
    (WED, "Is the meeting still on Thursday?", "2024-05-16"),  # a question opening with "is"
    (WED, "Could you water my plants on Friday?", "2024-05-17"),  # a request
    (WED, "I could come over on Thursday if you want.", "2024-05-16"),  # an offer for later
    (WED, "we were hoping to see you on Thursday, still on?", "2024-05-16"),  # a polite present that asks
    (WED, "I was hoping to come by on Saturday if that's ok", "2024-05-18"),
    (WED, "I was going to call you on Monday if I had time", "2024-05-13"),  # the "if" tells a past
    (WED, "We could meet up on Saturday if the weather's nice.", "2024-05-18"),
    (WED, "She said she could come on Saturday if she finished early.", UNCLEAR),  # reported, and a past "if"
    (WED, "Would you have come on Saturday?", "2024-05-11"),  # a question's perfect: past
    (WED, "My favorite day of the week is Friday.", UNCLEAR),  # a subject naming a day: no schedule
    (WED, "The party is at my place on Saturday.", "2024-05-18"),
    (WED, "I'm away on Friday.", "2024-05-17"),  # a personal "be" states where one will be
    (WED, "We're in London on the 28th.", "2024-05-28"),
    (WED, "I'm off work from the 20th to the 24th.", "2024-05-20..2024-05-24"),
    (WED, "I'm glad we met on Friday.", "2024-05-10"),  # the nearer past decides
    (WED, "The party's on Saturday night, you coming?", "2024-05-18"),  # "'s" for "is" before the time
    (WED, "There's a strike on Thursday so no trains.", "2024-05-16"),
    (WED, "John's party on Saturday was great.", "2024-05-11"),  # a possessive: "was" speaks
    (WED, "There was a party at Jo's on Saturday.", "2024-05-11"),  # a place, not "Jo is"
    (WED, "I'm away Monday to Wednesday.", "2024-05-20..2024-05-22"),  # a run of weekdays, by the tense
    (WED, "I'm away from Tuesday through Thursday.", "2024-05-21..2024-05-23"),
    (WED, "We're at the cottage from Friday till Sunday.", "2024-05-17..2024-05-19"),
    (WED, "We were in Rome Monday to Wednesday.", "2024-05-13..2024-05-15"),
    (WED, "The clinic is open Monday to Friday.", "2024-05-20..2024-05-24"),
    (WED, "She works Monday through Thursday.", UNCLEAR),  # a pronoun's present: maybe a habit
    (WED, "My mum always phones on Sunday.", UNCLEAR),  # a frequency word: a habit, no schedule
    (WED, "I'm never free on Friday.", UNCLEAR),
    (WED, "Nobody works on Sunday in this house.", UNCLEAR),  # a pronoun opening the sentence is no name
    (SUN_19, "The party is a week on Tuesday.", "2024-05-28"),  # a week after the coming Tuesday
    (SUN_19, "We fly out a week on Monday.", "2024-05-27"),
    (SUN_19, "The match is two weeks on Sunday.", "2024-06-09"),
    (WED, "They're arriving a week on Friday night.", "2024-05-24"),
    (WED, "The meeting moved from Thursday to Friday.", "2024-05-17"),  # a change of date: the new one
    (WED, "They postponed the launch from June to August.", "2024-08-01..2024-08-31"),
    (WED, "I changed my flight from the 20th to the 22nd.", "2024-05-22"),
    (WED, "We moved the dinner to Saturday.", "2024-05-18"),
    (WED, "The dentist moved my appointment to the 28th.", "2024-05-28"),  # a bare ordinal after the verb's "to"
    (WED, "She rescheduled our call to the 3rd instead.", "2024-06-03"),
    (WED, "We moved it to Friday and it went fine.", "2024-05-10"),  # how it went tells a past
    (WED, "They moved to Denver on Friday.", "2024-05-10"),  # the time is no new date of the move
    (WED, "My shift is from Monday to Wednesday next week.", "2024-05-20..2024-05-22"),  # a noun moves nothing
    (WED, "She is the one I met on Saturday.", "2024-05-11"),  # a new clause between: its past decides
    (WED, "My nephew turns five in August.", "2024-08-01..2024-08-31"),
    (WED, "He leaves his shoes everywhere since March.", "2024-03-01..2024-03-31"),  # "since": never ahead
    (WED, "I've been going to pottery classes since February.", "2024-02-01..2024-02-29"),  # a habit
    (WED, "We were going to visit in March but it fell through.", "2024-03-01..2024-03-31"),
    (WED, "I told him I'd be there on the 18th.", UNCLEAR),  # after the telling: either side of now
    (WED, "They said the package would arrive on Monday.", UNCLEAR),
    (WED, "I'd love to go on Saturday.", "2024-05-18"),
    (WED, "I'll have finished it by Friday.", "2024-05-17"),  # a future perfect: done by a time ahead
    (WED, "The builders won't have finished by June.", "2024-06-01..2024-06-30"),
    (WED, "He'll have left the country on Saturday.", "2024-05-18"),
    (WED, "We'll have moved out by June.", "2024-06-01..2024-06-30"),  # a verb of moving, too
    (WED, "I'd already left on Monday.", "2024-05-13"),
    (WED, "She said she would call on Monday but never did.", "2024-05-13"),  # a later clause says how it went
    (WED, "He told me he'd quit on Friday, and he actually did.", "2024-05-10"),
    (WED, "I was hoping to see you on Friday but I got sick.", "2024-05-10"),
    (WED, "I'd planned to visit in March but couldn't.", "2024-03-01..2024-03-31"),
    (WED, "We had planned to leave on Friday.", UNCLEAR),  # a plan seen from the past: either side of now
    (WED, "My boss asked if I could come in on Saturday.", UNCLEAR),
    (WED, "He said he would come on Monday, which was nice.", UNCLEAR),  # "which" joins no outcome
    (WED, "He said he'd send it on Friday, still nothing.", "2024-05-10"),  # overdue: its time went by
    (WED, "The agent said they'd call me on Monday, still no word.", "2024-05-13"),
    (WED, "They promised they would deliver it on Tuesday, and nothing yet.", "2024-05-14"),
    (WED, "She said she'd come over on Saturday, is that still ok?", UNCLEAR),  # "still" inside a clause of now
    (WED, "She swore she'd pay on the 10th and I haven't seen a penny.", "2024-05-10"),
    (WED, "He said he'd pay me back on Friday.", UNCLEAR),  # an open plan: either side of now
    (WED, "You said you'd finish the report on Tuesday, where is it?", "2024-05-14"),  # asks for its result
    (WED, "You said you'd come on Friday, where should we meet?", "2024-05-17"),  # a question arranging it: ahead
    (WED, "I wish I'd gone to the game on Saturday.", "2024-05-11"),
    (WED, "I'm taking the first week of June off.", "2024-06-01..2024-06-07"),  # "of June" is the week's month
    (WED, "We went to the beach in March.", "2024-03-01..2024-03-31"),
    # -- a month in a clause with a frequency word and no past is a habit ------------------------------
    (WED, "In May we always plant tomatoes.", "unresolvable: a habit, not one time"),
    (WED, "Every year in June we go to the coast.", "unresolvable: a habit, not one time"),
    (WED, "I get paid on the 15th of every month.", "unresolvable: a habit, not one time"),
    (WED, "We always went to the lake in July.", "2023-07-01..2023-07-31"),  # a past form tells one time
    (WED, "I often think about what happened in March.", "2024-03-01..2024-03-31"),
    # -- a time inside a work of fiction is the plot's ----------------------------------------------------
    (WED, "In the book the hero leaves on the 3rd.", PLOT),
    (WED, "In the movie, they get married in June.", PLOT),
    (WED, "We discussed it in the book club on Monday.", "2024-05-13"),  # a place, not a frame
    (WED, "I saw it in the movie theater on Friday.", "2024-05-10"),
    # -- a modal before a plain verb points ahead, before "have" back ----------------------------------------
    (WED, "I might see them on Saturday.", "2024-05-18"),
    (WED, "Can you pick me up from the station on Monday?", "2024-05-20"),
    (WED, "We need to talk on Monday.", "2024-05-20"),
    (WED, "I can't make it on Saturday, sorry.", "2024-05-18"),
    (WED, "I hope it doesn't rain on Sunday.", "2024-05-19"),
    (WED, "You should have seen it on Saturday.", "2024-05-11"),
    (WED, "I should've gone on Sunday.", "2024-05-12"),
    (WED, "I need to tell you about Saturday.", UNCLEAR),  # a topic, not the modal's time
    (WED, "It snowed on April 2nd, can you believe it?", "2024-04-02"),  # the modal opens another clause
    (WED, "On Saturday, we can go to the lake.", "2024-05-18"),  # a time opening the sentence is the clause's
    # -- a tag question states its sentence and asks only to confirm it ------------------------------------
    (WED, "It's been a year since we met, hasn't it?", "2023-01-01..2023-12-31"),
    (WED, "It's been a week since the surgery, right?", "2024-05-06..2024-05-12"),
    (WED, "You're in Porto right now, aren't you?", "2024-05-15"),
    # -- "last/next <weekday> the <nth>": the day of the month says which one -------------------------------
    (WED, "It happened last Tuesday the 7th.", "2024-05-07"),  # not the Tuesday just gone (the 14th)
    (WED, "last Tuesday the 14th I went", "2024-05-14"),
    (WED, "See you next Friday the 24th.", "2024-05-24"),  # not the Friday just ahead (the 17th)
    (WED, "last Tuesday the 8th I went", "unresolvable: weekday and day of the month disagree"),
    (WED, "last Tuesday the 7th grade class went", "2024-05-14"),  # "the 7th grade": no day
    (WED, "On the 3rd I had a dentist appointment.", "2024-05-03"),
    (WED, "on the 20th it rained", "2024-04-20"),
    # -- an -ed word after a present "be" is a state now, not a past event --------------------------------
    (WED, "The shop is closed on Sunday.", UNCLEAR),  # a thing's state: maybe its weekly habit
    (WED, "I'm booked on Friday.", "2024-05-17"),  # but a person's state then is arranged, as "I'm away" is
    (WED, "We're closed Thursday to Saturday.", "2024-05-16..2024-05-18"),
    (WED, "The shop closed on Sunday.", "2024-05-12"),
    (WED, "He's moved to Denver in March.", "2024-03-01..2024-03-31"),
    # -- a run of two bare ordinals is days of one month, picked by the tense ------------------------------
    (WED, "I went to Berlin from the 2nd to the 5th.", "2024-05-02..2024-05-05"),
    (WED, "We were away between the 1st and the 15th.", "2024-05-01..2024-05-15"),
    (WED, "we stayed from the 3rd to 9th, it was great", "2024-05-03..2024-05-09"),
    (WED, "I was off from the 10th to the 20th.", "2024-04-10..2024-04-20"),  # the run ends before now
    (WED, "I'll be in Japan from the 10th to the 20th.", "2024-06-10..2024-06-20"),
    (WED, "The office is closed from the 20th to the 24th.", UNCLEAR),
    # -- a bound with no tense cue lies ahead: a state lasting from now, or a deadline ----------------------
    (WED, "I'm off until Monday.", "2024-05-20"),
    (WED, "I need it done by Friday.", "2024-05-17"),
    (WED, "I'm in Berlin until March.", "2025-03-01..2025-03-31"),
    (WED, "I was off until Monday.", "2024-05-13"),  # a past bound
    (WED, "By Friday I was exhausted.", "2024-05-10"),
    (WED, "I was in Paris on 5/13.", "2024-05-13"),  # a full stop closing the sentence is no decimal
    (WED, "I'm off until Friday. Now that's settled, who's bringing snacks?", "2024-05-17"),  # not its "now"
    (WED, "I have a cold since Monday.", "2024-05-13"),  # a time after "since" lies behind
    (WED, "I have to submit it by the 20th.", "2024-05-20"),  # a bare ordinal after a bound is a day
    (WED, "The offer is valid until June 30.", "2024-06-30"),  # the bound's lead read past the date's words
    (WED, "He said he'd be back by Sunday.", UNCLEAR),  # a plan seen from the past is a cue: no bound from now
    (WED, "He promised he would fix it by Friday.", UNCLEAR),
    (WED, "I need it by May 31.", "2024-05-31"),
    (WED, "I'm off until the 24th.", "2024-05-24"),
    (WED, "She's been staying with us since the 3rd.", "2024-05-03"),
    (WED, "Since Monday is a holiday, the office is closed.", UNCLEAR),  # a reason, not a start
    (WED, "Monday before last I had a job interview.", "2024-05-06"),  # as "the Monday before last"
    (WED, "We fly out Friday after next.", "2024-05-24"),
]


@pytest.mark.parametrize(("observed", "text", "expected"), TABLE, ids=[f"{row[0]} {row[1]}" for row in TABLE])
def test_time_expression_means_its_interval(observed, text, expected):
    assert_means(observed, text, expected)


def test_the_table_is_large_and_has_no_duplicate_rows():
    assert len(TABLE) >= 120
    assert len({(observed, text) for observed, text, _ in TABLE}) == len(TABLE)


@pytest.mark.parametrize(("text", "expressions"), [
    ("from May 9 to May 3", ["from May 9", "May 3"]),  # a range ending before it starts is two dates
    ("I drove from May 3 to visit", ["from May 3"]),
    ("between two and three days", []),
    ("the week before my birthday on May 20, 2024", ["the week before", "on May 20, 2024"]),
    ("the day before 2023", ["the day before"]),  # a year is no stated day
    ("0 days ago", []),
    ("we met May 3 - 5 pm", ["May 3"]),  # a run of days never ends on a clock time
    ("it was April 29-31", []),  # April has no 31st
    ("we met May 15-13", ["May 15"]),  # a run ends after it begins
    ("From Friday to Monday last week I was sick", ["From Friday to Monday", "last week"]),  # not one week's run
    ("we went there on the weekend of the 4th", []),  # not last weekend: "the 4th" alone names no day
    ("the 5th Monday of May", ["Monday", "of May"]),  # a month has four sure weekdays of each name
    ("I saw him Monday before last week's game", ["Monday", "last week's"]),  # "last week" is a time of its own
])
def test_a_relation_or_range_that_does_not_hold_leaves_its_parts(text, expressions):
    found = resolve_occurrences(text, datetime.fromisoformat(WED).replace(hour=15, tzinfo=UTC))
    assert [o.expression for o in found] == expressions


@pytest.mark.parametrize(("text", "expressions"), [
    ("we bought a Christmas tree", []),  # a one-word holiday name needs a lead word ("at Christmas") or a year
    ("Halloween costumes are fun", []),
    ("Thanksgiving dinner was loud", []),
    ("a new year begins", []),
    ("the 31st of last month", ["last month"]),  # April has no 31st
    # days off the calendar claim nothing, and the words after them are still read
    ("we met on 31.02.2024 and yesterday", ["yesterday"]),
    ("it was on 2024-02-30", []),
    ("the 2024-13 report", []),
    ("it was 31/02/2024", []),
    ("it was February 30", []),
    ("on 30 February 2023", ["February 2023"]),
    ("on Monday, February 30 we met", ["on Monday"]),
    ("it was the thirty-first of February", ["of February"]),
    ("I voted on Super Tuesday", []),  # a named thing ending in a weekday, no day of this week
    ("church on Palm Sunday was full", []),
    ("Shrove Tuesday pancakes were great", []),
    ("we watched Saturday Night Live", []),
    ("the 5th week of May", ["of May"]),  # a month has four whole weeks
    ("the end of the week", []),  # a week has no agreed thirds
    ("at the end of the day we agreed", []),
    ("a late lunch and an early night", []),
    ("early on we agreed", []),
    ("the start of the meeting", []),
    ("in my 30s I moved", []),  # an age, not a decade
    ("highs in the 80s all weekend", []),  # a measured quantity, not a decade
    ("The temperature stayed in the nineties", []),
    ("in her early twenties", []),
    ("the first quarter of the game", []),  # a quarter of something that is not a year
    ("5/13 tests passed", []),  # a count: a slash pair needs a lead word
    ("upgrade to 4.12.10 now", []),  # a version: a two-digit year needs two-digit days and months
    ("the host 10.1.2.33 is down", []),
    ("Q5 is no quarter", []),
    ("she said '22 is plenty'", []),  # no lead word: a quote, not a year
    ("Now, let me tell you something.", []),  # "now" opening a sentence is no time
    ("By now you should know.", []),
    ("From now on I'll run daily.", []),
    ("What do you do now?", []),
    ("I'm now a teacher", []),
    ("I've been waiting for a while now", []),  # the tail of a duration says how long, not when
    ("we have lived here for years now.", []),
    ("She had just left when I arrived.", []),  # the past of another past
    ("I'd just finished dinner", []),
    ("It's just been so busy", []),
    ("I'm just tired", []),
    ("I just love this song", []),
    ("at the moment of his birth", []),
    # what the words also mean: "just" as "simply", "right" as an adjective, another moment, past narrative
    ("I just wanted to try a new genre", []),
    ("I just thought you should know", []),
    ("When I was a kid I just loved drawing", []),
    ("It just happened so fast", []),
    ("I'm just exhausted", []),
    ("We had only just arrived when it started", []),
    ("I've just got one question", []),
    ("You just got to try this place", []),
    ("yeah you're right now I remember", []),
    ("All right now, settle down", []),
    ("You're right\nnow let's go", []),
    ("At the moment I saw her I knew.", []),
    ("I'll call you at the moment you land", []),
    ("The show was at present-day prices", []),
    ("It was late now, so we went home", []),
    ("I'm volunteering at the food bank on Sunday mornings", []),  # a habit, as "on Sundays" is
    ("He coaches on Monday nights", []),
    ("Okay now, listen up", []),
    ("It's been a fortnight now.", []),
    ("She was currently unemployed.", []),
    ("Are you currently working?", []),  # a question asks; it reports no event
    ("Where are you right now, mate?", []),
    ("It'd been a year since I saw him.", []),
    ("It hasn't been a week since I started and I'm already tired.", []),
    ("Has it really been 10 years since we graduated?", []),
    ("I quit 1.5 years ago.", []),  # a decimal count names no calendar unit
    ("I quit 1,5 years ago.", []),
    ("It hasn't really even been a month since the wedding.", []),
    ("I've just been in love with this song.", []),
    ("I've just been exhausted.", []),
    ("It's been a year and a half now.", []),  # the tail of a duration
    ("Things have just been crazy at work.", []),
    ("I've just had enough of this job.", []),
    ("When I was a kid, I just found it boring.", []),
    ("It was late now, so we went home", []),
    ("I'm volunteering at the food bank on Sunday mornings", []),  # a habit, as "on Sundays" is
    ("He coaches on Monday nights", []),
    ("Come on now, be nice", []),
    ("It had been a year since I moved", []),  # since a past time, not since the observation
    ("It hasn't been a week since I started, has it?", []),  # a tag does not undo the negation
    ("Has it been a year since we met, or two?", []),  # a question that is no tag
    ("Where are you right now, huh?", []),  # a question that opens as one
    ("upgrade on 5/13.2 now", []),
    ("We live on the 4th floor.", []),  # an ordinal counting a noun is no day of a month
    ("I passed on the 2nd try.", []),
    ("I switched to the 2nd option.", []),  # "to the 2nd" after a moving verb, but before a noun
    ("We moved here in 2019 and went to the 3rd.", ["in 2019"]),  # the moving verb is another clause's
    ("By the 3rd time I was bored.", []),
    ("She's played since the 2nd grade.", []),
    ("On the 3rd day of the trip we rested.", []),
    ("I went to Sunday school", []),  # a weekday qualifying a noun names a kind of thing
    ("We go to Friday prayers together.", []),
    ("The Monday blues hit hard.", []),
    ("My Tuesday class got cancelled.", []),
    ("We took the kids to Saturday football.", []),
    ("the show airs on Sunday nights, did you catch it?", []),  # a habit, not one night
])
def test_words_that_name_no_date_here_claim_nothing(text, expressions):
    found = resolve_occurrences(text, datetime.fromisoformat(WED).replace(hour=15, tzinfo=UTC))
    assert [o.expression for o in found] == expressions
