"""Pre-answer evidence over assertions: an indexed lookup (``assertion_terms``, migration
0010_assertion_terms) whose rows examined per turn are capped, whatever the table holds; the
migration's backfill splits words exactly like ``contract.terms``; the doctor expects the index."""
from __future__ import annotations

import json

import pytest
from conftest import make_config

from hermes_trove.ops import doctor
from hermes_trove.runtime import build_runtime
from hermes_trove.state import contract, preanswer
from hermes_trove.state.assertion_store import AssertionStore
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")

T0 = 1_714_550_400.0
CAP = preanswer.MAX_EXAMINED + preanswer.MAX_EXAMINED // 4


def runtime_with(tmp_path, facts: list[tuple[str, str, str]], start: float = T0):
    """Store one user message per (subject, predicate, value) and its verified assertion."""
    rt = build_runtime(make_config(tmp_path, assertions_enabled=True, preanswer_evidence_enabled=True))
    add(rt, facts, start)
    return rt


def add(rt, facts: list[tuple[str, str, str]], start: float) -> None:
    store = AssertionStore(rt.db)
    store.ensure()
    texts = [f"note: {s} {p} is {v}" for s, p, v in facts]
    ids = rt.store.append(SessionKey("old"), [{"role": "user", "content": t, "timestamp": start + i}
                                             for i, t in enumerate(texts)])
    rows = {r.store_id: r for r in rt.store.get_many(ids)}
    proposals = [{"store_id": sid, "quote": rows[sid].content, "subject": s, "predicate": p, "value": v,
                  "kind": "preference", "confidence": 0.9} for sid, (s, p, v) in zip(ids, facts, strict=True)]
    for i in range(0, len(proposals), contract.MAX_ITEMS):
        parsed = contract.parse_answer(json.dumps({"assertions": proposals[i:i + contract.MAX_ITEMS]}), rows)
        assert not parsed.malformed and len(parsed.candidates) == len(proposals[i:i + contract.MAX_ITEMS]), parsed
        store.add(parsed.candidates)


def lookup(rt, text: str) -> tuple[list[str], int]:
    stats: dict[str, int] = {}
    lines = preanswer.assertion_lines(rt, preanswer.query_words(text), stats)
    return lines, stats.get("examined", 0)


def test_terms_are_the_subject_name_predicate_and_value_words():
    assert contract.terms("user:self", "prefers_editor", "helix") == ("prefers", "editor", "helix")
    assert contract.terms("person:alex smith", "lives_in", "lisbon old town lisbon") == (
        "alex", "smith", "lives", "lisbon", "town")


def test_the_lookup_examines_a_capped_number_of_rows_however_many_assertions_share_a_word(tmp_path):
    rt = runtime_with(tmp_path, [("user:self", f"tool_{i}_editor", f"name{i}") for i in range(150)])
    lines, small = lookup(rt, "which editor do I use now?")
    assert 0 < small <= CAP and len(lines) == preanswer.MAX_ASSERTIONS
    add(rt, [("user:self", f"tool_{i}_editor", f"name{i}") for i in range(150, 1500)], T0 + 10_000)
    assert AssertionStore(rt.db).sizes()["assertions"] == 1500
    lines, large = lookup(rt, "which editor do I use now?")
    assert large == small <= CAP  # ten times the matching rows, the same work
    assert "name1499" in lines[0] and "name1498" in lines[1]  # the newest first
    _, many_words = lookup(rt, "editor tool name1 name2 name3 prefers twelve words here maybe more than that")
    assert many_words <= CAP


def test_assertions_holding_more_of_the_words_come_first_and_superseded_ones_never(tmp_path):
    rt = runtime_with(tmp_path, [("user:self", "prefers_editor", "vim"), ("person:alex", "prefers_editor", "emacs"),
                                 ("user:self", "prefers_editor", "helix"), ("user:self", "prefers_shell", "fish")])
    lines, _ = lookup(rt, "which editor does alex prefer?")
    assert "'emacs'" in lines[0]  # "alex" and "editor" beat "editor" alone, though helix is newer
    assert "'helix'" in lines[1]
    assert not any("'vim'" in line for line in lines)  # helix superseded it
    block = preanswer.evidence_block(rt, "which editor does alex prefer?", "s1")
    assert "'emacs'" in block and "'vim'" not in block.split("quote")[0]
    assert lookup(rt, "anything about the orchard?") == ([], 0)


FACTS = [("person:Alex Smith", "prefers-editor", "helix@v2.0/beta+x_y"), ("user:self", "lives_in", "São Paulo"),
         ("thing:build", "status", "green as of 3.4.2025, see ci/main"), ("user:self", "uses", "a b c")]


def stored_terms(rt) -> list[tuple]:
    return sorted(tuple(r) for r in rt.db.read().execute("SELECT term, observed_at, assertion_id FROM assertion_terms"))


def test_the_writer_indexes_each_assertion_under_its_terms(tmp_path):
    rt = runtime_with(tmp_path, FACTS)
    written = stored_terms(rt)
    expected = sorted((t, a[1], a[0]) for a in rt.db.read().execute(
        "SELECT assertion_id, observed_at, subject_key, predicate_key, value_norm FROM assertions")
        for t in contract.terms(a[2], a[3], a[4]))
    assert written == expected and {"paulo", "helix", "beta", "2025", "green"} <= {w[0] for w in written}


def test_the_migration_backfill_splits_like_the_writer(tmp_path, backend):
    if backend == "postgresql":
        pytest.skip("the PostgreSQL set always held assertion_terms: there is no older schema to backfill")
    rt = runtime_with(tmp_path, FACTS)
    written = stored_terms(rt)
    with rt.db.transaction() as c:  # a file from before 0010_assertion_terms: the set applies it and backfills
        c.execute("DROP TABLE assertion_terms")
        c.execute("DELETE FROM schema_migrations WHERE name = '0010_assertion_terms'")
    store = AssertionStore(rt.db)
    assert not store.present() and lookup(rt, "which editor?") == ([], 0)
    assert store.ensure() == ["0010_assertion_terms"]
    assert stored_terms(rt) == written


def test_reset_and_message_deletion_take_the_terms_along(tmp_path):
    rt = runtime_with(tmp_path, [("user:self", "prefers_editor", "helix")])
    store = AssertionStore(rt.db)
    assert store.sizes()["assertion_terms"] == 3
    with rt.db.transaction() as c:
        c.execute("DELETE FROM messages")
    assert store.sizes()["assertions"] == 0 and store.sizes()["assertion_terms"] == 0
    add(rt, [("user:self", "prefers_editor", "helix")], T0 + 100)
    assert store.reset() == 1 and store.sizes()["assertion_terms"] == 0


def test_the_doctor_expects_the_terms_index(tmp_path):
    rt = runtime_with(tmp_path, [("user:self", "prefers_editor", "helix")])
    check = next(c for c in doctor.run_doctor(rt)["checks"] if c["check"] == "remembered_state")
    assert check["status"] == "pass", check
    rt.db.read().execute("DROP INDEX assertion_terms_assertion")
    check = next(c for c in doctor.run_doctor(rt)["checks"] if c["check"] == "remembered_state")
    assert check["status"] == "fail" and "assertion_terms_assertion" in check["detail"]
