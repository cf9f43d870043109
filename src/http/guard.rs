//! The browser guard in front of every route a web page could drive (`/v1/*`, `/admin/*`).
//!
//! The local machine is not a trust boundary: any page the operator opens can send requests to
//! 127.0.0.1. So, in this order:
//! - an `Origin` not in `http.allowed_origins` is refused (403), and so is a request a browser
//!   marks `Sec-Fetch-Site: cross-site`; CORS preflights are answered only for allowed origins;
//! - while the API has no key, the `Host` must be an IP literal, a loopback name or an entry of
//!   `http.allowed_hosts` (421 otherwise): DNS rebinding needs a name it controls;
//! - a POST must be `Content-Type: application/json` (415), which no HTML form can send.
//!
//! Signed webhook routes never pass through here: they work behind any reverse proxy. The control
//! panel (`/ui`, `/api/*`) takes only the `Host` rule (`host_guard`): it checks its own origin and
//! CSRF token.

use std::net::IpAddr;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::{HttpConfig, normalize_origin};

/// Headers a browser client may send cross-origin (when its origin is allowed).
const ALLOW_HEADERS: &str = "authorization, content-type, idempotency-key, x-hermes-session-id";
/// Headers an allowed origin's scripts may read.
const EXPOSE_HEADERS: &str = "x-hermes-session-id, idempotent-replayed, retry-after";

/// What the guard accepts.
#[derive(Debug, Clone)]
pub struct BrowserGuard {
    hosts: Vec<String>,
    origins: Vec<String>,
    /// No API key: the Host check applies.
    keyless: bool,
}

impl BrowserGuard {
    /// The guard for `[http]`; `keyless` when `API_SERVER_KEY` is unset.
    pub fn new(http: &HttpConfig, keyless: bool) -> Self {
        let hosts = http.allowed_hosts.iter().map(|h| host_name(h).to_owned()).collect();
        let origins = http.allowed_origins.iter().filter_map(|o| normalize_origin(o)).collect();
        Self { hosts, origins, keyless }
    }

    /// Whether `host` (a `Host` header value) is one the API may answer without a key.
    fn host_allowed(&self, host: &str) -> bool {
        let name = host_name(host);
        if name.parse::<IpAddr>().is_ok() {
            return true;
        }
        name == "localhost" || name.ends_with(".localhost") || self.hosts.contains(&name)
    }
}

/// The name part of a `Host` value or config entry: lower case, no port, no brackets, no
/// trailing dot.
fn host_name(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    let name = if let Some(rest) = host.strip_prefix('[') {
        rest.split(']').next().unwrap_or_default().to_owned()
    } else if host.matches(':').count() == 1 {
        host.split(':').next().unwrap_or_default().to_owned()
    } else {
        host
    };
    name.trim_end_matches('.').to_owned()
}

fn refuse(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({ "error": { "message": message, "type": "invalid_request_error", "code": code } });
    (status, Json(body)).into_response()
}

fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else { return false };
    let essence = value.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

/// The control panel's part of the guard (its forms cannot be JSON and its pages are its own
/// origin, so it checks those itself): while the API has no key, the `Host` rule against DNS
/// rebinding.
pub(super) async fn host_guard(State(guard): State<Arc<BrowserGuard>>, request: Request, next: Next) -> Response {
    if guard.keyless {
        let host = request.headers().get(header::HOST).and_then(|v| v.to_str().ok()).or(request.uri().host());
        if !host.is_some_and(|h| guard.host_allowed(h)) {
            return refuse(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                "this Host is not an IP address, a loopback name or in http.allowed_hosts",
            );
        }
    }
    next.run(request).await
}

/// The middleware: refuse what a hostile page could send, answer allowed preflights, and mark
/// responses to allowed origins for CORS.
pub(super) async fn browser_guard(State(guard): State<Arc<BrowserGuard>>, request: Request, next: Next) -> Response {
    let headers = request.headers();
    let origin = match headers.get(header::ORIGIN) {
        None => None,
        Some(value) => match value.to_str().ok().and_then(normalize_origin) {
            Some(origin) if guard.origins.contains(&origin) => Some(origin),
            _ => {
                return refuse(
                    StatusCode::FORBIDDEN,
                    "origin_not_allowed",
                    "this Origin is not in http.allowed_origins",
                );
            }
        },
    };
    let cross_site = headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"));
    if origin.is_none() && cross_site {
        return refuse(StatusCode::FORBIDDEN, "origin_not_allowed", "cross-site requests are not allowed");
    }
    if guard.keyless {
        let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).or(request.uri().host());
        if !host.is_some_and(|h| guard.host_allowed(h)) {
            return refuse(
                StatusCode::MISDIRECTED_REQUEST,
                "host_not_allowed",
                "this Host is not an IP address, a loopback name or in http.allowed_hosts",
            );
        }
    }
    if request.method() == Method::OPTIONS {
        let Some(origin) = origin else {
            return refuse(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "OPTIONS is for CORS preflights");
        };
        let mut response = StatusCode::NO_CONTENT.into_response();
        let out = response.headers_mut();
        out.insert(header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static("GET, POST, OPTIONS"));
        out.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, HeaderValue::from_static(ALLOW_HEADERS));
        out.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
        cors(out, &origin);
        return response;
    }
    if request.method() == Method::POST && !is_json(headers) {
        return refuse(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with Content-Type: application/json",
        );
    }
    let mut response = next.run(request).await;
    if let Some(origin) = origin {
        cors(response.headers_mut(), &origin);
    }
    response
}

fn cors(headers: &mut HeaderMap, origin: &str) {
    if let Ok(value) = HeaderValue::from_str(origin) {
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, value);
    }
    headers.insert(header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSE_HEADERS));
    headers.append(header::VARY, HeaderValue::from_static("origin"));
}

/// The handler behind `OPTIONS` on guarded routes; the guard answers before it runs.
pub(super) async fn preflight() -> StatusCode {
    StatusCode::NO_CONTENT
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(hosts: &[&str]) -> BrowserGuard {
        let http = HttpConfig { allowed_hosts: hosts.iter().map(|h| (*h).to_owned()).collect(), ..Default::default() };
        BrowserGuard::new(&http, true)
    }

    #[test]
    fn hosts_that_cannot_be_rebound_pass() {
        let g = guard(&["Hermes.Example.com:443"]);
        for ok in [
            "127.0.0.1:8642",
            "127.0.0.1",
            "[::1]:8642",
            "10.0.0.5",
            "localhost:8642",
            "LOCALHOST",
            "app.localhost",
            "hermes.example.com",
            "hermes.example.com.:80",
        ] {
            assert!(g.host_allowed(ok), "{ok}");
        }
        for bad in ["evil.example", "127.0.0.1.nip.io", "localhost.evil.example", "example.com:8642", ""] {
            assert!(!g.host_allowed(bad), "{bad}");
        }
    }

    #[test]
    fn json_content_types() {
        let mut headers = HeaderMap::new();
        assert!(!is_json(&headers));
        for (value, ok) in [
            ("application/json", true),
            ("Application/JSON; charset=utf-8", true),
            ("text/plain", false),
            ("application/x-www-form-urlencoded", false),
            ("multipart/form-data; boundary=x", false),
        ] {
            headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(value));
            assert_eq!(is_json(&headers), ok, "{value}");
        }
    }
}
