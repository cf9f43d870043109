//! Webhook routes at run time: each `[[webhooks]]` table with its secret read from the
//! environment, its per-route rate limit, and the rules that pick the signature scheme and the
//! delivery id from a request's headers. No IO besides reading the secret at build time.
//!
//! A route's rate limit is a sliding minute. `replay_key` is the hash of what a request's signature
//! covers, the handler's replay guard.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};

use super::signature::Scheme;
use crate::config::{Env, Secret, WebhookConfig};

/// The window the per-route rate limit counts over.
const WINDOW: Duration = Duration::from_secs(60);
/// Headers that carry a sender's delivery id, in order of preference.
const DELIVERY_HEADERS: [&str; 5] =
    ["x-github-delivery", "x-gitlab-event-uuid", "x-request-id", "x-webhook-id", "x-delivery-id"];
/// The longest delivery id kept; longer ones are hashed.
const MAX_DELIVERY_ID: usize = 128;

/// A configured route, ready to serve.
pub struct WebhookRoute {
    /// The route's config.
    pub config: WebhookConfig,
    /// Its signing secret.
    pub secret: Secret,
    limiter: Mutex<VecDeque<Instant>>,
}

impl std::fmt::Debug for WebhookRoute {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookRoute").field("route", &self.config.route).finish_non_exhaustive()
    }
}

impl WebhookRoute {
    /// Take one slot of the route's rate limit; `Err` holds how long until one frees up.
    pub fn admit(&self, now: Instant) -> Result<(), Duration> {
        let mut recent = self.limiter.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while recent.front().is_some_and(|t| now.saturating_duration_since(*t) >= WINDOW) {
            recent.pop_front();
        }
        let limit = usize::try_from(self.config.rate_limit_per_minute).unwrap_or(usize::MAX).max(1);
        if recent.len() >= limit {
            let oldest = recent.front().copied().unwrap_or(now);
            return Err(WINDOW.saturating_sub(now.saturating_duration_since(oldest)).max(Duration::from_secs(1)));
        }
        recent.push_back(now);
        Ok(())
    }

    /// Whether the route acts on `event_type`.
    pub fn wants(&self, event_type: &str) -> bool {
        self.config.events.is_empty() || self.config.events.iter().any(|e| e == event_type || e == "*")
    }
}

/// Every configured route, by name.
#[derive(Debug, Default)]
pub struct WebhookRoutes {
    routes: HashMap<String, std::sync::Arc<WebhookRoute>>,
}

impl WebhookRoutes {
    /// Routes from config, with secrets from `env`. Validation has checked that each is set.
    pub fn build(configs: &[WebhookConfig], env: &Env) -> Result<Self, String> {
        let mut routes = HashMap::new();
        for config in configs {
            let secret = env
                .secret(&config.secret_env)?
                .ok_or_else(|| format!("webhooks: {} is not set for route {}", config.secret_env, config.route))?;
            let route = WebhookRoute { config: config.clone(), secret, limiter: Mutex::new(VecDeque::new()) };
            routes.insert(config.route.clone(), std::sync::Arc::new(route));
        }
        Ok(Self { routes })
    }

    /// A route by name.
    pub fn get(&self, name: &str) -> Option<&std::sync::Arc<WebhookRoute>> {
        self.routes.get(name)
    }

    /// Whether any route is configured.
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
}

/// The scheme a request signs with, by the header it carries; `None`: unsigned.
pub fn scheme_of(headers: &impl Fn(&str) -> Option<String>) -> Option<Scheme> {
    if headers("x-hub-signature-256").is_some() {
        Some(Scheme::GitHub)
    } else if headers("x-gitlab-token").is_some() {
        Some(Scheme::GitLab)
    } else if headers("x-webhook-signature").is_some() {
        Some(Scheme::Generic)
    } else {
        None
    }
}

/// The delivery's replay key: a hash of what its signature covers — the body, and for the generic
/// scheme the timestamp and the body. The delivery id travels in a header no scheme signs, so a
/// replay could change it at will; this key it cannot change without breaking the signature.
pub fn replay_key(scheme: Scheme, headers: &impl Fn(&str) -> Option<String>, body: &[u8]) -> String {
    let mut hash = Sha256::new();
    match scheme {
        Scheme::GitHub => hash.update(b"github\0"),
        Scheme::GitLab => hash.update(b"gitlab\0"),
        Scheme::Generic => {
            hash.update(b"generic\0");
            // Signed as sent, so hashed as sent (trimmed, like the verifier).
            hash.update(headers("x-webhook-timestamp").unwrap_or_default().trim().as_bytes());
            hash.update(b".");
        }
    }
    hash.update(body);
    let digest = hash.finalize();
    format!("sha256:{}", digest.iter().map(|b| format!("{b:02x}")).collect::<String>())
}

/// The delivery's idempotency key: the sender's delivery id header, else a hash of what was
/// signed (a byte-identical retry is the same delivery).
pub fn delivery_id(headers: &impl Fn(&str) -> Option<String>, body: &[u8]) -> String {
    let given = DELIVERY_HEADERS
        .iter()
        .filter_map(|name| headers(name))
        .map(|v| v.trim().to_owned())
        .find(|v| !v.is_empty() && v.chars().all(|c| c.is_ascii_graphic()));
    match given {
        Some(id) if id.len() <= MAX_DELIVERY_ID => id,
        other => {
            let mut hash = Sha256::new();
            if let Some(id) = other {
                hash.update(id.as_bytes());
            }
            hash.update(headers("x-webhook-timestamp").unwrap_or_default().as_bytes());
            hash.update(body);
            let digest = hash.finalize();
            format!("sha256:{}", digest.iter().take(16).map(|b| format!("{b:02x}")).collect::<String>())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn route(rate: u32, events: &[&str]) -> WebhookRoute {
        WebhookRoute {
            config: WebhookConfig {
                route: "r".into(),
                secret_env: "S".into(),
                prompt: "p".into(),
                deliver: "local".into(),
                events: events.iter().map(|e| (*e).to_owned()).collect(),
                deliver_only: false,
                rate_limit_per_minute: rate,
                max_body_bytes: 1024,
                max_value_chars: 100,
                profile: None,
            },
            secret: Secret::new("0123456789"),
            limiter: Mutex::new(VecDeque::new()),
        }
    }

    #[test]
    fn rate_limit_counts_a_sliding_minute() {
        let route = route(2, &[]);
        let t0 = Instant::now();
        assert!(route.admit(t0).is_ok());
        assert!(route.admit(t0 + Duration::from_secs(1)).is_ok());
        let wait = route.admit(t0 + Duration::from_secs(2)).unwrap_err();
        assert_eq!(wait, Duration::from_secs(58));
        assert!(route.admit(t0 + Duration::from_secs(60)).is_ok());
    }

    #[test]
    fn event_filters() {
        assert!(route(1, &[]).wants("push"));
        assert!(route(1, &["push"]).wants("push"));
        assert!(!route(1, &["push"]).wants("issues"));
    }

    #[test]
    fn delivery_ids_from_headers_or_body() {
        let none = |_: &str| None;
        let github = |n: &str| (n == "x-github-delivery").then(|| "abc-123".to_owned());
        assert_eq!(delivery_id(&github, b"{}"), "abc-123");
        let a = delivery_id(&none, b"{\"a\":1}");
        assert_eq!(a, delivery_id(&none, b"{\"a\":1}"));
        assert_ne!(a, delivery_id(&none, b"{\"a\":2}"));
        let long = |n: &str| (n == "x-request-id").then(|| "x".repeat(500));
        assert!(delivery_id(&long, b"").starts_with("sha256:"));
    }

    #[test]
    fn scheme_by_header() {
        assert_eq!(scheme_of(&|n: &str| (n == "x-gitlab-token").then(String::new)), Some(Scheme::GitLab));
        assert_eq!(scheme_of(&|_: &str| None), None);
    }
}
