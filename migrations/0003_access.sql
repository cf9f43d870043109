-- hermesd schema 3: access control. Pairing codes are stored hashed; approved users persist.
CREATE TABLE pairing_codes (
    code_hash  TEXT PRIMARY KEY,
    platform   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    user_name  TEXT,
    chat_id    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX pairing_codes_by_user ON pairing_codes (platform, user_id);

CREATE TABLE approved_users (
    platform    TEXT NOT NULL,
    user_id     TEXT NOT NULL,
    user_name   TEXT,
    approved_at INTEGER NOT NULL,
    PRIMARY KEY (platform, user_id)
);

-- Failed approvals per platform, for the lockout.
CREATE TABLE pairing_failures (
    platform     TEXT PRIMARY KEY,
    failures     INTEGER NOT NULL,
    locked_until INTEGER
);
