-- hermesd schema 4: scheduled prompts, their runs, platform home channels, per-session choices.

-- A scheduled prompt. next_run_at is advanced in the same transaction that claims a run, so a
-- run is claimed at most once however many daemons share the database.
CREATE TABLE cron_jobs (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL,
    prompt      TEXT NOT NULL,
    -- The canonical schedule text (Schedule::canonical) and the zone it is read in.
    schedule    TEXT NOT NULL,
    timezone    TEXT NOT NULL,
    -- NULL once the schedule is spent.
    next_run_at INTEGER,
    -- Runs left; NULL means unlimited.
    repeat      INTEGER,
    -- active | paused | done
    state       TEXT NOT NULL DEFAULT 'active',
    deliver     TEXT NOT NULL,
    -- The chat the job was created from (JSON ChatRef), for the `origin` target.
    origin      TEXT,
    -- JSON array of toolsets; NULL means the `cron` platform's toolsets.
    toolsets    TEXT,
    -- A model of the configured chain to start on; NULL means the primary.
    model       TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    last_run_at INTEGER,
    last_status TEXT,
    last_error  TEXT,
    run_count   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX cron_jobs_due ON cron_jobs (state, next_run_at);

-- One row per claimed occurrence. status: running -> ok | silent | failed; skipped for a missed
-- occurrence outside its grace window.
CREATE TABLE cron_runs (
    id           INTEGER PRIMARY KEY,
    job_id       TEXT NOT NULL,
    scheduled_at INTEGER NOT NULL,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    status       TEXT NOT NULL,
    output_path  TEXT,
    error        TEXT,
    UNIQUE (job_id, scheduled_at)
);
CREATE INDEX cron_runs_by_job ON cron_runs (job_id, id);

-- The chat `/sethome` chose for a platform (JSON ChatRef): the `<platform>` delivery target.
CREATE TABLE home_channels (
    platform   TEXT PRIMARY KEY,
    chat       TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

-- The model `/model NAME` chose for a session; NULL means the configured primary.
ALTER TABLE sessions ADD COLUMN model TEXT;
