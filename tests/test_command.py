"""``/trove`` registration, parsing, rendering, and the promise that read-only forms write nothing."""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import re
from pathlib import Path

import pytest
from conftest import ROOT, assistant, make_config, user

from hermes_trove import backups, command
from hermes_trove.db import meta_value
from hermes_trove.engine import TroveEngine
from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")


def fingerprint(path: str) -> tuple[str, str]:
    def digest(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest() if p.exists() else "-"
    return digest(Path(path)), digest(Path(path + "-wal"))


def store_dump(rt) -> object:
    """Everything the store holds, to compare before and after a read: the SQLite file and its dump,
    or (PostgreSQL) a digest of every table of the server schema and the local outbox's dump."""
    if rt.db.kind == "sqlite":
        return fingerprint(rt.db.path), list(rt.db.read().iterdump())
    from hermes_trove.outbox import _SHIPPERS

    rt.store.settle()  # nothing waits to ship: a read that ships would change the outbox
    shipping = _SHIPPERS.threads.get(rt.store.outbox.path)
    if shipping is not None:  # the pass the last write started also refreshes search statistics
        shipping.join(30)
    conn = rt.db.read()
    tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                                         " ORDER BY 1")]
    rows = {t: conn.execute(f"SELECT md5(COALESCE(string_agg(x::text, '|' ORDER BY x::text), '')) FROM {t} x"
                            ).fetchone()[0] for t in tables}
    return rows, list(rt.store.outbox.db.read().iterdump())  # its rows: a checkpoint may move the file's bytes


@pytest.fixture(autouse=True)
def shippers_finish():
    """PostgreSQL: a test ends once the background passes its outboxes started have (a pass still
    shipping when the test's pooled schema is emptied would ship into the next test's store). A pass
    an earlier test left retrying against a server it took away is not this test's to wait for."""
    from hermes_trove.outbox import _SHIPPERS

    before = set(_SHIPPERS.threads.values())
    yield
    for thread in [t for t in list(_SHIPPERS.threads.values()) if t not in before]:
        thread.join(10)


class FakeCtx:
    """Records what a plugin registers, with the real host's method signatures."""

    def __init__(self) -> None:
        self.commands: dict[str, dict] = {}
        self.cli: dict[str, dict] = {}

    def register_command(self, name, handler, description="", args_hint=""):
        self.commands[name] = {"handler": handler, "description": description, "args_hint": args_hint}

    def register_cli_command(self, name, help, setup_fn, handler_fn=None, description=""):
        self.cli[name] = {"help": help, "setup_fn": setup_fn, "handler_fn": handler_fn}


def test_slash_command_is_registered_only_when_enabled(tmp_path):
    off = FakeCtx()
    command.register(off, build_runtime(make_config(tmp_path / "a")))
    assert off.commands == {} and "trove" in off.cli
    on = FakeCtx()
    command.register(on, build_runtime(make_config(tmp_path / "b", enable_slash_command=True)))
    entry = on.commands["trove"]
    assert "doctor" in entry["args_hint"] and entry["description"]
    assert entry["handler"]("status").startswith("trove status:")


def test_registration_survives_a_host_that_rejects_commands(tmp_path):
    class Grumpy(FakeCtx):
        def register_command(self, *a, **k):
            raise RuntimeError("no commands here")

    ctx = Grumpy()
    command.register(ctx, build_runtime(make_config(tmp_path, enable_slash_command=True)))
    assert "trove" in ctx.cli


def test_the_hermes_cli_entry_parses_and_runs_like_the_host_does(runtime, capsys):
    ctx = FakeCtx()
    command.register(ctx, runtime)
    entry = ctx.cli["trove"]
    parser = argparse.ArgumentParser(prog="hermes")
    sub = parser.add_subparsers(dest="command")
    plugin_parser = sub.add_parser("trove", help=entry["help"])
    entry["setup_fn"](plugin_parser)
    plugin_parser.set_defaults(func=entry["handler_fn"])
    runtime.db.connect()  # the CLI never creates the database; the host run before would have
    # and it ran trove: with no config.yaml the host runs its compressor, which doctor warns about
    (Path(runtime.config.hermes_home) / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    args = parser.parse_args(["trove", "doctor", "--json"])
    with pytest.raises(SystemExit) as done:  # the host drops handler return values: exit explicitly
        args.func(args)
    assert done.value.code == 0
    assert '"overall": "healthy"' in capsys.readouterr().out
    args = parser.parse_args(["trove", "help"])
    with pytest.raises(SystemExit) as done:
        args.func(args)
    assert done.value.code == 0
    assert "hermes trove rotate apply" in capsys.readouterr().out


def test_status_is_the_default_and_says_unbound_before_any_session(runtime):
    text = command.make_handler(runtime)("")
    assert text.startswith("trove status:") and "session_id: (unbound)" in text


def test_typed_before_the_first_turn_the_verdict_says_the_host_selected_trove(runtime):
    (Path(runtime.config.hermes_home) / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    typed = command.make_handler(runtime)("status")  # /trove inside Hermes, no engine bound yet
    assert "verdict: selected: context.engine is trove; no session bound yet" in typed
    assert "run `hermes`" not in typed
    name, result = command.run(runtime, ["status"])  # hermes trove / python -m: outside a session
    assert result["plugin"]["host"]["verdict"].startswith("configured: context.engine is trove")


def test_the_verdict_reads_context_engine_as_the_host_does(runtime, tmp_path, monkeypatch):
    """Hermes merges a managed scope's config.yaml (``$HERMES_MANAGED_DIR``, /etc/hermes) over the user's and
    expands ``${VAR}``: an engine selected there runs trove, so the verdict must not say "fallback" and send
    the user to ``hermes config set``."""
    home = Path(runtime.config.hermes_home)
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    (home / "config.yaml").write_text("model:\n  default: fake-model\n", encoding="utf-8")
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(managed))
    name, result = command.run(runtime, ["status"])
    assert result["plugin"]["host"]["verdict"].startswith("configured: context.engine is trove"), result["plugin"]
    monkeypatch.delenv("HERMES_MANAGED_DIR")
    monkeypatch.setenv("TROVE_TEST_ENGINE_NAME", "trove")
    (home / "config.yaml").write_text("context:\n  engine: ${TROVE_TEST_ENGINE_NAME}\n", encoding="utf-8")
    name, result = command.run(runtime, ["status"])
    assert result["plugin"]["host"]["verdict"].startswith("configured: context.engine is trove"), result["plugin"]
    (home / "config.yaml").write_text("context:\n  engine: compressor\n", encoding="utf-8")
    name, result = command.run(runtime, ["status"])
    assert result["plugin"]["host"]["verdict"].startswith("fallback: context.engine is 'compressor'")


def test_the_verdict_follows_a_managed_config_yaml_when_the_user_has_none(runtime, tmp_path, monkeypatch):
    """With no user config.yaml the host runs on its defaults merged with the managed scope's file: a managed
    ``context.engine: trove`` runs trove, so the verdict says so, not "config.yaml unreadable"."""
    home = Path(runtime.config.hermes_home)
    managed = tmp_path / "managed"
    managed.mkdir()
    (managed / "config.yaml").write_text("context:\n  engine: trove\n", encoding="utf-8")
    (home / "config.yaml").unlink(missing_ok=True)
    monkeypatch.setenv("HERMES_MANAGED_DIR", str(managed))
    name, result = command.run(runtime, ["status"])
    assert result["plugin"]["host"]["verdict"].startswith("configured: context.engine is trove"), result["plugin"]
    assert not (home / "config.yaml").exists()
    (managed / "config.yaml").write_text("model:\n  default: fake-model\n", encoding="utf-8")
    name, result = command.run(runtime, ["status"])  # nothing selects trove: the host's default
    assert result["plugin"]["host"]["verdict"].startswith("fallback: context.engine is 'compressor'")


def test_a_damaged_config_yaml_is_reported_unreadable_not_as_a_compressor_to_switch(runtime):
    """The host's loader serves its defaults (context.engine compressor) for a file it cannot parse: the
    verdict must say unreadable, not send the user to `hermes config set` over a file that needs fixing."""
    home = Path(runtime.config.hermes_home)
    (home / "config.yaml").write_text("context:\n  engine: trove\n bad: [\n", encoding="utf-8")
    name, result = command.run(runtime, ["status"])
    assert result["plugin"]["host"]["verdict"].startswith("unknown: config.yaml unreadable"), result["plugin"]


def test_a_session_id_the_store_never_saw_is_an_error_for_status_and_dag(engine):
    engine.ingest([user("hello"), assistant("hi")])
    for words in (["status"], ["dag"], ["dag", "mermaid"]):
        name, result = command.run(engine.runtime, words, session_id="20261204_000000_abcdef")
        assert "no session '20261204_000000_abcdef' in this store" in result["error"], words
        assert command.exit_code(result) == command.EXIT_PROBLEM, words
        if words == ["status"]:  # a name the store never saw is not a bound session
            assert result["bound"] is False
        name, result = command.run(engine.runtime, words, session_id="s1")
        assert "error" not in result and command.exit_code(result) == command.EXIT_OK, (words, result.get("error"))


def test_the_operator_guide_quotes_what_each_command_says_of_an_unknown_session(engine):
    engine.ingest([user("hello"), assistant("hi")])
    guide = (ROOT / "docs" / "operator-guide.md").read_text(encoding="utf-8")
    said = guide[guide.index("A `--session` id the store"):guide.index("never reads as\nan empty session")]
    for words in (["status"], ["dag"], ["rotate"]):
        name, result = command.run(engine.runtime, words, session_id="nosuch")
        assert command.exit_code(result) == command.EXIT_PROBLEM, words
        message = str(result.get("error") or result.get("reason")).split(":")[0]  # what precedes the advice
        assert message.replace("'nosuch'", "'<id>'").replace(" nosuch ", " <id> ") in " ".join(said.split()), words


def test_words_are_case_insensitive_and_extra_whitespace_is_ignored(engine):
    handler = command.make_handler(engine.runtime)
    assert handler("  DOCTOR   ").startswith("trove doctor: healthy")
    assert handler("Status").startswith("trove status:")


def test_unknown_subcommands_print_help_naming_the_mistake(runtime):
    text = command.make_handler(runtime)("doctor frobnicate")
    assert text.startswith("unknown subcommand: doctor frobnicate")
    assert "/trove rotate apply" in text and "/trove doctor clean apply" in text
    assert command.make_handler(runtime)("help").startswith("/trove commands:")


@pytest.mark.parametrize("words", ["a" * 100_000, "doctor " * 20_000], ids=["one-long-word", "many-words"])
def test_unknown_words_are_echoed_bounded_and_the_help_still_follows(runtime, words):
    text = command.make_handler(runtime)(words)
    assert text.startswith("unknown subcommand: ") and "more chars)" in text.splitlines()[0]
    assert "/trove rotate apply" in text and len(text) <= command.MAX_TEXT


def test_the_handler_never_raises_into_the_host(runtime, monkeypatch):
    def boom(*a, **k):
        raise OSError("disk on fire")

    monkeypatch.setattr(command.doctor, "run_doctor", boom)
    text = command.make_handler(runtime)("doctor")
    assert text.startswith("trove doctor:") and "error: OSError: disk on fire" in text
    monkeypatch.setattr(command, "render", boom)
    assert command.make_handler(runtime)("status") == "trove: command failed: OSError: disk on fire"


def test_the_cli_turns_a_failing_subcommand_into_an_error_and_exit_code(runtime, monkeypatch, capsys):
    def boom(*a, **k):
        raise OSError("disk on fire")

    monkeypatch.setattr(command.doctor, "run_doctor", boom)
    runtime.db.connect()
    args = argparse.Namespace(trove_words=["doctor"], trove_db=None, trove_json=True, trove_session=None)
    assert command.execute(args, runtime) == command.EXIT_PROBLEM
    assert '"error": "OSError: disk on fire"' in capsys.readouterr().out


def test_status_follows_the_foreground_engine(runtime):
    first = TroveEngine(runtime)
    first.on_session_start("alpha", platform="cli")
    second = TroveEngine(runtime)
    second.on_session_start("beta", platform="cli")
    assert "session_id: beta" in command.make_handler(runtime)("status")


def test_a_gateway_chats_command_reads_its_own_session_and_never_another_chats(runtime):
    import contextvars
    from types import SimpleNamespace

    chats = {"A": "agent:main:telegram:dm:1", "B": "agent:main:discord:dm:2", "C": "agent:main:telegram:dm:3"}
    engines = {}
    for name in ("B", "A"):  # A's engine binds last
        engines[name] = TroveEngine(runtime)
        engines[name].on_session_start(f"{name.lower()}1", platform="telegram", conversation_id=chats[name])
    runtime.store.ensure_session(SessionKey("c1", chats["C"], "telegram"))  # C: stored, no live engine
    handle = command.make_handler(runtime)

    def message(chat_key):  # one gateway message: the hook, then /trove, in the message's own context
        runner = SimpleNamespace(_session_key_for_source=lambda source: source)
        command.note_chat(event=SimpleNamespace(source=chat_key), gateway=runner)
        return handle("status")
    said = {n: contextvars.copy_context().run(message, key) for n, key in chats.items()}

    def names_a1(text):  # as a word: the status also prints the plugin's commit hash
        return re.search(r"\ba1\b", text) is not None
    assert "session_id: b1" in said["B"] and not names_a1(said["B"])
    assert "session_id: c1" in said["C"] and not names_a1(said["C"])
    assert "session_id: a1" in said["A"]
    # no chat named (the hook did not run): the last gateway chat's session is not assumed
    assert not names_a1(contextvars.copy_context().run(handle, "status"))


def test_long_output_is_bounded(runtime):
    big = {"rows": [{"n": i, "text": "x" * 500} for i in range(100)]}
    text = command.render("status", {"nested": big, **{f"k{i}": "y" * 200 for i in range(200)}})
    assert len(text) < command.MAX_TEXT + 200 and "truncated" in text


READ_ONLY = [["status"], ["doctor"], ["doctor", "clean"], ["doctor", "repair"], ["doctor", "source"],
             ["doctor", "retention"], ["rotate"], ["help"], ["bogus", "words"],
             ["doctor", "clean", "apply"]]  # refused without the flag


@pytest.mark.parametrize("words", READ_ONLY, ids=lambda w: "-".join(w))
def test_read_only_forms_write_nothing(tmp_path, words):
    rt = build_runtime(make_config(tmp_path, ignore_session_patterns=("cron_*",), fresh_tail_count=2))
    rt.store.append(SessionKey("cron_1"), [user("noise")])
    eng = TroveEngine(rt)
    eng.on_session_start("s1", platform="cli")
    eng.ingest([user(f"q{i}") if i % 2 == 0 else assistant(f"a{i}") for i in range(8)])
    with rt.db.transaction() as c:
        c.execute("UPDATE messages SET source='' WHERE store_id=1")
    before = store_dump(rt)
    text = command.make_handler(rt)(" ".join(words))
    assert text
    assert store_dump(rt) == before
    assert not (tmp_path / "backups").exists()


def test_backup_subcommand_writes_a_timestamped_copy(engine, backend):
    name, result = command.run(engine.runtime, ["backup"])
    if backend == "postgresql":  # no file copy of a server: the answer is the pg_dump line to run
        assert name == "backup" and result["status"] == "refused" and command.exit_code(result) == 1
        folder = backups.backup_dir(engine.runtime.config)  # made by the line, not by the answer
        assert result["pg_dump"].startswith(f"mkdir -p {folder} && pg_dump --format=custom --file={folder}/")
        assert "--schema=t_" in result["pg_dump"]
        assert result["pg_dump"] in result["reason"]
        assert not (Path(engine.runtime.config.hermes_home) / "backups").exists()
        return
    assert name == "backup" and result["status"] == "ok"
    assert Path(result["path"]).parent.name == "trove" and result["bytes"] > 0


def test_plugin_load_registers_the_command_and_runs_startup_maintenance(tmp_path, monkeypatch):
    import time

    import hermes_trove
    from hermes_trove.ops import maintenance

    for name in [k for k in __import__("os").environ if k.startswith("TROVE_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("HERMES_HOME", str(tmp_path))
    monkeypatch.setenv("TROVE_ENABLE_SLASH_COMMAND", "true")

    class HostCtx(FakeCtx):
        engine = None

        def register_context_engine(self, engine):
            self.engine = engine

    from hermes_trove.db import Database

    Database(tmp_path / "trove.db").connect()  # startup maintenance runs on an existing database
    ctx = HostCtx()
    hermes_trove.register(ctx)
    assert ctx.engine is not None and "trove" in ctx.commands and "trove" in ctx.cli
    conn = ctx.engine.runtime.db.read()
    deadline = time.time() + 10
    while meta_value(conn, maintenance.META_CHECKED_AT) is None and time.time() < deadline:
        time.sleep(0.02)
    assert meta_value(conn, maintenance.META_CHECKED_AT) is not None
    assert ctx.commands["trove"]["handler"]("").startswith("trove status:")


def test_the_real_host_plugin_context_accepts_both_commands(runtime):
    plugins = pytest.importorskip("hermes_cli.plugins", reason="hermes-agent is not installed in this interpreter")
    manager = plugins.PluginManager()
    ctx = plugins.PluginContext(plugins.PluginManifest(name="hermes-trove"), manager)
    enabled = build_runtime(dataclasses.replace(runtime.config, enable_slash_command=True))
    command.register(ctx, enabled)
    entry = manager._plugin_commands["trove"]
    assert entry["plugin"] == "hermes-trove" and entry["args_hint"] == command.ARGS_HINT
    assert plugins.resolve_plugin_command_result(entry["handler"]("help")).startswith("/trove commands:")
    cli = manager._cli_commands["trove"]
    parser = argparse.ArgumentParser()
    cli["setup_fn"](parser)
    args = parser.parse_args(["status", "--json"])
    enabled.db.connect()
    with pytest.raises(SystemExit) as done:  # the host ignores the return value
        cli["handler_fn"](args)
    assert done.value.code == 0
