-- hermesd schema 26: conversations brought in from another gateway's home (`hermesd import`), one
-- row per source session, so a second import of the same home changes nothing. No foreign key:
-- a row outlives its session (pruned or erased with its person) as the mark that it was imported,
-- so a later import never brings an erased conversation back. Bounded by the homes imported.
CREATE TABLE imported_sessions (
    source      TEXT PRIMARY KEY,
    session_id  TEXT NOT NULL,
    imported_at INTEGER NOT NULL
) WITHOUT ROWID;
