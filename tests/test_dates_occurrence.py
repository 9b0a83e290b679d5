from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from hermes_trove.dates import find_expressions
from hermes_trove.dates.occurrence import MAX_SCAN_CHARS, Occurrence, occurrences_for, resolve_occurrences

MON = "2023-07-17"  # a Monday
SUN = "2023-07-16"
FRI = "2023-07-21"
NEW_YEAR = "2024-01-02"  # a Tuesday
LEAP = "2024-03-01"


def observed(day: str, hour: int = 14) -> datetime:
    return datetime.fromisoformat(day).replace(hour=hour, minute=31, tzinfo=UTC)


def only(text: str, day: str) -> Occurrence:
    found = resolve_occurrences(text, observed(day))
    assert len(found) == 1, [o.to_dict() for o in found]
    return found[0]


def test_a_count_of_hours_names_the_day_of_its_instant_and_needs_the_instant():
    just_after_midnight = datetime(2024, 5, 15, 0, 30, tzinfo=UTC)
    (occ,) = resolve_occurrences("I pushed the fix an hour ago", just_after_midnight)
    assert (occ.start.date(), occ.granularity) == (date(2024, 5, 14), "day")
    assert find_expressions("an hour ago", date(2024, 5, 15)) == []  # a day alone has no hours
    assert [o.expression for o in resolve_occurrences("it took two hours; for 3 hours now", just_after_midnight)] == []


@pytest.mark.parametrize(
    ("text", "obs", "expression", "first", "end", "granularity"),
    [
        # relative days
        ("I went there yesterday.", MON, "yesterday", "2023-07-16", "2023-07-17", "day"),
        ("Yesterday was fun", LEAP, "Yesterday", "2024-02-29", "2024-03-01", "day"),
        ("we eat out today", NEW_YEAR, "today", "2024-01-02", "2024-01-03", "day"),
        ("see you tonight", MON, "tonight", "2023-07-17", "2023-07-18", "day"),
        ("Last night was amazing", MON, "Last night", "2023-07-16", "2023-07-17", "day"),
        ("I'll call tomorrow morning", SUN, "tomorrow morning", "2023-07-17", "2023-07-18", "day"),
        ("the day before yesterday", NEW_YEAR, "the day before yesterday", "2023-12-31", "2024-01-01", "day"),
        ("leaving the day after tomorrow", MON, "the day after tomorrow", "2023-07-19", "2023-07-20", "day"),
        ("I did it 3 days ago", LEAP, "3 days ago", "2024-02-27", "2024-02-28", "day"),
        ("two days ago", NEW_YEAR, "two days ago", "2023-12-31", "2024-01-01", "day"),
        # weekdays with last/this/next: nearest strictly before/after; "this" = same ISO week
        ("last Saturday", MON, "last Saturday", "2023-07-15", "2023-07-16", "day"),
        ("last Friday", FRI, "last Friday", "2023-07-14", "2023-07-15", "day"),
        ("Last Fri I went", FRI, "Last Fri", "2023-07-14", "2023-07-15", "day"),
        ("last Tues", MON, "last Tues", "2023-07-11", "2023-07-12", "day"),
        ("next Friday", FRI, "next Friday", "2023-07-28", "2023-07-29", "day"),
        ("next Friday", MON, "next Friday", "2023-07-21", "2023-07-22", "day"),
        ("this Friday", MON, "this Friday", "2023-07-21", "2023-07-22", "day"),
        ("this Monday", SUN, "this Monday", "2023-07-10", "2023-07-11", "day"),
        ("this past Sunday", FRI, "this past Sunday", "2023-07-16", "2023-07-17", "day"),
        # weekdays without a qualifier follow the nearest tense cue
        ("On Friday, I got great news", MON, "On Friday", "2023-07-14", "2023-07-15", "day"),
        ("I'll see you on Friday", FRI, "on Friday", "2023-07-28", "2023-07-29", "day"),
        ("I went for a check-up Monday and my doc said it can get worse if I don't change soon", SUN,
         "Monday", "2023-07-10", "2023-07-11", "day"),
        ("I met them on the 15th", MON, "on the 15th", "2023-07-15", "2023-07-16", "day"),
        ("we fly on the 3rd, can't wait", MON, "on the 3rd", "2023-08-03", "2023-08-04", "day"),
        # weeks (ISO) and weekends (2 days, granularity day)
        ("last week", MON, "last week", "2023-07-10", "2023-07-17", "week"),
        ("last week", NEW_YEAR, "last week", "2023-12-25", "2024-01-01", "week"),
        ("this week", SUN, "this week", "2023-07-10", "2023-07-17", "week"),
        ("next week", SUN, "next week", "2023-07-17", "2023-07-24", "week"),
        ("a week ago", MON, "a week ago", "2023-07-10", "2023-07-17", "week"),
        ("two weeks ago", MON, "two weeks ago", "2023-07-03", "2023-07-10", "week"),
        ("the week before last", MON, "the week before last", "2023-07-03", "2023-07-10", "week"),
        ("last weekend", MON, "last weekend", "2023-07-15", "2023-07-17", "day"),
        ("last weekend", SUN, "last weekend", "2023-07-08", "2023-07-10", "day"),
        ("this weekend", MON, "this weekend", "2023-07-22", "2023-07-24", "day"),
        ("next weekend", FRI, "next weekend", "2023-07-29", "2023-07-31", "day"),
        ("two weekends ago", MON, "two weekends ago", "2023-07-08", "2023-07-10", "day"),
        ("that roadtrip this past weekend was insane", FRI, "this past weekend", "2023-07-15", "2023-07-17", "day"),
        ("we hiked over the weekend", MON, "the weekend", "2023-07-15", "2023-07-17", "day"),
        # months and years
        ("this month", LEAP, "this month", "2024-03-01", "2024-04-01", "month"),
        ("last month", NEW_YEAR, "last month", "2023-12-01", "2024-01-01", "month"),
        ("last month", LEAP, "last month", "2024-02-01", "2024-03-01", "month"),
        ("next month", "2023-12-31", "next month", "2024-01-01", "2024-02-01", "month"),
        ("two months ago", NEW_YEAR, "two months ago", "2023-11-01", "2023-12-01", "month"),
        ("last year", NEW_YEAR, "last year", "2023-01-01", "2024-01-01", "year"),
        ("this year", MON, "this year", "2023-01-01", "2024-01-01", "year"),
        ("ten years ago", MON, "ten years ago", "2013-01-01", "2014-01-01", "year"),
        ("I've been playing for a month now", MON, "for a month now", "2023-06-01", "2023-07-01", "month"),
        # absolute dates
        ("on 3 July", MON, "on 3 July", "2023-07-03", "2023-07-04", "day"),
        ("3 July 2022", MON, "3 July 2022", "2022-07-03", "2022-07-04", "day"),
        ("July 3rd", MON, "July 3rd", "2023-07-03", "2023-07-04", "day"),
        ("on July 3rd, 2021", MON, "on July 3rd, 2021", "2021-07-03", "2021-07-04", "day"),
        ("the 3rd of July", MON, "the 3rd of July", "2023-07-03", "2023-07-04", "day"),
        ("Friday, July 14", MON, "Friday, July 14", "2023-07-14", "2023-07-15", "day"),
        ("on 25 July", MON, "on 25 July", "2022-07-25", "2022-07-26", "day"),
        ("I will return on July 25", MON, "on July 25", "2023-07-25", "2023-07-26", "day"),
        ("on 29 February", "2023-06-01", "on 29 February", "2020-02-29", "2020-03-01", "day"),
        ("2024-02-29", MON, "2024-02-29", "2024-02-29", "2024-03-01", "day"),
        ("on 13/4/2023", MON, "13/4/2023", "2023-04-13", "2023-04-14", "day"),
        ("in 2022", MON, "in 2022", "2022-01-01", "2023-01-01", "year"),
        ("the summer of 2022", MON, "the summer of 2022", "2022-01-01", "2023-01-01", "year"),
        ("June 2023", MON, "June 2023", "2023-06-01", "2023-07-01", "month"),
        ("September, 2023", MON, "September, 2023", "2023-09-01", "2023-10-01", "month"),
        ("2023-06", MON, "2023-06", "2023-06-01", "2023-07-01", "month"),
        ("In Jan 2023 we left", MON, "In Jan 2023", "2023-01-01", "2023-02-01", "month"),
        # a month without a year: the most recent one not after the observation month
        ("in May", MON, "in May", "2023-05-01", "2023-06-01", "month"),
        ("in July", MON, "in July", "2023-07-01", "2023-08-01", "month"),
        ("in December", NEW_YEAR, "in December", "2023-12-01", "2024-01-01", "month"),
        ("I will go in December", MON, "in December", "2023-12-01", "2024-01-01", "month"),
        ("mid-June was fun", MON, "mid-June", "2023-06-11", "2023-06-21", "day"),
        ("last May", "2023-05-20", "last May", "2022-05-01", "2022-06-01", "month"),
        ("next May", "2023-05-20", "next May", "2024-05-01", "2024-06-01", "month"),
        ("Last August I told you", NEW_YEAR, "Last August", "2023-08-01", "2023-09-01", "month"),
        # rolling windows of days ending with the observation day
        ("over the last two days", MON, "the last two days", "2023-07-16", "2023-07-18", "day"),
        ("in the past week", MON, "the past week", "2023-07-11", "2023-07-18", "day"),
        ("in the last month", "2024-03-31", "the last month", "2024-03-01", "2024-04-01", "day"),
    ],
)
def test_expression_resolves_to_interval(text, obs, expression, first, end, granularity):
    occ = only(text, obs)
    assert occ.expression == expression
    assert (occ.start.date(), occ.end.date()) == (date.fromisoformat(first), date.fromisoformat(end))
    assert occ.granularity == granularity
    assert occ.unresolved is None


@pytest.mark.parametrize(
    "text",
    ["I may go.", "We march forward.", "march forward in the rain", "I sat in the sun.", "He last sat there.",
     "May I ask you something?", "March on!", "an august gathering", "Jan said hi", "I trust Jan's judgement",
     "2000 people came", "the 15th century", "the last time", "next door", "at last", "on Fridays we swim",
     "every Saturday", "I have 3 apples and 12 pears", "version 1.2.3", "I did it in two weeks.",
     "We sun ourselves and wed", "the last week of the course", "it lasted 5 days",
     "I went to the gym and ate well."],
)
def test_no_false_matches(text):
    assert resolve_occurrences(text, observed(MON)) == []


@pytest.mark.parametrize(
    ("text", "expression", "reason"),
    [
        ("a few days ago", "a few days ago", "vague quantity"),
        ("few days ago", "few days ago", "vague quantity"),
        ("a couple of weeks ago", "a couple of weeks ago", "vague quantity"),
        ("these last few days", "last few days", "vague quantity"),
        ("recently", "recently", "vague reference"),
        ("lately", "lately", "vague reference"),
        ("the other day", "the other day", "vague reference"),
        ("a while ago", "a while ago", "vague reference"),
        ("about a year ago", "about a year ago", "approximate quantity"),
        ("more than a week ago", "more than a week ago", "approximate quantity"),
        ("the week before", "the week before", "relative to an unstated reference"),
        ("the day after", "the day after", "relative to an unstated reference"),
        ("two days later", "two days later", "relative to an unstated reference"),
        ("the next day", "the next day", "relative to an unstated reference"),
        ("last summer", "last summer", "season (hemisphere-dependent)"),
        ("in the winter", "in the winter", "season (hemisphere-dependent)"),
        ("on 3/4/2023", "3/4/2023", "day/month order ambiguous"),
        ("Friday is a day", "Friday", "weekday or day without last/this/next and unclear tense"),
    ],
)
def test_ambiguous_expressions_stay_unresolved_with_a_reason(text, expression, reason):
    occ = only(text, MON)
    assert occ.to_dict() == {"expression": expression, "unresolved": reason}
    assert occ.start is None and occ.end is None and not occ.resolved


@pytest.mark.parametrize(("text", "expected"), [
    # an offset from an unstated reference counts from the nearest time stated before it (observed Wed 2024-05-15)
    ("We got married on June 1st. The next day we flew to Rome.", "2023-06-02"),
    ("I bought it on May 2. I had seen it the previous day.", "2024-05-01"),
    ("Last weekend we hiked. The next morning I was sore.", "2024-05-13"),
    ("I'm flying out today. The next day I'll rest.", "2024-05-16"),
    ("I moved on May 3 and started the new job the following Monday.", "2024-05-06"),
    ("I started on May 3 and quit the previous Friday.", "2024-04-26"),
    ("I ran a 5k last Saturday. Two days later I ran again.", "2024-05-13"),
    ("I flew home on May 3; the day after, I slept all day.", "2024-05-04"),
    ("Last Friday I went to the beach, and the day before, I had a picnic.", "2024-05-09"),
    ("We met on Friday May 3rd and a week later we went out.", "2024-05-06..2024-05-12"),  # the ISO week after
    ("Last week was busy. The following week we went to Paris.", "2024-05-13..2024-05-19"),
    ("In March we went to Paris. The following month we went to Rome.", "2024-04-01..2024-04-30"),
    ("In 2020 I moved here. Two years later I bought a house.", "2022-01-01..2022-12-31"),
    ("We got there on the 5th and the next day went surfing.", "2024-05-06"),  # "the next" is no future cue
    # no usable reference: the reason stays
    ("Yes. The next day was rough.", None),
    ("We met in March. Two days later we went out.", None),  # a day does not count from a month
    ("I came back on May 3. The day before my birthday we left.", None),  # "my birthday" is its own reference
    ("Last Friday I went to the beach, and the day before I had a picnic.", None),  # "before I had": a clause
    ("I came back on May 3." + " So much happened." * 40 + " The next day I rested.", None),  # too far back
    # the time just before it is vague, or counting from it puts a past event in the future
    ("On May 1 we landed in Lima. A few days later we drove to Cusco. The next day we hiked.", None),
    ("On May 1st I started my diet. Today I'm 5 pounds down. The next day I cheated.", None),
    ("I just adopted a puppy! Two days later she got sick.", None),
    ("I met her on April 20. Two days later we had coffee.", "2024-04-22"),  # "20." is no decimal
    ("We met in 2010. A year later we married.", "2011-01-01..2011-12-31"),
    ("On Monday we agreed to meet the following Saturday.", "2024-05-18"),  # a plan may lie ahead
    ("Yesterday I booked a table for the following Friday.", "2024-05-17"),
    ("In March I moved. The previous Monday I quit.", None),  # a month gives no day to count from
    ("I started on May 6. Two weeks later I quit.", None),  # a later day needs a future or a plan
    # a date that is what something is about, or a setting described in the present, is no story time
    ("I watched a documentary about July 20, 1969. The next day I bought a telescope.", None),
    ("We read a book on the events of September 11, 2001. The next day I went to work.", None),
    ("The movie is set on December 25, 1914. The next day we went to see it again.", None),
    ("My favorite lecture was about June 6, 1944. The following week I had an exam.", None),
    ("She was born on June 3, 1990. The next day her father came home.", "1990-06-04"),  # an event of the story
    ("On the morning of May 3 we left. The next day we arrived.", "2024-05-04"),  # a part of that day
    ("In the month of May 2019 we moved. The next month we found jobs.", "2019-06-01..2019-06-30"),  # that month
    ("Our wedding is on June 1, 2025. The next day we fly to Bali.", "2025-06-02"),  # a plan, not a setting
    ("The story is set in 1920. The following year the hero returns.", "1921-01-01..1921-12-31"),  # the plot's time
])
def test_an_offset_counts_from_the_time_stated_before_it(text, expected):
    found = resolve_occurrences(text, observed("2024-05-15"))
    assert 1 <= len(found) <= 3, [o.to_dict() for o in found]
    offset = found[-1]
    if expected is None:
        assert offset.unresolved == "relative to an unstated reference", offset.to_dict()
        return
    first, _, last = expected.partition("..")
    assert offset.start is not None and offset.end is not None, offset.to_dict()
    assert (offset.start.date(), offset.end.date() - timedelta(days=1)) == (
        date.fromisoformat(first), date.fromisoformat(last or first))


@pytest.mark.parametrize(("text", "kept", "withdrawn"), [
    ("We went on Thursday, no wait, it was Friday.", ["Friday"], ["on Thursday"]),
    ("I saw her on Tuesday, sorry, I mean Monday.", ["Monday"], ["on Tuesday"]),
    ("We met on Monday, or rather Tuesday night.", ["Tuesday night"], ["on Monday"]),
    ("Actually it wasn't last week, it was two weeks ago.", ["two weeks ago"], ["last week"]),
    ("No, it wasn't on Saturday, it was on Sunday.", ["on Sunday"], ["on Saturday"]),
    ("On Sunday we went hiking, no wait, it was Saturday.", ["Saturday"], ["On Sunday"]),  # after its clause
    ("See you Thursday! Oh wait, I mean Friday.", ["Friday"], ["Thursday"]),  # past its sentence's end
    ("On Sunday we went hiking, no idea why, and on Saturday we rested.", ["On Sunday", "on Saturday"], []),
    # a bare replacement the grammar does not read alone still takes the place of the time it corrects
    ("The appointment is on the 20th, or rather the 21st.", ["the 21st"], ["on the 20th"]),
    ("We're going in July, no sorry, August.", ["August"], ["in July"]),
    ("I met him in March, actually no, it was April.", ["April"], ["in March"]),
    ("In June we saw the 4th film of the series.", ["In June"], []),
    # any other word between them keeps both
    ("I went on Monday and actually had fun on Tuesday too.", ["on Monday", "on Tuesday"], []),
    ("I worked on Monday and Tuesday.", ["on Monday", "Tuesday"], []),
    ("It wasn't on Saturday. It was great on Sunday.", ["on Saturday", "on Sunday"], []),
])
def test_a_time_the_speaker_takes_back_is_withdrawn_and_the_later_one_stands(text, kept, withdrawn):
    found = resolve_occurrences(text, observed("2024-05-15"))
    assert [o.expression for o in found if o.resolved] == kept
    assert [o.expression for o in found if o.unresolved == "taken back by the time after it"] == withdrawn


@pytest.mark.parametrize(("text", "expected"), [
    # a month alone takes the year of the time just before it, a day alone its month (observed Wed 2024-05-15)
    ("In 2022 we lived in Denver. In March we moved to Austin.", "2022-03-01..2022-03-31"),
    ("We met on June 3, 2019. In August we got engaged.", "2019-08-01..2019-08-31"),
    ("In 2025 we'll move to Spain. In March we'll look for a flat.", "2025-03-01..2025-03-31"),
    ("I was in Spain the first week of April, then on the 10th I flew to Berlin.", "2024-04-10"),
    ("The conference is in July. I arrive on the 2nd.", "2024-07-02"),
    ("On April 3 we landed and on the 5th we drove to the coast.", "2024-04-05"),
    ("In April we went to Italy, and on the 3rd we saw Rome.", "2024-04-03"),
    # another reading keeps its own: a later month in a past sentence, a day before the one stated
    ("Last month I was in Rome; in December I was in Paris.", "2023-12-01..2023-12-31"),
    ("We flew back on April 28 and on the 2nd I started work.", "2024-05-02"),
    ("In 2022 we lived in Denver. Last week I was there. In March we moved.", "2024-03-01..2024-03-31"),
    # after a month's own time an earlier month is the next year's, an earlier day the next month's
    ("The flat flooded in November 2021 and we moved out in January.", "2022-01-01..2022-01-31"),
    ("My dad got sick in October 2023, and he passed in February.", "2024-02-01..2024-02-29"),
    ("We arrive on 28 June and leave on the 5th.", "2024-07-05"),
    ("I arrived on 20 March 2018 and on the 2nd I found a flat.", "2018-04-02"),
    # a clause in the present or future takes no past year from the clause before it; a time opening a
    # progressive's clause is when the arranged act happens, so the next one
    ("The old bridge was built in 1890; in October they're closing it.", "2024-10-01..2024-10-31"),
    ("We first met in August 2010, and on the 20th we're celebrating.", "2024-05-20"),
    ("I've had this car since April 2016 but in June I'm selling it.", "2024-06-01..2024-06-30"),
    ("Tom and I met in May 2022, and on the 25th he's proposing.", "2024-05-25"),
    ("We met in May 2022, and on the 25th he'd proposed.", "2022-05-25"),
    # a weekday alone, or a run of two, is a day of the week named before it in its sentence
    ("Last week I saw her on Monday.", "2024-05-06"),
    ("Last week I was in Paris from Monday to Wednesday.", "2024-05-06..2024-05-08"),
    ("Next week I'm off on Thursday.", "2024-05-23"),
    ("Last week I worked Monday and Tuesday.", "2024-05-07"),
    ("Last week was rough, on Monday I'm starting fresh.", "2024-05-20"),  # ahead: no past Monday
    ("Next week? I saw her on Monday.", "2024-05-13"),  # another sentence
])
def test_a_bare_month_day_or_weekday_takes_its_year_month_or_week_from_the_time_before_it(text, expected):
    last = resolve_occurrences(text, observed("2024-05-15"))[-1]
    first, _, final = expected.partition("..")
    assert last.start is not None and last.end is not None, last.to_dict()
    assert (last.start.date(), last.end.date() - timedelta(days=1)) == (
        date.fromisoformat(first), date.fromisoformat(final or first))


@pytest.mark.parametrize(("text", "expressions"), [
    ("I just got back on May 3.", ["on May 3"]),  # the clause says when: "just" adds nothing
    ("I just got back from Rome the other day", ["the other day"]),
    ("I just got back from Rome, where I spent last week", ["last week"]),  # its sentence says when
    ("I just got back from my trip to Rome, 2 days ago.", ["2 days ago"]),
    ("Back in 2015 I was so broke, I just ate noodles every day.", ["in 2015"]),
    ("I just got back from Rome. Last week was wild.", ["just got", "Last week"]),  # another sentence
    ("I just booked my flight for next Friday!", ["just booked", "next Friday"]),  # a future time: both stand
    ("I just got home and just saw your message.", ["just got", "just saw"]),
    ("I'm currently reading the book I bought on May 3.", ["currently", "on May 3"]),
    ("It's not easy for us right now, my son had an accident last Tuesday", ["right now", "last Tuesday"]),
    ("Yesterday was rough. I just went to bed early.", ["Yesterday"]),  # "just" as "simply"
])
def test_just_gives_way_to_a_time_its_sentence_names(text, expressions):
    assert [o.expression for o in resolve_occurrences(text, observed("2024-05-15"))] == expressions


def test_days_past_the_calendar_claim_nothing_and_raise_nothing():
    edge = datetime(9999, 12, 20, 12, tzinfo=UTC)
    for text in ("I'll go Tuesday the 7th", "this coming weekend", "next year", "in two weeks we fly"):
        assert all(o.start is None or o.start.year == 9999 for o in resolve_occurrences(text, edge))
    assert resolve_occurrences("we met last year", datetime(1, 1, 2, tzinfo=UTC)) == []  # year 0 does not exist
    [previous] = resolve_occurrences("I left the previous Monday.", datetime(1, 1, 1, tzinfo=UTC))
    assert previous.start is None
    # a correction read as the calendar's last day: its span would end past year 9999
    found = resolve_occurrences("She said on the 15th, or rather the 31st", datetime(9999, 12, 30, tzinfo=UTC))
    assert [o.expression for o in found] == ["on the 15th"] and found[0].start.day == 15
    # a bare day read in the month of the day before it: the same last day, the same end past year 9999
    found = resolve_occurrences("On December 30 we met. On the 31st we left.", datetime(9999, 12, 30, tzinfo=UTC))
    assert found[0].expression == "On December 30" and found[0].start.day == 30
    assert all(o.start is None or o.start.year == 9999 for o in found)


def test_a_previous_weekday_with_no_time_before_it_is_the_last_one_and_does_not_chain():
    found = resolve_occurrences("He started the previous Monday, and twisted his knee the previous Friday.",
                                observed("2023-08-27"))  # a Sunday (a summary's date)
    assert [(o.start.date(), o.end.date()) for o in found if o.start and o.end] == [
        (date(2023, 8, 21), date(2023, 8, 22)), (date(2023, 8, 25), date(2023, 8, 26))]


def test_a_limit_counts_what_the_post_passes_keep():
    found = resolve_occurrences("I just got home and just saw your message. On May 3 I left.", observed("2024-05-15"),
                                limit=3)
    assert [o.expression for o in found] == ["just got", "just saw", "On May 3"]
    [first] = resolve_occurrences("I just got back on May 3.", observed("2024-05-15"), limit=1)
    assert first.expression == "on May 3"


def test_to_dict_has_exactly_the_documented_keys_with_utc_iso_strings():
    occ = only("I went to a support group yesterday", "2023-05-08")
    assert occ.to_dict() == {"expression": "yesterday", "start": "2023-05-07T00:00:00Z",
                             "end": "2023-05-08T00:00:00Z", "granularity": "day"}
    parsed = datetime.fromisoformat(occ.to_dict()["start"].replace("Z", "+00:00"))
    assert parsed == datetime(2023, 5, 7, tzinfo=UTC)


def test_several_expressions_come_back_in_text_order_with_spans():
    text = "Last week I scored 40 points, and next month we travel; it was 2 days ago too."
    found = resolve_occurrences(text, observed(MON))
    assert [o.expression for o in found] == ["Last week", "next month", "2 days ago"]
    assert all(text[o.span[0]:o.span[1]] == o.expression for o in found)


def test_observation_time_is_never_reported_as_an_occurrence():
    assert resolve_occurrences("I went to the museum with the kids.", observed(MON)) == []


def test_observation_uses_the_utc_date_of_an_aware_time_or_epoch():
    east = datetime(2023, 7, 17, 1, 0, tzinfo=timezone(timedelta(hours=3)))  # 2023-07-16 22:00 UTC
    assert only("yesterday", MON).start == datetime(2023, 7, 16, tzinfo=UTC)
    assert resolve_occurrences("yesterday", east)[0].start == datetime(2023, 7, 15, tzinfo=UTC)
    assert resolve_occurrences("yesterday", east.timestamp()) == resolve_occurrences("yesterday", east)


def test_naive_observation_time_is_refused():
    with pytest.raises(ValueError):
        resolve_occurrences("yesterday", datetime(2023, 7, 17))


def test_only_the_first_max_scan_chars_are_read():
    filler = "x " * (MAX_SCAN_CHARS // 2)
    assert resolve_occurrences("yesterday " + filler, observed(MON))[0].expression == "yesterday"
    assert resolve_occurrences(filler + " yesterday", observed(MON)) == []


def test_long_repetitive_input_finishes_and_is_bounded():
    found = resolve_occurrences("on Friday " * 10_000, observed(MON))
    assert 0 < len(found) <= MAX_SCAN_CHARS // len("on Friday ") + 1
    assert resolve_occurrences("", observed(MON)) == []


NOON = datetime(2024, 5, 15, 12, tzinfo=UTC).timestamp()  # a Wednesday


@dataclass(frozen=True)
class Node:
    summary: str
    latest_at: float | None
    created_at: float


@pytest.mark.parametrize(("row", "starts"), [
    ({"content": "I went there yesterday", "created_at": NOON}, ["2024-05-14T00:00:00Z"]),
    ({"summary": "Planned for next Friday.", "latest_at": NOON}, ["2024-05-17T00:00:00Z"]),
    ({"summary": "Met on Monday.", "latest_at": None, "created_at": NOON}, ["2024-05-13T00:00:00Z"]),
    (Node("Done last week.", NOON, 0.0), ["2024-05-06T00:00:00Z"]),
    (Node("Done last week.", None, NOON), ["2024-05-06T00:00:00Z"]),  # no latest_at: its creation time
    ({"content": "yesterday", "created_at": datetime(2024, 5, 15, 12, tzinfo=UTC)}, ["2024-05-14T00:00:00Z"]),
    ({"content": "a few days ago", "created_at": NOON}, [None]),  # unresolved, with its reason
    ({"content": "no time here", "created_at": NOON}, []),
    ({"content": "yesterday"}, []),  # no observation time: nothing is guessed
    ({"content": "yesterday", "created_at": True}, []),
    ({"content": "yesterday", "created_at": "2024-05-15"}, []),
    ({"content": "", "created_at": NOON}, []),
    ({"content": None, "summary": 7, "created_at": NOON}, []),
    ({"content": "yesterday", "created_at": 1e20}, []),  # a time past the calendar
])
def test_occurrences_for_reads_a_row_against_its_own_time(row, starts):
    assert [o.get("start") for o in occurrences_for(row)] == starts


def test_the_scan_stops_at_its_limit_and_reads_at_most_max_chars():
    text = "yesterday, today, last week and in March 2024"
    assert [o.expression for o in resolve_occurrences(text, observed(MON), limit=2)] == ["yesterday", "today"]
    assert resolve_occurrences(text, observed(MON), limit=0) == []
    assert [o.expression for o in resolve_occurrences(text, observed(MON), max_chars=12)] == ["yesterday"]
    assert len(resolve_occurrences("yesterday " * 5000, observed(MON), max_chars=10 ** 9)) == MAX_SCAN_CHARS // 10
    row = {"content": "x " * 3000 + "yesterday", "created_at": NOON}
    assert occurrences_for(row, max_chars=4000) == [] and occurrences_for(row)[0]["expression"] == "yesterday"


def test_occurrences_for_keeps_at_most_limit_in_text_order():
    row = {"content": "yesterday, today, last week and in March 2024", "created_at": NOON}
    assert [o["expression"] for o in occurrences_for(row)] == ["yesterday", "today", "last week", "in March 2024"]
    assert [o["expression"] for o in occurrences_for(row, limit=2)] == ["yesterday", "today"]
    assert occurrences_for(row, limit=-1) == []
    assert occurrences_for({"content": "a few days ago", "created_at": NOON}) == [
        {"expression": "a few days ago", "unresolved": "vague quantity"}]
