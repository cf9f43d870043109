-- Leases: one holder at a time for a named piece of work ("home" on SQLite: the whole home's
-- adapters, recovery, turns and cron; per single-consumer account on a shared store). The token
-- grows each time the lease changes hands, so a holder that lost it can be told apart (fencing).
CREATE TABLE leases (
    name        TEXT PRIMARY KEY,
    holder      TEXT NOT NULL,
    label       TEXT NOT NULL,
    token       INTEGER NOT NULL,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
