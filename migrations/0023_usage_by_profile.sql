-- hermesd schema 23: daily usage per profile. The same person reached through one adapter (the
-- API's `user`, a chat a route gives to another agent) is counted apart for each profile, as
-- their sessions and memories are; a profile's [limits] bind its own count. Rows from before
-- belong to the default profile.
CREATE TABLE usage_daily_by_profile (
    scope TEXT NOT NULL CHECK (scope IN ('user', 'chat')),
    platform TEXT NOT NULL,
    profile TEXT NOT NULL DEFAULT 'default',
    subject TEXT NOT NULL,
    day TEXT NOT NULL,
    turns INTEGER NOT NULL DEFAULT 0,
    calls INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_micros INTEGER NOT NULL DEFAULT 0,
    unpriced_calls INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (scope, platform, subject, profile, day)
) WITHOUT ROWID;

INSERT INTO usage_daily_by_profile (scope, platform, profile, subject, day, turns, calls, prompt_tokens,
    completion_tokens, cache_read_tokens, cache_write_tokens, cost_micros, unpriced_calls)
SELECT scope, platform, 'default', subject, day, turns, calls, prompt_tokens, completion_tokens,
    cache_read_tokens, cache_write_tokens, cost_micros, unpriced_calls FROM usage_daily;

DROP TABLE usage_daily;
ALTER TABLE usage_daily_by_profile RENAME TO usage_daily;
CREATE INDEX usage_daily_by_day ON usage_daily (day);
