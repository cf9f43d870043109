//! Per-session choices made by chat commands (`/title`, `/model`, `/undo`), the platforms' home
//! channels (`/sethome`), and delivery receipts of a turn, in SQLite.

use async_trait::async_trait;
use hermesd_platform::ChatRef;
use sqlx::Row;

use super::{SqliteStore, from_json, retry_busy, to_json};
use crate::store::{ExtrasStore, StoreResult, TokenTotals, TurnReceipts};

#[async_trait]
impl ExtrasStore for SqliteStore {
    async fn set_title(&self, session_id: &str, title: Option<&str>) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query("UPDATE sessions SET title = ? WHERE id = ?")
                .bind(title)
                .bind(session_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }

    async fn set_session_model(&self, session_id: &str, model: Option<&str>) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query("UPDATE sessions SET model = ? WHERE id = ?")
                .bind(model)
                .bind(session_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }

    async fn undo_last_exchange(&self, session_id: &str) -> StoreResult<Option<String>> {
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let last: Option<(i64, Option<String>)> = sqlx::query_as(
                "SELECT id, content FROM messages WHERE session_id = ? AND archived = 0 AND role = 'user' \
                 ORDER BY id DESC LIMIT 1",
            )
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((id, content)) = last else { return Ok(None) };
            sqlx::query("UPDATE messages SET archived = 1 WHERE session_id = ? AND archived = 0 AND id >= ?")
                .bind(session_id)
                .bind(id)
                .execute(&mut *tx)
                .await?;
            // The prompt-size estimate no longer holds once history shrank.
            sqlx::query("UPDATE sessions SET last_prompt_tokens = 0 WHERE id = ?")
                .bind(session_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(Some(content.unwrap_or_default()))
        })
        .await
        .inspect(|_| self.transcripts.clear())
    }

    async fn set_home_channel(&self, chat: &ChatRef, now: i64) -> StoreResult<()> {
        let json = to_json(chat);
        retry_busy(|| {
            let json = json.clone();
            async move {
                sqlx::query(
                    "INSERT INTO home_channels (platform, chat, updated_at) VALUES (?, ?, ?) \
                     ON CONFLICT (platform) DO UPDATE SET chat = excluded.chat, updated_at = excluded.updated_at",
                )
                .bind(&chat.platform)
                .bind(json)
                .bind(now)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
            }
        })
        .await
    }

    async fn home_channel(&self, platform: &str) -> StoreResult<Option<ChatRef>> {
        let row: Option<(String,)> = sqlx::query_as("SELECT chat FROM home_channels WHERE platform = ?")
            .bind(platform)
            .fetch_optional(&mut *self.readers.get().await?)
            .await?;
        row.map(|(text,)| from_json(&text, "home_channels.chat")).transpose()
    }

    async fn turn_receipts(&self, turn_id: &str) -> StoreResult<TurnReceipts> {
        let rows = sqlx::query(
            "SELECT state, platform_message_id, error FROM outbound_messages WHERE turn_id = ? ORDER BY chunk_index",
        )
        .bind(turn_id)
        .fetch_all(&mut *self.writer.get().await?)
        .await?;
        let mut receipts = TurnReceipts::default();
        for row in &rows {
            match row.get::<String, _>("state").as_str() {
                "sent" => {
                    receipts.delivered.push(row.get::<Option<String>, _>("platform_message_id").unwrap_or_default())
                }
                "failed" => receipts.failed.push(row.get::<Option<String>, _>("error").unwrap_or_default()),
                _ => receipts.pending += 1,
            }
        }
        Ok(receipts)
    }

    async fn set_show_reasoning(&self, session_id: &str, on: bool) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query("UPDATE sessions SET show_reasoning = ? WHERE id = ?")
                .bind(i64::from(on))
                .bind(session_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }

    async fn show_reasoning(&self, session_id: &str) -> StoreResult<bool> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT show_reasoning FROM sessions WHERE id = ?")
            .bind(session_id)
            .fetch_optional(&mut *self.readers.get().await?)
            .await?;
        Ok(row.is_some_and(|(on,)| on != 0))
    }

    async fn session_usage(&self, session_id: &str) -> StoreResult<TokenTotals> {
        let row = sqlx::query(
            "SELECT model_calls_total, prompt_tokens_total, completion_tokens_total, cache_read_tokens_total, \
             cache_write_tokens_total FROM sessions WHERE id = ?",
        )
        .bind(session_id)
        .fetch_optional(&mut *self.readers.get().await?)
        .await?;
        let Some(row) = row else { return Ok(TokenTotals::default()) };
        let count = |column: &str| u64::try_from(row.get::<i64, _>(column)).unwrap_or(0);
        Ok(TokenTotals {
            calls: count("model_calls_total"),
            prompt: count("prompt_tokens_total"),
            completion: count("completion_tokens_total"),
            cache_read: count("cache_read_tokens_total"),
            cache_write: count("cache_write_tokens_total"),
        })
    }
}
