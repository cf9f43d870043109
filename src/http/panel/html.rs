//! The panel's HTML: escaping, the page frame (navigation, the logout form with its CSRF token)
//! and the headers every panel answer carries — a strict Content-Security-Policy (no inline
//! script or style, nothing from elsewhere; scripts only from the panel's own `panel.js`), no framing, no caching, no sniffing.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// `text` safe inside HTML text and attribute values.
pub(super) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The panel's security headers on `response`.
pub(super) fn harden(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self' data:; \
             form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
        ),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    response
}

/// A whole page: `title`, the navigation (when logged in: `csrf` for the logout form) and `body`
/// (already HTML).
pub(super) fn page(status: StatusCode, title: &str, csrf: Option<&str>, body: &str) -> Response {
    framed(status, title, csrf, body, None)
}

/// The page saying the store could not answer (503).
pub(super) fn failed(csrf: &str, title: &str, e: impl std::fmt::Display) -> Response {
    page(
        StatusCode::SERVICE_UNAVAILABLE,
        title,
        Some(csrf),
        &format!("<p class=\"bad\">{}</p>", escape(&e.to_string())),
    )
}

/// A page the browser loads again every `seconds` (following the log without a script).
pub(super) fn refreshing(title: &str, csrf: &str, body: &str, seconds: u32) -> Response {
    framed(StatusCode::OK, title, Some(csrf), body, Some(seconds))
}

fn framed(status: StatusCode, title: &str, csrf: Option<&str>, body: &str, refresh: Option<u32>) -> Response {
    let nav = match csrf {
        Some(csrf) => format!(
            "<nav aria-label=\"Panel\"><a href=\"/ui\">Status</a><a href=\"/ui/chat\">Chat</a><a href=\"/ui/sessions\">Conversations</a>\
             <a href=\"/ui/people\">People</a><a href=\"/ui/cron\">Cron</a><a href=\"/ui/deliveries\">Deliveries</a>\
             <a href=\"/ui/usage\">Usage</a><a href=\"/ui/logs\">Logs</a><a href=\"/ui/config\">Config</a></nav>\
             <form class=\"inline\" method=\"post\" action=\"/ui/logout\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
             <button type=\"submit\">Log out</button></form>",
            escape(csrf)
        ),
        None => String::new(),
    };
    // Pages of a logged-in panel get the script (live status, the chat); the login page none.
    let script = if csrf.is_some() { "<script src=\"/ui/assets/panel.js\" defer></script>" } else { "" };
    let refresh = refresh.map(|s| format!("<meta http-equiv=\"refresh\" content=\"{s}\">")).unwrap_or_default();
    let html = format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">{refresh}\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · hermesd</title><link rel=\"stylesheet\" href=\"/ui/assets/panel.css\">{script}</head>\
         <body><header><strong>hermesd</strong>{nav}</header><main><h1>{}</h1>{body}</main></body></html>",
        escape(title),
        escape(title)
    );
    harden((status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response())
}

/// A Unix-ms time as UTC text.
pub(super) fn when(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(String::new, |t| t.format("%Y-%m-%d %H:%M UTC").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_text_is_shown_not_run() {
        assert_eq!(
            escape("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;"
        );
    }
}
