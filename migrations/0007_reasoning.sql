-- hermesd schema 7: reasoning and token usage.
-- An assistant message's reasoning as JSON ({"text": ..., "items": [...]}): the readable text
-- `/reasoning on` shows, and opaque provider items (Responses API reasoning with encrypted
-- content) sent back on later calls. NULL when the model did not reason.
ALTER TABLE messages ADD COLUMN reasoning TEXT;
-- `/reasoning on|off`: whether replies in this session show the model's reasoning.
ALTER TABLE sessions ADD COLUMN show_reasoning INTEGER NOT NULL DEFAULT 0;
-- Token totals over every model call of the session, as the providers reported them; cached
-- prompt tokens are part of the prompt total and also counted apart.
ALTER TABLE sessions ADD COLUMN prompt_tokens_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN completion_tokens_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_read_tokens_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN cache_write_tokens_total INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN model_calls_total INTEGER NOT NULL DEFAULT 0;
