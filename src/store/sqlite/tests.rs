//! Store tests against real SQLite files in a temp dir.

use std::time::Duration;

use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, OutboundKind, OutboundMessage, Sender};

use super::SqliteStore;
use crate::store::{
    AcceptOutcome, Compaction, EventState, ExtrasStore, Fence, IdempotencyStore, InboundStore, LeaseStore, OutboxStore,
    Outlive, PreviewStore, SessionKey, SessionStore, StoreError, TokenTotals, TurnEnd,
};
use crate::vocab::message::{Message, Role};

mod lane;

pub(super) async fn open(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap()
}

fn event(id: &str, text: &str) -> InboundEvent {
    InboundEvent::Message {
        event_id: id.into(),
        message: InboundMessage {
            profile: None,
            message_id: id.into(),
            chat: ChatRef::new("api", "c1", ChatType::Dm),
            sender: Sender { id: "u1".into(), name: None, is_bot: false, roles: Vec::new() },
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

pub(super) fn key() -> SessionKey {
    SessionKey {
        key: "agent:main:api:dm:c1".into(),
        platform: "api".into(),
        chat_id: "c1".into(),
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    }
}

fn reply(text: &str, index: u32, count: u32) -> OutboundMessage {
    OutboundMessage {
        chat: ChatRef::new("api", "c1", ChatType::Dm),
        text: text.into(),
        reply_to: None,
        kind: OutboundKind::Reply,
        buttons: vec![],
        chunk: (index, count),
        file: None,
    }
}

#[tokio::test]
async fn accept_deduplicates_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let first = store.accept_inbound(&event("e1", "hi"), 10, Outlive::PowerCut).await.unwrap();
    assert!(matches!(first, AcceptOutcome::New { .. }));
    assert_eq!(
        store.accept_inbound(&event("e1", "hi"), 11, Outlive::PowerCut).await.unwrap(),
        AcceptOutcome::Duplicate
    );
    store.close().await;
    let store = open(&dir).await;
    assert_eq!(
        store.accept_inbound(&event("e1", "hi"), 12, Outlive::PowerCut).await.unwrap(),
        AcceptOutcome::Duplicate
    );
    let unfinished = store.unfinished_events().await.unwrap().events;
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].event, event("e1", "hi"));
}

#[tokio::test]
async fn turn_lifecycle_is_atomic_and_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let AcceptOutcome::New { seq } = store.accept_inbound(&event("e1", "hello"), 1, Outlive::PowerCut).await.unwrap()
    else {
        panic!("new event expected")
    };
    let session = store.start_session(&key(), 1).await.unwrap();
    assert_eq!(store.route(&key().key).await.unwrap().unwrap().id, session.id);
    let user = Message::text(Role::User, "hello");
    assert_eq!(store.begin_turn(seq, &session.id, &user, 2).await.unwrap(), 1);
    // A retried start (after a crash) counts the attempt but writes the user message once.
    assert_eq!(store.begin_turn(seq, &session.id, &user, 3).await.unwrap(), 2);
    assert_eq!(store.load_transcript(&session.id).await.unwrap().len(), 1);
    // A rerun that took in a quick message arriving after the restart writes the merged words
    // over the first attempt's, in place, and a kept transcript does not hide the change.
    let merged = Message::text(Role::User, "hello\nand one more thing");
    assert_eq!(store.begin_turn(seq, &session.id, &merged, 4).await.unwrap(), 3);
    let transcript = store.load_transcript(&session.id).await.unwrap();
    assert_eq!(
        transcript.iter().map(|m| m.message.content.as_deref()).collect::<Vec<_>>(),
        [Some("hello\nand one more thing")]
    );
    let mut answer = Message::text(Role::Assistant, "hi there");
    let item = serde_json::json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "opaque"});
    answer.reasoning = crate::vocab::message::Reasoning::new("they greet".into(), vec![item]);
    let chunks = [reply("hi ", 0, 2), reply("there", 1, 2)];
    let usage = TokenTotals { calls: 2, prompt: 300, completion: 20, cache_read: 250, cache_write: 40 };
    let end = TurnEnd {
        messages: std::slice::from_ref(&answer),
        reply: &chunks,
        state: EventState::Done,
        error: None,
        prompt_tokens: Some(1234),
        also_done: &[],
        usage,
    };
    store.finish_turn(seq, &session.id, &end, 4).await.unwrap();
    let transcript = store.load_transcript(&session.id).await.unwrap();
    assert_eq!(transcript.iter().map(|m| m.message.role).collect::<Vec<_>>(), [Role::User, Role::Assistant]);
    // Reasoning, readable text and opaque items alike, comes back exactly as stored.
    assert_eq!(transcript[1].message, answer);
    assert_eq!(store.session_usage(&session.id).await.unwrap(), usage);
    assert!(!store.show_reasoning(&session.id).await.unwrap());
    store.set_show_reasoning(&session.id, true).await.unwrap();
    assert!(store.show_reasoning(&session.id).await.unwrap());
    assert!(store.unfinished_events().await.unwrap().events.is_empty());
    assert_eq!(store.route(&key().key).await.unwrap().unwrap().last_prompt_tokens, 1234);
    let pending = store.pending_for_turn(&format!("evt:{seq}")).await.unwrap();
    assert_eq!(pending.iter().map(|p| p.message.text.as_str()).collect::<Vec<_>>(), ["hi ", "there"]);
    // Queueing the same chunks again changes nothing.
    store.enqueue_outbound(&format!("evt:{seq}"), &chunks, 5).await.unwrap();
    assert_eq!(store.pending_outbound().await.unwrap().len(), 2);
    store.mark_sent(pending[0].id, "m1", 6, Outlive::PowerCut).await.unwrap();
    store.mark_attempt_failed(pending[1].id, "boom", false).await.unwrap();
    let left = store.pending_outbound().await.unwrap();
    assert_eq!((left.len(), left[0].attempts), (1, 1));
    store.mark_attempt_failed(pending[1].id, "boom", true).await.unwrap();
    assert!(store.pending_outbound().await.unwrap().is_empty());
}

#[tokio::test]
async fn search_finds_words_substrings_and_cjk() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = store.start_session(&key(), 1).await.unwrap();
    for (i, text) in ["the quick brown fox", "naïve café", "東京タワーに行きました"].iter().enumerate() {
        let AcceptOutcome::New { seq } =
            store.accept_inbound(&event(&format!("e{i}"), text), 1, Outlive::PowerCut).await.unwrap()
        else {
            panic!()
        };
        store.begin_turn(seq, &session.id, &Message::text(Role::User, *text), 1).await.unwrap();
    }
    let words = store.search("quick fox", None, 10).await.unwrap();
    assert_eq!(words.len(), 1);
    assert!(words[0].snippet.contains("[quick]"), "{}", words[0].snippet);
    assert_eq!(store.search("cafe", None, 10).await.unwrap().len(), 1, "diacritics folded");
    assert_eq!(store.search("uick bro", None, 10).await.unwrap().len(), 1, "substring via trigram");
    assert_eq!(store.search("タワー", None, 10).await.unwrap().len(), 1, "CJK via trigram");
    assert!(store.search("\"unbalanced OR (", None, 10).await.unwrap().is_empty(), "syntax is quoted");
    assert!(store.search("fox", Some("other-session"), 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_store_works_on_after_its_page_caches_are_released() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = store.start_session(&key(), 1).await.unwrap();
    let turn = |i: usize| {
        let (store, session) = (&store, &session);
        async move {
            let text = format!("invoice number {i}");
            let AcceptOutcome::New { seq } =
                store.accept_inbound(&event(&format!("e{i}"), &text), 1, Outlive::PowerCut).await.unwrap()
            else {
                panic!("event {i} is new")
            };
            store.begin_turn(seq, &session.id, &Message::text(Role::User, text.as_str()), 1).await.unwrap();
        }
    };
    for i in 0..20 {
        turn(i).await;
    }
    assert_eq!(store.search("invoice", None, 50).await.unwrap().len(), 20);
    store.release_memory().await;
    // Every connection opens its cache again from the file: reads, lane writes, searches.
    assert_eq!(store.load_transcript(&session.id).await.unwrap().len(), 20);
    turn(20).await;
    assert_eq!(store.search("invoice", None, 50).await.unwrap().len(), 21);
    store.release_memory().await;
    assert_eq!(store.load_transcript(&session.id).await.unwrap().len(), 21);
}

#[tokio::test]
async fn crash_counter_suspends_and_success_resets() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = store.start_session(&key(), 1).await.unwrap();
    assert_eq!(store.record_crash(&session.id, 3).await.unwrap(), 1);
    assert_eq!(store.record_crash(&session.id, 3).await.unwrap(), 2);
    assert!(!store.session(&session.id).await.unwrap().unwrap().suspended);
    assert_eq!(store.record_crash(&session.id, 3).await.unwrap(), 3);
    assert!(store.session(&session.id).await.unwrap().unwrap().suspended);
}

#[tokio::test]
async fn refuses_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (999, 'future', 1, x'00', 0)",
    )
    .execute(&mut *store.writer.get().await.unwrap())
    .await
    .unwrap();
    store.close().await;
    let err = SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(1), 1).await.err().unwrap();
    assert!(matches!(err, StoreError::SchemaTooNew { found: 999, .. }), "{err}");
}

#[tokio::test]
async fn cursors_persist() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    assert_eq!(store.load_cursor("telegram").await.unwrap(), None);
    assert!(store.save_cursor("telegram", "41", 1, None).await.unwrap());
    assert!(store.save_cursor("telegram", "42", 2, None).await.unwrap());
    assert_eq!(store.load_cursor("telegram").await.unwrap().as_deref(), Some("42"));
}

/// A cursor write fenced by a lease lands only while the lease is held under that token: once
/// another holder took it, the old holder's write is refused and the cursor stays the new one's.
#[tokio::test]
async fn a_fenced_cursor_write_is_refused_once_the_lease_changed_hands() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let first = store.take_lease("home", "a", "PID 1", 1).await.unwrap();
    let old = Fence { lease: "home".into(), token: first };
    assert!(store.save_cursor("telegram", "41", 1, Some(&old)).await.unwrap());
    assert!(store.save_cursor("telegram", "42", 2, Some(&old)).await.unwrap());
    let second = store.take_lease("home", "b", "PID 2", 3).await.unwrap();
    assert!(second > first);
    let new = Fence { lease: "home".into(), token: second };
    assert!(store.save_cursor("telegram", "43", 4, Some(&new)).await.unwrap());
    assert!(!store.save_cursor("telegram", "40", 5, Some(&old)).await.unwrap(), "the old holder is fenced off");
    assert!(!store.save_cursor("signal", "7", 5, Some(&old)).await.unwrap(), "a first write too");
    assert_eq!(store.load_cursor("telegram").await.unwrap().as_deref(), Some("43"));
    assert_eq!(store.load_cursor("signal").await.unwrap(), None);
    let unknown = Fence { lease: "account:telegram:other".into(), token: 1 };
    assert!(!store.save_cursor("telegram", "44", 6, Some(&unknown)).await.unwrap(), "a lease never taken");
}

#[tokio::test]
async fn compaction_archives_a_span_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = store.start_session(&key(), 1).await.unwrap();
    store.set_system_prompt(&session.id, "prompt v1").await.unwrap();
    for i in 0..6 {
        let AcceptOutcome::New { seq } =
            store.accept_inbound(&event(&format!("e{i}"), "x"), 1, Outlive::PowerCut).await.unwrap()
        else {
            panic!()
        };
        store
            .begin_turn(seq, &session.id, &Message::text(Role::User, format!("message {i} about zebras")), 1)
            .await
            .unwrap();
    }
    let live = store.load_transcript(&session.id).await.unwrap();
    let summary = Message::text(Role::User, "[summary] messages 2 to 4");
    let compaction =
        Compaction { from: live[2].position, to: live[4].position, summary: &summary, system_prompt: "prompt v2" };
    store.compact(&session.id, &compaction, 2).await.unwrap();
    let after: Vec<_> =
        store.load_transcript(&session.id).await.unwrap().into_iter().map(|m| m.message.content.unwrap()).collect();
    assert_eq!(
        after,
        ["message 0 about zebras", "message 1 about zebras", "[summary] messages 2 to 4", "message 5 about zebras"]
    );
    let info = store.route(&key().key).await.unwrap().unwrap();
    assert_eq!((info.id.as_str(), info.system_prompt.as_deref()), (session.id.as_str(), Some("prompt v2")));
    // Archived rows are still found by search.
    assert_eq!(store.search("zebras", Some(&session.id), 10).await.unwrap().len(), 6);
    assert_eq!(store.full_history(&session.id).await.unwrap().iter().filter(|m| m.archived).count(), 3);
}

#[tokio::test]
async fn undecodable_rows_are_quarantined_and_the_rest_still_load() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let bad = store.insert_raw_inbound("telegram", "u1", "{not json", 5).await.unwrap();
    let wrong_shape = store.insert_raw_inbound("telegram", "u2", r#"{"kind":"nonsense"}"#, 6).await.unwrap();
    store.accept_inbound(&event("e1", "fine"), 7, Outlive::PowerCut).await.unwrap();

    let found = store.unfinished_events().await.unwrap();
    assert_eq!(found.events.len(), 1);
    assert_eq!(found.events[0].event, event("e1", "fine"));
    assert_eq!(
        found.quarantined.iter().map(|q| (q.id, q.platform.as_str())).collect::<Vec<_>>(),
        [(bad, "telegram"), (wrong_shape, "telegram")]
    );
    let (state, error) = store.inbound_state(bad).await.unwrap().unwrap();
    assert_eq!(state, "quarantined");
    assert!(error.unwrap().contains("inbound_events.payload"));
    // Set aside once: the next start neither runs nor reports them again.
    let again = store.unfinished_events().await.unwrap();
    assert!(again.quarantined.is_empty());
    assert_eq!(again.events.len(), 1);

    // An undecodable pending reply is set aside too; the others are still delivered.
    store.enqueue_outbound("t1", &[reply("ok", 0, 1)], 8).await.unwrap();
    sqlx::query(
        "INSERT INTO outbound_messages (turn_id, chunk_index, platform, payload, created_at) \
         VALUES ('t0', 0, 'api', 'garbage', 1)",
    )
    .execute(&mut *store.writer.get().await.unwrap())
    .await
    .unwrap();
    let pending = store.pending_outbound().await.unwrap();
    assert_eq!(pending.iter().map(|p| p.turn_id.as_str()).collect::<Vec<_>>(), ["t1"]);
    let (state,): (String,) = sqlx::query_as("SELECT state FROM outbound_messages WHERE turn_id = 't0'")
        .fetch_one(&mut *store.writer.get().await.unwrap())
        .await
        .unwrap();
    assert_eq!(state, "quarantined");
}

#[tokio::test]
async fn a_new_database_uses_incremental_auto_vacuum() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    assert_eq!(store.auto_vacuum_mode().await.unwrap(), 2);
    store.incremental_vacuum(16).await.unwrap();
    assert!(!dir.path().join("backups").exists(), "a new database needs no snapshot");
}

#[tokio::test]
async fn migrating_keeps_a_snapshot_of_the_previous_database() {
    use std::borrow::Cow;

    use sqlx::migrate::{Migration, MigrationType, Migrator};
    use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("state.db");
    // A database left by an older binary: every migration but the last.
    let older = super::MIGRATIONS.len() - 1;
    let options = SqliteConnectOptions::new().filename(&path).create_if_missing(true);
    let pool = SqlitePoolOptions::new().max_connections(1).connect_with(options).await.unwrap();
    let migrations = super::MIGRATIONS[..older]
        .iter()
        .map(|(v, name, sql)| {
            Migration::new(*v, Cow::Borrowed(*name), MigrationType::Simple, sqlx::SqlStr::from_static(sql), false)
        })
        .collect();
    Migrator::with_migrations(migrations).run(&pool).await.unwrap();
    sqlx::query("INSERT INTO platform_cursors (platform, cursor, updated_at) VALUES ('telegram', '7', 1)")
        .execute(&pool)
        .await
        .unwrap();
    pool.close().await;

    let store = SqliteStore::open(&path, Duration::from_secs(5), 1).await.unwrap();
    assert_eq!(store.load_cursor("telegram").await.unwrap().as_deref(), Some("7"));
    store.close().await;
    let snapshots: Vec<_> = std::fs::read_dir(dir.path().join("backups")).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(snapshots.len(), 1, "{snapshots:?}");
    let name = snapshots[0].file_name().unwrap().to_str().unwrap().to_owned();
    let older_version = super::MIGRATIONS[older - 1].0;
    assert!(name.starts_with(&format!("state-v{older_version}-")), "{name}");
    // The snapshot is the old database: its schema stops before the last migration.
    let copy = SqlitePoolOptions::new()
        .connect_with(SqliteConnectOptions::new().filename(&snapshots[0]).read_only(true))
        .await
        .unwrap();
    let (version,): (i64,) =
        sqlx::query_as("SELECT MAX(version) FROM _sqlx_migrations").fetch_one(&copy).await.unwrap();
    assert_eq!(version, older_version);
    copy.close().await;

    // Reopening the migrated database takes no further snapshot.
    SqliteStore::open(&path, Duration::from_secs(5), 1).await.unwrap().close().await;
    assert_eq!(std::fs::read_dir(dir.path().join("backups")).unwrap().count(), 1);
}

#[tokio::test]
async fn retention_prunes_only_finished_old_rows_in_batches() {
    use crate::store::RetentionStore;

    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = store.start_session(&key(), 1).await.unwrap();
    // Five finished events at t=10..14 with one sent chunk each; one unfinished at t=15.
    for i in 0..5 {
        let AcceptOutcome::New { seq } =
            store.accept_inbound(&event(&format!("old{i}"), "hi"), 10 + i, Outlive::PowerCut).await.unwrap()
        else {
            panic!("new event expected")
        };
        store.begin_turn(seq, &session.id, &Message::text(Role::User, "hi"), 10 + i).await.unwrap();
        let chunks = [reply("answer", 0, 1)];
        let end = TurnEnd {
            messages: &[Message::text(Role::Assistant, "answer")],
            reply: &chunks,
            state: EventState::Done,
            error: None,
            prompt_tokens: None,
            also_done: &[],
            usage: Default::default(),
        };
        store.finish_turn(seq, &session.id, &end, 10 + i).await.unwrap();
        let pending = store.pending_for_turn(&format!("evt:{seq}")).await.unwrap();
        if i < 4 {
            store.mark_sent(pending[0].id, &format!("m{i}"), 10 + i, Outlive::PowerCut).await.unwrap();
        }
    }
    store.accept_inbound(&event("open", "hi"), 15, Outlive::PowerCut).await.unwrap();
    sqlx::query("UPDATE messages SET archived = 1 WHERE role = 'user'")
        .execute(&mut *store.writer.get().await.unwrap())
        .await
        .unwrap();

    // Nothing is old enough yet.
    assert_eq!(store.prune_inbound(10, 100).await.unwrap(), 0);
    // Batches: 2, then the rest of what is older than 100; the unfinished event stays.
    assert_eq!(store.prune_inbound(100, 2).await.unwrap(), 2);
    assert_eq!(store.prune_inbound(100, 100).await.unwrap(), 3);
    assert_eq!(store.unfinished_events().await.unwrap().events.len(), 1, "the unfinished event is kept");
    // Sent chunks go; the one still pending stays.
    assert_eq!(store.prune_outbound(100, 100).await.unwrap(), 4);
    assert_eq!(store.pending_outbound().await.unwrap().len(), 1);
    // Archived messages go; the live transcript (the answers) stays.
    assert_eq!(store.prune_archived_messages(100, 100).await.unwrap(), 5);
    let left = store.load_transcript(&session.id).await.unwrap();
    assert!(left.iter().all(|m| m.message.role == Role::Assistant) && left.len() == 5, "{left:?}");
    store.reclaim_space(100).await.unwrap();
    // Deduplication of a pruned event starts over; a kept one is still a duplicate.
    assert_eq!(
        store.accept_inbound(&event("open", "hi"), 16, Outlive::PowerCut).await.unwrap(),
        AcceptOutcome::Duplicate
    );
}

#[tokio::test]
async fn a_steering_message_stored_with_the_turn_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let AcceptOutcome::New { seq } =
        store.accept_inbound(&event("e1", "do the thing"), 1, Outlive::PowerCut).await.unwrap()
    else {
        panic!("new event expected")
    };
    let session = store.start_session(&key(), 1).await.unwrap();
    store.begin_turn(seq, &session.id, &Message::text(Role::User, "do the thing"), 2).await.unwrap();
    let steps = [
        Message::text(Role::Assistant, "working"),
        Message::text(Role::User, "also check the tests"),
        Message::text(Role::Assistant, "done, tests too"),
    ];
    let end = TurnEnd {
        messages: &steps,
        reply: &[],
        state: EventState::Done,
        error: None,
        prompt_tokens: None,
        also_done: &[],
        usage: Default::default(),
    };
    store.finish_turn(seq, &session.id, &end, 3).await.unwrap();
    let texts: Vec<String> =
        store.load_transcript(&session.id).await.unwrap().into_iter().filter_map(|m| m.message.content).collect();
    assert_eq!(texts, ["do the thing", "working", "also check the tests", "done, tests too"]);
}

/// The live transcript as the database has it now (no kept copy involved).
async fn fresh_transcript(store: &SqliteStore, session: &str) -> Vec<(i64, String)> {
    let (rows, _) = store.transcript(session, "AND archived = 0").unwrap();
    rows.into_iter().map(|m| (m.id, m.message.content.unwrap_or_default())).collect()
}

async fn kept_transcript(store: &SqliteStore, session: &str) -> Vec<(i64, String)> {
    let rows = store.load_transcript(session).await.unwrap();
    rows.into_iter().map(|m| (m.id, m.message.content.unwrap_or_default())).collect()
}

/// A user message `text` accepted as its own event (id from the text) and its turn begun.
pub(super) async fn add_user_message(store: &SqliteStore, session: &str, text: &str) {
    let AcceptOutcome::New { seq } =
        store.accept_inbound(&event(&format!("u:{text}"), text), 1, Outlive::PowerCut).await.unwrap()
    else {
        panic!("new event expected")
    };
    store.begin_turn(seq, session, &Message::text(Role::User, text), 1).await.unwrap();
}

#[tokio::test]
async fn a_kept_transcript_matches_the_database_through_appends_compaction_undo_and_outside_writes() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = store.start_session(&key(), 1).await.unwrap();
    let add = async |store: &SqliteStore, text: &str| add_user_message(store, &session.id, text).await;
    for i in 0..5 {
        add(&store, &format!("m{i}")).await;
        assert_eq!(kept_transcript(&store, &session.id).await, fresh_transcript(&store, &session.id).await);
    }
    // Kept and brought up to date: the copy now holds all five.
    assert_eq!(store.transcripts.take(&session.id).map(|kept| kept.len()), Some(5));
    assert_eq!(kept_transcript(&store, &session.id).await.len(), 5);

    // Compaction sorts a summary in among the kept rows.
    let live = store.load_transcript(&session.id).await.unwrap();
    let summary = Message::text(Role::User, "[summary]");
    let compaction = Compaction { from: live[1].position, to: live[2].position, summary: &summary, system_prompt: "p" };
    store.compact(&session.id, &compaction, 2).await.unwrap();
    add(&store, "after compaction").await;
    assert_eq!(kept_transcript(&store, &session.id).await, fresh_transcript(&store, &session.id).await);

    // `/undo` archives the last exchange; a new message follows.
    store.undo_last_exchange(&session.id).await.unwrap();
    add(&store, "after undo").await;
    assert_eq!(kept_transcript(&store, &session.id).await, fresh_transcript(&store, &session.id).await);

    // Another process (`hermesd sessions delete`, a hand edit) archives and deletes rows behind
    // this store's back, then a turn appends one: the kept copy must not survive that.
    let outside = rusqlite::Connection::open(dir.path().join("state.db")).unwrap();
    let oldest: i64 = outside
        .query_row("SELECT min(id) FROM messages WHERE session_id = ?1 AND archived = 0", [&session.id], |r| r.get(0))
        .unwrap();
    outside.execute("UPDATE messages SET archived = 1 WHERE id = ?1", [oldest]).unwrap();
    add(&store, "after an outside archive").await;
    assert_eq!(kept_transcript(&store, &session.id).await, fresh_transcript(&store, &session.id).await);
    let newest: i64 = outside
        .query_row("SELECT max(id) FROM messages WHERE session_id = ?1 AND archived = 0", [&session.id], |r| r.get(0))
        .unwrap();
    outside.execute("DELETE FROM messages WHERE id = ?1", [newest]).unwrap();
    assert_eq!(kept_transcript(&store, &session.id).await, fresh_transcript(&store, &session.id).await);
    add(&store, "after an outside delete").await;
    let kept = kept_transcript(&store, &session.id).await;
    assert_eq!(kept, fresh_transcript(&store, &session.id).await);
    assert!(kept.iter().all(|(id, _)| *id != oldest), "{kept:?}");
}
