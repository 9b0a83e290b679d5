"""The schema, as an ordered tuple of named migrations: SQL text only.

Each entry is ``(name, script)``; ``db.migrate`` applies the names a file's ledger lacks, in
this order, and refuses a file whose ledger holds a name missing here. Add a migration by
appending an entry (never edit or reorder an applied one) and its expectation in
``tests/test_db.py``.
"""
from __future__ import annotations

# FTS index -> (its external content table, that table's rowid column)
FTS_TABLES: dict[str, tuple[str, str]] = {"messages_fts": ("messages", "store_id"),
                                          "nodes_fts": ("summary_nodes", "node_id")}

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("0001_core", """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    store_id        INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id      TEXT NOT NULL,
    conversation_id TEXT NOT NULL DEFAULT '',
    platform        TEXT NOT NULL DEFAULT '',
    source          TEXT NOT NULL DEFAULT 'unknown',
    role            TEXT NOT NULL,
    content         TEXT NOT NULL DEFAULT '',
    content_is_json INTEGER NOT NULL DEFAULT 0,
    tool_calls      TEXT,
    tool_call_id    TEXT,
    tool_name       TEXT,
    extra           TEXT,
    token_count     INTEGER NOT NULL DEFAULT 0,
    identity        TEXT NOT NULL DEFAULT '',
    pinned          INTEGER NOT NULL DEFAULT 0,
    created_at      REAL NOT NULL,
    ingested_at     REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS messages_session ON messages(session_id, store_id);
CREATE INDEX IF NOT EXISTS messages_session_time ON messages(session_id, created_at);
CREATE INDEX IF NOT EXISTS messages_identity ON messages(session_id, identity);
CREATE INDEX IF NOT EXISTS messages_source ON messages(source, session_id, store_id);
CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5(
    content, tool_calls, content='messages', content_rowid='store_id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS messages_fts_insert AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.store_id, new.content, new.tool_calls);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.store_id, old.content, old.tool_calls);
END;
CREATE TRIGGER IF NOT EXISTS messages_fts_update AFTER UPDATE OF content, tool_calls ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.store_id, old.content, old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.store_id, new.content, new.tool_calls);
END;

CREATE TABLE IF NOT EXISTS summary_nodes (
    node_id            INTEGER PRIMARY KEY AUTOINCREMENT,
    session_id         TEXT NOT NULL,
    depth              INTEGER NOT NULL,
    summary            TEXT NOT NULL,
    token_count        INTEGER NOT NULL DEFAULT 0,
    source_token_count INTEGER NOT NULL DEFAULT 0,
    earliest_at        REAL,
    latest_at          REAL,
    level              TEXT NOT NULL DEFAULT 'normal',
    model              TEXT NOT NULL DEFAULT '',
    expand_hint        TEXT NOT NULL DEFAULT '',
    created_at         REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS summary_nodes_session ON summary_nodes(session_id, depth, node_id);
CREATE TABLE IF NOT EXISTS node_messages (
    node_id  INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    ordinal  INTEGER NOT NULL,
    store_id INTEGER NOT NULL,
    PRIMARY KEY (node_id, ordinal)
);
CREATE INDEX IF NOT EXISTS node_messages_store ON node_messages(store_id);
CREATE TABLE IF NOT EXISTS node_children (
    node_id  INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    ordinal  INTEGER NOT NULL,
    child_id INTEGER NOT NULL,
    PRIMARY KEY (node_id, ordinal)
);
CREATE INDEX IF NOT EXISTS node_children_child ON node_children(child_id);
CREATE TABLE IF NOT EXISTS carried_nodes (
    session_id TEXT NOT NULL,
    node_id    INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    from_session_id TEXT NOT NULL,
    carried_at REAL NOT NULL,
    PRIMARY KEY (session_id, node_id)
);
CREATE VIRTUAL TABLE IF NOT EXISTS nodes_fts USING fts5(
    summary, content='summary_nodes', content_rowid='node_id',
    tokenize='porter unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS nodes_fts_insert AFTER INSERT ON summary_nodes BEGIN
    INSERT INTO nodes_fts(rowid, summary) VALUES (new.node_id, new.summary);
END;
CREATE TRIGGER IF NOT EXISTS nodes_fts_delete AFTER DELETE ON summary_nodes BEGIN
    INSERT INTO nodes_fts(nodes_fts, rowid, summary) VALUES ('delete', old.node_id, old.summary);
END;
CREATE TRIGGER IF NOT EXISTS nodes_fts_update AFTER UPDATE OF summary ON summary_nodes BEGIN
    INSERT INTO nodes_fts(nodes_fts, rowid, summary) VALUES ('delete', old.node_id, old.summary);
    INSERT INTO nodes_fts(rowid, summary) VALUES (new.node_id, new.summary);
END;

CREATE TABLE IF NOT EXISTS sessions (
    session_id      TEXT PRIMARY KEY,
    conversation_id TEXT NOT NULL DEFAULT '',
    platform        TEXT NOT NULL DEFAULT '',
    ingest_len      INTEGER NOT NULL DEFAULT 0,
    ingest_identity TEXT NOT NULL DEFAULT '',
    frontier_store_id INTEGER NOT NULL DEFAULT 0,
    last_rotate_at  REAL,
    last_rotate_backup TEXT,
    previous_session_id TEXT,
    created_at      REAL NOT NULL,
    updated_at      REAL NOT NULL,
    ended_at        REAL
);
"""),
    ("0002_imports", """
CREATE TABLE IF NOT EXISTS imports (
    import_id  TEXT PRIMARY KEY,
    kind       TEXT NOT NULL,
    sources    TEXT NOT NULL,
    options    TEXT NOT NULL DEFAULT '{}',
    first_at   REAL NOT NULL,
    last_at    REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS imported_messages (
    import_id  TEXT NOT NULL,
    source_key TEXT NOT NULL,
    store_id   INTEGER NOT NULL,
    meta       TEXT,
    imported_at REAL NOT NULL,
    PRIMARY KEY (import_id, source_key)
);
CREATE INDEX IF NOT EXISTS imported_messages_store ON imported_messages(store_id);
CREATE TABLE IF NOT EXISTS imported_nodes (
    import_id  TEXT NOT NULL,
    source_key TEXT NOT NULL,
    node_id    INTEGER NOT NULL,
    imported_at REAL NOT NULL,
    PRIMARY KEY (import_id, source_key)
);
"""),
    ("0003_session_frontier", """
CREATE TABLE IF NOT EXISTS session_frontier (
    session_id TEXT NOT NULL,
    node_id    INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    PRIMARY KEY (session_id, node_id)
);
CREATE INDEX IF NOT EXISTS session_frontier_node ON session_frontier(node_id);
INSERT OR IGNORE INTO session_frontier(session_id, node_id)
SELECT v.session_id, v.node_id FROM (
    SELECT session_id, node_id FROM summary_nodes
    UNION SELECT session_id, node_id FROM carried_nodes) v
WHERE NOT EXISTS (
    SELECT 1 FROM node_children c JOIN summary_nodes p ON p.node_id = c.node_id
    WHERE c.child_id = v.node_id AND (p.session_id = v.session_id OR p.node_id IN
        (SELECT node_id FROM carried_nodes WHERE session_id = v.session_id)));
"""),
    # Row-at-a-time FTS5 inserts from a trigger cost several times a batched insert, so the
    # store indexes each batch of new rows with one statement (MessageStore._index_new_rows).
    ("0004_fts_insert_by_store", """
DROP TRIGGER IF EXISTS messages_fts_insert;
"""),
    # The import ledger is only ever looked up by its key: stored clustered on it, with no
    # second index, each imported row costs one B-tree insert here instead of three.
    ("0005_import_ledger_by_key", """
CREATE TABLE imported_messages_by_key (
    import_id  TEXT NOT NULL,
    source_key TEXT NOT NULL,
    store_id   INTEGER NOT NULL,
    meta       TEXT,
    imported_at REAL NOT NULL,
    PRIMARY KEY (import_id, source_key)
) WITHOUT ROWID;
INSERT INTO imported_messages_by_key(import_id, source_key, store_id, meta, imported_at)
SELECT import_id, source_key, store_id, meta, imported_at FROM imported_messages;
DROP TABLE imported_messages;
ALTER TABLE imported_messages_by_key RENAME TO imported_messages;
"""),
    # Background work shared by several processes on one file (rollups, embeddings,
    # extraction) is claimed by name for a bounded time, so no two processes do it twice.
    ("0006_work_leases", """
CREATE TABLE work_leases (
    name        TEXT PRIMARY KEY,
    owner       TEXT NOT NULL,
    acquired_at REAL NOT NULL,
    expires_at  REAL NOT NULL
) WITHOUT ROWID;
"""),
)
