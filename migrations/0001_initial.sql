-- hermesd schema 1: sessions, messages (+ FTS5), routes, inbound events, outbound messages, cursors.
-- Times are Unix milliseconds.

CREATE TABLE sessions (
    id            TEXT PRIMARY KEY,
    session_key   TEXT NOT NULL,
    platform      TEXT NOT NULL,
    chat_id       TEXT NOT NULL,
    chat_type     TEXT NOT NULL,
    thread_id     TEXT,
    user_id       TEXT,
    title         TEXT,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    restart_count INTEGER NOT NULL DEFAULT 0,
    suspended     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sessions_by_key ON sessions (session_key);
CREATE INDEX sessions_by_update ON sessions (updated_at);

-- The session a key currently points at; /new and resets repoint it.
CREATE TABLE session_routes (
    session_key TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL REFERENCES sessions (id),
    updated_at  INTEGER NOT NULL
);

CREATE TABLE messages (
    id           INTEGER PRIMARY KEY,
    session_id   TEXT NOT NULL REFERENCES sessions (id),
    role         TEXT NOT NULL,
    content      TEXT,
    tool_calls   TEXT,
    tool_call_id TEXT,
    event_seq    INTEGER,
    created_at   INTEGER NOT NULL,
    archived     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX messages_by_session ON messages (session_id, archived, id);
-- A user message is written once per inbound event, even when its turn is retried.
CREATE UNIQUE INDEX messages_one_user_per_event ON messages (event_seq) WHERE role = 'user' AND event_seq IS NOT NULL;

CREATE VIRTUAL TABLE messages_fts USING fts5 (
    content, content = 'messages', content_rowid = 'id', tokenize = 'unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE messages_fts_trigram USING fts5 (
    content, content = 'messages', content_rowid = 'id', tokenize = 'trigram'
);

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.content IS NOT NULL BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
    INSERT INTO messages_fts_trigram (rowid, content) VALUES (new.id, new.content);
END;
CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN old.content IS NOT NULL BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram (messages_fts_trigram, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update_old AFTER UPDATE OF content ON messages WHEN old.content IS NOT NULL BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content) VALUES ('delete', old.id, old.content);
    INSERT INTO messages_fts_trigram (messages_fts_trigram, rowid, content) VALUES ('delete', old.id, old.content);
END;
CREATE TRIGGER messages_fts_update_new AFTER UPDATE OF content ON messages WHEN new.content IS NOT NULL BEGIN
    INSERT INTO messages_fts (rowid, content) VALUES (new.id, new.content);
    INSERT INTO messages_fts_trigram (rowid, content) VALUES (new.id, new.content);
END;

-- Every accepted inbound event, deduplicated by (platform, event_id) before the platform is acked.
-- state: accepted -> running -> done | failed | expired
CREATE TABLE inbound_events (
    seq         INTEGER PRIMARY KEY,
    platform    TEXT NOT NULL,
    event_id    TEXT NOT NULL,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'accepted',
    attempts    INTEGER NOT NULL DEFAULT 0,
    session_id  TEXT,
    received_at INTEGER NOT NULL,
    finished_at INTEGER,
    error       TEXT,
    UNIQUE (platform, event_id)
);
CREATE INDEX inbound_unfinished ON inbound_events (state) WHERE state IN ('accepted', 'running');

-- Replies, stored before they are sent; one row per chunk. state: pending -> sent | failed
CREATE TABLE outbound_messages (
    id                  INTEGER PRIMARY KEY,
    turn_id             TEXT NOT NULL,
    chunk_index         INTEGER NOT NULL,
    platform            TEXT NOT NULL,
    payload             TEXT NOT NULL,
    state               TEXT NOT NULL DEFAULT 'pending',
    attempts            INTEGER NOT NULL DEFAULT 0,
    platform_message_id TEXT,
    created_at          INTEGER NOT NULL,
    sent_at             INTEGER,
    error               TEXT,
    UNIQUE (turn_id, chunk_index)
);
CREATE INDEX outbound_pending ON outbound_messages (state) WHERE state = 'pending';

CREATE TABLE platform_cursors (
    platform   TEXT PRIMARY KEY,
    cursor     TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);
