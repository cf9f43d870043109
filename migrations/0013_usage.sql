-- hermesd schema 13: cost and daily usage. A session's cost sits beside its token totals
-- (0007); daily rows per user and per chat (UTC days) feed /usage and the [limits] caps and
-- are pruned by age. Costs are integer microdollars; calls without a price are counted apart.
ALTER TABLE sessions ADD COLUMN cost_micros_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN unpriced_calls_total INTEGER NOT NULL DEFAULT 0;
-- Calls made before prices existed have no known cost.
UPDATE sessions SET unpriced_calls_total = model_calls_total;

CREATE TABLE usage_daily (
    scope TEXT NOT NULL CHECK (scope IN ('user', 'chat')),
    platform TEXT NOT NULL,
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
    PRIMARY KEY (scope, platform, subject, day)
) WITHOUT ROWID;

CREATE INDEX usage_daily_by_day ON usage_daily (day);
