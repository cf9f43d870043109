//! `GrantStore` on SQLite.

use async_trait::async_trait;
use sqlx::Row;

use super::{SqliteStore, retry_busy};
use crate::store::StoreResult;
use crate::store::grants::{Grant, GrantStore, MAX_GRANTS_PER_PERSON};

#[async_trait]
impl GrantStore for SqliteStore {
    async fn add_grant(&self, platform: &str, user_id: &str, pattern: &str, now: i64) -> StoreResult<()> {
        retry_busy(|| async {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            sqlx::query(
                "INSERT INTO approval_grants (platform, user_id, pattern, created_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (platform, user_id, pattern) DO NOTHING",
            )
            .bind(platform)
            .bind(user_id)
            .bind(pattern)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            // Bounded per person: the oldest approvals beyond the cap go.
            sqlx::query(
                "DELETE FROM approval_grants WHERE platform = ?1 AND user_id = ?2 AND pattern NOT IN \
                 (SELECT pattern FROM approval_grants WHERE platform = ?1 AND user_id = ?2 \
                  ORDER BY created_at DESC, pattern LIMIT ?3)",
            )
            .bind(platform)
            .bind(user_id)
            .bind(i64::from(MAX_GRANTS_PER_PERSON))
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })
        .await?;
        Ok(())
    }

    async fn has_grant(&self, platform: &str, user_id: &str, pattern: &str) -> StoreResult<bool> {
        let found: Option<(i64,)> =
            sqlx::query_as("SELECT 1 FROM approval_grants WHERE platform = ? AND user_id = ? AND pattern = ?")
                .bind(platform)
                .bind(user_id)
                .bind(pattern)
                .fetch_optional(&mut *self.readers.get().await?)
                .await?;
        Ok(found.is_some())
    }

    async fn grants(&self, person: Option<(&str, &str)>) -> StoreResult<Vec<Grant>> {
        let (platform, user) = person.unzip();
        let rows = sqlx::query(
            "SELECT platform, user_id, pattern, created_at FROM approval_grants \
             WHERE ?1 IS NULL OR (platform = ?1 AND user_id = ?2) ORDER BY created_at, pattern",
        )
        .bind(platform)
        .bind(user)
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        Ok(rows
            .iter()
            .map(|row| Grant {
                platform: row.get("platform"),
                user_id: row.get("user_id"),
                pattern: row.get("pattern"),
                created_at: row.get("created_at"),
            })
            .collect())
    }

    async fn revoke_grants(&self, platform: &str, user_id: &str, pattern: Option<&str>) -> StoreResult<u64> {
        let done = retry_busy(|| async {
            sqlx::query(
                "DELETE FROM approval_grants WHERE platform = ?1 AND user_id = ?2 AND (?3 IS NULL OR pattern = ?3)",
            )
            .bind(platform)
            .bind(user_id)
            .bind(pattern)
            .execute(&mut *self.writer.get().await?)
            .await
        })
        .await?;
        Ok(done.rows_affected())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn grants_are_per_person_revocable_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
        store.add_grant("telegram", "1", "git push", 1).await.unwrap();
        store.add_grant("telegram", "1", "git push", 2).await.unwrap();
        assert!(store.has_grant("telegram", "1", "git push").await.unwrap());
        assert!(!store.has_grant("telegram", "2", "git push").await.unwrap(), "another person's is not theirs");
        assert!(!store.has_grant("telegram@work", "1", "git push").await.unwrap(), "nor another bot's");
        assert_eq!(store.grants(Some(("telegram", "1"))).await.unwrap().len(), 1);
        for n in 0..MAX_GRANTS_PER_PERSON + 5 {
            store.add_grant("telegram", "1", &format!("cmd {n}"), 10 + i64::from(n)).await.unwrap();
        }
        let kept = store.grants(Some(("telegram", "1"))).await.unwrap();
        assert_eq!(kept.len(), MAX_GRANTS_PER_PERSON as usize, "bounded");
        assert!(!store.has_grant("telegram", "1", "git push").await.unwrap(), "the oldest went first");
        assert_eq!(store.revoke_grants("telegram", "1", Some("cmd 204")).await.unwrap(), 1);
        assert_eq!(store.revoke_grants("telegram", "1", None).await.unwrap(), u64::from(MAX_GRANTS_PER_PERSON) - 1);
        assert!(store.grants(None).await.unwrap().is_empty());
    }
}
