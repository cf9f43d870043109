-- hermesd schema 10: retention. Archived (compacted) messages are pruned by age; this partial
-- index finds them without scanning the live transcript.
CREATE INDEX messages_archived_by_age ON messages (created_at) WHERE archived = 1;
