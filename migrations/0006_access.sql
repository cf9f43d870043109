-- hermesd schema 6: who created a cron job, so changing or removing someone else's job needs an
-- admin. NULL (jobs made before this, or by the operator's CLI) counts as someone else.
ALTER TABLE cron_jobs ADD COLUMN created_by TEXT;
