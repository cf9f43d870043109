-- hermesd schema 25: commands a person approved for good (`/approve always`), per person and
-- per command as they saw it; listed and revoked with /approvals and `hermesd approvals`.
CREATE TABLE approval_grants (
    platform   TEXT NOT NULL,
    user_id    TEXT NOT NULL,
    pattern    TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (platform, user_id, pattern)
) WITHOUT ROWID;
