-- The profile a cron job's runs belong to (NULL: the default profile): a job made in a chat of
-- profile `work` runs as `work`, with its model, persona and memory.
ALTER TABLE cron_jobs ADD COLUMN profile TEXT;
