"""Several processes and engine copies share one trove.db without lock errors or duplicates."""
from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

from conftest import ROOT, make_config, user

from hermes_trove.runtime import build_runtime
from hermes_trove.store import SessionKey

BACKENDS = ("sqlite", "postgresql")  # every test here runs on the file and on a server

WRITER = textwrap.dedent("""
    import sys
    sys.path.insert(0, {tests!r})
    import conftest
    from pathlib import Path
    from conftest import make_config, user, assistant
    from hermes_trove.runtime import build_runtime
    from hermes_trove.store import SessionKey
    rt = build_runtime(make_config(Path({home!r})))
    name = sys.argv[1]
    own, shared = [], []
    for i in range(150):
        own += [user(f"{{name}} q{{i}}"), assistant(f"{{name}} a{{i}}")]
        rt.store.ingest(SessionKey(name), own)
        shared = [user(f"shared q{{k}}") for k in range(i + 1)]
        rt.store.ingest(SessionKey("shared"), shared)  # every process shows the same transcript
    print("ok")
""")


def test_processes_ingesting_at_once_store_everything_exactly_once(tmp_path):
    script = WRITER.format(tests=str(ROOT / "tests"), home=str(tmp_path))
    procs = [subprocess.Popen([sys.executable, "-c", script, f"proc{i}"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (out, err) in zip(procs, outs, strict=True):
        assert p.returncode == 0 and out.strip() == "ok", err
    rt = build_runtime(make_config(tmp_path))
    for i in range(3):
        assert rt.store.count(f"proc{i}") == 300
    shared = [r.content for r in rt.store.page("shared", 0, 10_000)]
    assert shared == [f"shared q{k}" for k in range(150)]
    if rt.db.kind == "sqlite":  # the file and its FTS5 index; a server has neither
        conn = rt.db.read()
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")


def test_engine_copies_on_threads_share_the_runtime(tmp_path):
    rt = build_runtime(make_config(tmp_path))
    errors = []

    def work(n):
        try:
            for i in range(100):
                rt.store.ingest(SessionKey("t"), [user(f"m{k}") for k in range(i + 1)])
                rt.store.ingest(SessionKey(f"own{n}"), [user(f"{n}-{k}") for k in range(i + 1)])
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [r.content for r in rt.store.page("t", 0, 1000)] == [f"m{k}" for k in range(100)]
    assert all(rt.store.count(f"own{n}") == 100 for n in range(4))
