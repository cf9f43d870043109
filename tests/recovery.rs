//! Restart recovery decisions, driven through a real store and daemon: stale events are answered
//! with an apology instead of run, and a session whose turns keep crashing is suspended.

mod support;

use std::time::Duration;

use hermesd::store::{AcceptOutcome, InboundStore, Outlive, SessionKey, SessionStore, SqliteStore};
use hermesd::vocab::message::{Message, Role};
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};
use support::{FakeLlm, config_for, start_daemon};

fn event(id: &str) -> InboundEvent {
    InboundEvent::Message {
        event_id: id.into(),
        message: InboundMessage {
            profile: None,
            message_id: id.into(),
            chat: ChatRef::new("api", "r1", ChatType::Dm),
            sender: Sender { id: "u".into(), name: None, is_bot: false, roles: Vec::new() },
            text: format!("text of {id}"),
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: 0,
            history: vec![],
            chat_title: None,
            client: None,
        },
    }
}

async fn accept(store: &SqliteStore, id: &str, at: i64) -> i64 {
    match store.accept_inbound(&event(id), at, Outlive::PowerCut).await.unwrap() {
        AcceptOutcome::New { seq } => seq,
        AcceptOutcome::Duplicate => panic!("fresh event expected"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_events_get_an_apology_and_crashing_sessions_are_suspended() {
    let home = tempfile::tempdir().unwrap();
    let now = hermesd::clock::now_ms();
    {
        let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
        // Accepted two hours ago while the daemon was down: too old to run.
        accept(&store, "stale", now - 2 * 3_600_000).await;
        // A turn that was running when the daemon died, in a session that already crashed twice.
        let key = SessionKey {
            key: "agent:main:api:dm:r1".into(),
            platform: "api".into(),
            chat_id: "r1".into(),
            chat_type: ChatType::Dm,
            thread_id: None,
            user_id: None,
        };
        let session = store.start_session(&key, now).await.unwrap();
        let seq = accept(&store, "crashy", now).await;
        store.begin_turn(seq, &session.id, &Message::text(Role::User, "text of crashy"), now).await.unwrap();
        store.record_crash(&session.id, 3).await.unwrap();
        store.record_crash(&session.id, 3).await.unwrap();
        store.close().await;
    }
    let llm = FakeLlm::echo().await;
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    assert_eq!(d.daemon.recovery.given_up, 2, "{:?}", d.daemon.recovery);
    assert_eq!(d.daemon.recovery.rerun, 0);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(llm.count(), 0, "nothing ran");
    d.daemon.stop().await;

    let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    assert!(store.unfinished_events().await.unwrap().events.is_empty(), "both events closed");
    let session = store.route("agent:main:api:dm:r1").await.unwrap().unwrap();
    assert!(session.suspended);
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_session_refuses_turns_until_new() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    support::ask(&d.base, Some("sus"), "hello").await;
    d.daemon.stop().await;
    {
        let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
        let session = store.route("agent:main:api:dm:sus").await.unwrap().unwrap();
        for _ in 0..3 {
            store.record_crash(&session.id, 3).await.unwrap();
        }
        store.close().await;
    }
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let (status, body) = support::ask(&d.base, Some("sus"), "are you there?").await;
    assert_eq!(status, 502);
    assert!(body["error"]["message"].as_str().unwrap().contains("suspended"), "{body}");
    support::ask(&d.base, Some("sus"), "/new").await;
    let (status, body) = support::ask(&d.base, Some("sus"), "are you there?").await;
    assert_eq!(status, 200);
    assert_eq!(support::answer(&body), "echo: are you there?");
    assert_eq!(llm.count(), 2, "the suspended turn never reached the model");
    d.daemon.stop().await;
}
