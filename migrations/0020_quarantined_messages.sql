-- hermesd schema 20: transcript rows that no longer decode are set aside, not fatal. A message
-- whose JSON columns (tool calls, reasoning, images) no longer parse, or whose role is unknown,
-- used to fail every turn of its session. Now its original row is copied here, with why, and the
-- message in `messages` keeps what still decodes (the bad columns cleared; a row with an unknown
-- role is removed). Rows here go with their session, and after the archived-messages age.
CREATE TABLE quarantined_messages (
    id             INTEGER PRIMARY KEY,
    message_id     INTEGER NOT NULL,
    session_id     TEXT NOT NULL,
    role           TEXT,
    content        TEXT,
    tool_calls     TEXT,
    tool_call_id   TEXT,
    reasoning      TEXT,
    images         TEXT,
    event_seq      INTEGER,
    created_at     INTEGER NOT NULL,
    reason         TEXT NOT NULL,
    quarantined_at INTEGER NOT NULL
);
CREATE INDEX quarantined_messages_by_session ON quarantined_messages (session_id);
CREATE INDEX quarantined_messages_by_age ON quarantined_messages (quarantined_at);
