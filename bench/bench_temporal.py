"""Occurrence-time accuracy of dates.occurrence on LoCoMo temporal questions (no model).

Every turn's observation time is its session's ``session_N_date_time`` (read as UTC). For each
category-2 question whose gold answer is a date, a month, a year, or a relative form such as
"the week/weekend/Friday before <date>", "two weeks before <date>", "the week of <date>",
"first/last week(end) of <month>", the evidence turns (text only) go through
``resolve_occurrences`` and the question is a hit when a resolved interval matches the gold.

Matching. Each gold answer yields one or more accepted intervals:
  date -> that day; month -> that month; year -> that year;
  "(N) week(s) before X" -> the ISO week N weeks before X's week, or the 7 days [X-7N, X-7N+7);
  "the week of X" -> X's ISO week; "(N) weekend(s) before X" -> the N-th Saturday+Sunday that
  ends before X; "<weekday> before/after X" -> the nearest such day strictly before/after X;
  "first/last week of M" -> days 1-7 (last 7 days) of M, or the ISO week holding M's first
  (last) Thursday; "first/last weekend of M" -> the first (last) Saturday+Sunday starting in M.
  A gold date without a year takes the year of the first evidence turn's observation.
Exact hit: some resolved occurrence interval equals an accepted interval. Loose hit: exact, or
an occurrence interval lies inside an accepted interval, or contains one while being at most
7 days long. Typos and approximate golds ("around", "early", seasons, durations) are not
eligible and are counted separately.

    python bench/bench_temporal.py [--data ../shared/data/locomo-dev.json] [--examples 3]
"""
from __future__ import annotations

import argparse
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _locomo import DEFAULT_DATA, evidence_ids, load_dev_split, sessions  # noqa: E402

_MONTHS = {name: index + 1 for index, name in enumerate(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
     "november", "december"])}
_WEEKDAYS = {name: index for index, name in enumerate(
    ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"])}
_COUNTS = {"": 1, "one": 1, "two": 2, "three": 3, "four": 4, "2": 2, "3": 3, "4": 4}
_M = "(" + "|".join(_MONTHS) + ")"
_DAY_MONTH_YEAR = re.compile(rf"(\d{{1,2}})(?:st|nd|rd|th)? {_M},? (\d{{4}})")
_MONTH_DAY_YEAR = re.compile(rf"{_M} (\d{{1,2}})(?:st|nd|rd|th)?,? (\d{{4}})")
_DAY_MONTH = re.compile(rf"(\d{{1,2}})(?:st|nd|rd|th)? {_M}")
_MONTH_DAY = re.compile(rf"{_M} (\d{{1,2}})(?:st|nd|rd|th)?")
_MONTH_YEAR = re.compile(rf"{_M}[,.]? ?(\d{{4}})")
_YEAR = re.compile(r"(\d{4})")
_RELATIVE = re.compile(r"(?:the |last )?(two |three |four |2 |3 |4 )?(week|weekend|" + "|".join(_WEEKDAYS)
                       + r")s? (before|after|of) (.+)")
_OF_MONTH = re.compile(r"(?:the )?(first|last) (week|weekend) of (.+)")


@dataclass(frozen=True)
class Gold:
    kind: str
    accepted: tuple[tuple[date, date], ...]


def parse_day(text: str, default_year: int) -> date | None:
    for pattern, order in ((_DAY_MONTH_YEAR, "dmy"), (_MONTH_DAY_YEAR, "mdy"), (_DAY_MONTH, "dm"),
                           (_MONTH_DAY, "md")):
        match = pattern.fullmatch(text)
        if match:
            parts = dict(zip(order, match.groups(), strict=True))
            year = int(parts.get("y", default_year))
            try:
                return date(year, _MONTHS[parts["m"]], int(parts["d"]))
            except ValueError:
                return None
    return None


def month_bounds(year: int, month: int) -> tuple[date, date]:
    end = date(year + (month == 12), month % 12 + 1, 1)
    return date(year, month, 1), end


def parse_gold(answer: object, default_year: int) -> Gold | None:
    """The gold answer as accepted intervals, or None when it is not a date-like answer."""
    text = " ".join(str(answer).lower().replace(",", ", ").split()).strip(" .")
    text = re.sub(r" ,", ",", re.sub(r"^(in|on) ", "", text))
    day = parse_day(text, default_year)
    if day:
        return Gold("date", ((day, day + timedelta(days=1)),))
    if match := _MONTH_YEAR.fullmatch(text):
        return Gold("month", (month_bounds(int(match.group(2)), _MONTHS[match.group(1)]),))
    if match := _YEAR.fullmatch(text):
        year = int(match.group(1))
        return Gold("year", ((date(year, 1, 1), date(year + 1, 1, 1)),))
    if match := _OF_MONTH.fullmatch(text):
        return _of_month(match.group(1), match.group(2), match.group(3))
    if match := _RELATIVE.fullmatch(text):
        anchor = parse_day(match.group(4), default_year)
        if anchor is None:
            return None
        return _relative(_COUNTS[(match.group(1) or "").strip()], match.group(2), match.group(3), anchor)
    return None


def _relative(count: int, unit: str, relation: str, anchor: date) -> Gold | None:
    monday = anchor - timedelta(days=anchor.weekday())
    if unit == "week":
        if relation == "of":
            return Gold("week of", ((monday, monday + timedelta(days=7)),)) if count == 1 else None
        sign = -1 if relation == "before" else 1
        iso = monday + timedelta(days=7 * sign * count)
        rolling = anchor - timedelta(days=7 * count) if sign < 0 else anchor + timedelta(days=1 + 7 * (count - 1))
        return Gold(f"week {relation}", ((iso, iso + timedelta(days=7)), (rolling, rolling + timedelta(days=7))))
    if relation == "of":
        return None
    if unit == "weekend":
        saturday = anchor - timedelta(days=(anchor.weekday() - 5) % 7 or 7)
        if saturday + timedelta(days=1) >= anchor:
            saturday -= timedelta(days=7)
        if relation == "after":
            saturday = anchor + timedelta(days=(5 - anchor.weekday() - 1) % 7 + 1)
        saturday += timedelta(days=7 * (count - 1) * (1 if relation == "after" else -1))
        return Gold(f"weekend {relation}", ((saturday, saturday + timedelta(days=2)),))
    weekday = _WEEKDAYS[unit]
    if relation == "before":
        day = anchor - timedelta(days=(anchor.weekday() - weekday - 1) % 7 + 1 + 7 * (count - 1))
    else:
        day = anchor + timedelta(days=(weekday - anchor.weekday() - 1) % 7 + 1 + 7 * (count - 1))
    return Gold(f"weekday {relation}", ((day, day + timedelta(days=1)),))


def _of_month(which: str, unit: str, rest: str) -> Gold | None:
    match = _MONTH_YEAR.fullmatch(rest)
    if not match:
        return None
    first, end = month_bounds(int(match.group(2)), _MONTHS[match.group(1)])
    last = end - timedelta(days=1)
    if unit == "weekend":
        saturday = first + timedelta(days=(5 - first.weekday()) % 7) if which == "first" else (
            last - timedelta(days=(last.weekday() - 5) % 7))
        return Gold(f"{which} weekend of month", ((saturday, saturday + timedelta(days=2)),))
    thursday = first + timedelta(days=(3 - first.weekday()) % 7) if which == "first" else (
        last - timedelta(days=(last.weekday() - 3) % 7))
    iso = thursday - timedelta(days=3)
    days = (first, first + timedelta(days=7)) if which == "first" else (end - timedelta(days=7), end)
    return Gold(f"{which} week of month", ((iso, iso + timedelta(days=7)), days))


def judge(gold: Gold, spans: list[tuple[date, date]]) -> tuple[bool, bool]:
    exact = any(span in gold.accepted for span in spans)
    loose = exact or any(
        (g0 <= o0 and o1 <= g1) or (o0 <= g0 and g1 <= o1 and (o1 - o0).days <= 7)
        for o0, o1 in spans for g0, g1 in gold.accepted)
    return exact, loose


def turns_by_dia(conversation: dict[str, Any]) -> dict[str, tuple[datetime | None, str]]:
    found: dict[str, tuple[datetime | None, str]] = {}
    for _, stamp, turns in sessions(conversation):
        for turn in turns:
            found[str(turn.get("dia_id"))] = (stamp, str(turn.get("text") or ""))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--examples", type=int, default=3)
    args = parser.parse_args(argv)
    samples = load_dev_split(args.data, "bench_temporal")
    if samples is None:
        return 0
    from hermes_trove.dates import resolve_occurrences

    category2 = eligible = exact_hits = loose_hits = 0
    ineligible: Counter[str] = Counter()
    skipped: list[str] = []
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses: dict[str, list[str]] = defaultdict(list)
    observation_fallback = 0
    for sample in samples:
        turns = turns_by_dia(sample["conversation"])
        for qa in sample.get("qa", []):
            if qa.get("category") != 2:
                continue
            category2 += 1
            dia_ids = evidence_ids(qa.get("evidence"))
            evidence = [turns[d] for d in dia_ids if d in turns and turns[d][0] is not None]
            if not evidence:
                ineligible["no evidence turn"] += 1
                continue
            first_stamp = evidence[0][0]
            assert first_stamp is not None
            gold = parse_gold(qa.get("answer"), first_stamp.year)
            if gold is None:
                ineligible["answer not a date/month/year/relative form"] += 1
                skipped.append(str(qa.get("answer")))
                continue
            eligible += 1
            found = [(stamp, occ) for stamp, text in evidence for occ in resolve_occurrences(text, stamp)]
            spans = [(occ.start.date(), occ.end.date()) for _, occ in found if occ.start and occ.end]
            exact, loose = judge(gold, spans)
            exact_hits += exact
            loose_hits += loose
            by_kind[gold.kind][0] += 1
            by_kind[gold.kind][1] += exact
            if exact:
                continue
            reason = ("no expression found" if not found else "unresolved only" if not spans else "wrong interval")
            if reason == "no expression found":
                days = [(s.date(), s.date() + timedelta(days=1)) for s, _ in evidence if s]
                observation_fallback += judge(gold, days)[0]
            note = " (loose hit)" if loose else ""
            shown = "; ".join(f"{o.to_dict()}" for _, o in found) or "-"
            misses[reason].append(f"gold {qa.get('answer')!r} obs {first_stamp:%Y-%m-%d %a}{note}\n"
                                  f"      text: {evidence[0][1][:160]!r}\n      found: {shown[:300]}")

    print(f"category-2 questions: {category2}; eligible (date-like gold with evidence): {eligible}")
    for why, count in ineligible.most_common():
        print(f"  not eligible, {why}: {count}")
    if skipped:
        print(f"  e.g. {', '.join(repr(answer) for answer in skipped[: max(args.examples * 3, 6)])}")
    if eligible:
        print(f"exact-hit rate: {exact_hits / eligible:.3f} ({exact_hits}/{eligible})")
        print(f"loose-hit rate: {loose_hits / eligible:.3f} ({loose_hits}/{eligible})")
    print("exact hits by gold kind:")
    for kind, (total, hits) in sorted(by_kind.items()):
        print(f"  {kind:<24} {hits:>3}/{total:<3}")
    print("misses (exact) by reason:")
    for reason, rows in sorted(misses.items(), key=lambda item: -len(item[1])):
        print(f"  {reason}: {len(rows)}")
        for row in rows[: args.examples]:
            print(f"    - {row}")
    if misses.get("no expression found"):
        print(f"  (of the 'no expression found' misses, {observation_fallback} have the observation day as gold)")
    throughput(samples, resolve_occurrences)
    return 0


def throughput(samples: list[dict[str, Any]], resolve: Any) -> None:
    messages = [(stamp, text) for sample in samples for stamp, text in turns_by_dia(sample["conversation"]).values()
                if stamp is not None]
    best = float("inf")
    expressions = 0
    for _ in range(3):
        started = time.perf_counter()
        expressions = sum(len(resolve(text, stamp)) for stamp, text in messages)
        best = min(best, time.perf_counter() - started)
    chars = sum(len(text) for _, text in messages)
    print(f"throughput: {len(messages)} messages ({chars} chars, {expressions} expressions) in {best:.3f}s "
          f"-> {len(messages) / best:,.0f} messages/s")


if __name__ == "__main__":
    raise SystemExit(main())
