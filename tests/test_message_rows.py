"""A stored message read back as a ``MessageRow``: the row ``message_row_from`` builds (every field set
at once) is the row the dataclass itself builds, stays frozen, and a column missing still fails loudly."""
from __future__ import annotations

import dataclasses
import sqlite3

import pytest
from conftest import assistant, tool_call, user

from hermes_trove.rows import MessageRow, message_row_from
from hermes_trove.store import SessionKey

KEY = SessionKey("rows-chat")


def stored_columns(runtime) -> list[dict]:
    runtime.store.append(KEY, [user("the deploy ran at noon"),
                               assistant("", [tool_call("c1", "terminal", '{"cmd": "ls"}')])])
    conn = sqlite3.connect(runtime.config.database_path)
    conn.row_factory = sqlite3.Row
    try:
        return [{k: r[k] for k in r.keys()} for r in conn.execute("SELECT * FROM messages ORDER BY store_id")]
    finally:
        conn.close()


def by_dataclass(columns: dict) -> MessageRow:
    """What the dataclass's own __init__ builds from the same normalised columns."""
    row = message_row_from(dict(columns))
    return MessageRow(**{f.name: getattr(row, f.name) for f in dataclasses.fields(MessageRow)})


def test_a_read_row_equals_the_row_the_dataclass_builds(runtime, backend):
    if backend != "sqlite":
        pytest.skip("reads the SQLite file's columns directly")
    rows = stored_columns(runtime)
    assert len(rows) == 2
    for columns in rows:
        row = message_row_from(dict(columns))
        assert row == by_dataclass(columns)
        assert hash(row.store_id) == hash(columns["store_id"])
        assert row.stored == columns["content"] and isinstance(row.pinned, bool)
    assert message_row_from(dict(rows[0])).content == "the deploy ran at noon"
    assert message_row_from(dict(rows[1])).tool_calls == rows[1]["tool_calls"]


def test_a_read_row_stays_frozen_and_a_missing_column_fails(runtime, backend):
    if backend != "sqlite":
        pytest.skip("reads the SQLite file's columns directly")
    columns = stored_columns(runtime)[0]
    row = message_row_from(dict(columns))
    with pytest.raises(dataclasses.FrozenInstanceError):
        row.role = "assistant"  # type: ignore[misc]
    newer = message_row_from({**columns, "column_of_a_newer_build": 1})  # an unknown column is not read
    assert newer == row and not hasattr(newer, "column_of_a_newer_build")
    missing = dict(columns)
    del missing["identity"]
    with pytest.raises(TypeError, match="identity"):
        message_row_from(missing)
