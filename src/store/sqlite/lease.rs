//! Leases in SQLite (`leases`, migration 0021): each operation is one statement, so two
//! processes racing for a lapsed lease cannot both get it.

use async_trait::async_trait;

use super::{SqliteStore, retry_busy};
use crate::store::{LeaseInfo, LeaseStore, StoreResult};

#[async_trait]
impl LeaseStore for SqliteStore {
    async fn acquire_lease(
        &self,
        name: &str,
        holder: &str,
        label: &str,
        ttl_ms: i64,
        now: i64,
    ) -> StoreResult<Option<i64>> {
        let expires = now.saturating_add(ttl_ms);
        retry_busy(|| async move {
            sqlx::query_scalar(
                "INSERT INTO leases (name, holder, label, token, acquired_at, expires_at) VALUES (?1, ?2, ?3, 1, ?4, ?5) \
                 ON CONFLICT (name) DO UPDATE SET \
                   token = CASE WHEN leases.holder = excluded.holder THEN leases.token ELSE leases.token + 1 END, \
                   acquired_at = CASE WHEN leases.holder = excluded.holder THEN leases.acquired_at ELSE excluded.acquired_at END, \
                   holder = excluded.holder, label = excluded.label, expires_at = excluded.expires_at \
                 WHERE leases.holder = excluded.holder OR leases.expires_at <= ?4 \
                 RETURNING token",
            )
            .bind(name)
            .bind(holder)
            .bind(label)
            .bind(now)
            .bind(expires)
            .fetch_optional(&mut *self.writer.get().await?)
            .await
        })
        .await
    }

    async fn take_lease(&self, name: &str, holder: &str, label: &str, now: i64) -> StoreResult<i64> {
        retry_busy(|| async move {
            sqlx::query_scalar(
                "INSERT INTO leases (name, holder, label, token, acquired_at, expires_at) \
                 VALUES (?1, ?2, ?3, 1, ?4, 9223372036854775807) \
                 ON CONFLICT (name) DO UPDATE SET token = leases.token + 1, holder = excluded.holder, \
                   label = excluded.label, acquired_at = excluded.acquired_at, expires_at = excluded.expires_at \
                 RETURNING token",
            )
            .bind(name)
            .bind(holder)
            .bind(label)
            .bind(now)
            .fetch_one(&mut *self.writer.get().await?)
            .await
        })
        .await
    }

    async fn renew_lease(&self, name: &str, holder: &str, token: i64, ttl_ms: i64, now: i64) -> StoreResult<bool> {
        let expires = now.saturating_add(ttl_ms);
        retry_busy(|| async move {
            sqlx::query("UPDATE leases SET expires_at = ? WHERE name = ? AND holder = ? AND token = ?")
                .bind(expires)
                .bind(name)
                .bind(holder)
                .bind(token)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(|done| done.rows_affected() == 1)
        })
        .await
    }

    async fn release_lease(&self, name: &str, holder: &str, token: i64) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query("UPDATE leases SET expires_at = 0 WHERE name = ? AND holder = ? AND token = ?")
                .bind(name)
                .bind(holder)
                .bind(token)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }

    async fn lease(&self, name: &str) -> StoreResult<Option<LeaseInfo>> {
        let row: Option<(String, String, i64, i64, i64)> =
            sqlx::query_as("SELECT holder, label, token, acquired_at, expires_at FROM leases WHERE name = ?")
                .bind(name)
                .fetch_optional(&mut *self.writer.get().await?)
                .await?;
        Ok(row.map(|(holder, label, token, acquired_at, expires_at)| LeaseInfo {
            holder,
            label,
            token,
            acquired_at,
            expires_at,
        }))
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn one_holder_at_a_time_a_lapsed_lease_changes_hands_with_a_larger_token() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(1), 1).await.unwrap();
        let a = store.acquire_lease("home", "a", "PID 1", 10_000, 1_000).await.unwrap();
        assert_eq!(a, Some(1));
        assert_eq!(store.acquire_lease("home", "b", "PID 2", 10_000, 2_000).await.unwrap(), None, "held");
        assert_eq!(store.acquire_lease("home", "a", "PID 1", 10_000, 3_000).await.unwrap(), Some(1), "again, same");
        assert!(store.renew_lease("home", "a", 1, 10_000, 5_000).await.unwrap());
        assert_eq!(store.acquire_lease("home", "b", "PID 2", 10_000, 14_999).await.unwrap(), None, "renewed");
        // a stops renewing: at its expiry b takes it, and a's holding is fenced off.
        let b = store.acquire_lease("home", "b", "PID 2", 10_000, 15_000).await.unwrap();
        assert_eq!(b, Some(2));
        assert!(!store.renew_lease("home", "a", 1, 10_000, 15_001).await.unwrap(), "a lost it");
        store.release_lease("home", "a", 1).await.unwrap();
        let info = store.lease("home").await.unwrap().unwrap();
        assert_eq!((info.holder.as_str(), info.label.as_str(), info.token), ("b", "PID 2", 2));
        assert_eq!(info.expires_at, 25_000, "a's late release does nothing");
        // A release lets the next one in at once.
        store.release_lease("home", "b", 2).await.unwrap();
        assert_eq!(store.acquire_lease("home", "c", "PID 3", 10_000, 15_002).await.unwrap(), Some(3));
        assert_eq!(store.lease("other").await.unwrap(), None);
        // Taking it (the holder is known to be gone) always works and fences the old holding.
        assert_eq!(store.take_lease("home", "d", "PID 4", 15_003).await.unwrap(), 4);
        assert!(!store.renew_lease("home", "c", 3, 10_000, 15_004).await.unwrap());
        assert_eq!(store.take_lease("fresh", "d", "PID 4", 1).await.unwrap(), 1);
    }
}
