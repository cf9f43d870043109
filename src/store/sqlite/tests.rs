//! Store tests against real SQLite files in a temp dir.

use std::time::Duration;

use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, OutboundKind, OutboundMessage, Sender};

use super::SqliteStore;
use crate::agent::message::{Message, Role};
use crate::store::{
    AcceptOutcome, Compaction, EventState, ExtrasStore, InboundStore, OutboxStore, SessionKey, SessionStore,
    StoreError, TokenTotals, TurnEnd,
};

async fn open(dir: &tempfile::TempDir) -> SqliteStore {
    SqliteStore::open(&dir.path().join("state.db"), Duration::from_secs(5), 2).await.unwrap()
}

fn event(id: &str, text: &str) -> InboundEvent {
    InboundEvent::Message {
        event_id: id.into(),
        message: InboundMessage {
            message_id: id.into(),
            chat: ChatRef::new("api", "c1", ChatType::Dm),
            sender: Sender { id: "u1".into(), name: None, is_bot: false, roles: Vec::new() },
            text: text.into(),
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: 1,
            history: vec![],
        },
    }
}

fn key() -> SessionKey {
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
    }
}

#[tokio::test]
async fn accept_deduplicates_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let first = store.accept_inbound(&event("e1", "hi"), 10).await.unwrap();
    assert!(matches!(first, AcceptOutcome::New { .. }));
    assert_eq!(store.accept_inbound(&event("e1", "hi"), 11).await.unwrap(), AcceptOutcome::Duplicate);
    store.close().await;
    let store = open(&dir).await;
    assert_eq!(store.accept_inbound(&event("e1", "hi"), 12).await.unwrap(), AcceptOutcome::Duplicate);
    let unfinished = store.unfinished_events().await.unwrap().events;
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].event, event("e1", "hi"));
}

#[tokio::test]
async fn turn_lifecycle_is_atomic_and_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let AcceptOutcome::New { seq } = store.accept_inbound(&event("e1", "hello"), 1).await.unwrap() else {
        panic!("new event expected")
    };
    let session = store.start_session(&key(), 1).await.unwrap();
    assert_eq!(store.route(&key().key).await.unwrap().unwrap().id, session.id);
    let user = Message::text(Role::User, "hello");
    assert_eq!(store.begin_turn(seq, &session.id, &user, 2).await.unwrap(), 1);
    // A retried start (after a crash) counts the attempt but writes the user message once.
    assert_eq!(store.begin_turn(seq, &session.id, &user, 3).await.unwrap(), 2);
    assert_eq!(store.load_transcript(&session.id).await.unwrap().len(), 1);
    let mut answer = Message::text(Role::Assistant, "hi there");
    let item = serde_json::json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "opaque"});
    answer.reasoning = crate::agent::message::Reasoning::new("they greet".into(), vec![item]);
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
    store.mark_sent(pending[0].id, "m1", 6).await.unwrap();
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
        let AcceptOutcome::New { seq } = store.accept_inbound(&event(&format!("e{i}"), text), 1).await.unwrap() else {
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
    .execute(&store.writer)
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
    store.save_cursor("telegram", "41", 1).await.unwrap();
    store.save_cursor("telegram", "42", 2).await.unwrap();
    assert_eq!(store.load_cursor("telegram").await.unwrap().as_deref(), Some("42"));
}

#[tokio::test]
async fn compaction_archives_a_span_in_place() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir).await;
    let session = store.start_session(&key(), 1).await.unwrap();
    store.set_system_prompt(&session.id, "prompt v1").await.unwrap();
    for i in 0..6 {
        let AcceptOutcome::New { seq } = store.accept_inbound(&event(&format!("e{i}"), "x"), 1).await.unwrap() else {
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
    store.accept_inbound(&event("e1", "fine"), 7).await.unwrap();

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
    .execute(&store.writer)
    .await
    .unwrap();
    let pending = store.pending_outbound().await.unwrap();
    assert_eq!(pending.iter().map(|p| p.turn_id.as_str()).collect::<Vec<_>>(), ["t1"]);
    let (state,): (String,) = sqlx::query_as("SELECT state FROM outbound_messages WHERE turn_id = 't0'")
        .fetch_one(&store.writer)
        .await
        .unwrap();
    assert_eq!(state, "quarantined");
}
