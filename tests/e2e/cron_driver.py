"""Run one Hermes cron job offline for the end-to-end suite, through the host's own scheduler.

``python cron_driver.py SPEC.json RESULT.json`` with ``HERMES_HOME`` set: creates each job of
``spec["jobs"]`` (``prompt``, ``toolsets``) with ``cron.jobs.create_job`` and runs it once with
``cron.scheduler.run_job``, the call the ticker makes for a due job. The result records each
run's success, final response and error, and every WARNING-or-worse log record.
"""
from __future__ import annotations

import importlib.util
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

_spec = importlib.util.spec_from_file_location("trove_e2e_driver", Path(__file__).with_name("driver.py"))
assert _spec is not None and _spec.loader is not None
driver = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(driver)


def run(spec: dict[str, Any]) -> dict[str, Any]:
    collect = driver._Collect()
    logging.getLogger().addHandler(collect)
    driver._skip_entry_points()
    from cron.jobs import create_job
    from cron.scheduler import run_job

    runs = []
    for item in spec["jobs"]:
        job = create_job(item["prompt"], "every 1h", name=item.get("name"), deliver="local",
                         enabled_toolsets=item.get("toolsets", ["todo", "context_engine"]))
        ok, _doc, final, error = run_job(job)
        runs.append({"job_id": job["id"], "ok": ok, "final": str(final or "")[:2000], "error": error})
    return {"runs": runs, "warnings": collect.lines}


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as fh:
        spec = json.load(fh)
    try:
        result, code = run(spec), 0
    except BaseException:
        result, code = {"error": traceback.format_exc()}, 1
    with open(argv[2], "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, default=str)
    sys.stdout.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
