//! The adapter's health: a signature-valid webhook proves Meta reaches us, and a periodic check
//! of the token against the Graph API proves we can answer. A quiet number is not a broken one:
//! without traffic the token check alone keeps it healthy; a refused token makes it unhealthy at
//! once, whatever arrives.
//!
//! `run` checks the token every `token_check_interval` (`GET /{version}/{phone-number-id}`).
//! Progress (`hermesd_platform::health`) is the later of the last signed webhook and the last
//! check while the token is valid.

use std::ops::Deref;
use std::time::Duration;

use hermesd_platform::PlatformHealth;
use hermesd_platform::health::{Health, Progress};
use tokio::time::Instant;

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

/// WhatsApp's own facts.
#[derive(Debug, Default)]
pub(crate) struct Own {
    token: Token,
    last_webhook: Option<Instant>,
}

/// Written by the webhook handler and the token check, read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    /// A signed webhook within this long keeps an unreachable Graph from counting as down.
    fresh: Duration,
    health: Health<Own>,
}

impl Deref for HealthTracker {
    type Target = Health<Own>;

    fn deref(&self) -> &Health<Own> {
        &self.health
    }
}

impl HealthTracker {
    pub(crate) fn new(check_interval: Duration) -> Self {
        Self { fresh: check_interval * 2, health: Health::default() }
    }

    /// A webhook with a valid signature arrived.
    pub(crate) fn signed_webhook(&self) {
        self.health.with(|state| {
            state.own.last_webhook = Some(Instant::now());
            state.last_progress = state.own.last_webhook;
        });
    }

    pub(crate) fn token_valid(&self) {
        self.health.with(|state| {
            state.own.token = Token::Valid;
            state.last_progress = Some(Instant::now());
        });
    }

    pub(crate) fn token_refused(&self, detail: String) {
        self.health.with(|state| Self::checked(state, Token::Refused(detail)));
    }

    pub(crate) fn token_unreachable(&self, detail: String) {
        self.health.with(|state| Self::checked(state, Token::Unreachable(detail)));
    }

    /// A failed check: only webhooks count as progress until the token is valid again.
    fn checked(state: &mut Progress<Own>, token: Token) {
        state.own.token = token;
        state.last_progress = state.own.last_webhook;
    }

    /// Whether the last check found the token refused.
    pub(crate) fn refused(&self) -> bool {
        self.health.with(|state| matches!(state.own.token, Token::Refused(_)))
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        self.health.report(|state| {
            let webhook_age = state.own.last_webhook.map(|at| at.elapsed());
            let webhooks = match webhook_age {
                Some(age) => format!("last signed webhook {:.1} s ago", age.as_secs_f64()),
                None => "no webhook yet".to_owned(),
            };
            match &state.own.token {
                Token::Pending => (false, "starting: access token check pending".to_owned()),
                Token::Valid => (true, format!("access token valid; {webhooks}")),
                Token::Refused(why) => (false, format!("the graph api refused the access token: {why}")),
                Token::Unreachable(why) => {
                    let fresh = webhook_age.is_some_and(|age| age < self.fresh);
                    (fresh, format!("access token check failing ({why}); {webhooks}"))
                }
            }
        })
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
