-- hermesd schema 24: the rows an operator acts on (`hermesd deliveries list --failed`, `events
-- list --quarantined`, their counts in /metrics) are found without reading every row.
CREATE INDEX outbound_troubled ON outbound_messages (state, id) WHERE state IN ('failed', 'quarantined');
CREATE INDEX inbound_troubled ON inbound_events (state, seq) WHERE state IN ('failed', 'quarantined');
