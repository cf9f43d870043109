//! `PersonStore` on SQLite (`sessions.person_id`, migration 0014): a person's sessions and
//! their erasure in one write transaction, so a concurrent daemon sees them whole or gone: with
//! their events, reply chunks (the files those sent are named for the caller to remove), stored
//! API responses, and the cron jobs they made with each run's session.

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

/// Cron jobs person `?2` created from a chat on platform `?1`.
const CRON_JOBS: &str = "SELECT id FROM cron_jobs WHERE created_by = ?2 \
     AND (CASE WHEN json_valid(origin) THEN json_extract(origin, '$.platform') END) = ?1";

fn session_of(row: &sqlx::sqlite::SqliteRow) -> PersonSession {
    let chat_type: String = row.get("chat_type");
    PersonSession { id: row.get("id"), key: row.get("session_key"), chat_id: row.get("chat_id"), dm: chat_type == "dm" }
}

/// The sessions each run of cron job `?` had (one per run, on the `cron` pseudo-platform).
const CRON_SESSIONS: &str = "SELECT id FROM sessions WHERE platform = 'cron' AND chat_id = ?";

/// What deleting some events removed.
#[derive(Default)]
struct EventsDeleted {
    events: u64,
    outbound: u64,
    files: Vec<String>,
    api_responses: u64,
}

/// Delete the events `seqs` with their reply chunks, previews and stored API responses; the
/// files their replies sent are returned for the caller to remove.
async fn delete_events(tx: &mut Transaction<'_, Sqlite>, seqs: &[i64]) -> Result<EventsDeleted, sqlx::Error> {
    let mut done = EventsDeleted::default();
    for seq in seqs {
        let turn = format!("evt:{seq}");
        let files: Vec<String> = sqlx::query_scalar(
            "SELECT json_extract(payload, '$.file.path') FROM outbound_messages WHERE turn_id = ? \
             AND json_valid(payload) AND json_extract(payload, '$.file.path') IS NOT NULL",
        )
        .bind(&turn)
        .fetch_all(&mut **tx)
        .await?;
        done.files.extend(files);
        done.outbound += sqlx::query("DELETE FROM outbound_messages WHERE turn_id = ?")
            .bind(&turn)
            .execute(&mut **tx)
            .await?
            .rows_affected();
        sqlx::query("DELETE FROM stream_previews WHERE turn_id = ?").bind(&turn).execute(&mut **tx).await?;
        // An API request's event id is the request id its Idempotency-Key record names.
        done.api_responses += sqlx::query(
            "DELETE FROM idempotency_keys WHERE request_id = \
             (SELECT event_id FROM inbound_events WHERE seq = ? AND platform = 'api')",
        )
        .bind(seq)
        .execute(&mut **tx)
        .await?
        .rows_affected();
        done.events +=
            sqlx::query("DELETE FROM inbound_events WHERE seq = ?").bind(seq).execute(&mut **tx).await?.rows_affected();
    }
    Ok(done)
}

/// Delete session `id` with its messages, routes and reset notes; returns (messages, routes).
async fn delete_session(tx: &mut Transaction<'_, Sqlite>, id: &str) -> Result<(u64, u64), sqlx::Error> {
    let messages =
        sqlx::query("DELETE FROM messages WHERE session_id = ?").bind(id).execute(&mut **tx).await?.rows_affected();
    sqlx::query("DELETE FROM quarantined_messages WHERE session_id = ?").bind(id).execute(&mut **tx).await?;
    let routes = sqlx::query("DELETE FROM session_routes WHERE session_id = ?")
        .bind(id)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    sqlx::query("DELETE FROM session_resets WHERE session_id = ?").bind(id).execute(&mut **tx).await?;
    // The Responses API's stored responses of an API conversation are its words too.
    sqlx::query(
        "DELETE FROM api_responses WHERE chat_id = (SELECT chat_id FROM sessions WHERE id = ? AND platform = 'api')",
    )
    .bind(id)
    .execute(&mut **tx)
    .await?;
    sqlx::query("DELETE FROM sessions WHERE id = ?").bind(id).execute(&mut **tx).await?;
    Ok((messages, routes))
}

/// Delete the cron jobs `jobs` with their run records; returns the jobs deleted.
async fn delete_jobs(tx: &mut Transaction<'_, Sqlite>, jobs: &[String]) -> Result<u64, sqlx::Error> {
    let mut deleted = 0;
    for job in jobs {
        sqlx::query("DELETE FROM cron_runs WHERE job_id = ?").bind(job).execute(&mut **tx).await?;
        deleted +=
            sqlx::query("DELETE FROM cron_jobs WHERE id = ?").bind(job).execute(&mut **tx).await?.rows_affected();
    }
    Ok(deleted)
}

/// Delete the day rows of person `user` and of their direct conversations `dms`.
async fn delete_usage(
    tx: &mut Transaction<'_, Sqlite>,
    platform: &str,
    user: &str,
    dms: &[&str],
) -> Result<u64, sqlx::Error> {
    // Their lasting approvals go with them.
    sqlx::query("DELETE FROM approval_grants WHERE platform = ? AND user_id = ?")
        .bind(platform)
        .bind(user)
        .execute(&mut **tx)
        .await?;
    let mut days = sqlx::query("DELETE FROM usage_daily WHERE scope = 'user' AND platform = ? AND subject = ?")
        .bind(platform)
        .bind(user)
        .execute(&mut **tx)
        .await?
        .rows_affected();
    // A direct conversation's own day rows are the person's too.
    for chat in dms {
        days += sqlx::query("DELETE FROM usage_daily WHERE scope = 'chat' AND platform = ? AND subject = ?")
            .bind(platform)
            .bind(chat)
            .execute(&mut **tx)
            .await?
            .rows_affected();
    }
    Ok(days)
}

#[async_trait]
impl PersonStore for SqliteStore {
    async fn note_person(&self, session_id: &str, user: &str) -> StoreResult<()> {
        retry_busy(|| async {
            sqlx::query("UPDATE sessions SET person_id = ? WHERE id = ? AND person_id IS NULL")
                .bind(user)
                .bind(session_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(|_| ())
        })
        .await
    }

    async fn person_sessions(&self, platform: &str, user: &str) -> StoreResult<Vec<PersonSession>> {
        let rows = sqlx::query(SESSIONS).bind(platform).bind(user).fetch_all(&mut *self.readers.get().await?).await?;
        Ok(rows.iter().map(session_of).collect())
    }

    async fn delete_person(&self, platform: &str, user: &str) -> StoreResult<PersonDeletion> {
        retry_busy(|| async {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin(&mut *conn).await?;
            let sessions: Vec<PersonSession> = sqlx::query(SESSIONS)
                .bind(platform)
                .bind(user)
                .fetch_all(&mut *tx)
                .await?
                .iter()
                .map(session_of)
                .collect();
            let jobs: Vec<String> = sqlx::query_scalar(CRON_JOBS).bind(platform).bind(user).fetch_all(&mut *tx).await?;
            let mut run_sessions: Vec<String> = Vec::new();
            for job in &jobs {
                run_sessions
                    .extend(sqlx::query_scalar::<_, String>(CRON_SESSIONS).bind(job).fetch_all(&mut *tx).await?);
            }
            let mut seqs: Vec<i64> =
                sqlx::query_scalar(LOOSE_EVENTS).bind(platform).bind(user).fetch_all(&mut *tx).await?;
            let ids = || sessions.iter().map(|s| s.id.as_str()).chain(run_sessions.iter().map(String::as_str));
            for id in ids() {
                let of_session: Vec<i64> = sqlx::query_scalar("SELECT seq FROM inbound_events WHERE session_id = ?")
                    .bind(id)
                    .fetch_all(&mut *tx)
                    .await?;
                seqs.extend(of_session);
            }
            let events = delete_events(&mut tx, &seqs).await?;
            let mut done = PersonDeletion {
                events: events.events,
                outbound: events.outbound,
                files: events.files,
                api_responses: events.api_responses,
                cron_jobs: delete_jobs(&mut tx, &jobs).await?,
                cron_sessions: run_sessions.len() as u64,
                ..PersonDeletion::default()
            };
            for id in ids() {
                let (messages, routes) = delete_session(&mut tx, id).await?;
                done.messages += messages;
                done.routes += routes;
            }
            let dms: Vec<&str> = sessions.iter().filter(|s| s.dm).map(|s| s.chat_id.as_str()).collect();
            done.usage_days = delete_usage(&mut tx, platform, user, &dms).await?;
            tx.commit().await?;
            done.sessions = sessions;
            done.cron_job_ids = jobs;
            Ok(done)
        })
        .await
        .inspect(|_| self.transcripts.clear())
    }
}

#[cfg(test)]
mod tests {
    use crate::store::Outlive;
    use std::time::Duration;

    use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, OutboundKind, OutboundMessage, Sender};

    use super::*;
    use crate::store::{AcceptOutcome, EventState, InboundStore, SessionKey, SessionStore, TokenTotals, TurnEnd};
    use crate::vocab::message::{Message, Role};

    /// A cron job `id` made in `chat` by `creator`, as the `cronjob` tool stores one.
    async fn insert_job(store: &SqliteStore, id: &str, chat: &ChatRef, creator: &str) {
        sqlx::query(
            "INSERT INTO cron_jobs (id, name, prompt, schedule, timezone, deliver, origin, created_by, created_at, updated_at) \
             VALUES (?, 'n', 'p', 'every 1h', 'UTC', 'origin', ?, ?, 0, 0)",
        )
        .bind(id)
        .bind(serde_json::to_string(chat).unwrap())
        .bind(creator)
        .execute(&mut *store.writer.get().await.unwrap())
        .await
        .unwrap();
    }

    fn event(id: &str, chat: &ChatRef, user: &str, text: &str) -> InboundEvent {
        InboundEvent::Message {
            event_id: id.into(),
            message: InboundMessage {
                profile: None,
                message_id: id.into(),
                chat: chat.clone(),
                sender: Sender { id: user.into(), name: None, is_bot: false, roles: Vec::new() },
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

    fn key(chat: &ChatRef, per_user: Option<&str>) -> SessionKey {
        let mut key = format!("agent:main:discord:{}:{}", chat.chat_type.as_str(), chat.chat_id);
        if let Some(user) = per_user {
            key.push_str(&format!(":{user}"));
        }
        SessionKey {
            key,
            platform: chat.platform.clone(),
            chat_id: chat.chat_id.clone(),
            chat_type: chat.chat_type,
            thread_id: None,
            user_id: per_user.map(str::to_owned),
        }
    }

    /// One answered turn of `user` in `chat`; returns the session id.
    async fn turn(store: &SqliteStore, id: &str, chat: &ChatRef, per_user: Option<&str>, user: &str) -> String {
        let text = format!("{user} says {id}");
        let AcceptOutcome::New { seq } =
            store.accept_inbound(&event(id, chat, user, &text), 1, Outlive::PowerCut).await.unwrap()
        else {
            panic!("new event expected")
        };
        let session = match store.route(&key(chat, per_user).key).await.unwrap() {
            Some(session) => session,
            None => store.start_session(&key(chat, per_user), 1).await.unwrap(),
        };
        store.begin_turn(seq, &session.id, &Message::text(Role::User, text), 2).await.unwrap();
        let reply = OutboundMessage {
            chat: chat.clone(),
            text: format!("answer to {id}"),
            reply_to: None,
            kind: OutboundKind::Reply,
            buttons: vec![],
            chunk: (0, 1),
            file: None,
        };
        let end = TurnEnd {
            messages: &[Message::text(Role::Assistant, format!("answer to {id}"))],
            reply: std::slice::from_ref(&reply),
            state: EventState::Done,
            error: None,
            prompt_tokens: None,
            also_done: &[],
            usage: TokenTotals::default(),
        };
        store.finish_turn(seq, &session.id, &end, 3).await.unwrap();
        session.id
    }

    async fn count(store: &SqliteStore, sql: &'static str) -> i64 {
        sqlx::query_scalar(sql).fetch_one(&mut *store.readers.get().await.unwrap()).await.unwrap()
    }

    #[tokio::test]
    async fn deleting_a_person_leaves_nothing_of_theirs_and_everything_of_others() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap();
        let (ann_dm, bob_dm) =
            (ChatRef::new("discord", "D1", ChatType::Dm), ChatRef::new("discord", "D2", ChatType::Dm));
        let group = ChatRef::new("discord", "G1", ChatType::Group);
        let ann = turn(&store, "e1", &ann_dm, None, "U1").await;
        store.note_person(&ann, "U1").await.unwrap();
        store.note_person(&ann, "U9").await.unwrap();
        let bob = turn(&store, "e2", &bob_dm, None, "U2").await;
        store.note_person(&bob, "U2").await.unwrap();
        let ann_in_group = turn(&store, "e3", &group, Some("U1"), "U1").await;
        let shared = turn(&store, "e4", &ChatRef::new("discord", "G2", ChatType::Group), None, "U1").await;
        store.accept_inbound(&event("e5", &ann_dm, "U1", "never ran"), 4, Outlive::PowerCut).await.unwrap();
        for (id, chat, creator) in [("j1", &ann_dm, "U1"), ("j2", &bob_dm, "U2")] {
            insert_job(&store, id, chat, creator).await;
        }

        let found: Vec<String> =
            store.person_sessions("discord", "U1").await.unwrap().into_iter().map(|s| s.id).collect();
        assert_eq!(found, [ann.clone(), ann_in_group.clone()], "the first person noted keeps the session");
        assert!(store.person_sessions("telegram", "U1").await.unwrap().is_empty(), "ids are per platform");

        for (subject, scope) in [("U1", "user"), ("U2", "user"), ("D1", "chat"), ("D2", "chat"), ("G1", "chat")] {
            sqlx::query("INSERT INTO usage_daily (scope, platform, subject, day, turns) VALUES (?, 'discord', ?, '2026-11-24', 1)")
                .bind(scope)
                .bind(subject)
                .execute(&mut *store.writer.get().await.unwrap())
                .await
                .unwrap();
        }
        sqlx::query(
            "INSERT INTO session_resets (session_key, session_id, reason, reset_at) VALUES ('k', ?, 'idle', 0)",
        )
        .bind(&ann)
        .execute(&mut *store.writer.get().await.unwrap())
        .await
        .unwrap();

        let done = store.delete_person("discord", "U1").await.unwrap();
        assert_eq!(done.usage_days, 2, "Ann's own usage and her DM's go; Bob's and the group's stay");
        assert_eq!(count(&store, "SELECT COUNT(*) FROM usage_daily").await, 3);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM session_resets").await, 0);
        assert_eq!(done.sessions.len(), 2);
        assert!(done.sessions[0].dm && !done.sessions[1].dm);
        assert_eq!((done.messages, done.events, done.outbound, done.routes), (4, 3, 2, 2));
        assert_eq!(done.cron_jobs, 1, "Ann's job goes, Bob's stays");
        assert_eq!(count(&store, "SELECT COUNT(*) FROM cron_jobs WHERE created_by = 'U2'").await, 1);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM cron_jobs").await, 1);
        assert!(store.search("says", None, 10).await.unwrap().iter().all(|hit| hit.session_id != ann));
        let left: Vec<String> =
            store.search("says", None, 10).await.unwrap().into_iter().map(|h| h.session_id).collect();
        assert!(left.contains(&bob) && left.contains(&shared) && left.len() == 2, "{left:?}");
        assert_eq!(count(&store, "SELECT COUNT(*) FROM sessions").await, 2);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM inbound_events").await, 2);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM outbound_messages").await, 2);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH 'U1'").await, 1);
        assert!(store.delete_person("discord", "U1").await.unwrap().sessions.is_empty(), "twice is harmless");
    }

    #[tokio::test]
    async fn deleting_a_person_takes_their_cron_runs_sent_files_and_stored_api_responses() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap();
        let write = || async { store.writer.get().await.unwrap() };
        let (ann_dm, bob_dm) =
            (ChatRef::new("api", "user:ann", ChatType::Dm), ChatRef::new("api", "user:bob", ChatType::Dm));
        turn(&store, "req-ann", &ann_dm, None, "ann").await;
        turn(&store, "req-bob", &bob_dm, None, "bob").await;
        // Ann's answer carried a file; so did Bob's.
        for (chat, path) in [("user:ann", "media/outbound/a1/chart.png"), ("user:bob", "media/outbound/b2/bob.pdf")] {
            sqlx::query(
                "UPDATE outbound_messages SET payload = json_set(payload, '$.file', json_object('path', ?)) \
                 WHERE json_extract(payload, '$.chat.chat_id') = ?",
            )
            .bind(path)
            .bind(chat)
            .execute(&mut *write().await)
            .await
            .unwrap();
        }
        for (request, scope) in [("req-ann", "s1"), ("req-bob", "s2")] {
            sqlx::query("INSERT INTO idempotency_keys (scope, idem_key, fingerprint, request_id, state, status, body, created_at) \
                 VALUES (?, 'k', 'f', ?, 'done', 200, '{}', 0)")
                .bind(scope)
                .bind(request)
                .execute(&mut *write().await)
                .await
                .unwrap();
        }
        for (id, chat, creator) in [("j1", &ann_dm, "ann"), ("j2", &bob_dm, "bob")] {
            insert_job(&store, id, chat, creator).await;
            // One run of each job: a session of the cron pseudo-platform, keyed by the job.
            turn(&store, &format!("{id}:1"), &ChatRef::new("cron", id, ChatType::Dm), None, "cron").await;
        }

        let done = store.delete_person("api", "ann").await.unwrap();
        assert_eq!(done.files, ["media/outbound/a1/chart.png"]);
        assert_eq!(done.cron_job_ids, ["j1"]);
        assert_eq!((done.cron_sessions, done.api_responses), (1, 1));
        assert_eq!(count(&store, "SELECT COUNT(*) FROM idempotency_keys WHERE request_id = 'req-bob'").await, 1);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM idempotency_keys").await, 1);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM sessions WHERE platform = 'cron'").await, 1, "Bob's run stays");
        assert_eq!(count(&store, "SELECT COUNT(*) FROM sessions WHERE chat_id = 'j1'").await, 0);
        assert_eq!(count(&store, "SELECT COUNT(*) FROM inbound_events WHERE event_id = 'j1:1'").await, 0);
        let left: Vec<String> =
            store.search("says", None, 10).await.unwrap().into_iter().map(|h| h.session_id).collect();
        assert_eq!(left.len(), 2, "Bob's request and his job's run: {left:?}");
    }

    #[tokio::test]
    async fn the_migration_finds_earlier_direct_conversations_by_their_sender() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap();
        let ann = turn(&store, "e1", &ChatRef::new("discord", "D1", ChatType::Dm), None, "U1").await;
        let group = turn(&store, "e2", &ChatRef::new("discord", "G1", ChatType::Group), Some("U2"), "U2").await;
        sqlx::query("UPDATE inbound_events SET payload = 'not json' WHERE event_id = 'e2'")
            .execute(&mut *store.writer.get().await.unwrap())
            .await
            .unwrap();
        sqlx::query("UPDATE sessions SET person_id = NULL")
            .execute(&mut *store.writer.get().await.unwrap())
            .await
            .unwrap();
        let migration = include_str!("../../../migrations/0014_session_people.sql");
        for statement in migration.split(';').filter(|s| s.contains("UPDATE")) {
            sqlx::query(sqlx::AssertSqlSafe(statement.to_owned()))
                .execute(&mut *store.writer.get().await.unwrap())
                .await
                .unwrap();
        }
        let person = |id: String| {
            let store = store.clone();
            async move {
                sqlx::query_scalar::<_, Option<String>>("SELECT person_id FROM sessions WHERE id = ?")
                    .bind(id)
                    .fetch_one(&mut *store.readers.get().await.unwrap())
                    .await
                    .unwrap()
            }
        };
        assert_eq!(person(ann).await.as_deref(), Some("U1"));
        assert_eq!(person(group).await.as_deref(), Some("U2"), "isolated group sessions name their user");
    }
}
