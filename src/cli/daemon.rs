//! Asking the daemon that runs on this home: a POST to its `/admin/…` routes on the configured
//! listen address (a wildcard one on loopback), with the home's local key as the bearer.

use std::time::Duration;

use serde_json::Value;

use super::Loaded;

/// `POST path` with `body` on the running daemon: `(status, answer)`; `None` when no daemon
/// listens on `http.listen`.
pub(super) async fn post(
    loaded: &Loaded,
    path: &str,
    body: &Value,
    wait: Duration,
) -> Option<Result<(u16, Value), String>> {
    post_to(&loaded.paths.home, &loaded.config.http.listen, path, body, wait).await
}

/// `post` to the daemon of `home` listening on `listen`.
pub(super) async fn post_to(
    home: &std::path::Path,
    listen: &str,
    path: &str,
    body: &Value,
    wait: Duration,
) -> Option<Result<(u16, Value), String>> {
    let listen: std::net::SocketAddr = listen.parse().ok()?;
    let host = if listen.ip().is_unspecified() { std::net::Ipv4Addr::LOCALHOST.into() } else { listen.ip() };
    let url = format!("http://{}{path}", std::net::SocketAddr::new(host, listen.port()));
    let client = reqwest::Client::builder().timeout(wait).no_proxy().build().ok()?;
    let mut request = client.post(url).json(body);
    // The home's local key: readable by whoever may read the home, never by a sandboxed command.
    match crate::access::PairingKey::load_or_create(home) {
        Ok(key) => request = request.bearer_auth(key.local_api_key()),
        Err(e) => return Some(Err(format!("the home's local key: {e}"))),
    }
    let response = match request.send().await {
        Ok(response) => response,
        Err(e) if e.is_connect() => return None,
        Err(e) => return Some(Err(format!("the running daemon did not answer: {e}"))),
    };
    let status = response.status().as_u16();
    Some(Ok((status, response.json().await.unwrap_or(Value::Null))))
}
