"""Helpers for the end-to-end suite: find the host interpreter, lay out a scratch Hermes
home with the checkout installed as a plugin, run the host in subprocesses, read trove.db.

Nothing here imports hermes-agent: the host only ever runs in child processes, each with
its own ``HERMES_HOME``, ``TIRITH_ENABLED=0`` and the loopback-only network guard.
"""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NETGUARD = HERE / "netguard"
DRIVER = HERE / "driver.py"
HOST_VERSION = "0.19.0"
FALLBACK_WARNING = "falling back to built-in compressor"

_PROBE = ("import importlib.util, sys; "
          "sys.exit(0 if importlib.util.find_spec('run_agent') and importlib.util.find_spec('hermes_cli') else 3)")


def candidate_pythons() -> list[str]:
    """Interpreters to try, in order: $TROVE_E2E_PYTHON when set, this one, then the checkout's .venv."""
    found = [os.environ.get("TROVE_E2E_PYTHON", ""), sys.executable, str(ROOT / ".venv" / "bin" / "python")]
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
        except (OSError, subprocess.TimeoutExpired):
            continue
        if done.returncode == 0:
            return python
    return None


def host_script(python: str, name: str) -> str:
    """A console script (``hermes``) installed beside the interpreter."""
    return str(Path(python).parent / name)


@dataclass
class HermesHome:
    """A scratch Hermes home wired to the fake server, with hermes-trove enabled."""

    root: Path
    python: str
    base_url: str
    context_length: int = 128000
    env_overrides: dict[str, str] = field(default_factory=dict)

    @property
    def home(self) -> Path:
        return self.root / "home"

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

    def create(self) -> HermesHome:
        plugins = self.home / "plugins"
        plugins.mkdir(parents=True, exist_ok=True)
        link = plugins / "hermes-trove"
        if not link.exists():
            link.symlink_to(ROOT, target_is_directory=True)
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
            "context:",
            "  engine: trove",
            "plugins:",
            "  enabled: [hermes-trove]",
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

    def run_driver(self, spec: dict[str, Any], name: str, timeout: float = 300) -> dict[str, Any]:
        """Run tests/e2e/driver.py with ``spec``; returns its result (raises with logs on failure)."""
        spec = dict(spec)
        spec.setdefault("base_url", self.base_url)
        spec_path, result_path = self.root / (name + ".spec.json"), self.root / (name + ".result.json")
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        done = subprocess.run([self.python, str(DRIVER), str(spec_path), str(result_path)],
                              env=self.env(), cwd=str(self.root), capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)
        result = json.loads(result_path.read_text(encoding="utf-8")) if result_path.exists() else {}
        result["stdout"], result["stderr"], result["returncode"] = done.stdout, done.stderr, done.returncode
        if done.returncode != 0 or "error" in result:
            raise AssertionError("host driver {} failed (rc={}):\n{}\n--- stderr ---\n{}".format(
                name, done.returncode, result.get("error", ""), done.stderr[-4000:]))
        return result

    def run_cli(self, args: list[str], timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """Run the ``hermes`` console script with ``args`` (no stdin)."""
        done = subprocess.run([host_script(self.python, "hermes"), *args], env=self.env(),
                              cwd=str(self.root), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise AssertionError("hermes {} failed (rc={}):\n{}\n--- stderr ---\n{}".format(
                " ".join(args), done.returncode, done.stdout[-3000:], done.stderr[-4000:]))
        return done

    def host_logs(self) -> str:
        """Everything the host wrote under $HERMES_HOME/logs."""
        logs = self.home / "logs"
        if not logs.is_dir():
            return ""
        return "\n".join(p.read_text(encoding="utf-8", errors="replace") for p in sorted(logs.rglob("*"))
                         if p.is_file())


def query(db_path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Read-only query against a trove.db written by the host."""
    conn = sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)
    try:
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
