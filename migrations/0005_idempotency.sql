-- hermesd schema 5: Idempotency-Key records of the API (IETF httpapi idempotency-key draft).
-- One row per (scope, key): the first request's body fingerprint, its state, and once it
-- finished the response a retry gets again. Times are Unix milliseconds.

CREATE TABLE idempotency_keys (
    -- Hash of the API key and the session (header or `user`) or the stateless scope.
    scope        TEXT NOT NULL,
    -- The client's Idempotency-Key value.
    idem_key     TEXT NOT NULL,
    -- Hash of the canonical request body.
    fingerprint  TEXT NOT NULL,
    -- The request id of the first request; its reply completes the row.
    request_id   TEXT NOT NULL UNIQUE,
    -- running | done
    state        TEXT NOT NULL,
    status       INTEGER,
    body         TEXT,
    created_at   INTEGER NOT NULL,
    completed_at INTEGER,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_by_age ON idempotency_keys (created_at);
