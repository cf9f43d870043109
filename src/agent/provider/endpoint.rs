//! What the three providers share: one HTTP endpoint with its model, key, timeout, context
//! length and vision, and the call that sends a body and turns a failure status into a
//! `ProviderError` through the provider's own classification. Each provider adds its wire format;
//! none logs its key.

use std::time::Duration;

use serde::Serialize;

use super::ProviderError;
use crate::config::Secret;

/// One model endpoint.
pub(super) struct Endpoint {
    http: reqwest::Client,
    url: String,
    /// The model's name, sent in every request.
    pub(super) model: String,
    key: Option<Secret>,
    timeout: Duration,
    /// The model's context window, in tokens.
    pub(super) context_length: u64,
    /// Images are sent as image parts (the model has vision).
    pub(super) vision: bool,
}

/// How a provider sends its key.
pub(super) enum KeyHeader {
    /// `Authorization: Bearer <key>`.
    Bearer,
    /// A header of its own (`x-api-key`).
    Named(&'static str),
}

/// A provider's reading of a failed call: the status, its Retry-After and the body.
pub(super) type Classify = fn(u16, Option<Duration>, &str) -> ProviderError;

impl Endpoint {
    /// The endpoint at `url` for `model`.
    pub(super) fn new(
        http: reqwest::Client,
        url: String,
        model: &str,
        key: Option<Secret>,
        timeout: Duration,
        context_length: u64,
    ) -> Self {
        Self { http, url, model: model.to_owned(), key, timeout, context_length, vision: false }
    }

    /// Send `body` (asking for an event stream when `stream`) with the key in `key_header` and
    /// the fixed `headers`; a non-success status is read and classified by `classify`.
    pub(super) async fn send<B: Serialize + Sync + ?Sized>(
        &self,
        body: &B,
        stream: bool,
        key_header: KeyHeader,
        headers: &[(&'static str, &'static str)],
        classify: Classify,
    ) -> Result<reqwest::Response, ProviderError> {
        let mut call = self.http.post(&self.url).json(body).timeout(self.timeout);
        for (name, value) in headers {
            call = call.header(*name, *value);
        }
        if stream {
            call = call.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        if let Some(key) = &self.key {
            call = match key_header {
                KeyHeader::Bearer => call.bearer_auth(key.expose()),
                KeyHeader::Named(name) => call.header(name, key.expose()),
            };
        }
        let response = call.send().await.map_err(transport_error)?;
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let retry_after = parse_retry_after(response.headers());
        let text = response.text().await.map_err(transport_error)?;
        Err(classify(status, retry_after, &text))
    }
}

/// Longest Retry-After taken as given; a longer one (which the runtime's deadline would refuse
/// anyway) is clamped, since `Duration::from_secs_f64` panics past `u64::MAX` seconds.
const MAX_RETRY_AFTER_SECS: f64 = 3600.0;

/// The Retry-After header in seconds (HTTP dates are not used by model APIs); negative, NaN and
/// infinite values are ignored, huge ones clamped to an hour.
pub(super) fn parse_retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs = value.trim().parse::<f64>().ok().filter(|s| s.is_finite() && *s >= 0.0)?;
    Some(Duration::from_secs_f64(secs.min(MAX_RETRY_AFTER_SECS)))
}

/// A failure to send or to read a reply. reqwest errors can carry the URL but never headers, so
/// the key cannot leak through them; the URL is dropped anyway.
pub(super) fn transport_error(error: reqwest::Error) -> ProviderError {
    if error.is_timeout() {
        ProviderError::Transient("request timed out".into())
    } else {
        ProviderError::Transient(format!("request failed: {}", error.without_url()))
    }
}

/// Whether a reply is plain JSON although a stream was asked for (some servers ignore `stream`).
pub(super) fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"))
}
