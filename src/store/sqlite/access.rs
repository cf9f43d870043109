//! Approved users and pairing codes in SQLite. Codes are stored only as hashes.

use async_trait::async_trait;
use sqlx::Row;

use super::{SqliteStore, retry_busy};
use crate::store::{
    AccessEntry, AccessStore, PairingApproval, PairingLimits, PairingRequest, PairingSubject, StoreResult,
};

impl SqliteStore {
    /// How many inbound events of `platform` are stored: what an operator (or a test) checks to
    /// see that strangers' messages never reach the store.
    pub async fn inbound_count(&self, platform: &str) -> StoreResult<i64> {
        let (count,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM inbound_events WHERE platform = ?")
            .bind(platform)
            .fetch_one(&mut *self.readers.get().await?)
            .await?;
        Ok(count)
    }
}

#[async_trait]
impl AccessStore for SqliteStore {
    async fn is_approved(&self, platform: &str, user_id: &str) -> StoreResult<bool> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT 1 FROM approved_users WHERE platform = ? AND user_id = ?")
            .bind(platform)
            .bind(user_id)
            .fetch_optional(&mut *self.readers.get().await?)
            .await?;
        Ok(row.is_some())
    }

    async fn request_pairing(
        &self,
        who: &PairingSubject<'_>,
        code_hash: &str,
        limits: &PairingLimits,
        now: i64,
    ) -> StoreResult<PairingRequest> {
        let PairingSubject { platform, user_id, user_name, chat_id } = *who;
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            sqlx::query("DELETE FROM pairing_codes WHERE expires_at <= ?").bind(now).execute(&mut *tx).await?;
            let (recent,): (i64,) = sqlx::query_as(
                "SELECT COUNT(*) FROM pairing_codes WHERE platform = ? AND user_id = ? AND created_at > ?",
            )
            .bind(platform)
            .bind(user_id)
            .bind(now - limits.min_interval_ms)
            .fetch_one(&mut *tx)
            .await?;
            if recent > 0 {
                return Ok(PairingRequest::TooSoon);
            }
            // A user's older code is replaced by the new one.
            sqlx::query("DELETE FROM pairing_codes WHERE platform = ? AND user_id = ?")
                .bind(platform)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
            let (pending,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM pairing_codes WHERE platform = ?")
                .bind(platform)
                .fetch_one(&mut *tx)
                .await?;
            if pending >= limits.max_pending {
                return Ok(PairingRequest::TooManyPending);
            }
            sqlx::query(
                "INSERT INTO pairing_codes (code_hash, platform, user_id, user_name, chat_id, created_at, expires_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(code_hash)
            .bind(platform)
            .bind(user_id)
            .bind(user_name)
            .bind(chat_id)
            .bind(now)
            .bind(now + limits.ttl_ms)
            .execute(&mut *tx)
            .await?;
            tx.commit().await?;
            Ok(PairingRequest::Created)
        })
        .await
    }

    async fn approve_pairing(
        &self,
        platform: &str,
        code_hash: &str,
        limits: &PairingLimits,
        now: i64,
    ) -> StoreResult<PairingApproval> {
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let lock: Option<(Option<i64>,)> =
                sqlx::query_as("SELECT locked_until FROM pairing_failures WHERE platform = ?")
                    .bind(platform)
                    .fetch_optional(&mut *tx)
                    .await?;
            if let Some((Some(until),)) = lock
                && until > now
            {
                return Ok(PairingApproval::Locked { until });
            }
            let found: Option<(String, Option<String>)> = sqlx::query_as(
                "SELECT user_id, user_name FROM pairing_codes WHERE platform = ? AND code_hash = ? AND expires_at > ?",
            )
            .bind(platform)
            .bind(code_hash)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((user_id, user_name)) = found else {
                let (failures,): (i64,) = sqlx::query_as(
                    "INSERT INTO pairing_failures (platform, failures) VALUES (?, 1) \
                     ON CONFLICT (platform) DO UPDATE SET failures = failures + 1 RETURNING failures",
                )
                .bind(platform)
                .fetch_one(&mut *tx)
                .await?;
                if failures >= limits.max_failures {
                    sqlx::query("UPDATE pairing_failures SET failures = 0, locked_until = ? WHERE platform = ?")
                        .bind(now + limits.lockout_ms)
                        .bind(platform)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await?;
                return Ok(PairingApproval::NoSuchCode);
            };
            sqlx::query(
                "INSERT INTO approved_users (platform, user_id, user_name, approved_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name",
            )
            .bind(platform)
            .bind(&user_id)
            .bind(&user_name)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM pairing_codes WHERE platform = ? AND user_id = ?")
                .bind(platform)
                .bind(&user_id)
                .execute(&mut *tx)
                .await?;
            sqlx::query("DELETE FROM pairing_failures WHERE platform = ?").bind(platform).execute(&mut *tx).await?;
            tx.commit().await?;
            Ok(PairingApproval::Approved { user_id, user_name })
        })
        .await
    }

    async fn access_entries(&self, now: i64) -> StoreResult<Vec<AccessEntry>> {
        let rows = sqlx::query(
            "SELECT platform, user_id, user_name, 1 AS approved, approved_at AS at FROM approved_users \
             UNION ALL SELECT platform, user_id, user_name, 0, expires_at FROM pairing_codes WHERE expires_at > ? \
             ORDER BY platform, approved DESC, at",
        )
        .bind(now)
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        Ok(rows
            .iter()
            .map(|row| AccessEntry {
                platform: row.get("platform"),
                user_id: row.get("user_id"),
                user_name: row.get("user_name"),
                approved: row.get::<i64, _>("approved") != 0,
                at: row.get("at"),
            })
            .collect())
    }

    async fn revoke_user(&self, platform: &str, user_id: &str) -> StoreResult<bool> {
        let done = retry_busy(|| async move {
            sqlx::query("DELETE FROM approved_users WHERE platform = ? AND user_id = ?")
                .bind(platform)
                .bind(user_id)
                .execute(&mut *self.writer.get().await?)
                .await
        })
        .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn approve_waiting(&self, platform: &str, user_id: &str, now: i64) -> StoreResult<bool> {
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            let found: Option<(Option<String>,)> = sqlx::query_as(
                "SELECT user_name FROM pairing_codes WHERE platform = ? AND user_id = ? AND expires_at > ? \
                 ORDER BY expires_at DESC LIMIT 1",
            )
            .bind(platform)
            .bind(user_id)
            .bind(now)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((user_name,)) = found else { return Ok(false) };
            sqlx::query(
                "INSERT INTO approved_users (platform, user_id, user_name, approved_at) VALUES (?, ?, ?, ?) \
                 ON CONFLICT (platform, user_id) DO UPDATE SET user_name = excluded.user_name",
            )
            .bind(platform)
            .bind(user_id)
            .bind(&user_name)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query("DELETE FROM pairing_codes WHERE platform = ? AND user_id = ?")
                .bind(platform)
                .bind(user_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn deny_waiting(&self, platform: &str, user_id: &str) -> StoreResult<bool> {
        let done = retry_busy(|| async move {
            sqlx::query("DELETE FROM pairing_codes WHERE platform = ? AND user_id = ?")
                .bind(platform)
                .bind(user_id)
                .execute(&mut *self.writer.get().await?)
                .await
        })
        .await?;
        Ok(done.rows_affected() > 0)
    }
}
