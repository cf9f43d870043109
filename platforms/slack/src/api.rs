//! The Slack Web API client (slack-morphism over hyper with rustls on ring), built in one place,
//! and Slack's errors → `PlatformError`.
//!
//! No retries here (the host owns them; slack-morphism's own rate control stays off). Tokens go
//! in the `Authorization` header only, and no token may reach an error text.
//!
//! The client uses ring-only TLS and a 10 s connect timeout. Every Web API call is bounded by
//! `api_timeout` through `within`: no answer in time is `Transient`, so the outbox retries it.
//! Uploads get `CALLS_PER_FILE` (6) of those limits, downloads `api_timeout` per stalled piece and
//! `DOWNLOAD_SPAN` (10) in all; lookups on the receive path (names, thread context) fall back to
//! none.

use std::time::Duration;

use hermesd_platform::{PlatformError, Redactor, clamp_retry_after};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use slack_morphism::errors::SlackClientError;
use slack_morphism::prelude::*;

use crate::inbound::BotIdentity;

/// The hyper connector: `https_or_http` so an `http://127.0.0.1` base works in tests and behind a
/// local proxy; TLS through rustls with the ring provider only (two providers make rustls panic).
pub(crate) type Connector = HttpsConnector<HttpConnector>;

/// The slack-morphism client type used for every Web API call.
pub(crate) type Client = SlackClient<SlackClientHyperConnector<Connector>>;

/// Slack's answer when no `Retry-After` came with a rate limit.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The longest a TCP connection to Slack may take to open.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Builds the HTTPS-or-HTTP connector shared by the Web API client and file downloads, with a
/// bounded connect time (the whole call is bounded by `within`).
pub(crate) fn connector() -> Result<Connector, String> {
    let builder = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_native_roots(rustls::crypto::ring::default_provider())
        .map_err(|error| format!("load the system's TLS roots: {error}"))?;
    let mut http = HttpConnector::new();
    http.enforce_http(false);
    http.set_connect_timeout(Some(CONNECT_TIMEOUT));
    http.set_nodelay(true);
    Ok(builder.https_or_http().enable_http1().enable_http2().wrap_connector(http))
}

/// Run one Slack operation with `limit`: no answer in time is a transient failure (the host's
/// outbox retries it later), so a hung Web API never holds a caller for ever.
pub(crate) async fn within<T>(
    limit: Duration,
    what: &str,
    call: impl std::future::Future<Output = Result<T, PlatformError>>,
) -> Result<T, PlatformError> {
    match tokio::time::timeout(limit, call).await {
        Ok(outcome) => outcome,
        Err(_) => {
            Err(PlatformError::Transient(format!("{what}: no answer from slack within {}s", limit.as_secs_f32())))
        }
    }
}

/// The Web API client for `api_base` (no trailing slash).
pub(crate) fn client(connector: Connector, api_base: &str) -> Client {
    SlackClient::new(SlackClientHyperConnector::with_connector(connector).with_slack_api_url(api_base))
}

/// A token in slack-morphism's type.
pub(crate) fn token(value: &str) -> SlackApiToken {
    SlackApiToken::new(SlackApiTokenValue(value.to_owned()))
}

/// `auth.test`: who the bot token belongs to.
pub(crate) async fn identify(
    client: &Client,
    bot_token: &SlackApiToken,
    redactor: &Redactor,
) -> Result<BotIdentity, PlatformError> {
    let me = client.open_session(bot_token).auth_test().await.map_err(|e| map_error(&e, "auth.test", redactor))?;
    Ok(BotIdentity { user_id: me.user_id.0, bot_id: me.bot_id.map(|id| id.0) })
}

/// Maps a slack-morphism error to what the host acts on; `context` says what was being done.
pub(crate) fn map_error(error: &SlackClientError, context: &str, redactor: &Redactor) -> PlatformError {
    let detail = |what: &dyn std::fmt::Display| format!("{context}: {}", redactor.redact(&what.to_string()));
    match error {
        SlackClientError::RateLimitError(limit) => PlatformError::RateLimited {
            retry_after: clamp_retry_after(limit.retry_after.unwrap_or(DEFAULT_RETRY_AFTER)),
        },
        SlackClientError::ApiError(api) => match api.code.as_str() {
            "ratelimited" | "rate_limited" => PlatformError::RateLimited { retry_after: DEFAULT_RETRY_AFTER },
            "invalid_auth"
            | "not_authed"
            | "account_inactive"
            | "token_revoked"
            | "token_expired"
            | "not_allowed_token_type" => PlatformError::Unauthorized(detail(&api.code)),
            "internal_error" | "fatal_error" | "service_unavailable" | "request_timeout" => {
                PlatformError::Transient(detail(&api.code))
            }
            _ => PlatformError::Permanent(detail(&api.code)),
        },
        SlackClientError::HttpError(http) => match http.status_code.as_u16() {
            401 | 403 => PlatformError::Unauthorized(detail(&http.status_code)),
            408 | 500..=599 => PlatformError::Transient(detail(&http.status_code)),
            _ => PlatformError::Permanent(detail(&http.status_code)),
        },
        // Network failures, cut streams and answers that are not Slack JSON (a proxy's error
        // page) may all pass.
        other => PlatformError::Transient(detail(other)),
    }
}

/// The code of a Web API error, when Slack answered with one.
pub(crate) fn api_code(error: &SlackClientError) -> Option<&str> {
    match error {
        SlackClientError::ApiError(api) => Some(api.code.as_str()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use slack_morphism::errors::{SlackClientApiError, SlackClientHttpError, SlackRateLimitError};

    use super::*;

    fn api(code: &str) -> SlackClientError {
        SlackClientError::ApiError(SlackClientApiError::new(code.to_owned()))
    }

    #[test]
    fn errors_map_to_what_the_host_acts_on() {
        let http = |code: u16| {
            let status = http::StatusCode::from_u16(code).expect("a status");
            SlackClientError::HttpError(SlackClientHttpError::new(status))
        };
        let table = [
            (api("invalid_auth"), "unauthorized"),
            (api("token_revoked"), "unauthorized"),
            (api("channel_not_found"), "permanent"),
            (api("msg_too_long"), "permanent"),
            (api("internal_error"), "transient"),
            (api("ratelimited"), "rate"),
            (http(502), "transient"),
            (http(403), "unauthorized"),
            (http(404), "permanent"),
        ];
        let redactor = Redactor::new("<secret>", &["xoxb-secret"]);
        for (error, want) in table {
            let mapped = map_error(&error, "chat.postMessage to C1", &redactor);
            assert_eq!(mapped.kind(), want, "{error:?} → {mapped:?}");
        }
        let limited =
            SlackClientError::RateLimitError(SlackRateLimitError::new().with_retry_after(Duration::from_secs(7)));
        let mapped = map_error(&limited, "x", &redactor);
        assert!(
            matches!(mapped, PlatformError::RateLimited { retry_after } if retry_after.as_secs() == 7),
            "{mapped:?}"
        );
        // A Retry-After of u64::MAX seconds would overflow any deadline: it is clamped to an hour.
        let absurd = SlackClientError::RateLimitError(
            SlackRateLimitError::new().with_retry_after(Duration::from_secs(u64::MAX)),
        );
        assert!(matches!(
            map_error(&absurd, "x", &redactor),
            PlatformError::RateLimited { retry_after } if retry_after == hermesd_platform::MAX_RETRY_AFTER
        ));
        let unsaid = SlackClientError::RateLimitError(SlackRateLimitError::new());
        assert!(
            matches!(map_error(&unsaid, "x", &redactor), PlatformError::RateLimited { retry_after } if retry_after == DEFAULT_RETRY_AFTER)
        );
    }

    #[test]
    fn tokens_never_reach_an_error_text() {
        let redactor = Redactor::new("<secret>", &["xoxb-secret", "", "xapp-other"]);
        let error = api("invalid_auth xoxb-secret xapp-other");
        let mapped = map_error(&error, "auth.test", &redactor).to_string();
        assert!(!mapped.contains("xoxb-secret") && !mapped.contains("xapp-other"), "{mapped}");
        assert!(mapped.contains("<secret>"), "{mapped}");
    }
}
