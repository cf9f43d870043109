//! Chain tests with scripted in-memory providers and paused time, so waits are measured exactly.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ChainError, ProviderChain, RetryPolicy};
use crate::agent::provider::{ChatRequest, ChatResponse, Delta, DeltaSink, Provider, ProviderError};
use crate::vocab::message::{Message, Role};

type Step = Result<&'static str, ProviderError>;

struct Scripted {
    name: &'static str,
    steps: Mutex<VecDeque<(Vec<&'static str>, Step)>>,
    calls: Mutex<Vec<Instant>>,
}

impl Scripted {
    fn new(name: &'static str, steps: Vec<Step>) -> Arc<Self> {
        Self::streaming(name, steps.into_iter().map(|s| (vec![], s)).collect())
    }

    fn streaming(name: &'static str, steps: Vec<(Vec<&'static str>, Step)>) -> Arc<Self> {
        Arc::new(Self { name, steps: Mutex::new(steps.into()), calls: Mutex::default() })
    }

    fn calls(&self) -> Vec<Instant> {
        self.calls.lock().unwrap().clone()
    }
}

#[async_trait]
impl Provider for Scripted {
    fn model(&self) -> &str {
        self.name
    }

    fn context_length(&self) -> u64 {
        10_000
    }

    async fn complete(
        &self,
        _request: &ChatRequest,
        deltas: Option<DeltaSink<'_>>,
    ) -> Result<ChatResponse, ProviderError> {
        self.calls.lock().unwrap().push(Instant::now());
        let (chunks, step) = self.steps.lock().unwrap().pop_front().unwrap_or((vec![], Ok("default")));
        if let Some(sink) = deltas {
            for chunk in chunks {
                sink(Delta::Text(chunk.into()));
            }
        }
        step.map(|text| ChatResponse {
            message: Message::text(Role::Assistant, format!("{}: {text}", self.name)),
            usage: None,
            finish_reason: Some("stop".into()),
            reasoning: None,
        })
    }
}

fn policy() -> RetryPolicy {
    RetryPolicy {
        attempts: 3,
        base_delay: Duration::from_secs(1),
        max_delay: Duration::from_secs(60),
        deadline: Duration::from_secs(300),
    }
}

fn text(response: &ChatResponse) -> &str {
    response.message.content.as_deref().unwrap()
}

#[tokio::test(start_paused = true)]
async fn rate_limit_waits_exactly_retry_after() {
    let primary = Scripted::new(
        "p",
        vec![Err(ProviderError::RateLimited { retry_after: Some(Duration::from_secs(7)) }), Ok("hi")],
    );
    let chain = ProviderChain::new(vec![primary.clone()], policy());
    let mut state = chain.start_turn();
    let response = chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    assert_eq!(text(&response), "p: hi");
    let calls = primary.calls();
    assert_eq!(calls[1] - calls[0], Duration::from_secs(7));
}

#[tokio::test(start_paused = true)]
async fn repeated_5xx_falls_back_and_next_turn_starts_on_primary() {
    let down = || Err(ProviderError::Transient("HTTP 500".into()));
    let primary = Scripted::new("primary", vec![down(), down(), down(), Ok("back")]);
    let fallback = Scripted::new("fallback", vec![Ok("saved the day")]);
    let chain = ProviderChain::new(vec![primary.clone(), fallback.clone()], policy());
    let mut state = chain.start_turn();
    let started = Instant::now();
    let response = chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    assert_eq!(text(&response), "fallback: saved the day");
    assert_eq!(primary.calls().len(), 3);
    assert_eq!(state.fallbacks, 1);
    // Backoff with jitter: between half and all of 1 s + 2 s.
    let waited = Instant::now() - started;
    assert!(waited >= Duration::from_millis(1500) && waited <= Duration::from_secs(3), "{waited:?}");
    // The turn stays on the fallback; the next turn starts on the primary.
    assert_eq!(chain.current(&state).model(), "fallback");
    let mut next = chain.start_turn();
    let response = chain.call(&mut next, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    assert_eq!(text(&response), "primary: back");
}

#[tokio::test(start_paused = true)]
async fn auth_errors_fall_back_at_once_and_permanent_errors_do_not() {
    let primary =
        Scripted::new("p", vec![Err(ProviderError::Unauthorized(401)), Err(ProviderError::Permanent("bad".into()))]);
    let fallback = Scripted::new("f", vec![Ok("ok"), Err(ProviderError::Permanent("bad model".into()))]);
    let chain = ProviderChain::new(vec![primary.clone(), fallback.clone()], policy());
    let mut state = chain.start_turn();
    let response = chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    assert_eq!(text(&response), "f: ok");
    assert_eq!(primary.calls().len(), 1);
    let mut state = chain.start_turn();
    let err = chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap_err();
    assert!(matches!(err, ChainError::Provider(ProviderError::Permanent(_))), "{err}");
    assert_eq!(fallback.calls().len(), 1, "a permanent error does not fall back");
}

#[tokio::test(start_paused = true)]
async fn cumulative_deadline_bounds_everything() {
    let slow_limit = || Err(ProviderError::RateLimited { retry_after: Some(Duration::from_secs(50)) });
    let primary = Scripted::new("p", vec![slow_limit(), slow_limit(), slow_limit()]);
    let policy = RetryPolicy { deadline: Duration::from_secs(90), ..policy() };
    let chain = ProviderChain::new(vec![primary], policy);
    let mut state = chain.start_turn();
    let started = Instant::now();
    let err = chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap_err();
    assert!(matches!(err, ChainError::Deadline { .. }), "{err}");
    assert!(err.to_string().contains("rate limited"), "{err}");
    assert!(Instant::now() - started <= Duration::from_secs(90));
}

/// A provider that takes `latency` to answer each call (paused time makes it exact).
struct Slow {
    latency: Duration,
}

#[async_trait]
impl Provider for Slow {
    fn model(&self) -> &str {
        "slow"
    }

    fn context_length(&self) -> u64 {
        10_000
    }

    async fn complete(&self, _: &ChatRequest, _: Option<DeltaSink<'_>>) -> Result<ChatResponse, ProviderError> {
        tokio::time::sleep(self.latency).await;
        Ok(ChatResponse {
            message: Message::text(Role::Assistant, "ok"),
            usage: None,
            finish_reason: Some("stop".into()),
            reasoning: None,
        })
    }
}

#[tokio::test(start_paused = true)]
async fn time_between_calls_does_not_use_the_model_budget() {
    // A 2 s budget, three calls of 0.6 s each, and 5 s of tool runs after each: the turn's
    // wall time is far past the budget, its model time (1.8 s) is not.
    let policy = RetryPolicy { deadline: Duration::from_secs(2), ..policy() };
    let chain = ProviderChain::new(vec![Arc::new(Slow { latency: Duration::from_millis(600) })], policy);
    let mut state = chain.start_turn();
    let started = Instant::now();
    for _ in 0..3 {
        chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
    assert!(Instant::now() - started >= Duration::from_secs(16));
    // Model time is summed: a fourth call has 0.2 s left and is cut there.
    let before = Instant::now();
    let err = chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap_err();
    assert_eq!(Instant::now() - before, Duration::from_millis(200));
    assert!(matches!(err, ChainError::Deadline { .. }), "{err}");
}

#[tokio::test(start_paused = true)]
async fn dropped_stream_is_retried_without_repeating_deltas() {
    let primary = Scripted::streaming(
        "p",
        vec![
            (vec!["Hel", "lo wo"], Err(ProviderError::StreamDropped("eof".into()))),
            (vec!["Hel", "lo wo", "rld"], Ok("Hello world")),
        ],
    );
    let chain = ProviderChain::new(vec![primary.clone()], policy());
    let mut state = chain.start_turn();
    let seen = Mutex::new(String::new());
    let sink = |d: Delta| {
        if let Delta::Text(t) = d {
            seen.lock().unwrap().push_str(&t);
        }
    };
    let request = ChatRequest { stream: true, ..Default::default() };
    chain.call(&mut state, &request, Some(&sink), &CancellationToken::new()).await.unwrap();
    assert_eq!(primary.calls().len(), 2);
    assert_eq!(seen.into_inner().unwrap(), "Hello world");
}

#[tokio::test(start_paused = true)]
async fn cancel_interrupts_a_backoff() {
    let primary =
        Scripted::new("p", vec![Err(ProviderError::RateLimited { retry_after: Some(Duration::from_secs(30)) })]);
    let chain = ProviderChain::new(vec![primary], policy());
    let cancel = CancellationToken::new();
    let stopper = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        stopper.cancel();
    });
    let mut state = chain.start_turn();
    let started = Instant::now();
    let err = chain.call(&mut state, &ChatRequest::default(), None, &cancel).await.unwrap_err();
    assert!(matches!(err, ChainError::Cancelled));
    assert_eq!(Instant::now() - started, Duration::from_secs(2));
}

/// Answers every call with 1000 prompt (400 cached) and 100 completion tokens.
struct Metered(&'static str);

#[async_trait]
impl Provider for Metered {
    fn model(&self) -> &str {
        self.0
    }

    fn context_length(&self) -> u64 {
        10_000
    }

    async fn complete(&self, _: &ChatRequest, _: Option<DeltaSink<'_>>) -> Result<ChatResponse, ProviderError> {
        let usage = crate::agent::provider::Usage {
            prompt_tokens: 1000,
            completion_tokens: 100,
            cache_read_tokens: 400,
            cache_write_tokens: 0,
        };
        Ok(ChatResponse {
            message: Message::text(Role::Assistant, "ok"),
            usage: Some(usage),
            finish_reason: Some("stop".into()),
            reasoning: None,
        })
    }
}

#[tokio::test]
async fn each_call_is_priced_by_the_entry_that_served_it() {
    use crate::config::ModelPrices;
    use crate::usage::Prices;
    let price = |input, output| {
        Prices::from_config(&ModelPrices { input: Some(input), output: Some(output), ..Default::default() })
    };
    let primary = Scripted::new("p", vec![Err(ProviderError::Unauthorized(401))]);
    let chain = ProviderChain::new(vec![primary, Arc::new(Metered("f")), Arc::new(Metered("free"))], policy())
        .with_prices(vec![price(100.0, 100.0), price(1.0, 2.0)]);
    let mut state = chain.start_turn();
    chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    // The fallback's prices: 1000 prompt tokens (cached ones at the input price) × $1 + 100 × $2
    // per million = $0.0012.
    assert_eq!((state.cost.micros(), state.cost.unpriced_calls), (1_200, 0));
    // The call is the fallback's: the primary that failed answered nothing.
    let by_model: Vec<(&str, u64, u64, i64)> = state
        .by_model
        .iter()
        .map(|m| (m.model.as_str(), m.usage.tokens.calls, m.usage.tokens.prompt, m.usage.cost.micros()))
        .collect();
    assert_eq!(by_model, [("f", 1, 1000, 1_200)]);
    chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    assert_eq!((state.by_model.len(), state.by_model[0].usage.tokens.calls), (1, 2), "one row per model");

    // A chain started on the unpriced entry counts its call as unpriced, never as free.
    let chain = chain.starting_with("free");
    let mut state = chain.start_turn();
    chain.call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    assert_eq!((state.cost.micros(), state.cost.unpriced_calls), (0, 1));
    // Moving an entry to the front moves its prices with it.
    let mut state = chain.starting_with("f").start_turn();
    chain.starting_with("f").call(&mut state, &ChatRequest::default(), None, &CancellationToken::new()).await.unwrap();
    assert_eq!(state.cost.micros(), 1_200);
}
