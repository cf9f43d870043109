//! The API's request rate limit: a keyed GCRA (governor) per API key, or per client address when
//! the request carries no valid key. Over the limit: 429 with `Retry-After`.
//!
//! The keyed state is bounded: idle keys are dropped every so often, and when the table is
//! still full, new clients share one overflow bucket rather than growing it.
//!
//! `ApiRateLimit` is the limiter.

use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use serde_json::json;

/// Most distinct clients tracked at once.
const MAX_KEYS: usize = 10_000;
/// Requests between two sweeps of idle keys.
const SWEEP_EVERY: u64 = 1024;

/// Who a request is counted against.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RateKey {
    /// The holder of the API key.
    ApiKey,
    /// A client without a valid key, by address.
    Client(IpAddr),
    /// New clients while the table is full.
    Overflow,
}

/// The limiter shared by the API routes.
pub struct ApiRateLimit {
    limiter: DefaultKeyedRateLimiter<RateKey>,
    clock: DefaultClock,
    seen: AtomicU64,
}

impl ApiRateLimit {
    /// A limit of `per_minute` requests per key (bursts up to the same number); `None` when 0.
    pub fn new(per_minute: u32) -> Option<Arc<Self>> {
        let quota = Quota::per_minute(NonZeroU32::new(per_minute)?);
        let clock = DefaultClock::default();
        Some(Arc::new(Self {
            limiter: RateLimiter::hashmap_with_clock(quota, clock.clone()),
            clock,
            seen: AtomicU64::new(0),
        }))
    }

    /// `Ok` when `key` may make a request now, else how long until it may.
    pub fn check(&self, key: RateKey) -> Result<(), std::time::Duration> {
        if self.seen.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
        }
        let key = if self.limiter.len() >= MAX_KEYS && key != RateKey::ApiKey {
            self.limiter.retain_recent();
            if self.limiter.len() >= MAX_KEYS { RateKey::Overflow } else { key }
        } else {
            key
        };
        self.limiter.check_key(&key).map_err(|not_until| not_until.wait_time_from(self.clock.now()))
    }

    /// Keys tracked now.
    pub fn tracked(&self) -> usize {
        self.limiter.len()
    }
}

/// State of the rate-limit middleware.
#[derive(Clone)]
pub(super) struct RateState {
    /// The limiter.
    pub(super) limit: Arc<ApiRateLimit>,
    /// Whether a request carries the configured API key.
    pub(super) authorized: Arc<dyn Fn(&axum::http::HeaderMap) -> bool + Send + Sync>,
}

/// The middleware: count the request against its key and refuse it with 429 when over.
pub(super) async fn rate_limit(State(state): State<RateState>, request: Request, next: Next) -> Response {
    let key = if (state.authorized)(request.headers()) {
        RateKey::ApiKey
    } else {
        match super::serve::client_addr(request.extensions()) {
            Some(addr) => RateKey::Client(addr.ip()),
            None => RateKey::Overflow,
        }
    };
    match state.limit.check(key) {
        Ok(()) => next.run(request).await,
        Err(wait) => {
            let seconds = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            let body = json!({ "error": {
                "message": format!("rate limit exceeded; retry in {seconds}s"),
                "type": "rate_limit_error",
                "code": "rate_limited",
            }});
            let mut response = (StatusCode::TOO_MANY_REQUESTS, Json(body)).into_response();
            response.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from(seconds.max(1)));
            response
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_over_its_quota_is_told_when_to_retry() {
        let limit = ApiRateLimit::new(2).expect("a limit");
        let client = RateKey::Client("127.0.0.1".parse().unwrap());
        assert!(limit.check(client.clone()).is_ok());
        assert!(limit.check(client.clone()).is_ok());
        let wait = limit.check(client).expect_err("third within the minute is refused");
        assert!(wait.as_secs() >= 20 && wait.as_secs() <= 30, "{wait:?}");
        assert!(limit.check(RateKey::ApiKey).is_ok(), "other keys have their own quota");
        assert!(ApiRateLimit::new(0).is_none());
    }

    #[test]
    fn the_table_never_grows_past_its_cap() {
        let limit = ApiRateLimit::new(1).expect("a limit");
        for i in 0..(MAX_KEYS as u32 + 50) {
            let _ = limit.check(RateKey::Client(IpAddr::from(i.to_be_bytes())));
        }
        assert!(limit.tracked() <= MAX_KEYS + 1, "{}", limit.tracked());
    }
}
