//! `UsageStore` on SQLite: one transaction adds a turn to its session's cost and upserts the
//! day's user and chat rows; sums read from the reader pool.

use async_trait::async_trait;
use sqlx::Row;

use super::{SqliteStore, retry_busy};
use crate::store::{StoreResult, TokenTotals, UsageRecord, UsageScope, UsageStore};
use crate::usage::UsageSum;

/// Adds one turn to a (scope, platform, subject, day) row, creating it when absent.
const UPSERT: &str = "INSERT INTO usage_daily (scope, platform, subject, day, turns, calls, prompt_tokens, \
     completion_tokens, cache_read_tokens, cache_write_tokens, cost_micros, unpriced_calls) \
     VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
     ON CONFLICT (scope, platform, subject, day) DO UPDATE SET turns = turns + 1, calls = calls + ?5, \
     prompt_tokens = prompt_tokens + ?6, completion_tokens = completion_tokens + ?7, \
     cache_read_tokens = cache_read_tokens + ?8, cache_write_tokens = cache_write_tokens + ?9, \
     cost_micros = cost_micros + ?10, unpriced_calls = unpriced_calls + ?11";

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl UsageStore for SqliteStore {
    async fn record_usage(&self, r: &UsageRecord<'_>) -> StoreResult<()> {
        retry_busy(|| async {
            let mut tx = self.writer.begin().await?;
            sqlx::query(
                "UPDATE sessions SET cost_micros_total = cost_micros_total + ?1, \
                 unpriced_calls_total = unpriced_calls_total + ?2 WHERE id = ?3",
            )
            .bind(r.cost_micros)
            .bind(signed(r.unpriced_calls))
            .bind(r.session_id)
            .execute(&mut *tx)
            .await?;
            for (scope, subject) in [(UsageScope::User, r.user), (UsageScope::Chat, r.chat)] {
                let t = r.tokens;
                sqlx::query(UPSERT)
                    .bind(scope.as_str())
                    .bind(r.platform)
                    .bind(subject)
                    .bind(r.day)
                    .bind(signed(t.calls))
                    .bind(signed(t.prompt))
                    .bind(signed(t.completion))
                    .bind(signed(t.cache_read))
                    .bind(signed(t.cache_write))
                    .bind(r.cost_micros)
                    .bind(signed(r.unpriced_calls))
                    .execute(&mut *tx)
                    .await?;
            }
            tx.commit().await
        })
        .await
    }

    async fn session_cost(&self, session_id: &str) -> StoreResult<(i64, u64)> {
        let row: Option<(i64, i64)> =
            sqlx::query_as("SELECT cost_micros_total, unpriced_calls_total FROM sessions WHERE id = ?")
                .bind(session_id)
                .fetch_optional(&self.readers)
                .await?;
        Ok(row.map_or((0, 0), |(cost, unpriced)| (cost, u64::try_from(unpriced).unwrap_or(0))))
    }

    async fn usage_between(
        &self,
        scope: UsageScope,
        platform: &str,
        subject: &str,
        from: &str,
        to: &str,
    ) -> StoreResult<UsageSum> {
        let row = sqlx::query(
            "SELECT COALESCE(SUM(turns), 0) AS turns, COALESCE(SUM(calls), 0) AS calls, \
             COALESCE(SUM(prompt_tokens), 0) AS prompt, COALESCE(SUM(completion_tokens), 0) AS completion, \
             COALESCE(SUM(cache_read_tokens), 0) AS cache_read, COALESCE(SUM(cache_write_tokens), 0) AS cache_write, \
             COALESCE(SUM(cost_micros), 0) AS cost, COALESCE(SUM(unpriced_calls), 0) AS unpriced \
             FROM usage_daily WHERE scope = ?1 AND platform = ?2 AND subject = ?3 AND day >= ?4 AND day <= ?5",
        )
        .bind(scope.as_str())
        .bind(platform)
        .bind(subject)
        .bind(from)
        .bind(to)
        .fetch_one(&self.readers)
        .await?;
        let count = |column: &str| u64::try_from(row.get::<i64, _>(column)).unwrap_or(0);
        Ok(UsageSum {
            turns: count("turns"),
            tokens: TokenTotals {
                calls: count("calls"),
                prompt: count("prompt"),
                completion: count("completion"),
                cache_read: count("cache_read"),
                cache_write: count("cache_write"),
            },
            cost_micros: row.get::<i64, _>("cost"),
            unpriced_calls: count("unpriced"),
        })
    }

    async fn prune_usage(&self, before: &str, limit: u32) -> StoreResult<u64> {
        retry_busy(|| async {
            sqlx::query(
                "DELETE FROM usage_daily WHERE (scope, platform, subject, day) IN \
                 (SELECT scope, platform, subject, day FROM usage_daily INDEXED BY usage_daily_by_day \
                 WHERE day < ?1 ORDER BY day LIMIT ?2)",
            )
            .bind(before)
            .bind(i64::from(limit))
            .execute(&self.writer)
            .await
            .map(|r| r.rows_affected())
        })
        .await
    }
}
