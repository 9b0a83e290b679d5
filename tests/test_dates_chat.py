"""Chat lines of the kind two friends write over months (family, work, hobbies, trips), each with
the day it was said and the intervals a careful reader gives its times: inclusive days
``first..last`` (one day alone for a single day), or nothing at all for a line whose time words
name no day (a habit, a kind of thing, a name).

Rows come in pairs of sides: where a rule fires and where the same words must not. The set was
written from how people talk, not from any benchmark.
"""
from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from hermes_trove.dates import resolve_occurrences

WED = "2024-05-15"  # a Wednesday: the last Saturday is the 11th, the next one the 18th
SUN = "2023-08-20"  # a Sunday: the last Tuesday is the 15th, the next Friday the 25th
TUE = "2023-03-07"  # a Tuesday: the next Thursday is the 9th

CHAT = [
    # -- "hope you have": a wish for later, not a perfect ("hope you had" is past) --------------------
    (WED, "Hope you have fun at the concert on Saturday!", ("2024-05-18",)),
    (WED, "Hope you had fun at the concert on Saturday!", ("2024-05-11",)),
    # -- being free, busy or away at a time is a state then: a schedule ------------------------------
    (WED, "Are you free on Saturday afternoon?", ("2024-05-18",)),
    (WED, "Is your brother around on Sunday?", ("2024-05-19",)),
    (WED, "We're on vacation from June 10 to June 20.", ("2024-06-10..2024-06-20",)),
    (WED, "Were you free on Saturday?", ("2024-05-11",)),
    (WED, "Are you still mad about Monday?", ()),
    # -- a plural noun subject with the plain form of arriving, leaving, starting: a timetable --------
    (WED, "My parents arrive on Friday, so the house is a mess.", ("2024-05-17",)),
    (WED, "The kids start summer camp on Monday.", ("2024-05-20",)),
    (WED, "My in-laws leave on Sunday, thank god.", ("2024-05-19",)),
    (WED, "Our guests come on Saturday, I still need to clean.", ("2024-05-18",)),
    (WED, "The kids finish school on Friday.", ("2024-05-17",)),
    (WED, "My parents arrived on Friday.", ("2024-05-10",)),
    (WED, "My parents come on Sundays.", ()),
    # -- a noun subject's "have": held like an arrangement -------------------------------------------
    (TUE, "The kids have a recital on Thursday evening.", ("2023-03-09",)),
    (WED, "My sister has a job interview on Monday.", ("2024-05-20",)),
    (WED, "The kids had a recital on Thursday.", ("2024-05-09",)),
    # -- a routine's present -s after a noun subject is a habit; one event's is a schedule -----------
    (WED, "Our team trains on Tuesday and Thursday.", ()),
    (WED, "My dad golfs on Saturday with his buddies.", ()),
    (WED, "The band practices on Wednesday in my garage.", ()),
    (WED, "The museum reopens on Friday after the renovation.", ("2024-05-17",)),
    (WED, "My brother moves into his new place on Saturday.", ("2024-05-18",)),
    (WED, "The new season premieres on Sunday, I'm hyped.", ("2024-05-19",)),
    # -- "the <weekday> <noun>" opening a clause that goes on in the past: that day's event ----------
    (WED, "The Monday meeting was long and pointless.", ("2024-05-13",)),
    (WED, "The Friday flight was delayed by three hours.", ("2024-05-10",)),
    (WED, "The Sunday brunch at Mia's was amazing, thanks for setting it up.", ("2024-05-12",)),
    (SUN, "The Tuesday game went to overtime, I was screaming.", ("2023-08-15",)),
    (WED, "The Friday market has the best peaches.", ()),
    (WED, "I love the Saturday farmers market.", ()),
    (WED, "We used to go to the Friday fish fry at church.", ()),
    (WED, "My Tuesday yoga class is the highlight of my week.", ()),
    (WED, "The Monday blues are real.", ()),
    # -- weekdays in names of things ----------------------------------------------------------------
    (WED, "Sunday school was my favorite part of the week growing up.", ()),
    (WED, "Saturday Night Live was hilarious this week.", ("2024-05-13..2024-05-19",)),
    (WED, "Cyber Monday deals are a scam.", ()),
    (WED, "I wore my Sunday best to the wedding.", ()),
    # -- a weekday's possessive ("Sunday's run") is that day's: the tense of its sentence ------------
    (WED, "I was so exhausted after Friday's shift.", ("2024-05-10",)),
    (WED, "Can't wait for Saturday's game!", ("2024-05-18",)),
    (WED, "Saturday's a good day for it.", ()),
]


def interval(expected: str) -> tuple[date, date]:
    first, _, last = expected.partition("..")
    return date.fromisoformat(first), date.fromisoformat(last or first) + timedelta(days=1)


@pytest.mark.parametrize(("observed", "text", "expected"), CHAT, ids=[f"{row[0]} {row[1]}" for row in CHAT])
def test_chat_line_means_its_intervals(observed, text, expected):
    at = datetime.fromisoformat(observed).replace(hour=15, tzinfo=UTC)
    found = resolve_occurrences(text, at)
    resolved = {(o.start.date(), o.end.date()) for o in found if o.start is not None and o.end is not None}
    assert resolved == {interval(item) for item in expected}, [o.to_dict() for o in found]


def test_the_chat_table_has_no_duplicate_rows():
    assert len({(observed, text) for observed, text, _ in CHAT}) == len(CHAT)
