-- hermesd schema 15: delivery receipts reported later by the platform (WhatsApp status
-- callbacks), and the last inbound time per chat (WhatsApp's 24-hour customer-service window).
-- delivery_status: sent | delivered | read | failed, as the platform last reported it.
ALTER TABLE outbound_messages ADD COLUMN delivery_status TEXT;
CREATE INDEX outbound_by_platform_id ON outbound_messages (platform, platform_message_id)
    WHERE platform_message_id IS NOT NULL;
-- The chat an event came from (messages and button presses), as stored in its payload; a
-- payload that is not JSON (quarantined rows) has none, and never makes a write fail.
CREATE INDEX inbound_by_chat ON inbound_events (
    platform,
    CASE WHEN json_valid(payload)
        THEN coalesce(json_extract(payload, '$.message.chat.chat_id'), json_extract(payload, '$.action.chat.chat_id'))
    END,
    received_at
);
