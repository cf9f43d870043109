//! `LifecycleStore` on SQLite: a key's sessions, `/resume`, the sweep's archiving (route dropped
//! and the reason kept in `session_resets`, in one transaction), and flush markers.

use async_trait::async_trait;
use hermesd_platform::{ChatType, InboundEvent};
use sqlx::Row;

use super::sessions::{SESSION_COLUMNS, session_from_row};
use super::{SqliteStore, from_json, retry_busy};
use crate::store::{LifecycleStore, ResetReason, SessionInfo, SessionKey, StaleRoute, StoreResult};
use crate::vocab::message::SUMMARY_PREFIX;

fn chat_type(text: &str) -> ChatType {
    match text {
        "group" => ChatType::Group,
        "channel" => ChatType::Channel,
        "thread" => ChatType::Thread,
        _ => ChatType::Dm,
    }
}

#[async_trait]
impl LifecycleStore for SqliteStore {
    async fn key_sessions(&self, key: &str, limit: u32) -> StoreResult<Vec<SessionInfo>> {
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.session_key = ? ORDER BY s.updated_at DESC, s.id DESC LIMIT ?"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(key)
            .bind(i64::from(limit))
            .fetch_all(&mut *self.readers.get().await?)
            .await?;
        Ok(rows.iter().map(session_from_row).collect())
    }

    async fn resume_session(&self, key: &str, session_id: &str, now: i64) -> StoreResult<bool> {
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let touched = sqlx::query("UPDATE sessions SET updated_at = ? WHERE id = ? AND session_key = ?")
                .bind(now)
                .bind(session_id)
                .bind(key)
                .execute(&mut *tx)
                .await?
                .rows_affected();
            if touched == 0 {
                return Ok(false);
            }
            sqlx::query(
                "INSERT INTO session_routes (session_key, session_id, updated_at) VALUES (?, ?, ?) \
                 ON CONFLICT (session_key) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at",
            )
            .bind(key)
            .bind(session_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM session_resets WHERE session_key = ?").bind(key).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn stale_routes(
        &self,
        before: i64,
        after: Option<(i64, String)>,
        limit: u32,
    ) -> StoreResult<Vec<StaleRoute>> {
        let (after_at, after_id) = after.unwrap_or((i64::MIN, String::new()));
        let rows = sqlx::query(
            "SELECT r.session_key, s.id, s.updated_at, s.platform, s.chat_id, s.chat_type, s.thread_id, s.user_id \
             FROM sessions s JOIN session_routes r ON r.session_id = s.id \
             WHERE s.updated_at < ? AND (s.updated_at > ? OR (s.updated_at = ? AND s.id > ?)) \
             ORDER BY s.updated_at, s.id LIMIT ?",
        )
        .bind(before)
        .bind(after_at)
        .bind(after_at)
        .bind(&after_id)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        Ok(rows
            .iter()
            .map(|row| StaleRoute {
                key: SessionKey {
                    key: row.get("session_key"),
                    platform: row.get("platform"),
                    chat_id: row.get("chat_id"),
                    chat_type: chat_type(row.get("chat_type")),
                    thread_id: row.get("thread_id"),
                    user_id: row.get("user_id"),
                },
                session_id: row.get("id"),
                updated_at: row.get("updated_at"),
            })
            .collect())
    }

    async fn archive_route(
        &self,
        key: &str,
        session_id: &str,
        updated_at: i64,
        reason: ResetReason,
        now: i64,
    ) -> StoreResult<bool> {
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let dropped = sqlx::query(
                "DELETE FROM session_routes WHERE session_key = ? AND session_id = ? \
                 AND (SELECT updated_at FROM sessions WHERE id = ?) = ?",
            )
            .bind(key)
            .bind(session_id)
            .bind(session_id)
            .bind(updated_at)
            .execute(&mut *tx)
            .await?
            .rows_affected();
            if dropped == 0 {
                return Ok(false);
            }
            sqlx::query(
                "INSERT INTO session_resets (session_key, session_id, reason, reset_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (session_key) DO UPDATE SET session_id = excluded.session_id, \
                 reason = excluded.reason, reset_at = excluded.reset_at",
            )
            .bind(key)
            .bind(session_id)
            .bind(reason.as_str())
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn take_reset(&self, key: &str) -> StoreResult<Option<ResetReason>> {
        // Most keys without a route are simply new: a read answers them without the writer.
        let pending: Option<(i64,)> = sqlx::query_as("SELECT 1 FROM session_resets WHERE session_key = ?")
            .bind(key)
            .fetch_optional(&mut *self.readers.get().await?)
            .await?;
        if pending.is_none() {
            return Ok(None);
        }
        let reason: Option<(String,)> = retry_busy(|| async move {
            sqlx::query_as("DELETE FROM session_resets WHERE session_key = ? RETURNING reason")
                .bind(key)
                .fetch_optional(&mut *self.writer.get().await?)
                .await
        })
        .await?;
        Ok(reason.map(|(reason,)| ResetReason::parse(&reason)))
    }

    async fn unflushed_through(&self, session_id: &str) -> StoreResult<Option<i64>> {
        let (newest,): (Option<i64>,) = sqlx::query_as(
            "SELECT MAX(m.id) FROM messages m JOIN sessions s ON s.id = m.session_id \
             WHERE m.session_id = ? AND m.role = 'user' AND m.id > s.flushed_through \
             AND substr(COALESCE(m.content, ''), 1, length(?)) <> ?",
        )
        .bind(session_id)
        .bind(SUMMARY_PREFIX)
        .bind(SUMMARY_PREFIX)
        .fetch_one(&mut *self.readers.get().await?)
        .await?;
        Ok(newest)
    }

    async fn set_flushed(&self, session_id: &str, message_id: i64) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query("UPDATE sessions SET flushed_through = MAX(flushed_through, ?) WHERE id = ?")
                .bind(message_id)
                .bind(session_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }

    async fn set_title_if_none(&self, session_id: &str, title: &str) -> StoreResult<bool> {
        retry_busy(|| async move {
            sqlx::query("UPDATE sessions SET title = ? WHERE id = ? AND title IS NULL")
                .bind(title)
                .bind(session_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(|done| done.rows_affected() == 1)
        })
        .await
    }

    async fn last_event(&self, session_id: &str) -> StoreResult<Option<InboundEvent>> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT payload FROM inbound_events WHERE session_id = ? ORDER BY seq DESC LIMIT 1")
                .bind(session_id)
                .fetch_optional(&mut *self.readers.get().await?)
                .await?;
        row.map(|(payload,)| from_json(&payload, "inbound_events.payload")).transpose()
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Outlive;
    use std::time::Duration;

    use hermesd_platform::{ChatRef, InboundMessage, Sender};

    use super::*;
    use crate::store::{AcceptOutcome, InboundStore, SessionStore};
    use crate::vocab::message::{Message, Role};

    fn key() -> SessionKey {
        SessionKey {
            key: "agent:main:rec:dm:c1".into(),
            platform: "rec".into(),
            chat_id: "c1".into(),
            chat_type: ChatType::Dm,
            thread_id: None,
            user_id: None,
        }
    }

    fn event(id: &str, text: &str) -> InboundEvent {
        InboundEvent::Message {
            event_id: id.into(),
            message: InboundMessage {
                profile: None,
                message_id: id.into(),
                chat: ChatRef::new("rec", "c1", ChatType::Dm),
                sender: Sender { id: "ann".into(), name: None, is_bot: false, roles: Vec::new() },
                text: text.into(),
                attachments: vec![],
                reply_to: None,
                addressed: true,
                timestamp_ms: 1,
                history: vec![],
                chat_title: None,
                client: None,
            },
        }
    }

    async fn say(store: &SqliteStore, session: &str, id: &str, text: &str, now: i64) {
        let AcceptOutcome::New { seq } = store.accept_inbound(&event(id, text), now, Outlive::PowerCut).await.unwrap()
        else {
            panic!("duplicate")
        };
        store.begin_turn(seq, session, &Message::text(Role::User, text), now).await.unwrap();
    }

    #[tokio::test]
    async fn sessions_of_a_key_archive_resume_and_flush_markers() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap();
        let first = store.start_session(&key(), 1_000).await.unwrap();
        assert_eq!(store.unflushed_through(&first.id).await.unwrap(), None, "nothing said yet");
        say(&store, &first.id, "e1", "remember the blue door", 1_000).await;
        let through = store.unflushed_through(&first.id).await.unwrap().expect("a user message to flush");
        store.set_flushed(&first.id, through).await.unwrap();
        assert_eq!(store.unflushed_through(&first.id).await.unwrap(), None, "flushed once");
        let Some(InboundEvent::Message { message, .. }) = store.last_event(&first.id).await.unwrap() else {
            panic!("the session's event")
        };
        assert_eq!(message.sender.id, "ann");

        // The sweep finds the stale route, loses to a turn that moved it, then archives it.
        let stale = store.stale_routes(2_000, None, 10).await.unwrap();
        assert_eq!(stale.len(), 1);
        assert_eq!((stale[0].key.key.as_str(), stale[0].session_id.as_str()), (key().key.as_str(), first.id.as_str()));
        assert!(store.stale_routes(2_000, Some((1_000, first.id.clone())), 10).await.unwrap().is_empty(), "cursor");
        assert!(store.stale_routes(500, None, 10).await.unwrap().is_empty(), "not stale yet");
        assert!(!store.archive_route(&key().key, &first.id, 999, ResetReason::Idle, 3_000).await.unwrap());
        assert!(store.archive_route(&key().key, &first.id, 1_000, ResetReason::Daily, 3_000).await.unwrap());
        assert!(store.route(&key().key).await.unwrap().is_none(), "the next message starts afresh");
        assert_eq!(store.take_reset(&key().key).await.unwrap(), Some(ResetReason::Daily));
        assert_eq!(store.take_reset(&key().key).await.unwrap(), None, "told once");

        let second = store.start_session(&key(), 4_000).await.unwrap();
        say(&store, &second.id, "e2", "hello again", 4_000).await;
        let listed = store.key_sessions(&key().key, 10).await.unwrap();
        assert_eq!(listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(), [second.id.as_str(), first.id.as_str()]);
        assert_eq!(listed[1].message_count, 1);
        assert!(store.set_title_if_none(&second.id, "Greetings").await.unwrap());
        assert!(!store.set_title_if_none(&second.id, "Other").await.unwrap(), "a title is kept");

        assert!(!store.resume_session("agent:main:rec:dm:other", &first.id, 5_000).await.unwrap(), "not its key");
        assert!(store.resume_session(&key().key, &first.id, 5_000).await.unwrap());
        let routed = store.route(&key().key).await.unwrap().expect("routed");
        assert_eq!((routed.id.as_str(), routed.updated_at), (first.id.as_str(), 5_000));
    }
}
