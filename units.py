"""Units and quantities: the unit table trove_compute converts within, and the numbers a quote holds.

A unit belongs to one dimension (time, calendar, length, mass, volume, data, money:<code>,
count) and converts only inside it; months and years form their own ``calendar`` dimension
because they have no fixed length in days. Money never converts: each currency is its own
dimension. Pure, no I/O.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Unit:
    name: str        # canonical name shown in answers
    dimension: str
    factor: float    # size in the dimension's base unit


def _units() -> dict[str, Unit]:
    table: list[tuple[str, str, float, tuple[str, ...]]] = [
        ("second", "time", 1, ("s", "sec", "secs", "second", "seconds")),
        ("minute", "time", 60, ("min", "mins", "minute", "minutes")),
        ("hour", "time", 3600, ("h", "hr", "hrs", "hour", "hours")),
        ("day", "time", 86400, ("day", "days")),
        ("week", "time", 604800, ("wk", "wks", "week", "weeks")),
        ("month", "calendar", 1, ("month", "months")),
        ("year", "calendar", 12, ("yr", "yrs", "year", "years")),
        ("mm", "length", 0.001, ("mm", "millimeter", "millimeters", "millimetre", "millimetres")),
        ("cm", "length", 0.01, ("cm", "centimeter", "centimeters", "centimetre", "centimetres")),
        ("m", "length", 1, ("m", "meter", "meters", "metre", "metres")),
        ("km", "length", 1000, ("km", "kms", "kilometer", "kilometers", "kilometre", "kilometres")),
        ("inch", "length", 0.0254, ("in", "inch", "inches")),
        ("foot", "length", 0.3048, ("ft", "foot", "feet")),
        ("yard", "length", 0.9144, ("yd", "yds", "yard", "yards")),
        ("mile", "length", 1609.344, ("mi", "mile", "miles")),
        ("mg", "mass", 0.001, ("mg", "milligram", "milligrams")),
        ("g", "mass", 1, ("g", "gram", "grams")),
        ("kg", "mass", 1000, ("kg", "kgs", "kilo", "kilos", "kilogram", "kilograms")),
        ("tonne", "mass", 1_000_000, ("tonne", "tonnes")),
        ("lb", "mass", 453.59237, ("lb", "lbs", "pound", "pounds")),
        ("oz", "mass", 28.349523125, ("oz", "ounce", "ounces")),
        ("ml", "volume", 0.001, ("ml", "milliliter", "milliliters", "millilitre", "millilitres")),
        ("l", "volume", 1, ("l", "liter", "liters", "litre", "litres")),
        ("gallon", "volume", 3.785411784, ("gal", "gallon", "gallons")),
        ("quart", "volume", 0.946352946, ("qt", "quart", "quarts")),
        ("pint", "volume", 0.473176473, ("pint", "pints")),
        ("cup", "volume", 0.2365882365, ("cup", "cups")),
        ("byte", "data", 1, ("b", "byte", "bytes")),
        ("KB", "data", 1e3, ("kb", "kilobyte", "kilobytes")),
        ("MB", "data", 1e6, ("mb", "megabyte", "megabytes")),
        ("GB", "data", 1e9, ("gb", "gigabyte", "gigabytes")),
        ("TB", "data", 1e12, ("tb", "terabyte", "terabytes")),
        ("KiB", "data", 1024.0, ("kib",)),
        ("MiB", "data", 1024.0 ** 2, ("mib",)),
        ("GiB", "data", 1024.0 ** 3, ("gib",)),
        ("TiB", "data", 1024.0 ** 4, ("tib",)),
    ]
    money = [(code, f"money:{code}", 1.0, aliases) for code, aliases in CURRENCIES.items()]
    return {alias: Unit(name, dimension, float(factor)) for name, dimension, factor, aliases in table + money
            for alias in aliases}


CURRENCIES: dict[str, tuple[str, ...]] = {
    "USD": ("$", "usd", "us$", "dollar", "dollars", "bucks"),
    "EUR": ("€", "eur", "euro", "euros"),
    "GBP": ("£", "gbp", "quid"),
    "JPY": ("¥", "jpy", "yen"),
    "CAD": ("cad", "c$"),
    "AUD": ("aud", "a$"),
    "CHF": ("chf",),
    "INR": ("₹", "inr", "rupee", "rupees"),
}
UNITS = _units()
SPACED_AMBIGUOUS = frozenset({"in", "a", "s", "b", "h", "m", "g", "l"})
SYMBOLS = ("us$", "c$", "a$", "$", "€", "£", "¥", "₹")
NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS.update({"thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
                     "ninety": 90, "hundred": 100, "a dozen": 12, "dozen": 12, "a couple": 2, "twice": 2,
                     "once": 1, "thrice": 3})
_SYMBOL = "|".join(re.escape(s) for s in SYMBOLS)
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|\.\d+"
_WORD = "|".join(sorted((re.escape(w) for w in NUMBER_WORDS), key=len, reverse=True))
QUANTITY = re.compile(
    rf"(?P<sym>{_SYMBOL})?\s?(?:(?P<num>(?<![\w.])(?:{_NUM}))|(?P<word>\b(?:{_WORD})\b))"
    r"(?:\s?(?P<unit>[A-Za-z$€£¥₹]{1,12}\b))?", re.I)


@dataclass(frozen=True)
class Quantity:
    """A number a quote holds, with the unit written next to it (None when there is none)."""

    value: float
    unit: Unit | None
    text: str
    span: tuple[int, int]


def unit_of(text: str | None) -> Unit | None:
    """The unit an alias names (case-insensitive except the data units' B), or None."""
    return UNITS.get(text.strip().lower().rstrip(".")) if text else None


def parse_number(text: object) -> float | None:
    """A caller's value as a number: 1,200 / 3.5 / 'three' / '$20'; None when it is not numeric."""
    if isinstance(text, bool):
        return None
    if isinstance(text, (int, float)):
        return float(text)
    if not isinstance(text, str):
        return None
    raw = text.strip().lower()
    for sym in SYMBOLS:
        raw = raw.removeprefix(sym).strip()
    if raw in NUMBER_WORDS:
        return float(NUMBER_WORDS[raw])
    return float(raw.replace(",", "")) if re.fullmatch(_NUM, raw) else None


def quantities(quote: str) -> list[Quantity]:
    """Every number of ``quote`` (digits or a small number word) with its adjacent unit.

    Years and parts of dates (2024, the 3 of '3 March') are kept; callers that want a value
    choose among them, and an ambiguous choice fails closed.
    """
    out: list[Quantity] = []
    for m in QUANTITY.finditer(quote):
        num = m.group("num")
        value = float(num.replace(",", "")) if num else float(NUMBER_WORDS[m.group("word").lower()])
        if not math.isfinite(value):
            continue  # hundreds of digits: no value a computation can use
        unit = unit_of(m.group("sym")) if m.group("sym") else None
        after = unit_of(m.group("unit"))
        number_start, number_end = m.span("num") if num else m.span("word")
        if after is not None and m.group("unit").lower() in SPACED_AMBIGUOUS and m.start("unit") > number_end:
            after = None  # "3 in March" is not three inches
        unit = unit or after
        end = m.end("unit") if after is not None else number_end
        start = m.start("sym") if m.group("sym") else number_start
        out.append(Quantity(value, unit, quote[start:end], (start, end)))
    return out


def unit_in_quote(unit: Unit, quote: str) -> bool:
    """Whether any alias of ``unit`` (same canonical unit) is written in ``quote``."""
    low = quote.lower()
    return any(alias in low if not alias[0].isalnum() else re.search(rf"(?<![a-z]){re.escape(alias)}(?![a-z])", low)
               for alias, other in UNITS.items() if other == unit)


def convert(value: float, source: Unit, target: Unit) -> float:
    if source.dimension != target.dimension:
        raise ValueError(f"cannot convert {source.name} ({source.dimension}) to {target.name} ({target.dimension})")
    return value * source.factor / target.factor


def fmt(value: float) -> str:
    """A number for a trace: integers without a point, others to at most 4 decimals."""
    if not math.isfinite(value):
        return str(value)
    if abs(value - round(value)) < 1e-9:
        return str(int(round(value)))
    return f"{value:.4f}".rstrip("0").rstrip(".")
