-- hermesd schema 2: the agent runtime.
-- The system prompt is stored per session so it stays byte-identical across turns and restarts;
-- only compaction replaces it.
ALTER TABLE sessions ADD COLUMN system_prompt TEXT;
-- Prompt tokens the provider reported for the session's last model call (compression threshold).
ALTER TABLE sessions ADD COLUMN last_prompt_tokens INTEGER NOT NULL DEFAULT 0;
-- Transcript order. NULL means "in id order"; a compaction summary takes the place of the span
-- it replaces by sorting where that span began.
ALTER TABLE messages ADD COLUMN sort_key REAL;
