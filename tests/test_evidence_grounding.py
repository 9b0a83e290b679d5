"""Grounding: a cited operand becomes facts read from its stored span, or the reason it does not.

Tables for the quote check, values and units in the quote, dates written in or resolved from it,
keys, the operand argument's parsing, and the unit vocabulary those checks read. Rows come from
a real temporary store."""
from __future__ import annotations

import math
from datetime import UTC, date, datetime

import pytest
from conftest import user

from hermes_trove.evidence.grounding import GroundingError, ground, parse_date, parse_operand, parse_operands
from hermes_trove.filters import SessionFilters
from hermes_trove.operands import ASSERTIONS_DISABLED, OperandSpec, norm_key
from hermes_trove.refs import RefClaim, make_ref
from hermes_trove.store import SessionKey
from hermes_trove.units import UNITS, convert, fmt, parse_number, quantities, unit_in_quote, unit_of

T0 = datetime(2024, 5, 6, 12, tzinfo=UTC).timestamp()


@pytest.fixture
def stored(runtime):
    """A row per text, and ``spec(text, **fields)`` citing the whole of it."""
    rows = {}

    def spec(text: str, index: int = 1, **fields) -> tuple[OperandSpec, object]:
        if text not in rows:
            [store_id] = runtime.store.append(SessionKey("s1"), [dict(user(text), timestamp=T0)])
            rows[text] = runtime.store.get(store_id)
        row = rows[text]
        claim = make_ref(row, 0, len(text))
        return OperandSpec(index, RefClaim(row.store_id, 0, len(text), claim.quote, claim.content_sha256),
                           **fields), row

    return spec


GROUNDED = [
    # (quote, operand fields, fields the plan needs, expected value, value text, unit name)
    ("The shoes cost $20.", {}, {"value"}, 20.0, "$20", "USD"),
    ("The shoes cost $20.", {"value": 20}, set(), 20.0, "$20", "USD"),
    ("The shoes cost $20.", {"value": "$20"}, set(), 20.0, "$20", "USD"),
    ("The shoes cost $20.", {"value": "twenty"}, set(), 20.0, "$20", "USD"),
    ("The shoes cost $20.", {"unit": "usd"}, set(), None, None, "USD"),
    ("The shoes cost $20.", {"unit": "dollars", "value": 20}, set(), 20.0, "$20", "USD"),
    ("I ran 5 km and then 3 miles.", {"value": 3}, set(), 3.0, "3 miles", "mile"),
    ("I ran 5 km and then 3 miles.", {"unit": "km"}, {"value"}, 5.0, "5 km", "km"),
    ("I read 3 books.", {}, {"value"}, 3.0, "3", None),
    ("I own two bikes.", {}, {"value"}, 2.0, "two", None),
    ("The car cost $1,200.", {}, {"value"}, 1200.0, "$1,200", "USD"),
    ("It weighed 2.5kg.", {}, {"value"}, 2.5, "2.5kg", "kg"),
    ("The lease began on 29 February 2024 and cost €900.", {}, {"value"}, 900.0, "€900", "EUR"),
    ("We met 2 weeks ago and paid 30 EUR.", {"value": 30}, set(), 30.0, "30 EUR", "EUR"),
    ("My city is Lisbon.", {"value": "Lisbon"}, set(), None, "Lisbon", None),
    ("I walked 800 m.", {"unit": "m"}, {"value"}, 800.0, "800", "m"),
]


@pytest.mark.both_backends
@pytest.mark.parametrize("quote,fields,need,value,text,unit", GROUNDED,
                         ids=[f"{i}-{c[0][:20]}" for i, c in enumerate(GROUNDED)])
def test_values_and_units_are_read_from_the_quote(stored, quote, fields, need, value, text, unit):
    spec, row = stored(quote, **fields)
    g = ground(spec, row, need=frozenset(need))
    assert (g.value, g.value_text) == (value, text)
    assert (g.unit.name if g.unit else None) == unit
    assert g.ref.quote == quote and g.observed_at == row.created_at


REFUSED = [
    # (quote, operand fields, fields needed, words of the reason)
    ("The shoes cost $20.", {"value": 25}, set(), "value 25 is not written in the quote (numbers there: $20)"),
    ("The shoes cost $20.", {"value": "thirty"}, set(), "value 'thirty' is not written"),
    ("The shoes cost $20.", {"unit": "EUR"}, {"value"}, "the quote writes '$20', not a value in 'EUR'"),
    ("The shoes cost $20.", {"unit": "EUR"}, set(), "unit 'EUR' is not written in the quote"),
    ("The shoes cost $20.", {"unit": "parsecs"}, set(), "unknown unit 'parsecs'"),
    ("I read 3 books.", {"unit": "kg"}, {"value"}, "unit 'kg' is not written in the quote"),
    ("I paid $5 for coffee and $7 for cake.", {}, {"value"}, "holds 2 numbers ($5, $7); give value"),
    ("A dog.", {}, {"value"}, "the quote holds no number"),
    ("My city is Lisbon.", {"value": "Lisbon"}, {"value"}, "value 'Lisbon' is not a number"),
    ("We met on 3 March 2024.", {}, {"value"}, "the quote holds no number"),  # date parts are no value
    ("I visited Paris.", {"key": "Rome"}, set(), "key 'Rome' is not written in the quote"),
    ("I visited Paris.", {}, {"key"}, "no key or label"),
    ("We met on 1 May 2024 and again on 9 May 2024.", {}, {"date"}, "names 2 times"),
    ("That was a few days ago.", {}, {"date"}, "does not pin a date down"),
    ("We met on 3 March 2024.", {"date": "2024-03-04"}, set(), "neither written in the quote nor resolved"),
    ("We met on 3 March 2024.", {"date": "2024-13-01"}, set(), "is not YYYY-MM-DD"),
    ("We met on 3 March 2024.", {"date": "whenever"}, set(), "is not YYYY-MM-DD"),
]


@pytest.mark.both_backends
@pytest.mark.parametrize("quote,fields,need,reason", REFUSED, ids=[f"{i}-{c[3][:24]}" for i, c in enumerate(REFUSED)])
def test_a_field_the_quote_does_not_hold_fails_closed_with_the_reason(stored, quote, fields, need, reason):
    spec, row = stored(quote, index=3, **fields)
    with pytest.raises(GroundingError) as caught:
        ground(spec, row, need=frozenset(need))
    assert str(caught.value).startswith("operand 3: ") and reason in str(caught.value)


QUOTE_CHECKS = [
    # (how the claim differs from the stored span, words of the reason)
    (lambda c: RefClaim(c.store_id, c.span_start + 1, c.span_end, c.quote, c.content_sha256), "not the stored text"),
    (lambda c: RefClaim(c.store_id, 0, c.span_end, "The hat cost $16.", c.content_sha256), "not the stored text"),
    (lambda c: RefClaim(c.store_id, 0, c.span_end, c.quote, "f" * 64), "stale or edited"),
    (lambda c: RefClaim(c.store_id, 0, 10_000, None, None), "span"),
]


@pytest.mark.both_backends
@pytest.mark.parametrize("change,reason", QUOTE_CHECKS, ids=[r for _, r in QUOTE_CHECKS])
def test_the_quote_must_be_the_stored_span(stored, change, reason):
    spec, row = stored("The hat cost $15.")
    with pytest.raises(GroundingError, match=reason):
        ground(OperandSpec(1, change(spec.claim)), row)


@pytest.mark.both_backends
def test_a_claim_without_a_quote_or_hash_reads_both_from_the_row(stored):
    spec, row = stored("The hat cost $15.")
    g = ground(OperandSpec(1, RefClaim(row.store_id, 4, 7, None, None)), row)
    assert g.ref.quote == "hat" and g.ref.shorthand == f"trove:{row.store_id}:4-7"


@pytest.mark.both_backends
def test_a_missing_row_an_unresolved_assertion_and_an_ignored_session_are_refused(stored):
    spec, row = stored("The hat cost $15.")
    with pytest.raises(GroundingError, match="not stored"):
        ground(spec, None)
    with pytest.raises(GroundingError, match="TROVE_ASSERTIONS_ENABLED"):
        ground(OperandSpec(1, None, assertion_id="ab" * 32), None)
    assert ASSERTIONS_DISABLED.startswith("assertions are disabled")
    with pytest.raises(GroundingError, match="unknown id"):
        ground(OperandSpec(1, None, claim_error="no assertion ab... is stored (unknown id)"), None)
    ignored = SessionFilters.build(ignore=["s*"]).ignored_by
    with pytest.raises(GroundingError, match="which is ignored .pattern 's\\*'"):
        ground(spec, row, ignored_by=ignored)


DATES = [
    # (quote, operand date, expected [start, end), granularity, source)
    ("We moved on 3 March 2024.", None, "2024-03-03", "2024-03-04", "day", "quote"),
    ("We moved in March 2024.", None, "2024-03-01", "2024-04-01", "month", "quote"),
    ("We married in 2023.", None, "2023-01-01", "2024-01-01", "year", "quote"),
    ("I adopted a dog.", None, "2024-05-06", "2024-05-07", "day", "observed_at"),
    ("I adopted a dog yesterday.", None, "2024-05-05", "2024-05-06", "day", "quote"),
    ("We moved on 3 March 2024.", "2024-03-03", "2024-03-03", "2024-03-04", "day", "quote"),
    ("We moved on 3 March 2024.", "3 March 2024", "2024-03-03", "2024-03-04", "day", "quote"),
    ("We met on 1 May 2024 and again on 9 May 2024.", "2024-05-09", "2024-05-09", "2024-05-10", "day", "quote"),
    ("We moved in March 2024.", "2024-03", "2024-03-01", "2024-04-01", "month", "quote"),
]


@pytest.mark.both_backends
@pytest.mark.parametrize("quote,given,start,end,granularity,source", DATES,
                         ids=[f"{i}-{c[0][:20]}" for i, c in enumerate(DATES)])
def test_dates_are_written_in_or_resolved_from_the_quote(stored, quote, given, start, end, granularity, source):
    spec, row = stored(quote, date=given)
    when = ground(spec, row, need=frozenset({"date"})).when
    assert when is not None
    assert (when.start.isoformat(), when.end.isoformat(), when.granularity, when.source) == (start, end,
                                                                                               granularity, source)


@pytest.mark.both_backends
def test_a_date_is_read_only_when_the_plan_needs_it(stored):
    spec, row = stored("We moved on 3 March 2024.")
    assert ground(spec, row).when is None


KEYS = [
    # (quote, key, label, needs key, expected key)
    ("I visited Paris.", "Paris", None, False, "paris"),
    ("I visited Paris.", "city:Paris", None, False, "paris"),
    ("I visited Paris.", None, "Paris", True, "paris"),
    ("I visited Paris.", None, "Paris", False, None),
    ("Read https://example.org/a now.", "https://example.org/a", None, False, "https://example.org/a"),
    ("I visited  PARIS, France.", "paris france", None, False, "paris france"),
]


@pytest.mark.both_backends
@pytest.mark.parametrize("quote,key,label,need_key,expected", KEYS, ids=[f"{i}" for i in range(len(KEYS))])
def test_keys_are_the_quotes_own_words(stored, quote, key, label, need_key, expected):
    spec, row = stored(quote, key=key, label=label)
    g = ground(spec, row, need=frozenset({"key"}) if need_key else frozenset())
    assert g.key == expected and g.label == label


@pytest.mark.both_backends
def test_an_assertion_tracked_key_stands_only_for_a_latest_state(stored):
    spec, row = stored("I live in Madrid.", tracked_key="user:self lives_in")
    assert ground(spec, row, operation="latest_state").key == "user:self lives_in"
    assert ground(spec, row, operation="order").key is None


@pytest.mark.both_backends
def test_a_trace_shows_what_grounded(stored):
    spec, row = stored("The shoes cost $20 on 3 March 2024.", label="shoes", key="shoes")
    g = ground(spec, row, need=frozenset({"value", "date"}))
    trace = g.trace()
    assert trace["value"] == "20" and trace["unit"] == "USD" and trace["label"] == "shoes" and trace["key"] == "shoes"
    assert trace["date"]["start"] == "2024-03-03" and trace["ref"] == g.ref.shorthand


OPERAND_ARGS = [
    # (the operand as sent, what it parses to: claim store id, claim error words, assertion id)
    ("trove:12:0-5", 12, None, None),
    ({"exact_ref": "trove:12:0-5"}, 12, None, None),
    ({"ref": "trove:12:0-5", "value": 3}, 12, None, None),
    ({"store_id": 12, "span_start": 0, "span_end": 5, "quote": "hello"}, 12, None, None),
    ({"exact_ref": {"store_id": 12, "span_start": 0, "span_end": 5}}, 12, None, None),
    ({"assertion_id": "AB" * 32}, None, None, "AB" * 32),
    ({"assertion_id": ""}, None, "a ref must be", None),
    ("trove:x", None, "not a ref", None),
    ({"store_id": 12, "span_start": 5, "span_end": 1}, None, "span", None),
    ({}, None, "a ref must be", None),
]


@pytest.mark.parametrize("raw,store_id,error,assertion", OPERAND_ARGS, ids=[str(i) for i in range(len(OPERAND_ARGS))])
def test_operand_arguments_parse_into_a_claim_or_keep_their_error(raw, store_id, error, assertion):
    spec = parse_operand(4, raw)
    assert spec.index == 4 and spec.assertion_id == assertion
    assert (spec.claim.store_id if spec.claim else None) == store_id
    assert (error in spec.claim_error) if error else spec.claim_error is None


@pytest.mark.parametrize("raw,error", [
    (None, "must be a list of 1-50"), ([], "must be a list of 1-50"), ("trove:1:0-2", "must be a list"),
    (["trove:1:0-2"] * 51, "at most 50"), ([5], "operand 1 must be an object"),
    ([{"exact_ref": "trove:1:0-2", "value": {"a": 1}}], "value must be a number or a string"),
    ([{"exact_ref": "trove:1:0-2", "value": False}], "value must be a number or a string"),
])
def test_structural_operand_errors_raise(raw, error):
    with pytest.raises(ValueError, match=error):
        parse_operands(raw)


def test_operand_text_fields_are_bounded():
    spec = parse_operand(1, {"exact_ref": "trove:1:0-2", "label": "x" * 5000, "unit": "", "key": 7})
    assert len(spec.label or "") == 400 and spec.unit is None and spec.key == "7"


@pytest.mark.parametrize("text,expected", [
    ("2024-03-03", (date(2024, 3, 3), date(2024, 3, 4), "day")),
    ("2024-12", (date(2024, 12, 1), date(2025, 1, 1), "month")),
    ("2024", (date(2024, 1, 1), date(2025, 1, 1), "year")),
    (" 2024-02 ", (date(2024, 2, 1), date(2024, 3, 1), "month")),
    ("2024-02-30", None), ("2024-00", None), ("soon", None), ("", None),
])
def test_parse_date_table(text, expected):
    assert parse_date(text) == expected


def test_parse_date_resolves_a_phrase_against_the_observation_time():
    assert parse_date("yesterday", T0) == (date(2024, 5, 5), date(2024, 5, 6), "day")


@pytest.mark.parametrize("text,expected", [
    ("  Paris,  France ", "paris france"), ("Café!", "café"), ("$20.", "$20"), ("user:self", "user:self"),
    ("a/b-c+d", "a/b-c+d"), ("...", ""), ("Straße", "strasse"),
])
def test_norm_key_table(text, expected):
    assert norm_key(text) == expected


# -- the unit vocabulary the checks read ---------------------------------------------------
@pytest.mark.parametrize("alias,name,dimension", [
    ("km", "km", "length"), ("Miles", "mile", "length"), ("ft.", "foot", "length"), ("hrs", "hour", "time"),
    ("months", "month", "calendar"), ("yr", "year", "calendar"), ("lbs", "lb", "mass"), ("GiB", "GiB", "data"),
    ("MB", "MB", "data"), ("$", "USD", "money:USD"), ("€", "EUR", "money:EUR"), ("quid", "GBP", "money:GBP"),
    ("cups", "cup", "volume"), ("parsec", None, None), ("", None, None), (None, None, None),
])
def test_unit_aliases(alias, name, dimension):
    unit = unit_of(alias)
    assert (unit.name if unit else None, unit.dimension if unit else None) == (name, dimension)


@pytest.mark.parametrize("raw,expected", [
    (3, 3.0), (2.5, 2.5), ("1,200", 1200.0), ("3.5", 3.5), (".5", 0.5), ("three", 3.0), ("a dozen", 12.0),
    ("$20", 20.0), ("€ 12", 12.0), ("twenty", 20.0), ("1,20", None), ("NaN", None), ("Infinity", None),
    ("1e5", None), ("", None), (True, None), (None, None), ([3], None),
])
def test_parse_number_table(raw, expected):
    assert parse_number(raw) == expected


@pytest.mark.parametrize("quote,found", [
    ("I ran 5 km and 3 miles.", [(5.0, "km"), (3.0, "mile")]),
    ("It cost $20 or €15.", [(20.0, "USD"), (15.0, "EUR")]),
    ("We met on 3 March 2024.", [(3.0, None), (2024.0, None)]),
    ("Meet me at 3 in March.", [(3.0, None)]),
    ("It was 3in long.", [(3.0, "inch")]),
    ("two dozen eggs", [(2.0, None)]),  # the word after a number is read as its (unknown) unit
    ("A number of " + "9" * 400 + " digits.", []),
    ("version 1.2.3", [(1.2, None)]),
])
def test_quantities_table(quote, found):
    assert [(q.value, q.unit.name if q.unit else None) for q in quantities(quote)] == found


def test_quantity_spans_point_at_their_text():
    quote = "Paid $1,200 for 2 kg, then three."
    assert [q.text for q in quantities(quote)] == ["$1,200", "2 kg", "three"]
    for q in quantities(quote):
        assert quote[q.span[0]:q.span[1]] == q.text


@pytest.mark.parametrize("value,source,target,expected", [
    (1, "km", "m", 1000), (3, "mile", "km", 4.828032), (90, "minute", "hour", 1.5), (1, "GiB", "MB", 1073.741824),
    (2, "year", "month", 24), (16, "oz", "lb", 1), (1, "gallon", "l", 3.785411784),
])
def test_conversions_stay_inside_a_dimension(value, source, target, expected):
    assert convert(value, unit_of(source), unit_of(target)) == pytest.approx(expected)


@pytest.mark.parametrize("source,target", [("km", "kg"), ("month", "day"), ("USD", "EUR"), ("byte", "second")])
def test_conversions_across_dimensions_raise(source, target):
    with pytest.raises(ValueError, match="cannot convert"):
        convert(1, unit_of(source), unit_of(target))


@pytest.mark.parametrize("unit,quote,written", [
    ("USD", "It cost $20.", True), ("USD", "It cost 20 dollars.", True), ("USD", "It cost 20 euros.", False),
    ("km", "We drove 5 kilometres.", True), ("km", "The kms were long", True), ("m", "I am here.", False),
    ("inch", "3 inches", True), ("inch", "in the box", True), ("GB", "1 gb", True),
])
def test_unit_in_quote_table(unit, quote, written):
    assert unit_in_quote(unit_of(unit), quote) is written


@pytest.mark.parametrize("value,text", [(3.0, "3"), (2.5, "2.5"), (1 / 3, "0.3333"), (-4.0, "-4"),
                                        (1e-12, "0"), (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan")])
def test_fmt_table(value, text):
    assert fmt(value) == text


def test_every_alias_names_one_unit_and_money_never_converts():
    assert all(u.factor > 0 for u in UNITS.values())
    money = {u.dimension for u in UNITS.values() if u.dimension.startswith("money:")}
    assert money == {f"money:{c}" for c in ("USD", "EUR", "GBP", "JPY", "CAD", "AUD", "CHF", "INR")}
