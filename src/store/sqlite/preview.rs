//! Streaming previews in SQLite (`stream_previews`, migration 0009).

use async_trait::async_trait;
use hermesd_platform::MessageRef;
use sqlx::Row;

use super::{SqliteStore, from_json, retry_busy, to_json};
use crate::store::{Outlive, PreviewStore, StoreResult, StoredPreview};

#[async_trait]
impl PreviewStore for SqliteStore {
    async fn save_preview(&self, turn_id: &str, message: &MessageRef, now: i64) -> StoreResult<()> {
        let payload = to_json(message);
        retry_busy(|| async {
            sqlx::query(
                "INSERT INTO stream_previews (turn_id, payload, created_at) VALUES (?, ?, ?) \
                 ON CONFLICT (turn_id) DO UPDATE SET payload = excluded.payload, created_at = excluded.created_at",
            )
            .bind(turn_id)
            .bind(&payload)
            .bind(now)
            .execute(&mut *self.writer.get().await?)
            .await
            .map(drop)
        })
        .await
    }

    async fn preview(&self, turn_id: &str) -> StoreResult<Option<MessageRef>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT payload FROM stream_previews WHERE turn_id = ?")
            .bind(turn_id)
            .fetch_optional(&mut *self.writer.get().await?)
            .await?;
        row.map(|(payload,)| from_json(&payload, "stream_previews.payload")).transpose()
    }

    async fn previews(&self) -> StoreResult<Vec<StoredPreview>> {
        let rows = sqlx::query(
            "SELECT p.turn_id, p.payload, EXISTS (SELECT 1 FROM outbound_messages o \
             WHERE o.turn_id = p.turn_id AND o.state = 'pending') AS pending \
             FROM stream_previews p ORDER BY p.created_at",
        )
        .fetch_all(&mut *self.writer.get().await?)
        .await?;
        let mut previews = Vec::with_capacity(rows.len());
        for row in rows {
            let turn_id: String = row.get("turn_id");
            match from_json(row.get("payload"), "stream_previews.payload") {
                Ok(message) => {
                    previews.push(StoredPreview { turn_id, message, reply_pending: row.get::<i64, _>("pending") != 0 });
                }
                Err(error) => {
                    // A preview is ephemeral: one that no longer decodes is simply forgotten.
                    tracing::warn!(turn = turn_id, error = %error, "dropped an undecodable stream preview");
                    sqlx::query("DELETE FROM stream_previews WHERE turn_id = ?")
                        .bind(&turn_id)
                        .execute(&mut *self.writer.get().await?)
                        .await?;
                }
            }
        }
        Ok(previews)
    }

    async fn drop_preview(&self, turn_id: &str, message_id: &str) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query("DELETE FROM stream_previews WHERE turn_id = ? AND json_extract(payload, '$.message_id') = ?")
                .bind(turn_id)
                .bind(message_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }

    async fn settle_preview(
        &self,
        outbound_id: i64,
        turn_id: &str,
        message_id: &str,
        now: i64,
        outlive: Outlive,
    ) -> StoreResult<()> {
        let (turn_id, message_id) = (turn_id.to_owned(), message_id.to_owned());
        // A receipt: on the write lane, whose batch syncs when `outlive` asks it to.
        self.write_lane_durable(outlive, move |conn| {
            conn.prepare_cached(
                "UPDATE outbound_messages SET state = 'sent', platform_message_id = ?1, sent_at = ?2, \
                 attempts = attempts + 1 WHERE id = ?3",
            )?
            .execute(rusqlite::params![message_id, now, outbound_id])?;
            conn.prepare_cached(
                "DELETE FROM stream_previews WHERE turn_id = ?1 AND json_extract(payload, '$.message_id') = ?2",
            )?
            .execute(rusqlite::params![turn_id, message_id])
            .map(drop)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Outlive;
    use hermesd_platform::{ChatRef, ChatType, OutboundKind, OutboundMessage};

    use crate::store::{OutboxStore, PreviewStore, SqliteStore};

    fn preview(id: &str) -> hermesd_platform::MessageRef {
        hermesd_platform::MessageRef { chat: ChatRef::new("telegram", "5", ChatType::Dm), message_id: id.into() }
    }

    fn chunk(text: &str) -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef::new("telegram", "5", ChatType::Dm),
            text: text.into(),
            reply_to: None,
            kind: OutboundKind::Reply,
            buttons: Vec::new(),
            chunk: (0, 1),
            file: None,
        }
    }

    #[tokio::test]
    async fn a_preview_is_kept_until_the_final_reply_settles_it() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("s.db"), std::time::Duration::from_secs(5), 2).await.unwrap();
        store.save_preview("evt:1", &preview("10"), 1).await.unwrap();
        store.save_preview("evt:2", &preview("20"), 2).await.unwrap();
        // A rerun's newer preview replaces the first one.
        store.save_preview("evt:2", &preview("21"), 3).await.unwrap();
        assert_eq!(store.preview("evt:2").await.unwrap(), Some(preview("21")));
        let ids = store.enqueue_outbound("evt:1", &[chunk("final")], 4).await.unwrap();
        let left = store.previews().await.unwrap();
        assert_eq!(left.len(), 2);
        assert!(left[0].reply_pending && left[0].turn_id == "evt:1");
        assert!(!left[1].reply_pending);

        // Dropping an older preview id leaves the newer one alone.
        store.drop_preview("evt:2", "20").await.unwrap();
        assert!(store.preview("evt:2").await.unwrap().is_some());
        store.drop_preview("evt:2", "21").await.unwrap();
        assert!(store.preview("evt:2").await.unwrap().is_none());

        store.settle_preview(ids[0], "evt:1", "10", 5, Outlive::PowerCut).await.unwrap();
        assert!(store.preview("evt:1").await.unwrap().is_none());
        assert!(store.pending_for_turn("evt:1").await.unwrap().is_empty(), "the chunk is sent");
    }
}
