-- hermesd schema 9: the chat message that shows a turn's answer while the model writes it.
-- A row lives from the preview's first send until the final reply replaced it (or, after a
-- crash mid-stream, until recovery edited it to a short note). Times are Unix milliseconds.

CREATE TABLE stream_previews (
    turn_id    TEXT PRIMARY KEY,
    payload    TEXT NOT NULL, -- the preview message (chat + platform message id), JSON
    created_at INTEGER NOT NULL
);
