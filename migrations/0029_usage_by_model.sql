-- hermesd schema 29: each day's model calls by the model that answered them (a fallback's calls
-- under its own name), per platform and profile, for the control panel's cost per model. Kept
-- and pruned with the other daily rows.
CREATE TABLE usage_daily_by_model (
    day TEXT NOT NULL,
    model TEXT NOT NULL,
    platform TEXT NOT NULL,
    profile TEXT NOT NULL,
    calls INTEGER NOT NULL DEFAULT 0,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    completion_tokens INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens INTEGER NOT NULL DEFAULT 0,
    cache_write_tokens INTEGER NOT NULL DEFAULT 0,
    cost_micros INTEGER NOT NULL DEFAULT 0,
    unpriced_calls INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (day, model, platform, profile)
) WITHOUT ROWID;
