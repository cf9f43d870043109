-- hermesd schema 12: scoped session search. A person's own per-user sessions (their isolated
-- session in a group) are found by (platform, user) without scanning every session.
CREATE INDEX sessions_by_user ON sessions (platform, user_id) WHERE user_id IS NOT NULL;
