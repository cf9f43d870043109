-- hermesd schema 11: the session lifecycle. A session remembers the last user message its
-- memory-only flush turn saw (so it is flushed once per new exchange); a key whose session the
-- background sweep archived (idle or daily reset) keeps why, until its next message is told.
ALTER TABLE sessions ADD COLUMN flushed_through INTEGER NOT NULL DEFAULT 0;

CREATE TABLE session_resets (
    session_key TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    reason      TEXT NOT NULL,
    reset_at    INTEGER NOT NULL
);

-- The sweep joins routes to their sessions; `/sessions` lists a key's sessions by activity.
CREATE INDEX session_routes_by_session ON session_routes (session_id);
CREATE INDEX sessions_by_key_update ON sessions (session_key, updated_at);
-- The sweep asks who last spoke in a session (its newest event).
CREATE INDEX inbound_by_session ON inbound_events (session_id, seq) WHERE session_id IS NOT NULL;
