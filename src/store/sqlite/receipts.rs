//! `ReceiptStore` on SQLite: delivery statuses on `outbound_messages` by platform message id,
//! and a chat's last inbound time from `inbound_events` (both indexed by migration 0015).

use async_trait::async_trait;

use super::SqliteStore;
use crate::store::{ReceiptStore, StoreResult};

/// The statuses a report may replace, by the status reported: progress only moves forward and
/// `failed` is final.
fn replaceable(status: &str) -> &'static str {
    match status {
        "delivered" => "coalesce(delivery_status, 'sent') IN ('sent')",
        "read" => "coalesce(delivery_status, 'sent') IN ('sent', 'delivered')",
        _ => "delivery_status IS NULL",
    }
}

#[async_trait]
impl ReceiptStore for SqliteStore {
    async fn record_delivery_status(
        &self,
        platform: &str,
        platform_message_id: &str,
        status: &str,
        error: Option<&str>,
    ) -> StoreResult<bool> {
        let failed = status == "failed";
        let sql = if failed {
            "UPDATE outbound_messages SET state = 'failed', delivery_status = 'failed', error = ?3 \
             WHERE platform = ?1 AND platform_message_id = ?2 AND state <> 'quarantined'"
                .to_owned()
        } else {
            format!(
                "UPDATE outbound_messages SET delivery_status = ?4 WHERE platform = ?1 AND platform_message_id = ?2 \
                 AND state = 'sent' AND {}",
                replaceable(status)
            )
        };
        let error = error.unwrap_or("failed after the platform accepted it");
        self.write(|| {
            let sql = sqlx::AssertSqlSafe(sql.clone());
            async move {
                sqlx::query(sql)
                    .bind(platform)
                    .bind(platform_message_id)
                    .bind(error)
                    .bind(status)
                    .execute(&mut *self.writer.get().await?)
                    .await
                    .map(|done| done.rows_affected() > 0)
            }
        })
        .await
    }

    async fn last_inbound_at(&self, platform: &str, chat_id: &str) -> StoreResult<Option<i64>> {
        let row: Option<(Option<i64>,)> = sqlx::query_as(
            "SELECT max(received_at) FROM inbound_events WHERE platform = ?1 AND \
             CASE WHEN json_valid(payload) THEN coalesce(json_extract(payload, '$.message.chat.chat_id'), \
             json_extract(payload, '$.action.chat.chat_id')) END = ?2",
        )
        .bind(platform)
        .bind(chat_id)
        .fetch_optional(&mut *self.readers.get().await?)
        .await?;
        Ok(row.and_then(|(at,)| at))
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Outlive;
    use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, OutboundKind, OutboundMessage, Sender};

    use super::SqliteStore;
    use crate::store::{InboundStore, OutboxStore, ReceiptStore};

    async fn open(dir: &tempfile::TempDir) -> SqliteStore {
        SqliteStore::open(&dir.path().join("state.db"), std::time::Duration::from_secs(5), 2).await.unwrap()
    }

    fn event(id: &str, chat: &str) -> InboundEvent {
        InboundEvent::Message {
            event_id: id.into(),
            message: InboundMessage {
                profile: None,
                message_id: id.into(),
                chat: ChatRef::new("whatsapp", chat, ChatType::Dm),
                sender: Sender { id: chat.into(), name: None, is_bot: false, roles: Vec::new() },
                text: "hi".into(),
                attachments: Vec::new(),
                reply_to: None,
                addressed: true,
                timestamp_ms: 0,
                history: Vec::new(),
                chat_title: None,
                client: None,
            },
        }
    }

    #[tokio::test]
    async fn the_last_inbound_time_is_the_newest_event_of_that_chat() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        assert_eq!(store.last_inbound_at("whatsapp", "15550001").await.unwrap(), None);
        store.accept_inbound(&event("w1", "15550001"), 1_000, Outlive::PowerCut).await.unwrap();
        store.accept_inbound(&event("w2", "15550001"), 5_000, Outlive::PowerCut).await.unwrap();
        store.accept_inbound(&event("w3", "15550002"), 9_000, Outlive::PowerCut).await.unwrap();
        store.insert_raw_inbound("whatsapp", "w4", "{not json", 9_500).await.unwrap();
        assert_eq!(store.last_inbound_at("whatsapp", "15550001").await.unwrap(), Some(5_000));
        assert_eq!(store.last_inbound_at("telegram", "15550001").await.unwrap(), None);
        let plan: Vec<(i64, i64, i64, String)> = sqlx::query_as(
            "EXPLAIN QUERY PLAN SELECT max(received_at) FROM inbound_events WHERE platform = 'whatsapp' AND \
             CASE WHEN json_valid(payload) THEN coalesce(json_extract(payload, '$.message.chat.chat_id'), \
             json_extract(payload, '$.action.chat.chat_id')) END = 'x'",
        )
        .fetch_all(&mut *store.readers.get().await.unwrap())
        .await
        .unwrap();
        assert!(plan.iter().any(|row| row.3.contains("inbound_by_chat")), "{plan:?}");
    }

    #[tokio::test]
    async fn a_later_failure_marks_the_sent_row_failed_and_progress_never_goes_back() {
        let dir = tempfile::tempdir().unwrap();
        let store = open(&dir).await;
        let message = OutboundMessage {
            chat: ChatRef::new("whatsapp", "15550001", ChatType::Dm),
            text: "hello".into(),
            reply_to: None,
            kind: OutboundKind::Reply,
            buttons: Vec::new(),
            chunk: (0, 1),
            file: None,
        };
        let ids = store.enqueue_outbound("turn-1", &[message], 1).await.unwrap();
        store.mark_sent(ids[0], "wamid.A", 2, Outlive::PowerCut).await.unwrap();
        assert!(store.record_delivery_status("whatsapp", "wamid.A", "read", None).await.unwrap());
        assert!(!store.record_delivery_status("whatsapp", "wamid.A", "delivered", None).await.unwrap());
        assert!(!store.record_delivery_status("whatsapp", "wamid.B", "failed", Some("x")).await.unwrap());
        assert!(
            store.record_delivery_status("whatsapp", "wamid.A", "failed", Some("131047: re-engage")).await.unwrap()
        );
        let row: (String, Option<String>, Option<String>) =
            sqlx::query_as("SELECT state, delivery_status, error FROM outbound_messages WHERE id = ?")
                .bind(ids[0])
                .fetch_one(&mut *store.readers.get().await.unwrap())
                .await
                .unwrap();
        assert_eq!(row, ("failed".into(), Some("failed".into()), Some("131047: re-engage".into())));
        assert!(!store.record_delivery_status("whatsapp", "wamid.A", "read", None).await.unwrap());
    }
}
