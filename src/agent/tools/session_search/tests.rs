//! `session_search` over a real store: grouped snippets, summaries from a scripted summary model,
//! and the fall back to snippets when that model fails or is slow.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};
use serde_json::json;

use super::SessionSearchTool;
use crate::agent::auxiliary::Summarizer;
use crate::agent::provider::{ChatRequest, ChatResponse, DeltaSink, Provider, ProviderError};
use crate::agent::tools::test_support::{FixedHuman, context};
use crate::agent::tools::{Approval, Tool, ToolContext};
use crate::store::{AcceptOutcome, EventState, Outlive, SessionKey, TurnEnd};
use crate::vocab::message::{Message, Role};

/// A summary model that records what it was asked and answers after `delay`.
struct FakeSummary {
    seen: Mutex<Vec<ChatRequest>>,
    answer: Result<&'static str, ()>,
    delay: Duration,
}

#[async_trait]
impl Provider for FakeSummary {
    fn model(&self) -> &str {
        "fake-summary"
    }

    fn context_length(&self) -> u64 {
        8192
    }

    async fn complete(&self, request: &ChatRequest, _: Option<DeltaSink<'_>>) -> Result<ChatResponse, ProviderError> {
        self.seen.lock().unwrap().push(request.clone());
        tokio::time::sleep(self.delay).await;
        let text = self.answer.map_err(|()| ProviderError::Transient("down".into()))?;
        Ok(ChatResponse {
            message: Message::text(Role::Assistant, text),
            usage: None,
            finish_reason: None,
            reasoning: None,
        })
    }
}

fn fake(answer: Result<&'static str, ()>, delay: Duration) -> Arc<FakeSummary> {
    Arc::new(FakeSummary { seen: Mutex::new(Vec::new()), answer, delay })
}

fn dm_key(user: &str) -> SessionKey {
    SessionKey {
        key: format!("agent:main:api:dm:{user}"),
        platform: "api".into(),
        chat_id: user.into(),
        chat_type: ChatType::Dm,
        thread_id: None,
        user_id: None,
    }
}

/// One exchange in a new session of `key` (at `at` ms): the user's text and the answer.
async fn exchange(ctx: &ToolContext, key: &SessionKey, id: &str, said: &str, answered: &str, at: i64) -> String {
    let store = &ctx.store;
    let session = match store.route(&key.key).await.unwrap() {
        Some(session) => session,
        None => store.start_session(key, at).await.unwrap(),
    };
    let event = InboundEvent::Message {
        event_id: id.into(),
        message: InboundMessage {
            profile: None,
            message_id: id.into(),
            chat: ChatRef::new("api", key.chat_id.clone(), ChatType::Dm),
            sender: Sender { id: key.chat_id.clone(), name: None, is_bot: false, roles: Vec::new() },
            text: said.into(),
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: at,
            history: vec![],
            chat_title: None,
            client: None,
        },
    };
    let AcceptOutcome::New { seq } = store.accept_inbound(&event, at, Outlive::PowerCut).await.unwrap() else {
        panic!("new event")
    };
    store.begin_turn(seq, &session.id, &Message::text(Role::User, said), at).await.unwrap();
    let answer = Message::text(Role::Assistant, answered);
    let end = TurnEnd {
        messages: std::slice::from_ref(&answer),
        reply: &[],
        state: EventState::Done,
        error: None,
        prompt_tokens: None,
        also_done: &[],
        usage: Default::default(),
    };
    store.finish_turn(seq, &session.id, &end, at + 1).await.unwrap();
    session.id
}

const DAY: i64 = 86_400_000;

/// Alice (the caller, key `agent:main:api:dm:alice`) has an earlier, titled session and a current
/// one; Bob talked about the same things.
async fn setup(dir: &tempfile::TempDir) -> (ToolContext, String, String) {
    let human = Arc::new(FixedHuman { answer: Approval::Denied, asked: Mutex::new(Vec::new()) });
    let ctx = context(dir.path(), dir.path().into(), dir.path().into(), human).await;
    let alice = dm_key("alice");
    let earlier =
        exchange(&ctx, &alice, "a1", "we pick the blue kayak", "blue kayak noted, 340 euros", 20_000 * DAY).await;
    ctx.store.set_title(&earlier, Some("Holiday gear")).await.unwrap();
    exchange(&ctx, &alice, "a2", "and a paddle", "the paddle costs 60 euros", 20_000 * DAY + 5).await;
    ctx.store.start_session(&alice, 20_003 * DAY).await.unwrap();
    let current = exchange(&ctx, &alice, "a3", "was the kayak blue?", "let me look", 20_003 * DAY + 1).await;
    for i in 0..30 {
        exchange(&ctx, &dm_key("bob"), &format!("b{i}"), "bob wants a red kayak", "red kayak for bob", 20_001 * DAY)
            .await;
    }
    let ctx = ToolContext {
        session_id: current.clone(),
        session_key: alice.key.clone(),
        chat: ChatRef::new("api", "alice", ChatType::Dm),
        user_id: "alice".into(),
        ..ctx
    };
    (ctx, earlier, current)
}

#[tokio::test]
async fn without_a_summary_model_snippets_are_grouped_by_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _, _) = setup(&dir).await;
    let out = SessionSearchTool::new(None).call(&ctx, json!({"query": "kayak", "limit": 5})).await.unwrap();
    assert!(out.contains("in 2 conversations for \"kayak\""), "{out}");
    assert!(out.contains("Conversation \"Holiday gear\" (started 2024-10-04); matches on 2024-10-04:"), "{out}");
    assert!(out.contains("(started 2024-10-07, this conversation)"), "{out}");
    assert!(out.contains("assistant: blue [kayak] noted, 340 euros"), "{out}");
    assert!(!out.contains("bob") && !out.contains("red"), "another person's messages leaked: {out}");
    let none = SessionSearchTool::new(None).call(&ctx, json!({"query": "red"})).await.unwrap();
    assert_eq!(none, "No earlier messages match \"red\".");
    assert!(SessionSearchTool::new(None).call(&ctx, json!({"query": "  "})).await.is_err());
}

#[tokio::test]
async fn the_summary_model_summarises_each_conversation_from_its_own_excerpts() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _, _) = setup(&dir).await;
    let model = fake(Ok("They chose a blue kayak for 340 euros."), Duration::ZERO);
    let summary = Arc::new(Summarizer::new(model.clone(), Duration::from_secs(5)));
    let out = SessionSearchTool::new(Some(summary)).call(&ctx, json!({"query": "euros"})).await.unwrap();
    assert!(out.contains("Summary: They chose a blue kayak for 340 euros."), "{out}");
    assert!(!out.contains("[euros]"), "summaries replace the snippets: {out}");
    let seen = model.seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one conversation matched, one summary");
    let text = seen[0].messages[1].content.clone().unwrap();
    assert!(text.starts_with("Query: euros"), "{text}");
    // The hits come with their neighbours: the user's question before the answer that matched.
    for expected in ["user: we pick the blue kayak", "assistant: blue kayak noted, 340 euros", "the paddle costs 60"] {
        assert!(text.contains(expected), "{expected:?} in {text}");
    }
    assert!(!text.contains("bob"), "{text}");
    assert_eq!(seen[0].max_tokens, Some(super::render::SUMMARY_TOKENS));
}

#[tokio::test]
async fn failed_or_slow_summaries_fall_back_to_snippets() {
    let dir = tempfile::tempdir().unwrap();
    let (ctx, _, _) = setup(&dir).await;
    let failing = Arc::new(Summarizer::new(fake(Err(()), Duration::ZERO), Duration::from_secs(5)));
    let out = SessionSearchTool::new(Some(failing)).call(&ctx, json!({"query": "kayak"})).await.unwrap();
    assert!(out.contains("some summaries failed"), "{out}");
    assert!(out.contains("user: we pick the blue [kayak]") && !out.contains("Summary:"), "{out}");

    let slow = Arc::new(Summarizer::new(fake(Ok("late"), Duration::from_secs(30)), Duration::from_secs(60)));
    let tool = SessionSearchTool { wait: Duration::from_millis(200), ..SessionSearchTool::new(Some(slow)) };
    let started = std::time::Instant::now();
    let out = tool.call(&ctx, json!({"query": "kayak"})).await.unwrap();
    assert!(started.elapsed() < Duration::from_secs(10), "the wait bounds the call");
    assert!(out.contains("did not answer in time") && out.contains("[kayak]"), "{out}");
    assert!(!out.contains("late"), "{out}");
}
