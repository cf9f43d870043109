//! `ResponseStore` on SQLite.

use async_trait::async_trait;

use super::{SqliteStore, retry_busy};
use crate::store::responses::{ResponseStore, StoredApiResponse};
use crate::store::{StoreError, StoreResult};

#[async_trait]
impl ResponseStore for SqliteStore {
    async fn save_response(&self, response: &StoredApiResponse) -> StoreResult<()> {
        let context = match response.context.is_empty() {
            true => None,
            false => Some(serde_json::to_string(&response.context).map_err(|e| StoreError::Corrupt(e.to_string()))?),
        };
        retry_busy(|| async {
            sqlx::query(
                "INSERT INTO api_responses (id, chat_id, body, created_at, context) VALUES (?, ?, ?, ?, ?) \
                 ON CONFLICT (id) DO UPDATE SET body = excluded.body",
            )
            .bind(&response.id)
            .bind(&response.chat_id)
            .bind(&response.body)
            .bind(response.created_at)
            .bind(context.as_deref())
            .execute(&mut *self.writer.get().await?)
            .await
            .map(drop)
        })
        .await
    }

    async fn api_response(&self, id: &str) -> StoreResult<Option<StoredApiResponse>> {
        let row: Option<(String, String, String, i64, Option<String>)> =
            sqlx::query_as("SELECT id, chat_id, body, created_at, context FROM api_responses WHERE id = ?")
                .bind(id)
                .fetch_optional(&mut *self.readers.get().await?)
                .await?;
        let Some((id, chat_id, body, created_at, context)) = row else { return Ok(None) };
        let context = match context {
            Some(json) => {
                serde_json::from_str(&json).map_err(|e| StoreError::Corrupt(format!("response {id}: {e}")))?
            }
            None => Vec::new(),
        };
        Ok(Some(StoredApiResponse { id, chat_id, body, created_at, context }))
    }

    async fn latest_response(&self, chat_id: &str) -> StoreResult<Option<String>> {
        let row: Option<(String,)> = sqlx::query_as(
            "SELECT id FROM api_responses WHERE chat_id = ? ORDER BY created_at DESC, rowid DESC LIMIT 1",
        )
        .bind(chat_id)
        .fetch_optional(&mut *self.readers.get().await?)
        .await?;
        Ok(row.map(|(id,)| id))
    }

    async fn delete_response(&self, id: &str) -> StoreResult<bool> {
        let done = retry_busy(|| async {
            sqlx::query("DELETE FROM api_responses WHERE id = ?").bind(id).execute(&mut *self.writer.get().await?).await
        })
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn prune_responses(&self, before: i64, limit: u32) -> StoreResult<u64> {
        let done = retry_busy(|| async {
            sqlx::query(
                "DELETE FROM api_responses WHERE rowid IN \
                 (SELECT rowid FROM api_responses WHERE created_at < ? LIMIT ?)",
            )
            .bind(before)
            .bind(i64::from(limit))
            .execute(&mut *self.writer.get().await?)
            .await
        })
        .await?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn responses_are_kept_found_by_chat_deleted_and_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("s.db"), std::time::Duration::from_secs(5), 1).await.unwrap();
        let response = |id: &str, at| StoredApiResponse {
            id: id.into(),
            chat_id: "c".into(),
            body: "{}".into(),
            created_at: at,
            context: Vec::new(),
        };
        store.save_response(&response("resp_1", 10)).await.unwrap();
        store.save_response(&response("resp_2", 20)).await.unwrap();
        assert_eq!(store.latest_response("c").await.unwrap().as_deref(), Some("resp_2"));
        assert_eq!(store.api_response("resp_1").await.unwrap(), Some(response("resp_1", 10)));
        assert!(store.delete_response("resp_2").await.unwrap());
        assert!(!store.delete_response("resp_2").await.unwrap());
        assert_eq!(store.prune_responses(15, 10).await.unwrap(), 1);
        assert_eq!(store.api_response("resp_1").await.unwrap(), None);
        store.close().await;
    }
}
