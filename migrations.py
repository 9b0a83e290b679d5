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
# how messages_fts splits text (as 0001_core writes it): a scratch index that must match the same rows uses it too
MESSAGES_TOKENIZE = "porter unicode61 remove_diacritics 2"

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
    # store indexes each batch of new rows with one statement (ingestrows.index_new_rows).
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
    # Temporal rollups (opt-in): one summary per UTC day, ISO week and month of leaf summaries, with the
    # leaves each covers. A leaf added, changed or removed marks its periods' rollups stale at once (a
    # racing build's conditional finish then fails); leaves by end time and messages by time are indexed.
    ("0007_temporal_rollups", """
CREATE TABLE temporal_rollups (
    rollup_id          INTEGER PRIMARY KEY AUTOINCREMENT,
    period_kind        TEXT NOT NULL CHECK (period_kind IN ('day', 'week', 'month')),
    period_start       REAL NOT NULL,
    period_end         REAL NOT NULL,
    scope              TEXT NOT NULL DEFAULT 'all',
    status             TEXT NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'building', 'ready', 'stale', 'failed')),
    summary            TEXT NOT NULL DEFAULT '',
    token_count        INTEGER NOT NULL DEFAULT 0,
    source_count       INTEGER NOT NULL DEFAULT 0,
    source_token_count INTEGER NOT NULL DEFAULT 0,
    level              TEXT NOT NULL DEFAULT '',
    model              TEXT NOT NULL DEFAULT '',
    model_calls        INTEGER NOT NULL DEFAULT 0,
    input_tokens       INTEGER NOT NULL DEFAULT 0,
    generation         INTEGER NOT NULL DEFAULT 0,
    attempts           INTEGER NOT NULL DEFAULT 0,
    error              TEXT,
    created_at         REAL NOT NULL,
    updated_at         REAL NOT NULL,
    claimed_at         REAL,
    built_at           REAL,
    failed_at          REAL,
    UNIQUE (period_kind, period_start, scope)
);
CREATE INDEX temporal_rollups_window ON temporal_rollups(scope, period_start);
CREATE INDEX temporal_rollups_status ON temporal_rollups(status, period_kind, period_start);
CREATE TABLE temporal_rollup_sources (
    rollup_id INTEGER NOT NULL REFERENCES temporal_rollups(rollup_id) ON DELETE CASCADE,
    ordinal   INTEGER NOT NULL,
    node_id   INTEGER NOT NULL REFERENCES summary_nodes(node_id) ON DELETE CASCADE,
    PRIMARY KEY (rollup_id, ordinal)
);
CREATE INDEX temporal_rollup_sources_node ON temporal_rollup_sources(node_id);
CREATE INDEX summary_nodes_leaf_time ON summary_nodes(depth, latest_at);
CREATE INDEX messages_time ON messages(created_at);
CREATE TRIGGER temporal_rollups_leaf_added AFTER INSERT ON summary_nodes WHEN new.depth = 0 BEGIN
    UPDATE temporal_rollups SET status = 'stale', updated_at = (julianday('now') - 2440587.5) * 86400.0
    WHERE status IN ('ready', 'building', 'failed')
      AND period_start <= COALESCE(new.latest_at, new.created_at)
      AND period_end > COALESCE(new.earliest_at, new.created_at);
END;
CREATE TRIGGER temporal_rollups_leaf_changed AFTER UPDATE OF summary, earliest_at, latest_at ON summary_nodes
WHEN old.depth = 0 BEGIN
    UPDATE temporal_rollups SET status = 'stale', updated_at = (julianday('now') - 2440587.5) * 86400.0
    WHERE status IN ('ready', 'building', 'failed')
      AND ((period_start <= COALESCE(old.latest_at, old.created_at)
            AND period_end > COALESCE(old.earliest_at, old.created_at))
        OR (period_start <= COALESCE(new.latest_at, new.created_at)
            AND period_end > COALESCE(new.earliest_at, new.created_at)));
END;
CREATE TRIGGER temporal_rollups_leaf_removed AFTER DELETE ON summary_nodes WHEN old.depth = 0 BEGIN
    UPDATE temporal_rollups SET status = 'stale', updated_at = (julianday('now') - 2440587.5) * 86400.0
    WHERE status IN ('ready', 'building', 'failed')
      AND period_start <= COALESCE(old.latest_at, old.created_at)
      AND period_end > COALESCE(old.earliest_at, old.created_at);
END;
"""),
    # Embedding vectors (opt-in). A generation pins provider, model and dimension; its cursors keep indexing
    # O(new rows). A vector is a message chunk (a span) or a whole node (span NULL), deleted with its row;
    # ``removed`` lets in-memory vector caches notice.
    ("0008_embeddings", """
CREATE TABLE embedding_generations (
    generation_id  INTEGER PRIMARY KEY AUTOINCREMENT,
    provider       TEXT NOT NULL,
    model          TEXT NOT NULL,
    dim            INTEGER NOT NULL,
    base_url       TEXT NOT NULL DEFAULT '',
    state          TEXT NOT NULL DEFAULT 'building',
    message_cursor INTEGER NOT NULL DEFAULT 0,
    node_cursor    INTEGER NOT NULL DEFAULT 0,
    removed        INTEGER NOT NULL DEFAULT 0,
    last_error     TEXT,
    last_error_at  REAL,
    created_at     REAL NOT NULL,
    activated_at   REAL,
    UNIQUE (provider, model, dim)
);
CREATE TABLE embedding_vectors (
    vector_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    generation_id INTEGER NOT NULL REFERENCES embedding_generations(generation_id) ON DELETE CASCADE,
    kind          TEXT NOT NULL,
    item_id       INTEGER NOT NULL,
    span_start    INTEGER NOT NULL DEFAULT 0,
    span_end      INTEGER,
    session_id    TEXT NOT NULL,
    at            REAL,
    vector        BLOB NOT NULL,
    scale         REAL NOT NULL,
    created_at    REAL NOT NULL,
    UNIQUE (generation_id, kind, item_id, span_start)
);
CREATE INDEX embedding_vectors_scan ON embedding_vectors(generation_id, vector_id);
CREATE INDEX embedding_vectors_item ON embedding_vectors(kind, item_id);
CREATE TRIGGER embedding_vectors_removed AFTER DELETE ON embedding_vectors BEGIN
    UPDATE embedding_generations SET removed = removed + 1 WHERE generation_id = old.generation_id;
END;
CREATE TRIGGER embedding_vectors_message_gone AFTER DELETE ON messages BEGIN
    DELETE FROM embedding_vectors WHERE kind = 'message' AND item_id = old.store_id;
END;
CREATE TRIGGER embedding_vectors_node_gone AFTER DELETE ON summary_nodes BEGIN
    DELETE FROM embedding_vectors WHERE kind = 'summary' AND item_id = old.node_id;
END;
"""),
    # The text recipe a generation's message vectors were made with. Generations made before the
    # column existed embedded each message chunk alone ('chunk'); the indexer re-embeds their
    # messages with the current recipe in place.
    ("0011_embedding_recipe", """
ALTER TABLE embedding_generations ADD COLUMN recipe TEXT NOT NULL DEFAULT 'chunk';
"""),
    # Each session's owner scope (scope.scope_for), set at its first write; cross-session reads
    # filter on it. Existing rows: a gateway row with its session key gets that key, a local
    # row 'local', and a gateway row without a key stays unscoped ('') for the doctor to report.
    ("0012_session_scope", """
ALTER TABLE sessions ADD COLUMN scope TEXT NOT NULL DEFAULT '';
UPDATE sessions SET scope = CASE
    WHEN lower(platform) IN ('', 'cli', 'local') THEN 'local'
    WHEN conversation_id <> '' THEN lower(platform) || ':' || conversation_id
    ELSE '' END;
CREATE INDEX sessions_scope ON sessions(scope, session_id);
"""),
    # Rollups per owner scope (that of the leaves summarised): the rows built over every session ('all')
    # are dropped and the leaf cursor reset, so the next pass rebuilds per (scope, period). A leaf marks
    # only its own scope's rollups stale (every scope's when its session row is gone).
    ("0013_rollup_owner_scope", """
DELETE FROM temporal_rollup_sources WHERE rollup_id IN (SELECT rollup_id FROM temporal_rollups WHERE scope = 'all');
DELETE FROM temporal_rollups WHERE scope = 'all';
DELETE FROM meta WHERE key = 'temporal_rollups.leaf_cursor';
DROP TRIGGER temporal_rollups_leaf_added;
DROP TRIGGER temporal_rollups_leaf_changed;
DROP TRIGGER temporal_rollups_leaf_removed;
CREATE TRIGGER temporal_rollups_leaf_added AFTER INSERT ON summary_nodes WHEN new.depth = 0 BEGIN
    UPDATE temporal_rollups SET status = 'stale', updated_at = (julianday('now') - 2440587.5) * 86400.0
    WHERE status IN ('ready', 'building', 'failed')
      AND scope = COALESCE((SELECT scope FROM sessions WHERE session_id = new.session_id), scope)
      AND period_start <= COALESCE(new.latest_at, new.created_at)
      AND period_end > COALESCE(new.earliest_at, new.created_at);
END;
CREATE TRIGGER temporal_rollups_leaf_changed AFTER UPDATE OF summary, earliest_at, latest_at ON summary_nodes
WHEN old.depth = 0 BEGIN
    UPDATE temporal_rollups SET status = 'stale', updated_at = (julianday('now') - 2440587.5) * 86400.0
    WHERE status IN ('ready', 'building', 'failed')
      AND scope = COALESCE((SELECT scope FROM sessions WHERE session_id = new.session_id), scope)
      AND ((period_start <= COALESCE(old.latest_at, old.created_at)
            AND period_end > COALESCE(old.earliest_at, old.created_at))
        OR (period_start <= COALESCE(new.latest_at, new.created_at)
            AND period_end > COALESCE(new.earliest_at, new.created_at)));
END;
CREATE TRIGGER temporal_rollups_leaf_removed AFTER DELETE ON summary_nodes WHEN old.depth = 0 BEGIN
    UPDATE temporal_rollups SET status = 'stale', updated_at = (julianday('now') - 2440587.5) * 86400.0
    WHERE status IN ('ready', 'building', 'failed')
      AND scope = COALESCE((SELECT scope FROM sessions WHERE session_id = old.session_id), scope)
      AND period_start <= COALESCE(old.latest_at, old.created_at)
      AND period_end > COALESCE(old.earliest_at, old.created_at);
END;
"""),
    # No read looks messages up by source first (source filters apply to rows already found by
    # session, id or full-text match), so its index only cost a B-tree entry per stored message.
    ("0014_drop_source_index", """
DROP INDEX IF EXISTS messages_source;
"""),
    # Long text stored deflated (``packed.py``): the index reads rows through ``trove_text`` and is rebuilt
    # once (FTS5 cannot change its content table in place). A damaged index must not stop the file opening:
    # the config row a drop needs is put back (version 4) and leftover shadow tables are dropped.
    ("0015_packed_text", """
CREATE VIEW IF NOT EXISTS messages_text AS
    SELECT store_id, trove_text(content) AS content, tool_calls FROM messages;
DROP TRIGGER IF EXISTS messages_fts_delete;
DROP TRIGGER IF EXISTS messages_fts_update;
CREATE TABLE IF NOT EXISTS messages_fts_config(k PRIMARY KEY, v) WITHOUT ROWID;
INSERT OR IGNORE INTO messages_fts_config(k, v) VALUES ('version', 4);
DROP TABLE IF EXISTS messages_fts;
DROP TABLE IF EXISTS messages_fts_data;
DROP TABLE IF EXISTS messages_fts_idx;
DROP TABLE IF EXISTS messages_fts_docsize;
DROP TABLE IF EXISTS messages_fts_content;
DROP TABLE IF EXISTS messages_fts_config;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, tool_calls, content='messages_text', content_rowid='store_id',
    tokenize='porter unicode61 remove_diacritics 2');
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.store_id, trove_text(old.content), old.tool_calls);
END;
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, tool_calls ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, tool_calls)
    VALUES ('delete', old.store_id, trove_text(old.content), old.tool_calls);
    INSERT INTO messages_fts(rowid, content, tool_calls) VALUES (new.store_id, trove_text(new.content), new.tool_calls);
END;
"""),
    # Imported OpenClaw sessions were written with no owner scope, so no other session could read
    # them under the default scope; they are the profile owner's history, like a local session.
    ("0016_imported_sessions_local", """
UPDATE sessions SET scope = 'local' WHERE platform = 'openclaw' AND scope = '';
"""),
    # A gateway chat's sessions, newest first (the chat a new session follows, /trove's chat look-up).
    ("0017_sessions_by_conversation", """
CREATE INDEX sessions_conversation ON sessions(conversation_id, updated_at);
"""),
    # The furthest frontier a rotate set: a damaged frontier reads as no less (``dag.frontier_value``).
    ("0018_rotated_frontier", """
ALTER TABLE sessions ADD COLUMN rotated_frontier INTEGER;
"""),
    # The sessions that name a session as their previous one: the empty-row tidy-up at a session's end
    # asks only about its own row (``emptyrows``), a seek here rather than a read of the whole table.
    ("0019_sessions_by_previous", """
CREATE INDEX sessions_previous ON sessions(previous_session_id) WHERE previous_session_id IS NOT NULL;
"""),
)


# Opt-in migration sets: applied through the same ledger only when their feature is turned on
# (``db.migrate_optional``), never by ``migrate``; ``OPTIONAL_DROPS`` is what turning one off
# removes (``db.drop_optional``). A file without them is complete: the doctor expects only MIGRATIONS.
OPTIONAL_MIGRATIONS: dict[str, tuple[tuple[str, str], ...]] = {
    # Remembered state (TROVE_ASSERTIONS_ENABLED or TROVE_ADAPTIVE_RETRIEVAL_ENABLED): assertions pinned to
    # exact spans (a trigger refuses a quote that is not the stored text), their relations, the extraction
    # cursor and batch log, and the retrieval controller's episodes and events.
    "state": (("0009_assertions", """
CREATE TABLE assertions (
    assertion_id   TEXT PRIMARY KEY,
    store_id       INTEGER NOT NULL REFERENCES messages(store_id) ON DELETE CASCADE,
    span_start     INTEGER NOT NULL,
    span_end       INTEGER NOT NULL,
    quote          TEXT NOT NULL,
    content_sha256 TEXT NOT NULL,
    session_id     TEXT NOT NULL,
    subject_key    TEXT NOT NULL,
    predicate_key  TEXT NOT NULL,
    value_text     TEXT NOT NULL,
    value_norm     TEXT NOT NULL,
    kind           TEXT NOT NULL CHECK (kind IN ('fact', 'event', 'preference', 'recommendation',
                                                  'commitment', 'action', 'status', 'quotation')),
    polarity       TEXT NOT NULL CHECK (polarity IN ('positive', 'negative')),
    scope_key      TEXT NOT NULL DEFAULT '',
    speaker_role   TEXT NOT NULL,
    observed_at    REAL NOT NULL,
    event_at       REAL,
    event_end      REAL,
    event_expression TEXT,
    valid_from     REAL,
    valid_to       REAL,
    confidence     REAL NOT NULL,
    extractor      TEXT NOT NULL DEFAULT '',
    created_at     REAL NOT NULL
);
CREATE INDEX assertions_subject ON assertions(subject_key, predicate_key, observed_at);
CREATE INDEX assertions_store ON assertions(store_id);
CREATE TRIGGER assertions_quote_guard BEFORE INSERT ON assertions
WHEN NOT EXISTS (SELECT 1 FROM messages m WHERE m.store_id = new.store_id
                 AND substr(m.content, new.span_start + 1, new.span_end - new.span_start) = new.quote)
BEGIN
    SELECT RAISE(ABORT, 'assertion quote is not the stored text at its span');
END;
CREATE TABLE assertion_relations (
    from_id    TEXT NOT NULL REFERENCES assertions(assertion_id) ON DELETE CASCADE,
    to_id      TEXT NOT NULL REFERENCES assertions(assertion_id) ON DELETE CASCADE,
    relation   TEXT NOT NULL CHECK (relation IN ('supersedes', 'conflicts', 'restates')),
    at         REAL NOT NULL,
    PRIMARY KEY (from_id, to_id, relation)
) WITHOUT ROWID;
CREATE INDEX assertion_relations_to ON assertion_relations(to_id, relation);
CREATE TABLE assertion_extraction (
    name          TEXT PRIMARY KEY,
    cursor        INTEGER NOT NULL DEFAULT 0,
    updated_at    REAL NOT NULL
) WITHOUT ROWID;
CREATE TABLE assertion_batches (
    batch_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    first_store_id INTEGER NOT NULL,
    last_store_id INTEGER NOT NULL,
    messages      INTEGER NOT NULL,
    model_calls   INTEGER NOT NULL DEFAULT 0,
    input_chars   INTEGER NOT NULL DEFAULT 0,
    proposed      INTEGER NOT NULL DEFAULT 0,
    stored        INTEGER NOT NULL DEFAULT 0,
    unverified    INTEGER NOT NULL DEFAULT 0,
    invalid       INTEGER NOT NULL DEFAULT 0,
    outcome       TEXT NOT NULL,
    error         TEXT,
    created_at    REAL NOT NULL,
    UNIQUE (first_store_id, last_store_id, created_at)
);
CREATE TABLE retrieval_episodes (
    retrieval_id  TEXT PRIMARY KEY,
    session_id    TEXT NOT NULL DEFAULT '',
    state         TEXT NOT NULL CHECK (state IN ('open', 'finished', 'abandoned')),
    question      TEXT NOT NULL,
    identity      TEXT NOT NULL,
    requirements  TEXT NOT NULL,
    rounds        INTEGER NOT NULL DEFAULT 0,
    observed      TEXT NOT NULL DEFAULT '[]',
    view          TEXT,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL
);
CREATE INDEX retrieval_episodes_state ON retrieval_episodes(state, updated_at);
CREATE TABLE retrieval_events (
    retrieval_id  TEXT NOT NULL REFERENCES retrieval_episodes(retrieval_id) ON DELETE CASCADE,
    seq           INTEGER NOT NULL,
    action        TEXT NOT NULL,
    trace         TEXT NOT NULL,
    at            REAL NOT NULL,
    PRIMARY KEY (retrieval_id, seq)
) WITHOUT ROWID;
"""),
        # The words of each assertion's subject name, predicate and value, newest first per word,
        # so pre-answer evidence finds assertions by an indexed, capped lookup instead of a scan.
        # The backfill splits like ``state.contract.terms`` (separators :_-./@+, words of 4+, not "self").
        ("0010_assertion_terms", """
CREATE TABLE assertion_terms (
    term          TEXT NOT NULL,
    observed_at   REAL NOT NULL,
    assertion_id  TEXT NOT NULL REFERENCES assertions(assertion_id) ON DELETE CASCADE ON UPDATE CASCADE,
    PRIMARY KEY (term, observed_at, assertion_id)
) WITHOUT ROWID;
CREATE INDEX assertion_terms_assertion ON assertion_terms(assertion_id);
WITH RECURSIVE words(assertion_id, observed_at, word, rest) AS (
    SELECT assertion_id, observed_at, '',
           replace(replace(replace(replace(replace(replace(replace(
               substr(subject_key, instr(subject_key, ':') + 1) || ' ' || predicate_key || ' ' || value_norm,
               ':', ' '), '_', ' '), '-', ' '), '.', ' '), '/', ' '), '@', ' '), '+', ' ') || ' '
    FROM assertions
    UNION ALL
    SELECT assertion_id, observed_at, substr(rest, 1, instr(rest, ' ') - 1), substr(rest, instr(rest, ' ') + 1)
    FROM words WHERE rest <> ''
)
INSERT OR IGNORE INTO assertion_terms(term, observed_at, assertion_id)
SELECT word, observed_at, assertion_id FROM words WHERE length(word) >= 4 AND word <> 'self';
"""),
        # The quote guard compares against the message's text, which may be stored deflated (0015).
        ("0016_quote_guard_reads_text", """
DROP TRIGGER IF EXISTS assertions_quote_guard;
CREATE TRIGGER assertions_quote_guard BEFORE INSERT ON assertions
WHEN NOT EXISTS (SELECT 1 FROM messages m WHERE m.store_id = new.store_id
                 AND substr(trove_text(m.content), new.span_start + 1, new.span_end - new.span_start) = new.quote)
BEGIN
    SELECT RAISE(ABORT, 'assertion quote is not the stored text at its span');
END;
"""),
    ),
}
OPTIONAL_DROPS: dict[str, str] = {
    "state": """
DROP TABLE IF EXISTS assertion_terms;
DROP TABLE IF EXISTS retrieval_events;
DROP TABLE IF EXISTS retrieval_episodes;
DROP TABLE IF EXISTS assertion_batches;
DROP TABLE IF EXISTS assertion_extraction;
DROP TABLE IF EXISTS assertion_relations;
DROP TABLE IF EXISTS assertions;
""",
}
