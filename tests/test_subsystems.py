"""The subsystem registry: every row is complete, and a new row is all a new subsystem costs.

The edge (plugin load, engine, hooks) and the operators (command, status, doctor, inspect) loop
over ``subsystems.SUBSYSTEMS``: a fake row registered here is started, reported, checked and
commanded with no edit of any of them.
"""
from __future__ import annotations

import dataclasses
import logging
from typing import Any

import pytest
from conftest import make_config, make_engine, user

import hermes_trove
from hermes_trove import command, subsystems
from hermes_trove.config import TroveConfig
from hermes_trove.hooks import make_hooks
from hermes_trove.migrations import OPTIONAL_MIGRATIONS
from hermes_trove.ops import doctor, status
from hermes_trove.runtime import build_runtime
from hermes_trove.subsystems import SUBSYSTEMS, Request, Subsystem

CONFIG_FIELDS = {f.name for f in dataclasses.fields(TroveConfig)}


@pytest.mark.parametrize("row", SUBSYSTEMS, ids=[r.name for r in SUBSYSTEMS])
def test_every_row_is_complete(row):
    assert row.name and row.switch in CONFIG_FIELDS and isinstance(getattr(TroveConfig, row.switch, False), bool)
    assert row.background and set(row.background) <= set(subsystems.EVENTS)
    assert row.commands and all(words and doc for words, (_, doc) in row.commands.items())
    assert all(prefix in row.commands for prefix in row.takes_words)
    assert row.usage.split()[0] == next(iter(row.commands))[0]  # the usage line names its first word
    assert (row.status is None) == (row.section == "") and (row.inspect_omits is None or row.status is not None)
    assert all(name and callable(check) for name, check in row.checks)
    assert row.migrations is None or row.migrations in OPTIONAL_MIGRATIONS


def test_the_rows_name_distinct_words_sections_checks_and_every_opt_in_migration_set():
    names = [r.name for r in SUBSYSTEMS]
    words = [w for r in SUBSYSTEMS for w in r.commands]
    sections = [r.section for r in SUBSYSTEMS if r.section]
    checks = [name for r in SUBSYSTEMS for name, _ in r.checks]
    assert len(set(names)) == len(names) and len(set(words)) == len(words) and len(set(sections)) == len(sections)
    assert not set(words) & set(command.HANDLERS) and not set(checks) & {n for n, _ in doctor.CHECKS}
    assert {r.migrations for r in SUBSYSTEMS if r.migrations} == set(OPTIONAL_MIGRATIONS)


def test_each_rows_subcommands_answer_on_a_real_database(tmp_path):
    runtime = build_runtime(make_config(tmp_path))
    runtime.store.db.connect()
    for row in SUBSYSTEMS:
        for words in row.commands:
            name, result = command.run(runtime, list(words))
            assert name == " ".join(words) and isinstance(result, dict), words
            assert "Traceback" not in str(result), words


# -- a fake subsystem: one row, no other edit ----------------------------------------------------

class Fake:
    """Everything the fake row is asked to do, recorded."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.requests: list[Request] = []

    def row(self) -> Subsystem:
        def started(event: str) -> Any:
            return lambda runtime, completion: self.events.append((event, completion()))

        def echo(r: Request) -> dict[str, Any]:
            self.requests.append(r)
            return {"status": "ok", "words": list(r.words), "model": r.model(), "in_host": r.in_host}

        return Subsystem(
            name="fake", switch="embeddings_enabled", migrations=None,
            background={event: started(event) for event in subsystems.EVENTS},
            commands={("fake",): (lambda r: {"status": "ok", "fake": True}, "the fake subsystem's status"),
                      ("fake", "echo"): (echo, "say the words back")},
            usage="fake [echo WORDS]", takes_words=(("fake", "echo"),),
            section="fake_section", status=lambda runtime: {"fine": True, "bulky": [1, 2, 3]},
            inspect_omits=("bulky",),
            checks=(("fake_check", lambda runtime, conn, ctx: ("warn", "the fake is unwell", "rest it")),),
            before_answer=lambda runtime, message, session: f"FAKE EVIDENCE for {message!r}")


@pytest.fixture
def fake(monkeypatch):
    recorder = Fake()
    monkeypatch.setattr(subsystems, "SUBSYSTEMS", (*SUBSYSTEMS, recorder.row()))
    return recorder


def model(messages, model, timeout_s, max_tokens):
    return "fake"


def test_a_new_row_is_reported_checked_and_inspected(tmp_path, fake):
    runtime = build_runtime(make_config(tmp_path))
    engine = make_engine(runtime, model)
    report = status.build_status(runtime, engine.snapshot())
    assert report["fake_section"] == {"fine": True, "bulky": [1, 2, 3]}
    assert status.build_inspect(runtime, engine.snapshot(), "s1")["fake_section"] == {"fine": True}
    checked = doctor.run_doctor(runtime, engine.snapshot())
    assert {"check": "fake_check", "status": "warn", "detail": "the fake is unwell"} in checked["checks"]
    assert "fake_check: rest it" in checked["guidance"] and checked["overall"] == "warnings"


def test_a_new_row_is_commanded_with_its_words_and_the_operator_model(tmp_path, fake, monkeypatch):
    runtime = build_runtime(make_config(tmp_path))
    runtime.store.db.connect()
    assert "/trove fake echo - say the words back" in command.help_text()
    assert command.run(runtime, ["FAKE"]) == ("fake", {"status": "ok", "fake": True})
    name, result = command.run(runtime, ["fake", "echo", "Loud", "scope=Mixed"])
    assert name == "fake echo" and result == {"status": "ok", "words": ["loud", "scope=Mixed"], "model": None,
                                              "in_host": False}
    monkeypatch.setattr(command, "_operator_model", lambda t: model)
    engine = make_engine(runtime, model)
    assert command.run(runtime, ["fake", "echo"], engine=engine)[1] == {"status": "ok", "words": [], "model": model,
                                                                       "in_host": True}


def test_a_new_row_starts_its_background_work_on_every_event(tmp_path, fake):
    runtime = build_runtime(make_config(tmp_path, fresh_tail_count=4, leaf_chunk_tokens=500))
    engine = make_engine(runtime, model)  # binds a session
    hooks = make_hooks(runtime)
    hooks["post_llm_call"](session_id="s1", platform="cli", conversation_history=[user("a turn")])
    engine.compress([user(f"turn {i} " + "x " * 300) for i in range(40)], current_tokens=200000, force=True)
    assert engine.compression_count == 1
    assert fake.events == [("session_start", model), ("turn", model), ("compaction", model)]
    subsystems.start("load", runtime)
    assert fake.events[-1] == ("load", None)  # nothing at load asks for a model


def test_plugin_load_starts_the_load_event(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("TROVE_DATABASE_PATH", str(tmp_path / "trove.db"))

    class Ctx:
        def register_context_engine(self, engine: Any) -> None:
            self.engine = engine

    hermes_trove.register(Ctx())
    assert hermes_trove.LOAD_STATE["registered"] and [e for e, _ in fake.events] == ["load"]


def test_a_new_row_adds_its_text_before_the_answer(tmp_path, fake):
    runtime = build_runtime(make_config(tmp_path))
    make_engine(runtime, model)
    out = make_hooks(runtime)["pre_llm_call"](session_id="s1", user_message="where is the key?",
                                              conversation_history=[])
    assert "FAKE EVIDENCE for 'where is the key?'" in out["context"]


def test_a_failing_row_costs_only_itself(tmp_path, monkeypatch, caplog):
    def boom(*args: Any) -> Any:
        raise RuntimeError("the fake broke")

    started: list[str] = []
    broken = Subsystem(name="broken", switch="embeddings_enabled", migrations=None,
                       background={"session_start": boom}, commands={("broken",): (boom, "fails")}, usage="broken",
                       section="broken_section", status=boom, checks=(("broken_check", boom),), before_answer=boom)
    healthy = dataclasses.replace(broken, name="healthy", section="healthy_section", status=lambda r: {"ok": 1},
                                  background={"session_start": lambda r, c: started.append("healthy")},
                                  commands={("healthy",): (lambda r: {"status": "ok"}, "works")}, usage="healthy",
                                  checks=(), before_answer=None)
    monkeypatch.setattr(subsystems, "SUBSYSTEMS", (broken, healthy))
    runtime = build_runtime(make_config(tmp_path))
    with caplog.at_level(logging.WARNING):
        make_engine(runtime, model)
        out = make_hooks(runtime)["pre_llm_call"](session_id="s1", user_message="hello there",
                                                  conversation_history=[])
    assert started == ["healthy"] and "broken did not start its background work" in caplog.text
    assert out is None or "the fake broke" not in out["context"]
    report = status.build_status(runtime)
    assert report["broken_section"] == {"enabled": False, "error": "RuntimeError: the fake broke"}
    assert report["healthy_section"] == {"ok": 1}
    check = next(c for c in doctor.run_doctor(runtime)["checks"] if c["check"] == "broken_check")
    assert check["status"] == "fail" and "the fake broke" in check["detail"]
    assert command.run(runtime, ["healthy"]) == ("healthy", {"status": "ok"})
