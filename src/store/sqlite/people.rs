//! `PersonStore` on SQLite (`sessions.person_id`, migration 0014): a person's sessions and
//! their erasure in one write transaction, so a concurrent daemon sees them whole or gone.

use async_trait::async_trait;
use sqlx::{Row, Sqlite, Transaction};

use super::{SqliteStore, retry_busy};
use crate::store::{PersonDeletion, PersonSession, PersonStore, StoreResult};

/// The sessions of person `?2` on platform `?1`.
const SESSIONS: &str = "SELECT id, session_key, chat_id, chat_type FROM sessions WHERE platform = ?1 AND (\
     person_id = ?2 OR user_id = ?2 \
     OR (chat_type = 'dm' AND platform <> 'api' AND chat_id = ?2) \
     OR (platform = 'api' AND chat_id = 'user:' || ?2)) ORDER BY created_at, id";

/// Events of person `?2` on platform `?1` that never reached a session (payloads that do not
/// decode as JSON are skipped).
const LOOSE_EVENTS: &str = "SELECT seq FROM inbound_events WHERE session_id IS NULL AND platform = ?1 \
     AND (CASE WHEN json_valid(payload) THEN json_extract(payload, '$.message.sender.id') END) = ?2";

fn session_of(row: &sqlx::sqlite::SqliteRow) -> PersonSession {
    let chat_type: String = row.get("chat_type");
    PersonSession { id: row.get("id"), key: row.get("session_key"), chat_id: row.get("chat_id"), dm: chat_type == "dm" }
}

/// Delete the events `seqs` with their reply chunks and previews; returns (events, chunks).
async fn delete_events(tx: &mut Transaction<'_, Sqlite>, seqs: &[i64]) -> Result<(u64, u64), sqlx::Error> {
    let (mut events, mut outbound) = (0, 0);
    for seq in seqs {
        let turn = format!("evt:{seq}");
        outbound += sqlx::query("DELETE FROM outbound_messages WHERE turn_id = ?")
            .bind(&turn)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM stream_previews WHERE turn_id = ?").bind(&turn).execute(&mut **tx).await?;
        events += sqlx::query("DELETE FROM inbound_events WHERE seq = ?").bind(seq).execute(&mut **tx).await?.rows_affected();
    }
    Ok((events, outbound))
}

#[async_trait]
impl PersonStore for SqliteStore {
    async fn note_person(&self, session_id: &str, user: &str) -> StoreResult<()> {
        retry_busy(|| async {
            sqlx::query("UPDATE sessions SET person_id = ? WHERE id = ? AND person_id IS NULL")
                .bind(user)
                .bind(session_id)
                .execute(&self.writer)
                .await
                .map(|_| ())
        })
        .await
    }

    async fn person_sessions(&self, platform: &str, user: &str) -> StoreResult<Vec<PersonSession>> {
        let rows = sqlx::query(SESSIONS).bind(platform).bind(user).fetch_all(&self.readers).await?;
        Ok(rows.iter().map(session_of).collect())
    }

    async fn delete_person(&self, platform: &str, user: &str) -> StoreResult<PersonDeletion> {
        retry_busy(|| async {
            let mut tx = self.writer.begin().await?;
            let sessions: Vec<PersonSession> =
                sqlx::query(SESSIONS).bind(platform).bind(user).fetch_all(&mut *tx).await?.iter().map(session_of).collect();
            let mut done = PersonDeletion::default();
            let mut seqs: Vec<i64> =
                sqlx::query_scalar(LOOSE_EVENTS).bind(platform).bind(user).fetch_all(&mut *tx).await?;
            for session in &sessions {
                let of_session: Vec<i64> = sqlx::query_scalar("SELECT seq FROM inbound_events WHERE session_id = ?")
                    .bind(&session.id)
                    .fetch_all(&mut *tx)
                    .await?;
                seqs.extend(of_session);
            }
            (done.events, done.outbound) = delete_events(&mut tx, &seqs).await?;
            for session in &sessions {
                let id = &session.id;
                done.messages += sqlx::query("DELETE FROM messages WHERE session_id = ?")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                done.routes += sqlx::query("DELETE FROM session_routes WHERE session_id = ?")
                    .bind(id)
                    .execute(&mut *tx)
                    .await?
                    .rows_affected();
                sqlx::query("DELETE FROM sessions WHERE id = ?").bind(id).execute(&mut *tx).await?;
            }
            tx.commit().await?;
            done.sessions = sessions;
            Ok(done)
        })
        .await
    }
}
