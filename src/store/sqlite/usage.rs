//! `UsageStore` on SQLite: one transaction adds a turn to its session's cost and upserts the
//! day's user and chat rows; sums read from the reader pool.

use async_trait::async_trait;
use sqlx::Row;

use super::lane::execute_all;
use super::{SqliteStore, retry_busy};
use crate::store::{
    ModelDay, PersonUsage, StoreResult, TokenTotals, UsageDay, UsageRecord, UsageScope, UsageStore, UsageSum,
};

/// Adds one turn to a (scope, platform, subject, profile, day) row, creating it when absent; the
/// scope and subject parameters are given, the others are `?2` platform, `?4` day, `?5`..`?9`
/// calls and tokens, `?10` cost, `?11` unpriced calls, `?12` turns, `?16` profile.
macro_rules! upsert_daily {
    ($scope:literal, $subject:literal) => {
        concat!(
            "INSERT INTO usage_daily (scope, platform, subject, profile, day, turns, calls, prompt_tokens, \
             completion_tokens, cache_read_tokens, cache_write_tokens, cost_micros, unpriced_calls) \
             VALUES (",
            $scope,
            ", ?2, ",
            $subject,
            ", ?16, ?4, ?12, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
             ON CONFLICT (scope, platform, subject, profile, day) DO UPDATE SET turns = turns + ?12, calls = calls + ?5, \
             prompt_tokens = prompt_tokens + ?6, completion_tokens = completion_tokens + ?7, \
             cache_read_tokens = cache_read_tokens + ?8, cache_write_tokens = cache_write_tokens + ?9, \
             cost_micros = cost_micros + ?10, unpriced_calls = unpriced_calls + ?11"
        )
    };
}

/// A turn's cost on its session (`?15`); its tokens reach the session with `finish_turn`.
macro_rules! session_cost {
    () => {
        "UPDATE sessions SET cost_micros_total = cost_micros_total + ?10, \
         unpriced_calls_total = unpriced_calls_total + ?11 WHERE id = ?15"
    };
}

/// A call outside a turn (compaction, a title): its tokens go on the session here too.
macro_rules! session_call {
    () => {
        "UPDATE sessions SET cost_micros_total = cost_micros_total + ?10, \
         unpriced_calls_total = unpriced_calls_total + ?11, model_calls_total = model_calls_total + ?5, \
         prompt_tokens_total = prompt_tokens_total + ?6, completion_tokens_total = completion_tokens_total + ?7, \
         cache_read_tokens_total = cache_read_tokens_total + ?8, \
         cache_write_tokens_total = cache_write_tokens_total + ?9 WHERE id = ?15"
    };
}

/// `record_usage` of a turn as one command: the session, the day's user row (`?1` scope, `?3`
/// subject) and chat row (`?13`, `?14`).
const RECORD_TURN: &str = concat!(session_cost!(), "; ", upsert_daily!("?1", "?3"), "; ", upsert_daily!("?13", "?14"));
/// The same for a call outside a turn.
const RECORD_CALL: &str = concat!(session_call!(), "; ", upsert_daily!("?1", "?3"), "; ", upsert_daily!("?13", "?14"));

/// Adds one model's calls to its (day, model, platform, profile) row: `?1` day, `?2` model,
/// `?3` platform, `?4` profile, `?5`..`?9` calls and tokens, `?10` cost, `?11` unpriced calls.
const RECORD_MODEL: &str = "INSERT INTO usage_daily_by_model (day, model, platform, profile, calls, prompt_tokens, \
     completion_tokens, cache_read_tokens, cache_write_tokens, cost_micros, unpriced_calls) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11) \
     ON CONFLICT (day, model, platform, profile) DO UPDATE SET calls = calls + ?5, \
     prompt_tokens = prompt_tokens + ?6, completion_tokens = completion_tokens + ?7, \
     cache_read_tokens = cache_read_tokens + ?8, cache_write_tokens = cache_write_tokens + ?9, \
     cost_micros = cost_micros + ?10, unpriced_calls = unpriced_calls + ?11";

fn signed(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The sums a grouped usage query selects, read by `summed`.
macro_rules! sums {
    () => {
        "SUM(turns) AS turns, SUM(calls) AS calls, SUM(prompt_tokens) AS prompt, \
         SUM(completion_tokens) AS completion, SUM(cache_read_tokens) AS cache_read, \
         SUM(cache_write_tokens) AS cache_write, SUM(cost_micros) AS cost, SUM(unpriced_calls) AS unpriced"
    };
}

/// The `SUMS` of a row.
fn summed(row: &sqlx::sqlite::SqliteRow) -> UsageSum {
    let count = |column: &str| u64::try_from(row.get::<i64, _>(column)).unwrap_or(0);
    UsageSum {
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
    }
}

#[async_trait]
impl UsageStore for SqliteStore {
    async fn record_usage(&self, r: &UsageRecord<'_>) -> StoreResult<()> {
        // On the write lane, in one transaction (rolled back if any statement fails).
        let sql = if r.turn { RECORD_TURN } else { RECORD_CALL };
        let t = r.tokens;
        let (calls, prompt, completion) = (signed(t.calls), signed(t.prompt), signed(t.completion));
        let (cache_read, cache_write, unpriced) =
            (signed(t.cache_read), signed(t.cache_write), signed(r.unpriced_calls));
        let turn = i64::from(r.turn);
        let (platform, user, day) = (r.platform.to_owned(), r.user.to_owned(), r.day.to_owned());
        let (chat, session_id, cost_micros) = (r.chat.to_owned(), r.session_id.to_owned(), r.cost_micros);
        let profile = r.profile.to_owned();
        let models: Vec<(String, [i64; 7])> = r
            .models
            .iter()
            .map(|m| {
                let t = m.tokens;
                let sums = [t.calls, t.prompt, t.completion, t.cache_read, t.cache_write].map(signed);
                let [calls, prompt, completion, read, write] = sums;
                (m.model.to_owned(), [calls, prompt, completion, read, write, m.cost_micros, signed(m.unpriced_calls)])
            })
            .collect();
        self.retry_lane(move |conn| {
            for (model, n) in &models {
                let params: [&(dyn rusqlite::ToSql + Sync); 11] =
                    [&day, model, &platform, &profile, &n[0], &n[1], &n[2], &n[3], &n[4], &n[5], &n[6]];
                execute_all(conn, RECORD_MODEL, &params)?;
            }
            let params: [&(dyn rusqlite::ToSql + Sync); 16] = [
                &UsageScope::User.as_str(),
                &platform,
                &user,
                &day,
                &calls,
                &prompt,
                &completion,
                &cache_read,
                &cache_write,
                &cost_micros,
                &unpriced,
                &turn,
                &UsageScope::Chat.as_str(),
                &chat,
                &session_id,
                &profile,
            ];
            execute_all(conn, sql, &params).map(drop)
        })
        .await
    }

    async fn session_cost(&self, session_id: &str) -> StoreResult<(i64, u64)> {
        let row: Option<(i64, i64)> =
            sqlx::query_as("SELECT cost_micros_total, unpriced_calls_total FROM sessions WHERE id = ?")
                .bind(session_id)
                .fetch_optional(&mut *self.readers.get().await?)
                .await?;
        Ok(row.map_or((0, 0), |(cost, unpriced)| (cost, u64::try_from(unpriced).unwrap_or(0))))
    }

    async fn usage_between(
        &self,
        scope: UsageScope,
        platform: &str,
        profile: &str,
        subject: &str,
        from: &str,
        to: &str,
    ) -> StoreResult<UsageSum> {
        let row = sqlx::query(
            "SELECT COALESCE(SUM(turns), 0) AS turns, COALESCE(SUM(calls), 0) AS calls, \
             COALESCE(SUM(prompt_tokens), 0) AS prompt, COALESCE(SUM(completion_tokens), 0) AS completion, \
             COALESCE(SUM(cache_read_tokens), 0) AS cache_read, COALESCE(SUM(cache_write_tokens), 0) AS cache_write, \
             COALESCE(SUM(cost_micros), 0) AS cost, COALESCE(SUM(unpriced_calls), 0) AS unpriced \
             FROM usage_daily WHERE scope = ?1 AND platform = ?2 AND subject = ?3 AND profile = ?6 \
             AND day >= ?4 AND day <= ?5",
        )
        .bind(scope.as_str())
        .bind(platform)
        .bind(subject)
        .bind(from)
        .bind(to)
        .bind(profile)
        .fetch_one(&mut *self.readers.get().await?)
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

    async fn usage_by_day(&self, from: &str, to: &str) -> StoreResult<Vec<UsageDay>> {
        // Each turn is charged to a user row and a chat row: the chat rows alone sum it once.
        let rows = sqlx::query(concat!(
            "SELECT day, platform, profile, ",
            sums!(),
            " FROM usage_daily WHERE scope = 'chat' AND day >= ?1 AND day <= ?2 \
                 GROUP BY day, platform, profile ORDER BY day, platform, profile"
        ))
        .bind(from)
        .bind(to)
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        Ok(rows
            .iter()
            .map(|row| UsageDay {
                day: row.get("day"),
                platform: row.get("platform"),
                profile: row.get("profile"),
                sum: summed(row),
            })
            .collect())
    }

    async fn usage_by_model(&self, from: &str, to: &str) -> StoreResult<Vec<ModelDay>> {
        let rows = sqlx::query(
            "SELECT day, model, 0 AS turns, SUM(calls) AS calls, SUM(prompt_tokens) AS prompt, \
             SUM(completion_tokens) AS completion, SUM(cache_read_tokens) AS cache_read, \
             SUM(cache_write_tokens) AS cache_write, SUM(cost_micros) AS cost, SUM(unpriced_calls) AS unpriced \
             FROM usage_daily_by_model WHERE day >= ?1 AND day <= ?2 GROUP BY day, model ORDER BY day, model",
        )
        .bind(from)
        .bind(to)
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        Ok(rows.iter().map(|row| ModelDay { day: row.get("day"), model: row.get("model"), sum: summed(row) }).collect())
    }

    async fn usage_by_person(&self, from: &str, to: &str, limit: u32) -> StoreResult<Vec<PersonUsage>> {
        let rows = sqlx::query(concat!(
            "SELECT platform, subject, ",
            sums!(),
            " FROM usage_daily WHERE scope = 'user' AND day >= ?1 AND day <= ?2 \
             GROUP BY platform, subject ORDER BY cost DESC, prompt + completion DESC, platform, subject LIMIT ?3"
        ))
        .bind(from)
        .bind(to)
        .bind(i64::from(limit))
        .fetch_all(&mut *self.readers.get().await?)
        .await?;
        Ok(rows
            .iter()
            .map(|row| PersonUsage { platform: row.get("platform"), user: row.get("subject"), sum: summed(row) })
            .collect())
    }

    async fn prune_usage(&self, before: &str, limit: u32) -> StoreResult<u64> {
        let daily = retry_busy(|| async {
            sqlx::query(
                "DELETE FROM usage_daily WHERE (scope, platform, subject, profile, day) IN \
                 (SELECT scope, platform, subject, profile, day FROM usage_daily INDEXED BY usage_daily_by_day \
                 WHERE day < ?1 ORDER BY day LIMIT ?2)",
            )
            .bind(before)
            .bind(i64::from(limit))
            .execute(&mut *self.writer.get().await?)
            .await
            .map(|r| r.rows_affected())
        })
        .await?;
        let by_model = retry_busy(|| async {
            sqlx::query(
                "DELETE FROM usage_daily_by_model WHERE (day, model, platform, profile) IN \
                 (SELECT day, model, platform, profile FROM usage_daily_by_model WHERE day < ?1 ORDER BY day LIMIT ?2)",
            )
            .bind(before)
            .bind(i64::from(limit))
            .execute(&mut *self.writer.get().await?)
            .await
            .map(|r| r.rows_affected())
        })
        .await?;
        Ok(daily + by_model)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::store::{ModelUsage, SessionKey, SessionStore};

    #[tokio::test]
    async fn a_turn_adds_to_its_session_its_user_and_its_chat_and_old_days_are_pruned() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
        let key = SessionKey {
            key: "agent:main:rec:group:g1:ann".into(),
            platform: "rec".into(),
            chat_id: "g1".into(),
            chat_type: hermesd_platform::ChatType::Group,
            thread_id: None,
            user_id: Some("ann".into()),
        };
        let session = store.start_session(&key, 1).await.unwrap();
        let tokens = TokenTotals { calls: 2, prompt: 100, completion: 20, cache_read: 60, cache_write: 0 };
        let record = |day, user, cost_micros, unpriced_calls| UsageRecord {
            session_id: &session.id,
            day,
            platform: "rec",
            profile: "default",
            user,
            chat: "g1",
            tokens,
            cost_micros,
            unpriced_calls,
            models: &[],
            turn: true,
        };
        // A turn that fell back: each model's calls on its own row.
        let models = [
            ModelUsage {
                model: "big",
                tokens: TokenTotals { calls: 1, ..tokens },
                cost_micros: 900,
                unpriced_calls: 0,
            },
            ModelUsage {
                model: "small",
                tokens: TokenTotals { calls: 1, ..tokens },
                cost_micros: 100,
                unpriced_calls: 0,
            },
        ];
        store.record_usage(&UsageRecord { models: &models, ..record("2026-01-01", "ann", 1_000, 0) }).await.unwrap();
        store.record_usage(&record("2026-01-02", "ann", 2_000, 1)).await.unwrap();
        store.record_usage(&record("2026-01-02", "bob", 500, 0)).await.unwrap();

        assert_eq!(store.session_cost(&session.id).await.unwrap(), (3_500, 1));
        let ann =
            store.usage_between(UsageScope::User, "rec", "default", "ann", "2026-01-02", "2026-01-02").await.unwrap();
        assert_eq!((ann.turns, ann.tokens.prompt, ann.cost_micros, ann.unpriced_calls), (1, 100, 2_000, 1));
        let ann =
            store.usage_between(UsageScope::User, "rec", "default", "ann", "2026-01-01", "2026-01-02").await.unwrap();
        assert_eq!((ann.turns, ann.tokens.calls, ann.tokens.cache_read, ann.total_tokens()), (2, 4, 120, 240));
        let chat =
            store.usage_between(UsageScope::Chat, "rec", "default", "g1", "2026-01-02", "2026-01-02").await.unwrap();
        assert_eq!((chat.turns, chat.cost_micros), (2, 2_500));
        let other =
            store.usage_between(UsageScope::User, "slack", "default", "ann", "2026-01-01", "2026-01-02").await.unwrap();
        assert_eq!(other, UsageSum::default());

        // Calls outside a turn (`/compress`) count tokens and cost but no turn, and reach the
        // session's token totals.
        let compaction = UsageRecord { turn: false, ..record("2026-01-02", "ann", 10, 0) };
        store.record_usage(&compaction).await.unwrap();
        let ann =
            store.usage_between(UsageScope::User, "rec", "default", "ann", "2026-01-02", "2026-01-02").await.unwrap();
        assert_eq!((ann.turns, ann.tokens.prompt, ann.cost_micros), (1, 200, 2_010));
        assert_eq!(crate::store::ExtrasStore::session_usage(&store, &session.id).await.unwrap(), tokens);

        // Another profile's turn by the same person counts apart.
        store.record_usage(&UsageRecord { profile: "work", ..record("2026-01-02", "ann", 7, 0) }).await.unwrap();
        let work =
            store.usage_between(UsageScope::User, "rec", "work", "ann", "2026-01-02", "2026-01-02").await.unwrap();
        assert_eq!((work.turns, work.cost_micros), (1, 7));
        let ann =
            store.usage_between(UsageScope::User, "rec", "default", "ann", "2026-01-02", "2026-01-02").await.unwrap();
        assert_eq!(ann.cost_micros, 2_010, "the default profile's count is unchanged");

        let by_model = store.usage_by_model("2026-01-01", "2026-01-02").await.unwrap();
        let rows: Vec<(&str, u64, i64)> =
            by_model.iter().map(|m| (m.model.as_str(), m.sum.tokens.calls, m.sum.cost_micros)).collect();
        assert_eq!(rows, [("big", 1, 900), ("small", 1, 100)]);

        // Day one's user, chat and model rows go; day two's stay.
        assert_eq!(store.prune_usage("2026-01-02", 500).await.unwrap(), 4);
        assert!(store.usage_by_model("2026-01-01", "2026-01-02").await.unwrap().is_empty());
        let left =
            store.usage_between(UsageScope::Chat, "rec", "default", "g1", "2026-01-01", "2026-01-02").await.unwrap();
        assert_eq!(left.turns, 2);
    }
}
