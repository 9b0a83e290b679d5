"""Words that are no UTF-8 through the real host: ``hermes trove`` on a strict UTF-8 stdout and
``/trove`` typed into the interactive CLI. Each answers with help naming the word (as U+FFFD),
exits or returns normally, and the host prints it without a traceback."""
from __future__ import annotations

import os

import pytest

pytestmark = pytest.mark.e2e

NOT_UTF8 = os.fsdecode(b"\xff")  # how Python hands a command line byte that is no UTF-8 to the program


def test_hermes_trove_echoes_a_word_that_is_no_utf8_on_a_strict_terminal(make_home):
    home = make_home(PYTHONIOENCODING="utf-8")
    done = home.hermes("trove", NOT_UTF8)
    said = done.stdout + done.stderr
    assert done.returncode == 2, said[-3000:]
    assert "unknown subcommand: \ufffd" in said and "Traceback" not in said, said[-3000:]


def test_trove_typed_with_a_lone_surrogate_answers_in_utf8(make_home):
    home = make_home(TROVE_ENABLE_SLASH_COMMAND="1")
    steps = [{"command": "/trove \udcff"}, {"command": "/trove status \u202eevil"}]
    result = home.run_driver({"mode": "cli", "steps": steps}, "bad-words")
    for step in result["steps"]:
        out = step["output"]
        out.encode("utf-8")
        assert "unknown subcommand:" in out and "Traceback" not in out, out[:2000]
