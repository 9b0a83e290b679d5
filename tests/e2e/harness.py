"""Helpers for the end-to-end suite: find the host interpreter, lay out a scratch Hermes
home with the checkout installed as a plugin, run the host in subprocesses, read trove.db;
and for the install-route tests: a clean repository of the checkout, a venv with it
pip-installed, one 3-turn run per route and the checks every route must pass.

Nothing here imports hermes-agent: the host only ever runs in child processes, each with
its own ``HERMES_HOME``, ``TIRITH_ENABLED=0`` and the loopback-only network guard. The host
interpreter is one that can NOT import ``hermes_trove`` (scripts/test.sh builds it as
``.venv-host``), so every test loads the plugin as Hermes users do: as the directory plugin
``$HERMES_HOME/plugins/hermes-trove``, imported as ``hermes_plugins.hermes_trove``.
"""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NETGUARD = HERE / "netguard"
DRIVER = HERE / "driver.py"
GATEWAY_DRIVER = HERE / "gateway_driver.py"
HOST_VERSION = "0.19.0"
FALLBACK_WARNING = "falling back to built-in compressor"
DEFAULT_HOST_VENV = ROOT / ".venv-host"

_PROBE = ("import importlib.util, sys; "
          "sys.exit(0 if importlib.util.find_spec('run_agent') and importlib.util.find_spec('hermes_cli') else 3)")
_PACKAGE_PROBE = ("import importlib.util, sys; spec = importlib.util.find_spec('hermes_trove'); "
                  "print(spec.origin if spec else ''); sys.exit(0 if spec else 3)")


def candidate_pythons() -> list[str]:
    """Interpreters to try, in order: $TROVE_E2E_PYTHON, then the checkout's .venv-host.

    Never the interpreter running pytest nor .venv: both have the checkout installed
    editable, whose entry point would load ``hermes_trove`` instead of the directory plugin."""
    found = [os.environ.get("TROVE_E2E_PYTHON", ""), str(DEFAULT_HOST_VENV / "bin" / "python")]
    seen: list[str] = []
    for path in found:
        if path and path not in seen and Path(path).exists():
            seen.append(path)
    return seen


def find_host_python() -> str | None:
    """The first candidate interpreter that can import ``run_agent`` (checked without importing it)."""
    for python in candidate_pythons():
        try:
            done = subprocess.run([python, "-c", _PROBE], capture_output=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            continue
        if done.returncode == 0:
            return python
    return None


def package_importable(python: str, env: dict[str, str] | None = None) -> str | None:
    """Where ``import hermes_trove`` resolves for ``python`` (None: it cannot), run from an empty
    directory with ``env`` (the environment a host process gets)."""
    with tempfile.TemporaryDirectory() as empty:
        done = subprocess.run([python, "-c", _PACKAGE_PROBE], capture_output=True, text=True, timeout=60,
                              cwd=empty, env=env, stdin=subprocess.DEVNULL)
    return (done.stdout.strip() or "(found)") if done.returncode == 0 else None


def wheelhouse(python: str) -> Path:
    """The offline build backend scripts/test.sh downloads beside the host venv."""
    return Path(python).parent.parent / "wheelhouse"


def host_script(python: str, name: str) -> str:
    """A console script (``hermes``) installed beside the interpreter."""
    return str(Path(python).parent / name)


# Runs tests/e2e/driver.py's ``run`` and then waits for the named background threads (the
# plugin's rollup and extraction passes) before writing the result: driver.py itself exits at
# once, which would kill a pass mid-way. argv: DRIVER SPEC RESULT.
_DRIVER_WAITING = """
import importlib.util, json, os, sys, threading, time, traceback
spec_path, result_path = sys.argv[2], sys.argv[3]
loader = importlib.util.spec_from_file_location("trove_e2e_driver", sys.argv[1])
driver = importlib.util.module_from_spec(loader)
loader.loader.exec_module(driver)
with open(spec_path, encoding="utf-8") as fh:
    spec = json.load(fh)
try:
    result = driver.run(spec)
    names, deadline = set(spec["wait_threads"]), time.monotonic() + float(spec.get("wait_seconds", 60))
    waited = {}
    for t in [t for t in threading.enumerate() if t.name in names]:
        t.join(max(0.0, deadline - time.monotonic()))
        waited[t.name] = "alive" if t.is_alive() else "done"
    result["waited_threads"] = waited
    code = 0
except BaseException:
    result, code = {"error": traceback.format_exc()}, 1
with open(result_path, "w", encoding="utf-8") as fh:
    json.dump(result, fh, indent=1, default=str)
sys.stdout.flush()
os._exit(code)
"""


@dataclass
class HermesHome:
    """A scratch Hermes home wired to the fake server, with hermes-trove enabled.

    ``wired=False`` makes a bare home instead: no plugin directory and no ``context.engine`` or
    ``plugins.enabled`` in config.yaml, for the tests that install the plugin the user's way."""

    root: Path
    python: str
    base_url: str
    context_length: int = 128000
    env_overrides: dict[str, str] = field(default_factory=dict)
    wired: bool = True
    home_dir: Path | None = None  # default: <root>/home

    @property
    def home(self) -> Path:
        return self.home_dir or self.root / "home"

    @property
    def netlog(self) -> Path:
        return self.root / "netlog.txt"

    @property
    def guarded_processes(self) -> list[str]:
        """One line per host process in which the network guard was active."""
        active = Path(str(self.netlog) + ".active")
        return active.read_text(encoding="utf-8").splitlines() if active.exists() else []

    @property
    def db_path(self) -> Path:
        return self.home / "trove.db"

    @property
    def plugin_dir(self) -> Path:
        return self.home / "plugins" / "hermes-trove"

    def create(self) -> HermesHome:
        self.home.mkdir(parents=True, exist_ok=True)
        if self.wired:
            self.plugin_dir.parent.mkdir(parents=True, exist_ok=True)
            if not self.plugin_dir.exists():
                self.plugin_dir.symlink_to(ROOT, target_is_directory=True)
        (self.home / "config.yaml").write_text(self.config_yaml(), encoding="utf-8")
        check = {"ts": int(time.time()), "behind": 0, "rev": None, "ver": HOST_VERSION}
        (self.home / ".update_check").write_text(json.dumps(check), encoding="utf-8")
        self.netlog.touch()
        return self

    def config_yaml(self) -> str:
        # context_length values skip the host's model-window discovery probes; tirith, lazy
        # dependency installs (the CLI pip-installs a TTS backend otherwise) and the nudges
        # are off, so a run downloads nothing and forks no review agents.
        return "\n".join([
            "model:",
            "  default: fake-model",
            "  provider: custom",
            f"  base_url: {self.base_url}",
            "  api_key: sk-fake",
            f"  context_length: {self.context_length}",
            *(["context:", "  engine: trove", "plugins:", "  enabled: [hermes-trove]"] if self.wired else []),
            "auxiliary:",
            "  compression:",
            f"    context_length: {self.context_length}",
            "security:",
            "  tirith_enabled: false",
            "  allow_lazy_installs: false",
            "memory:",
            "  nudge_interval: 0",
            "skills:",
            "  creation_nudge_interval: 0",
            "",
        ])

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TROVE_", "HERMES_", "OPENAI_"))}
        env.update({
            "HOME": str(self.root),
            "HERMES_HOME": str(self.home),
            "TIRITH_ENABLED": "0",
            "HERMES_DISABLE_LAZY_INSTALLS": "1",
            "TROVE_E2E_NETLOG": str(self.netlog),
            "PYTHONPATH": os.pathsep.join([str(NETGUARD)] + [p for p in [os.environ.get("PYTHONPATH", "")] if p]),
            # The host probes python3/pip on PATH for its system prompt: find the venv's first.
            "PATH": os.pathsep.join([str(Path(self.python).parent), os.environ.get("PATH", "/usr/bin:/bin")]),
            "PYTHONDONTWRITEBYTECODE": "1",
            "NO_COLOR": "1",
            "TERM": "dumb",
        })
        env.update(self.env_overrides)
        env.update(extra)
        return env

    def run_driver(self, spec: dict[str, Any], name: str, timeout: float = 300,
                   script: Path = DRIVER) -> dict[str, Any]:
        """Run tests/e2e/driver.py (or another driver ``script``) with ``spec``; returns its result
        (raises with logs on failure).

        ``spec["wait_threads"]`` (thread names) makes the host process wait, up to
        ``spec["wait_seconds"]``, for those background threads before it exits."""
        proc = self.start_driver(spec, name, script)
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
        result_path = self.root / (name + ".result.json")
        result = json.loads(result_path.read_text(encoding="utf-8")) if result_path.exists() else {}
        result["stdout"], result["stderr"], result["returncode"] = stdout, stderr, proc.returncode
        if proc.returncode != 0 or "error" in result:
            raise AssertionError("host driver {} failed (rc={}):\n{}\n--- stderr ---\n{}".format(
                name, proc.returncode, result.get("error", ""), stderr[-4000:]))
        return result

    def run_cli_steps(self, steps: list[dict[str, Any]], name: str, timeout: float = 600) -> dict[str, Any]:
        """``run_driver`` of the interactive CLI (``cli.HermesCLI``) through ``steps`` (chats and commands)."""
        return self.run_driver({"mode": "cli", "steps": steps, "max_iterations": 4}, name, timeout=timeout)

    def start_driver(self, spec: dict[str, Any], name: str, script: Path = DRIVER) -> subprocess.Popen[str]:
        """Start tests/e2e/driver.py (or ``script``) with ``spec`` and return the running host process."""
        spec = dict(spec)
        spec.setdefault("base_url", self.base_url)
        spec_path, result_path = self.root / (name + ".spec.json"), self.root / (name + ".result.json")
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        command = [self.python, str(script), str(spec_path), str(result_path)]
        if spec.get("wait_threads"):
            command = [self.python, "-c", _DRIVER_WAITING, str(script), str(spec_path), str(result_path)]
        return subprocess.Popen(command, env=self.env(), cwd=str(self.root), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)

    def run_cli(self, args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the ``hermes`` console script with ``args`` (no stdin); a non-zero exit raises."""
        done = self.hermes(*args, timeout=timeout)
        if done.returncode != 0:
            raise AssertionError("hermes {} failed (rc={}):\n{}\n--- stderr ---\n{}".format(
                " ".join(args), done.returncode, done.stdout[-3000:], done.stderr[-4000:]))
        return done

    def hermes(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """``hermes ARGS`` in this home; the exit status is returned, not raised."""
        return subprocess.run([host_script(self.python, "hermes"), *args], env=self.env(), cwd=str(self.root),
                              capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)

    def host_logs(self) -> str:
        """Everything the host wrote under $HERMES_HOME/logs."""
        logs = self.home / "logs"
        if not logs.is_dir():
            return ""
        return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(logs.rglob("*"))
                         if p.is_file())


def stored_text(value: Any) -> Any:
    """A ``messages.content`` value as text: the store keeps long text as zlib-deflated UTF-8 (a BLOB)."""
    return zlib.decompress(value).decode("utf-8") if isinstance(value, bytes) else value


def query(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read-only query against a trove.db written by the host; ``messages`` reads its text back.

    A temporary view named ``messages`` (the temp schema is searched first) shows every column
    with ``content`` unpacked, so the tests' SQL compares text whatever the store packed.
    """
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
        conn.create_function("e2e_text", 1, stored_text, deterministic=True)
        names = [str(r[1]) for r in conn.execute("PRAGMA main.table_info(messages)")]
        if names:
            columns = ", ".join("e2e_text(content) AS content" if n == "content" else n for n in names)
            conn.execute(f"CREATE TEMP VIEW messages AS SELECT {columns} FROM main.messages")
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def content_counts(db_path: Path, session_id: str | None = None) -> dict[tuple[str, str], int]:
    """How many stored rows share each (role, content) pair, optionally for one session."""
    sql = "SELECT role, content, COUNT(*) FROM messages"
    params: tuple[Any, ...] = ()
    if session_id:
        sql, params = sql + " WHERE session_id = ?", (session_id,)
    return {(role, content): n for role, content, n in query(db_path, sql + " GROUP BY role, content", params)}


def chat_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Bodies of main-loop requests (they offer tools); auxiliary calls offer none."""
    return [r["body"] for r in requests if r["path"].endswith("/chat/completions") and r["body"].get("tools")]


def aux_requests(requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["body"] for r in requests if r["path"].endswith("/chat/completions") and not r["body"].get("tools")]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [(t.get("function") or {}).get("name", "") for t in body.get("tools") or []]


def request_tokens(body: dict[str, Any]) -> int:
    """Rough prompt size of one request: characters of its messages divided by four."""
    return len(json.dumps(body.get("messages") or [])) // 4


def status_json(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    """The JSON object ``hermes trove status --json`` printed (the host may print lines before it)."""
    return dict(json.loads(done.stdout[done.stdout.index("{"):]))


def plugin_tool_names() -> list[str]:
    """The tools plugin.yaml says the plugin provides (its ``provides_tools`` list)."""
    names, inside = [], False
    for line in (ROOT / "plugin.yaml").read_text(encoding="utf-8").splitlines():
        if not line.startswith((" ", "-")):
            inside = line.startswith("provides_tools:")
        elif inside and line.strip().startswith("- "):
            names.append(line.strip()[2:].strip())
    return names


SNAPSHOT_IGNORE = shutil.ignore_patterns(".git", ".venv", ".venv-*", ".*_cache", "__pycache__", "*.egg-info",
                                         "build", "dist", "*.db", "*.db-wal", "*.db-shm")


def snapshot_repo(where: Path) -> Path:
    """A clean git repository holding the checkout's working tree (no venvs, caches or build
    output), committed once: what ``hermes plugins install`` clones and ``pip install`` builds."""
    repo = where / "hermes-trove"
    shutil.copytree(ROOT, repo, symlinks=True, ignore=SNAPSHOT_IGNORE)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "snapshot"]):
        subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, timeout=120)
    return repo


def site_packages(python: str) -> Path:
    """The purelib directory of ``python``'s environment."""
    done = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, timeout=60, check=True)
    return Path(done.stdout.strip())


def pip_venv(where: Path, host_python: str, checkout: Path, env: dict[str, str]) -> str:
    """A venv with ``checkout`` pip-installed (not editable) and the host borrowed from ``host_python``.

    The host is not installed twice: a .pth line puts the host venv's site-packages after this
    venv's own, and a ``hermes`` script like the host venv's starts this venv's interpreter. The
    wheel is built offline: no index, and the build backend comes from the wheelhouse
    scripts/test.sh fills. Returns the new interpreter."""
    venv = where / "pip-venv"
    subprocess.run([host_python, "-m", "venv", "--without-pip", str(venv)], check=True, capture_output=True,
                   timeout=120)
    python = str(venv / "bin" / "python")
    # A plain path line (not ``import site``): pip's isolated build environment then drops it again.
    (site_packages(python) / "zz_hermes_host.pth").write_text(f"{site_packages(host_python)}\n", encoding="utf-8")
    script = Path(host_script(host_python, "hermes")).read_text(encoding="utf-8").split("\n", 1)[1]
    hermes = Path(host_script(python, "hermes"))
    hermes.write_text(f"#!{python}\n{script}", encoding="utf-8")
    hermes.chmod(0o755)
    done = subprocess.run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--disable-pip-version-check",
                           "--find-links", str(wheelhouse(host_python)), str(checkout)],
                          env=env, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        raise AssertionError(f"pip install {checkout} failed (rc={done.returncode}):\n{done.stdout[-3000:]}\n"
                             f"{done.stderr[-3000:]}")
    return python


# -- install routes: one 3-turn run through the host, then what the plugin reports -------------
ROUTE_TURNS = ("route turn 1: my editor is vim, remember it",
               "route turn 2: the heliotrope garden is blooming",
               "route turn 3: what about the heliotrope garden?")


@dataclass
class RouteRun:
    """What one install route produced: the host's 3-turn run, the requests the fake model got,
    and ``hermes trove status --json`` afterwards."""

    home: HermesHome
    result: dict[str, Any]
    requests: list[dict[str, Any]]
    status_run: subprocess.CompletedProcess[str]

    @property
    def status(self) -> dict[str, Any]:
        """The status JSON; fails with the command's output when it did not run (the ``hermes
        trove`` command exists only when the plugin loaded)."""
        done = self.status_run
        assert done.returncode == 0, f"hermes trove status --json failed (rc={done.returncode}):\n" \
                                     f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return status_json(done)


def run_route(home: HermesHome, requests: Any, name: str, **spec: Any) -> RouteRun:
    """Three turns through the host's own plugin discovery (entry points included), then status.
    ``requests`` is the fake server's ``requests`` method; ``spec`` adds driver options."""
    start = len(requests())
    result = home.run_driver({"turns": list(ROUTE_TURNS), "directory_plugin_only": False, **spec}, name)
    sent = requests()[start:]
    return RouteRun(home, result, sent, home.hermes("trove", "status", "--json"))


def trove_log_problems(run: RouteRun) -> list[str]:
    """Warnings and errors that name the plugin, an engine fallback or a traceback, wherever logged."""
    lines = list(run.result.get("warnings") or [])
    lines += (run.result.get("stdout", "") + run.result.get("stderr", "") + run.home.host_logs()).splitlines()
    bad = []
    for line in lines:
        low = line.lower()
        if FALLBACK_WARNING in line or "traceback" in low or "failed to load" in low:
            bad.append(line)
        elif ("warning" in low or "error" in low) and "trove" in low:
            bad.append(line)
    return bad


def check_engine_trove(run: RouteRun, route: str, served_from: str) -> None:
    """The host ran engine ``trove`` from the ``served_from`` module tree, status says ``route``."""
    result = run.result
    problems = trove_log_problems(run)
    assert result["engine_name"] == "trove", (result["engine_class"], problems[:20])
    assert result["engine_class"] == f"{served_from}.engine.TroveEngine", result["engine_class"]
    assert not problems, "\n".join(problems[:20])
    plugin = run.status["plugin"]
    assert plugin["route"] == route, plugin
    assert plugin["copies"][0]["loaded"] == "true", plugin["copies"]


def check_tools_offered(run: RouteRun, expected: list[str]) -> None:
    """Every main request offered exactly the expected trove_* tools, each once."""
    bodies = chat_requests(run.requests)
    assert len(bodies) >= len(ROUTE_TURNS), len(bodies)
    for body in bodies:
        names = tool_names(body)
        trove = sorted(n for n in names if n.startswith("trove_"))
        assert trove == sorted(expected), sorted(set(expected) ^ set(trove))
        assert len(names) == len(set(names)), names


def check_stored_once(run: RouteRun) -> None:
    """Each turn of the run (user message and reply) is in trove.db exactly once."""
    session = run.result["session_id"]
    counts = content_counts(run.home.db_path, session)
    finals = [t["final"] for t in run.result["turns"]]
    for key in [("user", t) for t in ROUTE_TURNS] + [("assistant", f) for f in finals]:
        assert counts.get(key) == 1, (key, counts.get(key))
    assert sum(counts.values()) == 2 * len(ROUTE_TURNS), counts


def check_skill_visible(run: RouteRun) -> None:
    """The bundled skill is in the host's skills index, and status says so."""
    assert (run.home.home / "skills" / "hermes-trove" / "SKILL.md").exists()
    assert run.status["plugin"]["skill"]["in_index"] is True, run.status["plugin"]["skill"]


def check_loopback_only(run: RouteRun) -> None:
    """The network guard was active in the home's host processes and refused nothing."""
    assert run.home.guarded_processes, "the network guard never ran in a host process"
    assert run.home.netlog.read_text(encoding="utf-8") == "", run.home.netlog.read_text(encoding="utf-8")
