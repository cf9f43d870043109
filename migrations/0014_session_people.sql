-- hermesd schema 14: whose a session is. A DM (or an API request with `user`) belongs to the
-- person who wrote it; `hermesd sessions delete --user` finds a person's sessions by it, even on
-- platforms whose DM chat id is not the user id (Discord, Slack). A session keeps its first person.
ALTER TABLE sessions ADD COLUMN person_id TEXT;

-- Sessions isolated per user in a group already name their user.
UPDATE sessions SET person_id = user_id WHERE user_id IS NOT NULL;

-- Earlier direct conversations: the sender of their first stored event (payloads that do not
-- decode as JSON are skipped, never an error).
UPDATE sessions SET person_id = (
    SELECT CASE WHEN json_valid(e.payload) THEN json_extract(e.payload, '$.message.sender.id') END
    FROM inbound_events e WHERE e.session_id = sessions.id ORDER BY e.seq LIMIT 1
) WHERE person_id IS NULL AND chat_type = 'dm' AND platform NOT IN ('cron', 'webhook');

CREATE INDEX sessions_by_person ON sessions (platform, person_id) WHERE person_id IS NOT NULL;
