//! The Graph API client: one reqwest client (ring-only TLS, per-call timeout), the bearer token
//! only in the `Authorization` header, and Graph's errors mapped to the host's kinds.
//!
//! Rate limits (HTTP 429, codes 130429 throughput, 131056 pair rate, 80007 account, 4 and 613
//! app) become `RateLimited` with Graph's `Retry-After` when it sends one, else a per-code
//! default; a refused token (190, HTTP 401) `Unauthorized`; 5xx and Graph's "try again" codes
//! `Transient`; everything else `Permanent`, with the code in the text.
//!
//! 131047 (a free-form message outside the 24-hour window) is `Permanent`, its text naming the
//! window.

use std::time::Duration;

use hermesd_platform::{PlatformError, Redactor, clamp_retry_after};
use serde::Deserialize;
use serde_json::Value;

/// Graph's re-engagement error: a free-form message outside the 24-hour window.
pub(crate) const REENGAGEMENT_CODE: i64 = 131_047;

/// A Graph API client bound to one base URL and token.
#[derive(Clone)]
pub(crate) struct Graph {
    http: reqwest::Client,
    /// `{api_url}/{api_version}`.
    base: String,
    token: String,
    redactor: Redactor,
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Graph").field("base", &self.base).finish_non_exhaustive()
    }
}

/// Graph's error object (`{"error": {...}}`).
#[derive(Debug, Default, Deserialize)]
struct GraphError {
    #[serde(default)]
    message: String,
    #[serde(default)]
    code: i64,
    #[serde(default)]
    error_data: Option<ErrorData>,
}

#[derive(Debug, Default, Deserialize)]
struct ErrorData {
    #[serde(default)]
    details: String,
}

#[derive(Debug, Deserialize)]
struct ErrorBody {
    error: GraphError,
}

impl Graph {
    /// A client for `base` with `token`; fails only when no TLS client can be built.
    pub(crate) fn new(base: String, token: &str, timeout: Duration, redactor: Redactor) -> Result<Self, String> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(Duration::from_secs(10))
            .pool_idle_timeout(hermesd_platform::HTTP_POOL_IDLE_TIMEOUT)
            .pool_max_idle_per_host(hermesd_platform::HTTP_POOL_MAX_IDLE_PER_HOST)
            // Graph never redirects API calls; a redirect would carry the token elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| format!("build http client: {e}"))?;
        Ok(Self { http, base, token: token.to_owned(), redactor })
    }

    /// `{base}/{path}`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("{}/{}", self.base, path.trim_start_matches('/'))
    }

    /// The shared reqwest client (downloads, uploads).
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The bearer token (downloads of media URLs need it too).
    pub(crate) fn token(&self) -> &str {
        &self.token
    }

    /// The redactor that keeps the token out of error text.
    pub(crate) fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// POST `body` as JSON to `path`; the JSON answer, or the mapped error.
    pub(crate) async fn post(&self, path: &str, body: &Value) -> Result<Value, PlatformError> {
        let request = self.http.post(self.url(path)).bearer_auth(&self.token).json(body);
        self.execute(request).await
    }

    /// GET `path`; the JSON answer, or the mapped error.
    pub(crate) async fn get(&self, path: &str) -> Result<Value, PlatformError> {
        self.execute(self.http.get(self.url(path)).bearer_auth(&self.token)).await
    }

    /// Sends `request` (already carrying the token) and maps the answer.
    pub(crate) async fn execute(&self, request: reqwest::RequestBuilder) -> Result<Value, PlatformError> {
        let response = request.send().await.map_err(|e| self.transport(&e))?;
        let status = response.status().as_u16();
        let retry_after = retry_after_header(response.headers());
        let bytes = response.bytes().await.map_err(|e| self.transport(&e))?;
        if (200..300).contains(&status) {
            return serde_json::from_slice(&bytes).map_err(|_| {
                PlatformError::Transient(format!("graph answered {status} with a body that is not json"))
            });
        }
        Err(map_error(status, retry_after, &bytes, &self.redactor))
    }

    fn transport(&self, error: &reqwest::Error) -> PlatformError {
        let what = if error.is_timeout() { "timed out" } else { "request failed" };
        // reqwest's text may hold the URL, never the token (it is a header); redact anyway.
        PlatformError::Transient(self.redactor.redact(&format!("graph api {what}: {error}")))
    }
}

fn retry_after_header(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?;
    let secs: f64 = value.trim().parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then(|| clamp_retry_after(Duration::from_secs_f64(secs.min(3600.0))))
}

/// The default wait for a Graph rate-limit code that came without `Retry-After`.
fn default_wait(code: i64) -> Duration {
    match code {
        // Throughput: the number's messages per second; a short pause is enough.
        130_429 => Duration::from_secs(2),
        // Pair rate: about one message per 6 s to the same user after a burst.
        131_056 => Duration::from_secs(6),
        // Account and application call limits are counted per hour.
        _ => Duration::from_secs(60),
    }
}

/// Maps a non-2xx Graph answer to the host's error kinds.
pub(crate) fn map_error(status: u16, retry_after: Option<Duration>, body: &[u8], redactor: &Redactor) -> PlatformError {
    let error = serde_json::from_slice::<ErrorBody>(body).map(|b| b.error).unwrap_or_default();
    let code = error.code;
    let mut text = format!("graph api {status}, code {code}: {}", error.message);
    if let Some(details) = error.error_data.as_ref().map(|d| d.details.as_str()).filter(|d| !d.is_empty()) {
        text.push_str(&format!(" ({details})"));
    }
    let text = redactor.redact(&text);
    if status == 429 || matches!(code, 130_429 | 131_056 | 80_007 | 4 | 613) {
        let retry_after = retry_after.unwrap_or_else(|| default_wait(code));
        return PlatformError::RateLimited { retry_after: clamp_retry_after(retry_after) };
    }
    if status == 401 || code == 190 {
        return PlatformError::Unauthorized(text);
    }
    if code == REENGAGEMENT_CODE {
        return PlatformError::Permanent(format!("outside the 24-hour customer service window: {text}"));
    }
    // 1 and 2: unknown/temporary API errors; 131000 something went wrong; 131016 service
    // unavailable; 133004 server temporarily unavailable.
    if status >= 500 || matches!(code, 1 | 2 | 131_000 | 131_016 | 133_004) {
        return PlatformError::Transient(text);
    }
    PlatformError::Permanent(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(code: i64) -> Vec<u8> {
        serde_json::json!({"error": {"message": "m", "type": "OAuthException", "code": code, "fbtrace_id": "x"}})
            .to_string()
            .into_bytes()
    }

    #[test]
    fn graph_errors_map_to_the_hosts_kinds() {
        let redactor = Redactor::new("<secret>", &["EAAsecrettoken"]);
        let table: [(u16, Option<u64>, Vec<u8>, &str); 11] = [
            (400, None, graph(130_429), "rate"),
            (400, None, graph(131_056), "rate"),
            (400, None, graph(80_007), "rate"),
            (400, None, graph(4), "rate"),
            (429, Some(7), b"not json".to_vec(), "rate"),
            (401, None, graph(190), "unauthorized"),
            (400, None, graph(190), "unauthorized"),
            (500, None, graph(1), "transient"),
            (400, None, graph(131_016), "transient"),
            (400, None, graph(131_047), "permanent"),
            (400, None, graph(100), "permanent"),
        ];
        for (index, (status, retry, body, kind)) in table.into_iter().enumerate() {
            let error = map_error(status, retry.map(Duration::from_secs), &body, &redactor);
            assert_eq!(error.kind(), kind, "row {index}: {error}");
        }
        let waits = [
            (map_error(429, Some(Duration::from_secs(7)), b"", &redactor), 7),
            (map_error(400, None, &graph(131_056), &redactor), 6),
            (map_error(400, None, &graph(80_007), &redactor), 60),
            (map_error(400, Some(Duration::from_secs(999_999)), &graph(4), &redactor), 3600),
        ];
        for (error, secs) in waits {
            let PlatformError::RateLimited { retry_after } = error else { panic!("{error}") };
            assert_eq!(retry_after, Duration::from_secs(secs));
        }
        let error = map_error(400, None, &graph(131_047), &redactor).to_string();
        assert!(error.contains("24-hour") && error.contains("131047"), "{error}");
    }

    #[test]
    fn the_token_never_reaches_error_text() {
        let redactor = Redactor::new("<secret>", &["EAAsecrettoken"]);
        let body = serde_json::json!({"error": {"message": "bad token EAAsecrettoken", "code": 190}}).to_string();
        let error = map_error(401, None, body.as_bytes(), &redactor).to_string();
        assert!(!error.contains("EAAsecrettoken") && error.contains("<secret>"), "{error}");
    }
}
