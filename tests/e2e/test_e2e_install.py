"""Install route (a), the Hermes way: ``hermes plugins install file://<clean repo> --enable``, then the
one step after-install.md names (``hermes config set context.engine trove``), in a scratch home that
starts with no plugin and no engine configured. The host clones the repository into its plugins
directory and loads that copy as a directory plugin (the host venv cannot import ``hermes_trove``).

One home gets a ``hermes chat`` turn, a 3-turn run through the host and ``hermes trove status``. A
second home installs the same way with the opt-in background families on (temporal rollups,
assertion extraction, pre-answer evidence): a second host process resumes the session, forces a
compaction and waits for the background passes, which must each have run, with no load error.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hermes_trove.ingest import EVIDENCE_OPEN

from .fake_llm import EXTRACTION_MARKER, FakeLLM
from .harness import (
    FALLBACK_WARNING,
    ROUTE_TURNS,
    HermesHome,
    aux_requests,
    chat_requests,
    check_engine_trove,
    check_loopback_only,
    check_skill_visible,
    check_stored_once,
    check_tools_offered,
    host_script,
    plugin_tool_names,
    query,
    run_route,
    trove_log_problems,
)

DIRECTORY_MODULES = "hermes_plugins.hermes_trove"  # how the host imports a plugin directory
OPT_IN = {"TROVE_TEMPORAL_ROLLUPS_ENABLED": "true", "TROVE_ASSERTIONS_ENABLED": "true",
          "TROVE_PREANSWER_EVIDENCE_ENABLED": "true",
          "TROVE_FRESH_TAIL_COUNT": "2"}  # lets the forced compaction of 3 turns write a leaf
BACKGROUND_THREADS = ["trove-rollups", "trove-assertions"]


def install(root: Path, host_python: str, fake_llm: FakeLLM, repo: Path,
            **env: str) -> tuple[HermesHome, subprocess.CompletedProcess[str], subprocess.CompletedProcess[str],
                                 subprocess.CompletedProcess[str]]:
    """A bare home, then the two host commands of the install route, with ``hermes trove doctor`` run
    between them (the plugin enabled, the engine not chosen yet); their results are returned."""
    home = HermesHome(root, host_python, fake_llm.url, env_overrides=dict(env), wired=False).create()
    added = home.hermes("plugins", "install", f"file://{repo}", "--enable")
    early = home.hermes("trove", "doctor")
    engine = home.hermes("config", "set", "context.engine", "trove")
    assert added.returncode == 0 and engine.returncode == 0, added.stdout + added.stderr + engine.stderr
    return home, added, engine, early


@pytest.fixture(scope="module")
def installed(tmp_path_factory, host_python, fake_llm, checkout_repo) -> dict[str, Any]:
    home, added, engine, early = install(tmp_path_factory.mktemp("install"), host_python, fake_llm, checkout_repo)
    turn = home.hermes("chat", "-Q", "-q", "install turn: remember the code word heliotrope")
    run = run_route(home, fake_llm.requests, "route-a")
    bad = home.hermes("trove", "frobnicate")
    return {"home": home, "install": added, "engine": engine, "early": early, "turn": turn, "run": run, "bad": bad}


@pytest.fixture(scope="module")
def opted_in(tmp_path_factory, host_python, fake_llm, checkout_repo) -> dict[str, Any]:
    home, _, _, _ = install(tmp_path_factory.mktemp("install-opt-in"), host_python, fake_llm, checkout_repo, **OPT_IN)
    history = str(home.root / "history.json")
    run = run_route(home, fake_llm.requests, "opt-in", history_out=history)
    start = len(fake_llm.requests())
    later = home.run_driver({"turns": [], "session_id": run.result["session_id"], "history_in": history,
                             "compress_focus": "", "directory_plugin_only": False,
                             "wait_threads": BACKGROUND_THREADS, "wait_seconds": 60}, "opt-in-later")
    return {"home": home, "run": run, "later": later, "later_requests": fake_llm.requests()[start:]}


def test_the_host_installs_enables_and_shows_the_after_install_step(installed):
    out = installed["install"].stdout
    assert "hermes config set context.engine trove" in out and "enabled" in out
    plugin = installed["home"].plugin_dir
    assert (plugin / "plugin.yaml").exists() and not plugin.is_symlink()


def test_the_doctor_before_the_engine_is_chosen_names_the_missing_step(installed):
    """Enabled but ``context.engine`` still the host's default: Hermes runs its own compressor and trove
    stores nothing, so the doctor says why there is no store and what to run, and writes nothing."""
    early = installed["early"]
    assert early.returncode == 2, early.stdout + early.stderr
    assert "no trove database" in early.stderr
    assert "context.engine is 'compressor'" in early.stderr, early.stderr
    assert "hermes config set context.engine trove" in early.stderr


def test_a_turn_runs_with_engine_trove_after_the_host_commands(installed):
    done, home = installed["turn"], installed["home"]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert FALLBACK_WARNING not in done.stdout + done.stderr + home.host_logs()
    rows = query(home.db_path, "SELECT content FROM messages WHERE role='user'")
    assert any("heliotrope" in str(r[0]) for r in rows)


def test_the_installed_directory_serves_engine_trove_with_every_tool(installed):
    run = installed["run"]
    check_engine_trove(run, "plugins-dir", DIRECTORY_MODULES)
    assert run.result["plugin_source"] == f"user:{installed['home'].plugin_dir}", run.result["plugin_source"]
    check_tools_offered(run, plugin_tool_names())
    check_loopback_only(run)


def test_each_turn_of_the_installed_run_is_stored_once(installed):
    check_stored_once(installed["run"])


def test_the_skill_is_in_the_index_and_status_names_the_only_copy(installed):
    run = installed["run"]
    check_skill_visible(run)
    plugin = run.status["plugin"]
    assert [c["path"] for c in plugin["copies"]] == [str(installed["home"].plugin_dir.resolve())]
    assert "warning" not in plugin


def test_hermes_trove_exit_codes_reach_the_shell(installed):
    assert installed["bad"].returncode == 2
    assert "unknown subcommand: frobnicate" in installed["bad"].stdout
    home, sid = installed["home"], installed["run"].result["session_id"]
    typo = home.hermes("trove", "status", "--session", sid[:-1] + "x")
    assert typo.returncode == 1 and f"no session '{sid[:-1]}x' in this store" in typo.stdout, typo.stdout[-800:]
    assert home.hermes("trove", "dag", "--session", sid[:-1] + "x").returncode == 1
    assert home.hermes("trove", "status", "--session", sid).returncode == 0
    # a command that acts on the whole store refuses --session rather than ignore it and report "(unbound)"
    wrong = home.hermes("trove", "doctor", "--session", sid)
    assert wrong.returncode == 2 and "takes no --session" in wrong.stderr and "(unbound)" not in wrong.stdout, wrong


def test_hermes_trove_import_names_the_importer_that_runs_from_the_install(installed):
    """The importer is no `hermes trove` subcommand: the answer names the command that is, and it runs."""
    home = installed["home"]
    said = home.hermes("trove", "import")
    assert said.returncode == 2 and "unknown subcommand: import" in said.stdout, said.stdout[-1500:]
    script = home.plugin_dir / "scripts" / "import_lossless_claw.py"
    assert f"{script} --help" in said.stdout.replace(str(script.resolve()), str(script)), said.stdout[:1500]
    helped = subprocess.run([home.python, str(script), "--help"], env=home.env(), capture_output=True, text=True,
                            timeout=120, cwd=str(home.root))
    assert helped.returncode == 0 and "--source-db" in helped.stdout, helped.stderr[-2000:]


def test_the_doctor_warns_when_hermes_compression_is_switched_off(make_home):
    home = make_home()
    turn = home.hermes("chat", "-Q", "-q", "a turn before compression is switched off")
    assert turn.returncode == 0 and home.db_path.is_file(), turn.stderr[-2000:]
    assert home.hermes("trove", "doctor").returncode == 0
    assert home.hermes("config", "set", "compression.enabled", "false").returncode == 0
    doctor = home.hermes("trove", "doctor")
    assert doctor.returncode == 0, doctor.stdout[-2000:] + doctor.stderr[-2000:]  # a warning
    assert "compression.enabled is off" in doctor.stdout
    assert "hermes config set compression.enabled true" in doctor.stdout


def test_the_terminal_doctor_gives_the_verdict_the_readme_describes(installed):
    """README, Verify: from the terminal no conversation runs, so the verdict is ``configured``."""
    done = installed["home"].hermes("trove", "doctor", "--json")
    assert done.returncode == 0, done.stdout[-2000:]
    identity = next(c for c in json.loads(done.stdout)["checks"] if c["check"] == "plugin_identity")
    assert "host: configured: context.engine is trove" in identity["detail"], identity
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    verify = readme[readme.index("### Verify"):readme.index("## Tools")]
    assert "plugin_identity" in verify and "`configured`" in verify and "ends with" not in verify


def test_the_documented_terminal_commands_run_on_the_hermes_install(installed, tmp_path):
    """docs/import.md: with no pip install, the importer is the script inside the installed plugin,
    run by Hermes' own Python; the operator guide: there ``python -m hermes_trove`` cannot import the
    package, and ``hermes trove`` is the terminal CLI."""
    home = installed["home"]
    export = tmp_path / "sessions" / "0a1b2c3d-0000-4000-8000-00000000beef.jsonl"
    export.parent.mkdir()
    lines = [{"type": "session", "version": 3, "id": export.stem, "timestamp": "2026-03-01T09:00:00Z"},
             {"type": "message", "id": "m1", "parentId": None, "timestamp": "2026-03-01T09:00:01Z",
              "message": {"role": "user", "content": "the greenhouse key is under the blue pot"}},
             {"type": "message", "id": "m2", "parentId": "m1", "timestamp": "2026-03-01T09:00:05Z",
              "message": {"role": "assistant", "content": "Noted: under the blue pot."}}]
    export.write_text("\n".join(json.dumps(x) for x in lines) + "\n", encoding="utf-8")
    script = home.plugin_dir / "scripts" / "import_lossless_claw.py"
    env = home.env()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([home.python, *args], env=env, cwd=str(home.root), capture_output=True, text=True,
                              timeout=120, stdin=subprocess.DEVNULL)

    done = run(str(script), "--source-jsonl-dir", str(export.parent), "--target-db", str(home.db_path),
               "--agent", "sammy", "--apply", "--json")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert json.loads(done.stdout)["imported"] == 2
    rows = query(home.db_path, "SELECT session_id FROM messages WHERE content = ?",
                 ("the greenhouse key is under the blue pot",))
    assert rows == [(f"openclaw-jsonl:agent:sammy:{export.stem}",)]
    assert "No module named hermes_trove" in run("-m", "hermes_trove", "status").stderr
    status = home.hermes("trove", "status", "--db", str(home.db_path), "--json")
    assert status.returncode == 0 and json.loads(status.stdout)["store"]["total_sessions"] >= 2


def test_a_missing_extra_is_explained_for_the_plugin_directory_not_as_a_second_pip_copy(installed):
    """Embeddings on, without their packages in Hermes' Python: the hint installs the packages into
    that Python; ``pip install 'hermes-trove[embeddings]'`` would add a second copy beside the plugin."""
    home = installed["home"]
    done = subprocess.run([host_script(home.python, "hermes"), "trove", "embed", "status", "--json"],
                          env=home.env(TROVE_EMBEDDINGS_ENABLED="true"), cwd=str(home.root), capture_output=True,
                          text=True, timeout=120, stdin=subprocess.DEVNULL)
    reason = json.loads(done.stdout)["unavailable_reason"]
    python = reason.split("; ", 1)[1].split(" -m pip install ", 1)[0]
    assert Path(python).parent.resolve() == Path(home.python).parent.resolve(), reason  # the host's venv
    assert "-m pip install 'onnxruntime>=1.19' numpy" in reason, reason
    assert "hermes-trove[" not in reason, reason


# -- the same route with the opt-in families on ------------------------------------------------
def test_with_opt_in_families_the_install_serves_trove_and_stores_each_turn_once(opted_in):
    run = opted_in["run"]
    check_engine_trove(run, "plugins-dir", DIRECTORY_MODULES)
    check_tools_offered(run, plugin_tool_names())
    check_stored_once(run)
    check_skill_visible(run)


def test_the_background_passes_finished_and_nothing_logged_a_load_error(opted_in):
    later = opted_in["later"]
    assert set(later["waited_threads"].values()) <= {"done"}, later["waited_threads"]
    assert later["engine_name"] == "trove"
    assert not [w for w in later["warnings"] if "trove" in w.lower() or FALLBACK_WARNING in w], later["warnings"]
    problems = trove_log_problems(opted_in["run"])
    assert not problems, "\n".join(problems[:20])
    check_loopback_only(opted_in["run"])


def test_the_rollup_pass_ran_over_the_forced_compactions_leaf(opted_in):
    db = opted_in["home"].db_path
    assert opted_in["later"]["forced_compaction"]["compression_count"] == 1
    assert query(db, "SELECT COUNT(*) FROM summary_nodes WHERE depth = 0") == [(1,)]
    rows = query(db, "SELECT period_kind, status, error FROM temporal_rollups ORDER BY period_kind")
    # The pass turned the leaf into its day, week and month (built once those periods close).
    assert [r[0] for r in rows] == ["day", "month", "week"], rows
    assert all(r[1] != "failed" and r[2] is None for r in rows), rows


def test_the_assertion_pass_ran_once_over_the_stored_turns(opted_in):
    db = opted_in["home"].db_path
    batches = query(db, "SELECT outcome, messages, model_calls, stored FROM assertion_batches")
    # One pass in the second process reads the whole backlog; a host slow enough to pass the
    # 20 s interval during the first run may split it, but never reads a message twice.
    assert batches and all(b[0] == "ok" and b[2] == 1 for b in batches), batches
    assert sum(b[1] for b in batches) == 2 * len(ROUTE_TURNS) and sum(b[3] for b in batches) == 1, batches
    assert query(db, "SELECT value_text, quote FROM assertions") == [("vim", "my editor is vim")]
    prompts = [b for b in aux_requests(opted_in["run"].requests + opted_in["later_requests"])
               if EXTRACTION_MARKER in str((b.get("messages") or [{}])[-1].get("content"))]
    assert len(prompts) == len(batches)


def test_pre_answer_evidence_reached_the_model_with_the_earlier_turn(opted_in):
    bodies = chat_requests(opted_in["run"].requests)
    last_user = [m for m in bodies[-1]["messages"] if m.get("role") == "user"][-1]
    content = str(last_user.get("content"))
    assert content.startswith(ROUTE_TURNS[2]) and EVIDENCE_OPEN in content, content[:600]
    assert "the heliotrope garden is blooming" in content[content.index(EVIDENCE_OPEN):]
