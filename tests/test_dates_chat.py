"""Chat lines of the kind two friends write over months (family, work, hobbies, trips), each with
the day it was said and the intervals a careful reader gives its times: inclusive days
``first..last`` (one day alone for a single day), or nothing at all for a line whose time words
name no day (a habit, a kind of thing, a name).

Rows come in pairs of sides: where a rule fires and where the same words must not. The set was
written from how people talk, not from any benchmark.
"""
from __future__ import annotations

from datetime import UTC, datetime

import pytest
from conftest import expected_interval

from hermes_trove.dates import resolve_occurrences

WED = "2024-05-15"  # a Wednesday: the last Saturday is the 11th, the next one the 18th
SUN = "2023-08-20"  # a Sunday: the last Tuesday is the 15th, the next Friday the 25th
TUE = "2023-03-07"  # a Tuesday: the next Thursday is the 9th
FRI = "2023-07-21"  # a Friday
THU = "2023-11-16"  # a Thursday: the last Sunday is the 12th, the next Saturday the 18th
HALLOWEEN = "2024-10-31"  # a Thursday

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
    # -- tired, sore or still recovering "after"/"from" a day: what that day left behind -------------
    (WED, "I'm so tired after Saturday.", ("2024-05-11",)),
    (WED, "Still tired from Monday, that hike wrecked me.", ("2024-05-13",)),
    (WED, "I'm still recovering from Saturday night, lol.", ("2024-05-11",)),
    (WED, "My legs are still sore from Sunday's run.", ("2024-05-12",)),
    (WED, "I'll be so tired after Saturday.", ("2024-05-18",)),
    (WED, "I'm free after Saturday.", ()),
    # -- a story told in the present ("calls me and says") happened: the last such day ---------------
    (WED, "So my boss calls me on Friday and says I got the promotion!", ("2024-05-10",)),
    (WED, "So on Saturday this guy walks up to me at the park and asks for directions in French.", ("2024-05-11",)),
    (SUN, "So I'm at the store on Thursday and who do I see but my old teacher.", ("2023-08-17",)),
    (WED, "So my parents arrive on Friday and we leave on Sunday.", ("2024-05-17", "2024-05-19")),
    (WED, "The new cafe opens on Friday and looks amazing.", ("2024-05-17",)),
    (WED, "My boss will call me on Friday and tell me.", ("2024-05-17",)),
    (WED, "She always texts on Friday and asks how I'm doing.", ()),  # a habit, no story
    # -- a plan of yours or ours, reported in the past, that a question goes on to arrange: ahead -----
    (WED, "You said you'd come over on Friday, where should we meet?", ("2024-05-17",)),
    (WED, "You mentioned you'd be in town on Saturday, want to grab lunch?", ("2024-05-18",)),
    (WED, "You said you'd finish the report on Tuesday, where is it?", ("2024-05-14",)),
    (WED, "He said he'd pay me back on Friday, what should I do?", ()),
    (WED, "You said you'd come on Friday?", ()),
    # -- remembering a thing, thanking for a deed: past; good luck, remembering to: ahead ------------
    (WED, "Remember the storm on Tuesday? Our fence blew down.", ("2024-05-14",)),
    (WED, "Remember to call grandma on Sunday!", ("2024-05-19",)),
    (WED, "Thanks again for helping me move on Saturday!", ("2024-05-11",)),
    (WED, "Thanks for the invite for Saturday, I'll be there!", ("2024-05-18",)),
    (WED, "Thanks for asking about Saturday, it's a long story.", ()),  # a topic, not the thing done
    (WED, "Good luck with the exam on Thursday!", ("2024-05-16",)),
    (WED, "Good luck was on our side on Saturday.", ("2024-05-11",)),
    # -- "couldn't" + a plain verb with no "if": a past inability ------------------------------------
    (WED, "Sorry I couldn't make it on Saturday!", ("2024-05-11",)),
    (WED, "Couldn't you come on Saturday instead?", ("2024-05-18",)),  # a request
    (WED, "I couldn't be happier about Saturday!", ()),  # a state now
    # -- a name's "'s" before coming or going is "is": an arrangement; before a noun a possessive -----
    (WED, "Mom's coming to visit on Friday.", ("2024-05-17",)),
    (WED, "Jake's leaving for college on Sunday.", ("2024-05-19",)),
    (WED, "Mom's cooking on Sunday was amazing.", ("2024-05-12",)),
    # -- a month opening a sentence in the simple present, with no tense cue: a habit ----------------
    (WED, "In August the city empties out.", ()),
    (WED, "In December everyone goes a little crazy with the lights.", ()),
    (WED, "In April it rains a lot here.", ()),
    (WED, "In March we moved into the new apartment.", ("2024-03-01..2024-03-31",)),
    (WED, "In July we're going to Portugal!", ("2024-07-01..2024-07-31",)),
    (WED, "In January the gym was packed.", ("2024-01-01..2024-01-31",)),
    (WED, "I started running in January.", ("2024-01-01..2024-01-31",)),
    (WED, "In November the days get so short.", ()),
    (WED, "In November the days were so short.", ("2023-11-01..2023-11-30",)),
    # -- "I've got" a thing on a day holds it as "I have" does; "I got" is past ----------------------
    (WED, "I've got a big presentation on Monday.", ("2024-05-20",)),
    (WED, "I got a sunburn on Saturday.", ("2024-05-11",)),
    (WED, "I've got to work on Saturday.", ("2024-05-18",)),  # as "I have to"
    (WED, "I've got photos from Saturday to share.", ("2024-05-11",)),  # got them then
    # -- "thinking of (about) doing" is a plan --------------------------------------------------------
    (WED, "I'm thinking of going to the lake on Saturday.", ("2024-05-18",)),
    (WED, "I was thinking of you on Saturday.", ("2024-05-11",)),
    # -- "go back" is a return: a timetable's plain form -----------------------------------------------
    (WED, "I go back to work on Monday, ugh.", ("2024-05-20",)),
    (WED, "The kids go back to school on Tuesday.", ("2024-05-21",)),
    (WED, "We always go back to Grandma's on Sunday.", ()),
    # -- "a Tuesday" is some Tuesday, no day; a recent birth with its weekday is that day -------------
    (WED, "She was born on a Tuesday.", ()),
    (WED, "It happened on a Tuesday, I think.", ()),
    (WED, "My niece was born on Tuesday, she's tiny and perfect!", ("2024-05-14",)),
    (WED, "Our baby boy was born on Saturday, we're exhausted but so happy.", ("2024-05-11",)),
    (WED, "I was born in August, so I'm a Leo.", ()),
    (WED, "She was born on a Sunday morning in June.", ()),
    # -- "still on?", "still good?" asks whether a plan stands; "still nothing" says it went by -------
    (WED, "We said we'd meet on Friday, still good?", ("2024-05-17",)),
    (WED, "She said she'd call on Friday, still nothing.", ("2024-05-10",)),
    (WED, "Hey, are we still on for Wednesday?", ("2024-05-22",)),
    (WED, "We were still on the road on Wednesday.", ("2024-05-08",)),
    # -- the state and its "from"/"after" may stand apart from the day: "sore from the gym on Saturday" -
    (WED, "I'm sore from the gym on Saturday.", ("2024-05-11",)),
    (WED, "I'm exhausted from the move on Sunday.", ("2024-05-12",)),
    (WED, "I'll be sore from the gym on Saturday.", ("2024-05-18",)),
    # -- thanks for a thing done; "let me know how it goes"; a request opening its sentence ----------
    (FRI, "Thanks for the lovely dinner on Tuesday!", ("2023-07-18",)),
    (FRI, "Let me know how Monday goes!", ("2023-07-24",)),
    (FRI, "Let me know how Monday went!", ("2023-07-17",)),
    (FRI, "Say hi to your mom for me on Sunday!", ("2023-07-23",)),
    (FRI, "Bring the blue cooler on Saturday.", ("2023-07-22",)),
    (FRI, "Enjoyed the concert on Wednesday!", ("2023-07-19",)),
    # -- "Happy Friday!" greets the day it is said on; "every other Thursday" is a habit ---------------
    (FRI, "Happy Friday!", ("2023-07-21",)),
    (WED, "Happy Friday!", ()),
    (WED, "I have book club every other Thursday.", ()),
    # -- playing at an event is one event, not a routine -----------------------------------------------
    (WED, "Our band plays at the brewery on Saturday night, come!", ("2024-05-18",)),
    (WED, "My son plays in a soccer game on Saturday.", ("2024-05-18",)),
    (THU, "My brother's band plays on Friday, wanna come?", ("2023-11-17",)),  # a possessive in the subject
    # -- a past verb is no noun of a subject: "the kids decorated cookies" is no "cookies" timetable --
    (THU, "The kids decorated cookies on Sunday afternoon.", ("2023-11-12",)),
    # -- "did you have" asks about a past; "Have fun!" opening a sentence wishes for later ------------
    (THU, "Did you have fun at the wedding on Saturday?", ("2023-11-11",)),
    (THU, "Have fun at the wedding on Saturday!", ("2023-11-18",)),
    (THU, "Do you have plans on Saturday?", ("2023-11-18",)),
    # -- "get here/there/back/home" is arriving: a timetable's plain form -----------------------------
    (THU, "My grandparents get here on Saturday.", ("2023-11-18",)),
    (THU, "My grandparents got here on Saturday.", ("2023-11-11",)),
    # -- a story in the present goes on with "and my boss says" too ------------------------------------
    (THU, "So Monday I walk into the office and my boss says we're all getting a bonus.", ("2023-11-13",)),
    # -- full from a day; dreading one; hoping one went well ---------------------------------------------
    (THU, "I'm so full from Sunday dinner at my aunt's.", ("2023-11-12",)),
    (THU, "Dreading Monday already.", ("2023-11-20",)),
    (THU, "Hope Tuesday went well!", ("2023-11-14",)),
    (THU, "Hope Tuesday goes well!", ("2023-11-21",)),
    # -- a weekday and its part of the day qualifying a noun name a kind -----------------------------
    (THU, "Our Tuesday night trivia team finally won!", ()),
    (THU, "The Tuesday night game was a blowout.", ("2023-11-14",)),
    # -- a wish for "a nice weekend": the coming one or the last one, by tense ------------------------
    (WED, "Hope you had a nice weekend!", ("2024-05-11..2024-05-12",)),
    (WED, "Hope you have a nice weekend!", ("2024-05-18..2024-05-19",)),
    (WED, "Have a great weekend!", ("2024-05-18..2024-05-19",)),
    (SUN, "Did you have a good weekend?", ("2023-08-19..2023-08-20",)),
    (WED, "We always have a nice weekend.", ()),
    (WED, "What a nice weekend that was.", ()),
    # -- "Happy Halloween!" greets the day it is said on, when it is that day ----------------------------
    (HALLOWEEN, "Happy Halloween!", ("2024-10-31",)),
    (WED, "Happy Halloween!", ()),
    # -- a hyphenated word stays one word between an arrangement and its time ---------------------------
    (TUE, "I have a parent-teacher conference on Wednesday afternoon.", ("2023-03-08",)),
    (TUE, "I have a meeting - and then lunch on Wednesday.", ()),
    # -- a possessive in a noun subject ("my daughter's school has") --------------------------------------
    (HALLOWEEN, "My daughter's school has a parade on Friday.", ("2024-11-01",)),
    # -- "is"/"are" after a subject in a month-opened sentence with no tense cue: generic ---------------
    (SUN, "In September the weather here is perfect.", ()),
    (SUN, "In September the weather here was perfect.", ("2022-09-01..2022-09-30",)),
    # -- a dated time as the subject of a present "is" is the next one; "was" the last -----------------
    (WED, "The first weekend of June is my brother's wedding.", ("2024-06-01..2024-06-02",)),
    (WED, "The first weekend of June was my brother's wedding.", ("2023-06-03..2023-06-04",)),
    (WED, "The end of June is when we move.", ("2024-06-21..2024-06-30",)),
    (WED, "Saturday is my favorite day.", ()),
    (WED, "On the 3rd we're walking around the Colosseum and it starts pouring.", ()),  # a story, no "is"
    # -- "run" after a plural subject is a timetable's ---------------------------------------------------
    (WED, "My exams run from June 3 through June 14.", ("2024-06-03..2024-06-14",)),
    (WED, "We run on Saturdays.", ()),
    # -- short -ed pasts ("dyed", "tied") are pasts; "still coming?" asks whether a plan stands ---------
    (WED, "We dyed Easter eggs with the kids on Saturday.", ("2024-05-11",)),
    (WED, "We tied the knot on Saturday!", ("2024-05-11",)),
    (WED, "I used to swim on Saturday.", ()),  # "used to": a habit, no past day
    (WED, "You said you'd come to the game on Sunday, are you still coming?", ("2024-05-19",)),
    (WED, "You said you'd come to the game on Sunday, where were you?", ("2024-05-12",)),
    # -- more lines of the same kinds, each read by one of the rules above ---------------------------
    ("2024-05-15", "The Saturday hike was brutal but the views were worth it.", ("2024-05-11",)),
    ("2023-10-12", "The Saturday shift at the cafe was chaos.", ("2023-10-07",)),
    ("2023-10-12", "The Wednesday standup ran over again.", ("2023-10-11",)),
    ("2023-10-12", "I'm still buzzing from Friday's concert.", ("2023-10-06",)),
    ("2023-10-12", "Totally wiped out after Sunday's hike.", ("2023-10-08",)),
    ("2023-10-12", "So Tuesday my neighbor knocks on the door and asks if I've seen her cat.", ("2023-10-10",)),
    ("2023-10-12", "My grandparents fly in on Saturday, so I'm cleaning like crazy.", ("2023-10-14",)),
    ("2023-10-12", "The twins start kindergarten on Monday.", ("2023-10-16",)),
    ("2023-10-12", "Our choir rehearses on Tuesday and Thursday evenings.", ()),
    ("2023-10-12", "My husband works on Saturday, so it's just me and the kids.", ()),
    ("2023-10-12", "You said we'd go fishing on Saturday, what time should I pick you up?", ("2023-10-14",)),
    ("2023-10-12", "Thanks for watching the dog on Sunday!", ("2023-10-08",)),
    ("2023-10-12", "Good luck at the audition on Monday!", ("2023-10-16",)),
    ("2023-10-12", "Remember the concert on Friday? Best night ever.", ("2023-10-06",)),
    ("2023-10-12", "Are you around on Sunday?", ("2023-10-15",)),
    ("2023-10-12", "Dad's driving up on Sunday.", ("2023-10-15",)),
    ("2023-10-12", "My mom has surgery on Tuesday, I'm nervous.", ("2023-10-17",)),
    ("2022-01-09", "I'm so hungover from Saturday.", ("2022-01-08",)),
    ("2023-05-08", "The Sunday barbecue got rained out.", ("2023-05-07",)),
    ("2023-05-08", "So Friday night my husband surprises me with concert tickets and says pack a bag.",
     ("2023-05-05",)),
    ("2023-05-08", "In May the garden goes crazy.", ()),
    ("2023-07-21", "Wednesday's storm took out a tree in our yard.", ("2023-07-19",)),
    ("2023-11-16", "The Saturday market was packed, we got so many apples.", ("2023-11-11",)),
    ("2023-11-16", "Still recovering from Sunday's game, my voice is gone.", ("2023-11-12",)),
    ("2023-11-16", "You said you'd help me paint on Saturday, still on?", ("2023-11-18",)),
    ("2023-11-16", "Thanks for the ride on Monday!", ("2023-11-13",)),
    ("2023-11-16", "Are you busy on Sunday?", ("2023-11-19",)),
    ("2023-11-16", "Sarah's visiting on the weekend.", ("2023-11-18..2023-11-19",)),
    ("2024-02-07", "The Saturday class was cancelled because of snow.", ("2024-02-03",)),
    ("2024-02-07", "Tuesday's dinner at your place was lovely, thank you!", ("2024-02-06",)),
    ("2024-02-07", "My son's team plays in the final on Sunday.", ("2024-02-11",)),
    ("2024-02-07", "My cousins land on Friday morning.", ("2024-02-09",)),
    ("2024-02-07", "Still sore from Saturday's climbing session.", ("2024-02-03",)),
    ("2024-02-07", "You mentioned you'd bring dessert on Friday, what are you making?", ("2024-02-09",)),
    ("2024-02-07", "Thanks so much for the card on Monday.", ("2024-02-05",)),
    ("2024-02-07", "In February everyone here gets the flu.", ()),
    ("2024-02-07", "I've got a job interview on Friday!", ("2024-02-09",)),
    ("2024-02-07", "I'm exhausted after the funeral on Saturday.", ("2024-02-03",)),
    ("2024-05-15", "The Sunday paper had a great article on it.", ("2024-05-12",)),
    ("2024-05-15", "Remember to water the plants on Thursday.", ("2024-05-16",)),
    ("2024-05-15", "In August the festival returns to the park.", ()),
    # -- a frequency word makes a plural subject's timetable, or what it has on a day, a habit ----------
    (WED, "My parents always come on Sunday for dinner.", ()),
    (WED, "My parents sometimes come on Saturday, sometimes Sunday.", ()),
    (WED, "My in-laws often visit on Sunday.", ()),
    (WED, "My kids always have practice on Tuesday.", ()),
    (WED, "My sisters always fly in on Thursday.", ()),
    (WED, "My parents arrive on Saturday, as always.", ("2024-05-18",)),
    (WED, "My kids have a piano recital on Thursday.", ("2024-05-16",)),
    # -- "the <weekday> <noun>s were", or a past told as a habit, is every such day's --------------------
    (WED, "The Friday meetings were always a waste of time.", ()),
    (WED, "The Sunday dinners at grandma's were legendary growing up.", ()),
    (WED, "The Sunday roast was a family tradition growing up.", ()),
    (WED, "The Tuesday class was always my favorite.", ()),
    (WED, "The Friday party was so much fun.", ("2024-05-10",)),
    (WED, "The Tuesday trivia night was packed.", ("2024-05-14",)),
    # -- a short -ed participle after a present "be" is a state then, as "I'm booked" is -----------------
    (WED, "I'm tied up on Friday, sorry.", ("2024-05-17",)),
    (WED, "We're tied up on Monday with the movers.", ("2024-05-20",)),
    (WED, "I tied up the loose ends on Friday.", ("2024-05-10",)),
    # -- a request for a thing of a day ("from", "about", "of" before it) says nothing of when it is ------
    (WED, "Send me the pics from Saturday!", ()),
    (WED, "Give me the recap of Monday's meeting.", ()),
    (WED, "Don't ask about Saturday, it was a disaster.", ("2024-05-11",)),
    (WED, "Send me the address for Saturday.", ("2024-05-18",)),
    # -- thanks for a thing for a day or for an offer is no past; "thanks in advance" looks ahead --------
    (WED, "Thanks for the invite for Saturday!", ()),
    (WED, "Thanks for offering to drive on Friday.", ()),
    (WED, "Thanks in advance for Saturday!", ("2024-05-18",)),
    (WED, "Thanks again for Saturday, it was perfect.", ("2024-05-11",)),
    # -- a timetable verb in a later "when"/"if" clause is that clause's, not the time's -----------------
    (WED, "Bring the photos from Sunday when you come.", ()),
    (WED, "If you come on Friday, bring the wine.", ("2024-05-17",)),
    (WED, "Our parents visit on Sunday, can you come?", ("2024-05-19",)),
    # -- "happy" greets only opening its sentence or after "a"; after "I'm so" it is a feeling -----------
    (WED, "I'm so happy Saturday went well.", ("2024-05-11",)),
    (WED, "I'm happy Friday is almost here.", ("2024-05-17",)),
    (WED, "Wishing you a happy Wednesday!", ("2024-05-15",)),
    (WED, "Happy Friday to you too!", ()),
]


@pytest.mark.parametrize(("observed", "text", "expected"), CHAT, ids=[f"{row[0]} {row[1]}" for row in CHAT])
def test_chat_line_means_its_intervals(observed, text, expected):
    at = datetime.fromisoformat(observed).replace(hour=15, tzinfo=UTC)
    found = resolve_occurrences(text, at)
    resolved = {(o.start.date(), o.end.date()) for o in found if o.start is not None and o.end is not None}
    assert resolved == {expected_interval(item) for item in expected}, [o.to_dict() for o in found]


def test_the_chat_table_has_no_duplicate_rows():
    assert len({(observed, text) for observed, text, _ in CHAT}) == len(CHAT)
