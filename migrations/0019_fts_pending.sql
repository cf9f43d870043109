-- hermesd schema 19: full-text indexing off the write path. A message insert records only its id
-- in `messages_fts_pending`; a background step (and every search, first) moves pending messages
-- into both FTS5 tables in one batch. Each FTS5 write transaction flushes a new segment, so
-- indexing two messages per turn in the turn's own transactions cost ~4x the rest of the turn's
-- writes; batched, it is a fraction of it.
--
-- The delete and update triggers keep the external-content FTS tables exact: a row still pending
-- was never indexed, so it must not be "deleted" from them (FTS5 would subtract terms it never
-- added and corrupt the index); it just leaves the queue.
CREATE TABLE messages_fts_pending (id INTEGER PRIMARY KEY);

DROP TRIGGER messages_fts_insert;
DROP TRIGGER messages_fts_delete;
DROP TRIGGER messages_fts_update_old;
DROP TRIGGER messages_fts_update_new;

CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.content IS NOT NULL BEGIN
    INSERT OR IGNORE INTO messages_fts_pending (id) VALUES (new.id);
END;

CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN old.content IS NOT NULL BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE NOT EXISTS (SELECT 1 FROM messages_fts_pending WHERE id = old.id);
    INSERT INTO messages_fts_trigram (messages_fts_trigram, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE NOT EXISTS (SELECT 1 FROM messages_fts_pending WHERE id = old.id);
    DELETE FROM messages_fts_pending WHERE id = old.id;
END;

-- One trigger, so the removal of the old text runs before the row is queued again.
CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
    INSERT INTO messages_fts (messages_fts, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE old.content IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages_fts_pending WHERE id = old.id);
    INSERT INTO messages_fts_trigram (messages_fts_trigram, rowid, content)
        SELECT 'delete', old.id, old.content
        WHERE old.content IS NOT NULL AND NOT EXISTS (SELECT 1 FROM messages_fts_pending WHERE id = old.id);
    DELETE FROM messages_fts_pending WHERE id = old.id;
    INSERT INTO messages_fts_pending (id) SELECT new.id WHERE new.content IS NOT NULL;
END;
