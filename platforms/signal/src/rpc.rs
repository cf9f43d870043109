//! signal-cli's JSON-RPC 2.0 over HTTP (`POST /api/v1/rpc`) and how its errors map onto
//! `PlatformError`.
//!
//! Rate limits arrive as JSON-RPC error `-5` (`RateLimitErrorException`), not as HTTP 429; the
//! wait comes from the send results in `error.data.response.results[].retryAfterSeconds`.
//! Every call is bounded by a timeout; nothing here logs.
//!
//! Calls are bounded by `api_timeout` and answers capped in size. The map: `-5` (or `-1` saying
//! "rate limit") → `RateLimited`, the wait from the results, else 30 s; `-3`, `-32603`, 5xx and
//! transport errors → `Transient`; `-4`, `-6`, any other code and other HTTP errors → `Permanent`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hermesd_platform::media::CappedBuffer;
use hermesd_platform::{PlatformError, clamp_retry_after};
use serde_json::{Value, json};

/// signal-cli's error codes (`SignalJsonRpcCommandHandler`).
pub(crate) mod code {
    /// `UserErrorException`: bad input, unknown group, unregistered recipient.
    pub(crate) const USER_ERROR: i64 = -1;
    /// `IOErrorException`: signal-cli could not reach Signal.
    pub(crate) const IO_ERROR: i64 = -3;
    /// `UntrustedKeyErrorException`: the recipient's safety number changed.
    pub(crate) const UNTRUSTED_KEY: i64 = -4;
    /// `RateLimitErrorException`.
    pub(crate) const RATE_LIMIT: i64 = -5;
    /// `CaptchaRejectedErrorException`.
    pub(crate) const CAPTCHA_REJECTED: i64 = -6;
    /// JSON-RPC internal error (`UnexpectedErrorException`, often a network failure).
    pub(crate) const INTERNAL: i64 = -32603;
}

/// The wait assumed when signal-cli reports a rate limit without saying how long.
pub(crate) const DEFAULT_RATE_LIMIT_WAIT: Duration = Duration::from_secs(30);

/// What a call can fail with.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RpcError {
    /// No answer: connection refused, reset, or no response within the timeout.
    #[error("{method}: signal-cli unreachable: {detail}")]
    Transport { method: String, detail: String },
    /// An HTTP status other than 200/201.
    #[error("{method}: signal-cli answered HTTP {status}")]
    Http { method: String, status: u16 },
    /// The body was not a JSON-RPC response.
    #[error("{method}: unreadable answer: {detail}")]
    Decode { method: String, detail: String },
    /// A JSON-RPC error object.
    #[error("{method}: signal-cli error {code}: {message}")]
    Rpc { method: String, code: i64, message: String, data: Value },
}

impl RpcError {
    /// The platform error the host acts on.
    pub(crate) fn into_platform(self) -> PlatformError {
        match &self {
            RpcError::Transport { .. } | RpcError::Decode { .. } => PlatformError::Transient(self.to_string()),
            RpcError::Http { status, .. } if *status >= 500 => PlatformError::Transient(self.to_string()),
            RpcError::Http { .. } => PlatformError::Permanent(self.to_string()),
            RpcError::Rpc { code, message, data, .. } => match *code {
                code::RATE_LIMIT => PlatformError::RateLimited { retry_after: retry_after(data) },
                code::USER_ERROR if message.to_ascii_lowercase().contains("rate limit") => {
                    PlatformError::RateLimited { retry_after: retry_after(data) }
                }
                code::IO_ERROR | code::INTERNAL => PlatformError::Transient(self.to_string()),
                // A changed safety number or a captcha challenge needs the operator.
                code::UNTRUSTED_KEY | code::CAPTCHA_REJECTED => PlatformError::Permanent(self.to_string()),
                // Unregistered or untrusted recipients, bad parameters, a rejected captcha:
                // retrying the same call cannot help.
                _ => PlatformError::Permanent(self.to_string()),
            },
        }
    }
}

/// The longest `retryAfterSeconds` among the send results in an error's data, clamped; the
/// default wait when none is given.
pub(crate) fn retry_after(data: &Value) -> Duration {
    let results = data.pointer("/response/results").and_then(Value::as_array);
    let longest =
        results.into_iter().flatten().filter_map(|r| r.get("retryAfterSeconds").and_then(Value::as_u64)).max();
    longest.map_or(DEFAULT_RATE_LIMIT_WAIT, |secs| clamp_retry_after(Duration::from_secs(secs.max(1))))
}

/// The largest answer read from an ordinary call (a `receive` batch, a send result).
pub(crate) const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// A JSON-RPC client for one account of a signal-cli daemon.
#[derive(Debug)]
pub(crate) struct Rpc {
    http: reqwest::Client,
    url: String,
    /// The number every call is made for (`params.account`): a multi-account daemon needs it to
    /// pick the account, a single-account one accepts it.
    account: String,
    timeout: Duration,
    next_id: AtomicU64,
}

impl Rpc {
    pub(crate) fn new(http: reqwest::Client, base: &str, account: &str, timeout: Duration) -> Self {
        let (url, account) = (format!("{base}/api/v1/rpc"), account.to_owned());
        Self { http, url, account, timeout, next_id: AtomicU64::new(1) }
    }

    /// Calls `method` with `params`, bounded by the client's timeout.
    pub(crate) async fn call(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.call_within(method, params, self.timeout).await
    }

    /// Calls `method` with `params`, bounded by `timeout` (long polls need more than a call).
    pub(crate) async fn call_within(&self, method: &str, params: Value, timeout: Duration) -> Result<Value, RpcError> {
        self.call_capped(method, params, timeout, MAX_ANSWER_BYTES).await
    }

    /// `call_within`, refusing an answer body over `max_body` bytes (attachments).
    pub(crate) async fn call_capped(
        &self,
        method: &str,
        mut params: Value,
        timeout: Duration,
        max_body: usize,
    ) -> Result<Value, RpcError> {
        if let Some(params) = params.as_object_mut() {
            params.insert("account".to_owned(), Value::String(self.account.clone()));
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params, "id": id});
        let transport = |detail: String| RpcError::Transport { method: method.to_owned(), detail };
        let exchange = async {
            let response = self.http.post(&self.url).json(&body).send().await.map_err(|e| transport(describe(&e)))?;
            let status = response.status().as_u16();
            if status == 201 {
                // A notification answered without a body; our calls always carry an id.
                return Ok(Value::Null);
            }
            if status != 200 {
                return Err(RpcError::Http { method: method.to_owned(), status });
            }
            let mut response = response;
            let mut body = CappedBuffer::new(max_body);
            while let Some(piece) = response.chunk().await.map_err(|e| transport(describe(&e)))? {
                if !body.push(&piece) {
                    return Err(RpcError::Decode {
                        method: method.to_owned(),
                        detail: format!("answer larger than {max_body} bytes"),
                    });
                }
            }
            let body = body.into_inner();
            serde_json::from_slice::<Value>(&body)
                .map_err(|e| RpcError::Decode { method: method.to_owned(), detail: e.to_string() })
        };
        let answer = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| transport(format!("no answer within {:.1}s", timeout.as_secs_f64())))??;
        parse_response(method, answer)
    }
}

/// The `result` of a JSON-RPC response, or its `error`.
pub(crate) fn parse_response(method: &str, answer: Value) -> Result<Value, RpcError> {
    if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
        return Err(RpcError::Rpc {
            method: method.to_owned(),
            code: error.get("code").and_then(Value::as_i64).unwrap_or(code::INTERNAL),
            message: error.get("message").and_then(Value::as_str).unwrap_or_default().chars().take(300).collect(),
            data: error.get("data").cloned().unwrap_or(Value::Null),
        });
    }
    match answer {
        Value::Null => Ok(Value::Null),
        Value::Object(mut fields) => Ok(fields.remove("result").unwrap_or(Value::Null)),
        other => Err(RpcError::Decode { method: method.to_owned(), detail: format!("not an object: {other}") }),
    }
}

/// A reqwest error without its URL (the URL is harmless, but the message is shorter).
pub(crate) fn describe(error: &reqwest::Error) -> String {
    let kind = if error.is_timeout() {
        "timed out"
    } else if error.is_connect() {
        "connect failed"
    } else if error.is_body() || error.is_decode() {
        "body failed"
    } else {
        "request failed"
    };
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(error);
    let mut detail = String::new();
    while let Some(inner) = source {
        detail = inner.to_string();
        source = inner.source();
    }
    if detail.is_empty() { kind.to_owned() } else { format!("{kind}: {detail}") }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc_error(code: i64, message: &str, data: Value) -> PlatformError {
        RpcError::Rpc { method: "send".into(), code, message: message.into(), data }.into_platform()
    }

    #[test]
    fn errors_map_to_what_the_host_acts_on() {
        let data = json!({"response": {"timestamp": 5, "results": [
            {"recipientAddress": {"uuid": "u"}, "type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": 7},
            {"recipientAddress": {"uuid": "v"}, "type": "RATE_LIMIT_FAILURE", "retryAfterSeconds": 12}]}});
        let limited = rpc_error(code::RATE_LIMIT, "Failed to send message due to rate limiting", data);
        assert!(
            matches!(limited, PlatformError::RateLimited { retry_after } if retry_after == Duration::from_secs(12))
        );
        let bare = rpc_error(code::RATE_LIMIT, "rate limited", Value::Null);
        assert!(matches!(bare, PlatformError::RateLimited { retry_after } if retry_after == DEFAULT_RATE_LIMIT_WAIT));
        let huge = json!({"response": {"results": [{"retryAfterSeconds": 999_999_999}]}});
        assert!(matches!(rpc_error(code::RATE_LIMIT, "", huge),
            PlatformError::RateLimited { retry_after } if retry_after == hermesd_platform::MAX_RETRY_AFTER));
        assert_eq!(
            rpc_error(code::UNTRUSTED_KEY, "Failed to send message due to untrusted identities", Value::Null).kind(),
            "permanent"
        );
        assert_eq!(rpc_error(code::USER_ERROR, "The user +1555 is not registered.", Value::Null).kind(), "permanent");
        assert_eq!(rpc_error(code::CAPTCHA_REJECTED, "captcha", Value::Null).kind(), "permanent");
        assert_eq!(rpc_error(code::IO_ERROR, "Error while receiving", Value::Null).kind(), "transient");
        assert_eq!(rpc_error(code::INTERNAL, "Failed to send message: timeout", Value::Null).kind(), "transient");
        let http = |status| RpcError::Http { method: "send".into(), status }.into_platform().kind();
        assert_eq!((http(503), http(415)), ("transient", "permanent"));
        let gone = RpcError::Transport { method: "send".into(), detail: "connect failed".into() };
        assert_eq!(gone.into_platform().kind(), "transient");
    }

    #[test]
    fn responses_give_their_result_or_error() {
        let ok = parse_response("send", json!({"jsonrpc": "2.0", "result": {"timestamp": 999}, "id": 4}));
        assert_eq!(ok.ok(), Some(json!({"timestamp": 999})));
        let err = parse_response("send", json!({"jsonrpc": "2.0", "error": {"code": -5, "message": "m"}, "id": 4}));
        assert!(matches!(err, Err(RpcError::Rpc { code: -5, .. })));
        assert!(parse_response("send", json!([1])).is_err());
    }
}
