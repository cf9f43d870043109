-- hermesd schema 26: what `hermesd import` brought from another gateway's home, one row per item
-- (a conversation, a cron job, an approval, a file, a variable), so a second import of the same
-- home changes nothing: not even an item removed here since (a conversation erased with its
-- person, a revoked approval) comes back. No foreign key: a row outlives what it names. Bounded
-- by the homes imported.
CREATE TABLE imports (
    source      TEXT PRIMARY KEY,
    target      TEXT NOT NULL,
    imported_at INTEGER NOT NULL
) WITHOUT ROWID;
