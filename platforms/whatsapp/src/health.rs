//! The adapter's health: a signature-valid webhook proves Meta reaches us, and a periodic check
//! of the token against the Graph API proves we can answer. A quiet number is not a broken one:
//! without traffic the token check alone keeps it healthy; a refused token makes it unhealthy at
//! once, whatever arrives.
//!
//! `run` checks the token every `token_check_interval` (`GET /{version}/{phone-number-id}`).

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use hermesd_platform::PlatformHealth;

#[derive(Debug, Default)]
enum Token {
    /// Not checked yet.
    #[default]
    Pending,
    /// The last check passed.
    Valid,
    /// Graph refused the token; only a new token helps.
    Refused(String),
    /// The check failed for another reason (network, 5xx).
    Unreachable(String),
}

#[derive(Debug, Default)]
struct State {
    started: bool,
    token: Token,
    last_check: Option<Instant>,
    last_webhook: Option<Instant>,
}

/// Written by the webhook handler and the token check, read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    /// A signed webhook within this long keeps an unreachable Graph from counting as down.
    fresh: Duration,
    state: Mutex<State>,
}

impl HealthTracker {
    pub(crate) fn new(check_interval: Duration) -> Self {
        Self { fresh: check_interval * 2, state: Mutex::default() }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn started(&self) {
        self.lock().started = true;
    }

    /// A webhook with a valid signature arrived.
    pub(crate) fn signed_webhook(&self) {
        self.lock().last_webhook = Some(Instant::now());
    }

    pub(crate) fn token_valid(&self) {
        let mut state = self.lock();
        state.token = Token::Valid;
        state.last_check = Some(Instant::now());
    }

    pub(crate) fn token_refused(&self, detail: String) {
        let mut state = self.lock();
        state.token = Token::Refused(detail);
        state.last_check = Some(Instant::now());
    }

    pub(crate) fn token_unreachable(&self, detail: String) {
        let mut state = self.lock();
        state.token = Token::Unreachable(detail);
        state.last_check = Some(Instant::now());
    }

    /// Whether the last check found the token refused.
    pub(crate) fn refused(&self) -> bool {
        matches!(self.lock().token, Token::Refused(_))
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        let state = self.lock();
        if !state.started {
            return None;
        }
        let webhook_age = state.last_webhook.map(|at| at.elapsed());
        let progress = [state.last_webhook, state.last_check.filter(|_| matches!(state.token, Token::Valid))]
            .into_iter()
            .flatten()
            .max();
        let since = progress.map(|at| at.elapsed().as_secs_f64());
        let webhooks = match webhook_age {
            Some(age) => format!("last signed webhook {:.1} s ago", age.as_secs_f64()),
            None => "no webhook yet".to_owned(),
        };
        let (healthy, detail) = match &state.token {
            Token::Pending => (false, "starting: access token check pending".to_owned()),
            Token::Valid => (true, format!("access token valid; {webhooks}")),
            Token::Refused(why) => (false, format!("the graph api refused the access token: {why}")),
            Token::Unreachable(why) => {
                let fresh = webhook_age.is_some_and(|age| age < self.fresh);
                (fresh, format!("access token check failing ({why}); {webhooks}"))
            }
        };
        Some(PlatformHealth { healthy, seconds_since_progress: since, detail })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_number_with_a_valid_token_is_healthy_and_a_refused_token_is_not() {
        let health = HealthTracker::new(Duration::from_secs(300));
        assert_eq!(health.report(), None, "not started");
        health.started();
        assert!(!health.report().unwrap().healthy, "pending check");
        health.token_valid();
        let report = health.report().unwrap();
        assert!(report.healthy && report.detail.contains("no webhook yet"), "{report:?}");
        health.token_unreachable("graph api timed out".into());
        assert!(!health.report().unwrap().healthy, "no webhook proves the number works");
        health.signed_webhook();
        assert!(health.report().unwrap().healthy, "webhooks arrive: a graph hiccup is not an outage");
        health.token_refused("code 190".into());
        let report = health.report().unwrap();
        assert!(!report.healthy && report.detail.contains("refused"), "{report:?}");
        assert!(health.refused());
    }
}
