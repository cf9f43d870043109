//! The failure rings around model calls: per-call retry with jittered exponential backoff that
//! honours Retry-After, stream-drop retry, and the fallback chain, all under one budget of
//! model time per turn. The runtime owns every retry; providers make single attempts.
//!
//! The budget counts only time spent in model calls and their retry waits: tool runs and
//! approval waits between calls never use it up, so a long tool-heavy turn is not cut short.
//!
//! A turn that falls back stays on the fallback; the next turn starts on the primary again
//! (each turn gets a fresh `ChainState`). Each answered call is priced with the prices of the
//! entry that served it.
//!
//! `ProviderChain` holds the providers and their `Prices`; `ChainState` is one turn's place in it:
//! the model time spent (`agent.model_deadline` is its budget), the calls, their `Usage` summed and
//! their `cost` (`turn_usage` gives the `TurnUsage`). A dropped stream is retried without repeating
//! the deltas already sent. Every answered call is counted in the token and cost metrics.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand::Rng;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::agent::provider::{ChatRequest, ChatResponse, Delta, DeltaSink, Provider, ProviderError, Usage};
use crate::metrics::Metrics;
use crate::usage::{Cost, ModelUse, Prices, TurnUsage, add_model_call};

/// Retry limits.
#[derive(Debug, Clone, Copy)]
pub struct RetryPolicy {
    /// Attempts per provider for a retryable failure.
    pub attempts: u32,
    /// First backoff.
    pub base_delay: Duration,
    /// Longest single backoff (a longer Retry-After moves on to the fallback instead).
    pub max_delay: Duration,
    /// Budget of model time for one turn: the time spent in model calls, retries, their waits
    /// and fallbacks, summed; time between calls (tools, approvals) does not count.
    pub deadline: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            attempts: 3,
            base_delay: Duration::from_secs(1),
            max_delay: Duration::from_secs(60),
            deadline: Duration::from_secs(600),
        }
    }
}

/// The primary provider and its fallbacks, in order.
#[derive(Clone)]
pub struct ProviderChain {
    providers: Vec<Arc<dyn Provider>>,
    /// Each provider's prices, in the same order.
    prices: Vec<Prices>,
    policy: RetryPolicy,
    metrics: Option<Arc<Metrics>>,
}

/// Where one turn is in the chain.
#[derive(Debug)]
pub struct ChainState {
    current: usize,
    /// Model time this turn has used so far.
    spent: Duration,
    /// Providers that failed over during this turn (for logs and `/status`).
    pub fallbacks: u32,
    /// Model calls that answered during this turn.
    pub calls: u64,
    /// Their usage, summed (calls that reported none add nothing).
    pub usage: Usage,
    /// Their cost, each priced by the entry that served it.
    pub cost: Cost,
    /// The same calls by the model that answered them.
    pub by_model: Vec<ModelUse>,
}

impl ChainState {
    /// What the model calls of this turn used so far.
    pub fn turn_usage(&self) -> TurnUsage {
        TurnUsage::of(self.calls, &self.usage, self.cost)
    }
}

/// Why a call through the chain failed.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    /// The last provider's error, after retries and fallbacks.
    #[error("{0}")]
    Provider(ProviderError),
    /// The turn's budget of model time ran out.
    #[error("no model answered within {}s of model time (last error: {last})", budget.as_secs())]
    Deadline {
        /// The budget.
        budget: Duration,
        /// The last failure seen.
        last: String,
    },
    /// The turn was stopped.
    #[error("stopped")]
    Cancelled,
}

enum Wait {
    Done,
    Cancelled,
    Deadline,
}

impl ProviderChain {
    /// A chain; `providers` must not be empty.
    pub fn new(providers: Vec<Arc<dyn Provider>>, policy: RetryPolicy) -> Self {
        assert!(!providers.is_empty(), "a provider chain needs at least one provider");
        let prices = vec![Prices::default(); providers.len()];
        Self { providers, prices, policy, metrics: None }
    }

    /// Price each provider's calls (`prices` in the providers' order; missing ones unpriced).
    pub fn with_prices(mut self, prices: Vec<Prices>) -> Self {
        let n = self.providers.len();
        self.prices = prices.into_iter().chain(std::iter::repeat(Prices::default())).take(n).collect();
        self
    }

    /// Record every model call's duration in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The primary provider.
    pub fn primary(&self) -> &Arc<dyn Provider> {
        &self.providers[0]
    }

    /// The model names of the chain, primary first.
    pub fn models(&self) -> Vec<String> {
        self.providers.iter().map(|p| p.model().to_owned()).collect()
    }

    /// The same chain with the provider serving `model` moved to the front (the others keep
    /// their order as its fallbacks); unchanged when no provider serves it.
    pub fn starting_with(&self, model: &str) -> ProviderChain {
        let (mut providers, mut prices) = (self.providers.clone(), self.prices.clone());
        if let Some(at) = providers.iter().position(|p| p.model() == model) {
            let chosen = providers.remove(at);
            providers.insert(0, chosen);
            let price = prices.remove(at);
            prices.insert(0, price);
        }
        ProviderChain { providers, prices, policy: self.policy, metrics: self.metrics.clone() }
    }

    /// A fresh per-turn state, starting on the primary.
    pub fn start_turn(&self) -> ChainState {
        ChainState {
            current: 0,
            spent: Duration::ZERO,
            fallbacks: 0,
            calls: 0,
            usage: Usage::default(),
            cost: Cost::default(),
            by_model: Vec::new(),
        }
    }

    /// Model time `state` has left.
    fn remaining(&self, state: &ChainState) -> Duration {
        self.policy.deadline.saturating_sub(state.spent)
    }

    /// The provider this turn is on now.
    pub fn current(&self, state: &ChainState) -> &Arc<dyn Provider> {
        &self.providers[state.current.min(self.providers.len() - 1)]
    }

    /// Move the turn to the next provider; false when there is none.
    pub fn advance(&self, state: &mut ChainState) -> bool {
        if state.current + 1 < self.providers.len() {
            state.current += 1;
            state.fallbacks += 1;
            tracing::warn!(model = self.current(state).model(), "falling back to the next provider");
            true
        } else {
            false
        }
    }

    /// One model call with retries and fallbacks. Deltas of a retried stream are not repeated:
    /// only text beyond what the user already saw is forwarded.
    pub async fn call(
        &self,
        state: &mut ChainState,
        request: &ChatRequest,
        deltas: Option<DeltaSink<'_>>,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, ChainError> {
        let forwarded = Mutex::new(String::new());
        loop {
            let provider = self.current(state).clone();
            let mut attempt = 0;
            let error = loop {
                attempt += 1;
                let seen = Mutex::new(String::new());
                let sink = |delta: Delta| forward_new(delta, &seen, &forwarded, deltas);
                let sink_ref: Option<DeltaSink<'_>> = deltas.map(|_| &sink as DeltaSink<'_>);
                let started = Instant::now();
                let out_of_time = started + self.remaining(state);
                let result = tokio::select! {
                    result = provider.complete(request, sink_ref) => {
                        if let Some(metrics) = &self.metrics {
                            metrics.observe_model_call(started.elapsed());
                        }
                        result
                    }
                    _ = cancel.cancelled() => {
                        state.spent += started.elapsed();
                        return Err(ChainError::Cancelled);
                    }
                    _ = tokio::time::sleep_until(out_of_time) => {
                        state.spent = self.policy.deadline;
                        return Err(ChainError::Deadline { budget: self.policy.deadline, last: "timed out".into() });
                    }
                };
                state.spent += started.elapsed();
                if let Some(metrics) = &self.metrics {
                    let error = result.as_ref().err().map(|e| crate::logging::mask(&e.to_string()));
                    metrics.note_model_call(provider.model(), crate::clock::now_ms(), started.elapsed(), error);
                }
                let error = match result {
                    Ok(response) => {
                        state.calls += 1;
                        if let Some(usage) = &response.usage {
                            state.usage.add(usage);
                        }
                        self.count_cost(state, response.usage.as_ref());
                        return Ok(response);
                    }
                    Err(e) => e,
                };
                tracing::warn!(model = provider.model(), attempt, error = %error, "model call failed");
                if !error.is_retryable() || attempt >= self.policy.attempts {
                    break error;
                }
                let delay = match &error {
                    ProviderError::RateLimited { retry_after: Some(after) } if *after > self.policy.max_delay => {
                        break error;
                    }
                    ProviderError::RateLimited { retry_after: Some(after) } => *after,
                    ProviderError::StreamDropped(_) => Duration::ZERO,
                    _ => self.backoff(attempt),
                };
                match self.wait(delay, state, cancel).await {
                    Wait::Done => {}
                    Wait::Cancelled => return Err(ChainError::Cancelled),
                    Wait::Deadline => {
                        return Err(ChainError::Deadline { budget: self.policy.deadline, last: error.to_string() });
                    }
                }
            };
            if !(error.warrants_fallback() && self.advance(state)) {
                return Err(ChainError::Provider(error));
            }
        }
    }

    /// Price an answered call with the entry that served it; count it in the metrics.
    fn count_cost(&self, state: &mut ChainState, usage: Option<&Usage>) {
        let prices = self.prices.get(state.current.min(self.prices.len().saturating_sub(1)));
        let picos = usage.zip(prices).and_then(|(usage, prices)| prices.cost(usage));
        state.cost.add_call(picos);
        if let Some(provider) = self.providers.get(state.current) {
            add_model_call(&mut state.by_model, provider.model(), usage, picos);
        }
        if let Some(metrics) = &self.metrics {
            let u = usage.copied().unwrap_or_default();
            let uncached = u.prompt_tokens.saturating_sub(u.cache_read_tokens.saturating_add(u.cache_write_tokens));
            let tokens = [
                ("input", uncached),
                ("cache_read", u.cache_read_tokens),
                ("cache_write", u.cache_write_tokens),
                ("output", u.completion_tokens),
            ];
            metrics.count_model_usage(&tokens, picos);
        }
    }

    fn backoff(&self, attempt: u32) -> Duration {
        let exp = self.policy.base_delay.saturating_mul(2u32.saturating_pow(attempt.saturating_sub(1)));
        let capped = exp.min(self.policy.max_delay);
        // Full jitter between half and all of the step keeps retries from synchronising.
        let jitter = rand::rng().random_range(0.5..=1.0);
        capped.mul_f64(jitter)
    }

    /// A backoff before a retry; it is part of getting an answer, so it counts as model time.
    async fn wait(&self, delay: Duration, state: &mut ChainState, cancel: &CancellationToken) -> Wait {
        if delay > self.remaining(state) {
            return Wait::Deadline;
        }
        let started = Instant::now();
        let outcome = tokio::select! {
            _ = tokio::time::sleep(delay) => Wait::Done,
            _ = cancel.cancelled() => Wait::Cancelled,
        };
        state.spent += started.elapsed();
        outcome
    }
}

/// Forward the part of an attempt's text that goes beyond what earlier attempts already sent.
fn forward_new(delta: Delta, seen: &Mutex<String>, forwarded: &Mutex<String>, sink: Option<DeltaSink<'_>>) {
    let Some(sink) = sink else { return };
    match delta {
        Delta::Reasoning(text) => sink(Delta::Reasoning(text)),
        Delta::Text(text) => {
            let mut seen = seen.lock().expect("delta lock poisoned");
            let mut forwarded = forwarded.lock().expect("delta lock poisoned");
            seen.push_str(&text);
            if seen.starts_with(forwarded.as_str()) {
                if seen.len() > forwarded.len() {
                    let fresh = seen[forwarded.len()..].to_owned();
                    forwarded.push_str(&fresh);
                    sink(Delta::Text(fresh));
                }
            } else if !forwarded.starts_with(seen.as_str()) {
                // The retry says something else than what the user already saw: text cannot be
                // taken back, so start the new answer on a fresh paragraph.
                sink(Delta::Text(format!("\n\n{seen}")));
                *forwarded = seen.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests;
