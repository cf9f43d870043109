//! `ImportStore` on SQLite: a conversation, its route and its source mark in one transaction.

use async_trait::async_trait;

use super::sessions::message_json;
use super::{SqliteStore, retry_busy};
use crate::store::StoreResult;
use crate::store::import::{ImportStore, ImportedSession, SessionImport};

#[async_trait]
impl ImportStore for SqliteStore {
    async fn imported(&self, source: &str) -> StoreResult<Option<String>> {
        let found: Option<(String,)> = sqlx::query_as("SELECT target FROM imports WHERE source = ?")
            .bind(source)
            .fetch_optional(&mut *self.readers.get().await?)
            .await?;
        Ok(found.map(|(id,)| id))
    }

    async fn mark_imported(&self, source: &str, target: &str, now: i64) -> StoreResult<()> {
        retry_busy(|| async {
            sqlx::query(
                "INSERT INTO imports (source, target, imported_at) VALUES (?, ?, ?) ON CONFLICT (source) DO NOTHING",
            )
            .bind(source)
            .bind(target)
            .bind(now)
            .execute(&mut *self.writer.get().await?)
            .await
            .map(drop)
        })
        .await
    }

    async fn import_session(&self, session: &ImportedSession, now: i64) -> StoreResult<SessionImport> {
        let id = uuid::Uuid::now_v7().to_string();
        let rows: Vec<_> = session
            .messages
            .iter()
            .map(|(message, at)| {
                let (tool_calls, reasoning, images) = message_json(message);
                (
                    message.role.as_str(),
                    message.content.clone(),
                    tool_calls,
                    message.tool_call_id.clone(),
                    reasoning,
                    images,
                    *at,
                )
            })
            .collect();
        let (id_ref, rows_ref) = (id.as_str(), &rows);
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let earlier: Option<(String,)> =
                sqlx::query_as("SELECT target FROM imports WHERE source = ?")
                    .bind(&session.source)
                    .fetch_optional(&mut *tx)
                    .await?;
            if let Some((earlier,)) = earlier {
                return Ok(SessionImport::Already { id: earlier });
            }
            let key = &session.key;
            sqlx::query(
                "INSERT INTO sessions (id, session_key, platform, chat_id, chat_type, thread_id, user_id, title, \
                 created_at, updated_at, person_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id_ref)
            .bind(&key.key)
            .bind(&key.platform)
            .bind(&key.chat_id)
            .bind(key.chat_type.as_str())
            .bind(&key.thread_id)
            .bind(&key.user_id)
            .bind(&session.title)
            .bind(session.created_at)
            .bind(session.updated_at)
            .bind(&session.person)
            .execute(&mut *tx)
            .await?;
            for (role, content, tool_calls, tool_call_id, reasoning, images, at) in rows_ref {
                sqlx::query(
                    "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, reasoning, \
                     created_at, images) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                )
                .bind(id_ref)
                .bind(*role)
                .bind(content)
                .bind(tool_calls)
                .bind(tool_call_id)
                .bind(reasoning)
                .bind(at)
                .bind(images)
                .execute(&mut *tx)
                .await?;
            }
            // Its memory was Hermes' to keep: no memory-only turn over what came in.
            sqlx::query("UPDATE sessions SET flushed_through = (SELECT COALESCE(MAX(id), 0) FROM messages WHERE session_id = ?1) WHERE id = ?1")
                .bind(id_ref)
                .execute(&mut *tx)
                .await?;
            // Routed only where the chat has no conversation here yet.
            let routed = session.route
                && sqlx::query(
                    "INSERT INTO session_routes (session_key, session_id, updated_at) VALUES (?, ?, ?) \
                     ON CONFLICT (session_key) DO NOTHING",
                )
                .bind(&key.key)
                .bind(id_ref)
                .bind(session.updated_at)
                .execute(&mut *tx)
                .await?
                .rows_affected()
                    == 1;
            sqlx::query("INSERT INTO imports (source, target, imported_at) VALUES (?, ?, ?)")
                .bind(&session.source)
                .bind(id_ref)
                .bind(now)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(SessionImport::Imported { id: id_ref.to_owned(), routed })
        })
        .await
    }

    async fn approve_user(
        &self,
        platform: &str,
        user_id: &str,
        user_name: Option<&str>,
        now: i64,
    ) -> StoreResult<bool> {
        let done = retry_busy(|| async {
            sqlx::query(
                "INSERT INTO approved_users (platform, user_id, user_name, approved_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (platform, user_id) DO NOTHING",
            )
            .bind(platform)
            .bind(user_id)
            .bind(user_name)
            .bind(now)
            .execute(&mut *self.writer.get().await?)
            .await
        })
        .await?;
        Ok(done.rows_affected() == 1)
    }
}
