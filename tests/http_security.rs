//! The HTTP server against what a web page (or a slow client) can do, on the real in-process
//! daemon: foreign Origins refused and preflights answered only for allowed ones, rebinding Host
//! names refused while the API has no key, JSON required on POSTs, the per-client rate limit,
//! the header read timeout and the connection cap, idle and slow connections of every kind
//! (silent, HTTP/2 preface or handshake only, idle keep-alive, trickled body) freeing their slot,
//! and authentication before the body — while signed webhook routes keep working with any Host.

mod support;

use std::time::{Duration, Instant};

use hermesd::webhooks::signature::sign_github;
use serde_json::{Value, json};
use support::{FakeLlm, answer, client, config_for, start_daemon};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn chat_body(text: &str) -> String {
    json!({ "messages": [{ "role": "user", "content": text }] }).to_string()
}

/// POST a chat completion with the given extra headers; the body is JSON unless a header says
/// otherwise.
async fn post(
    base: &str,
    path: &str,
    body: String,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut request = client().post(format!("{base}{path}")).body(body);
    if !headers.iter().any(|(name, _)| name.eq_ignore_ascii_case("content-type")) {
        request = request.header("content-type", "application/json");
    }
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.expect("request sent");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    (status, headers, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_routes_need_a_key_even_on_a_keyless_loopback_api() {
    // Loopback is no credential: any local process (a command, another user's program) could
    // post as the bot. The home's local key (what `hermesd send` presents) or API_SERVER_KEY is.
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let body = || json!({ "target": "local", "text": "from a local process" }).to_string();
    let (status, _, _) = post(&d.base, "/admin/send", body(), &[]).await;
    assert_eq!(status, 401, "no key");
    let (status, _, _) = post(&d.base, "/admin/send", body(), &[("authorization", "Bearer guess")]).await;
    assert_eq!(status, 401, "a wrong key");
    let bearer = format!("Bearer {}", support::local_key(home.path()));
    let (status, _, body) = post(&d.base, "/admin/send", body(), &[("authorization", &bearer)]).await;
    assert_eq!(status, 200, "the home's local key: {body}");
    // The keyless chat API itself stays open on loopback (commands cannot reach it: namespaces).
    let (status, _, _) = post(&d.base, "/v1/chat/completions", chat_body("hi"), &[]).await;
    assert_eq!(status, 200);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_origins_are_refused_and_preflight_answers_only_allowed_ones() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(&llm, "").replace("[http]\n", "[http]\nallowed_origins = [\"http://ui.example:3000\"]\n");
    let d = start_daemon(home.path(), &config, &[]).await;

    // A cross-site form post (text/plain, foreign Origin) and a JSON fetch from a foreign page.
    let evil = [("origin", "https://evil.example")];
    let form = [("origin", "https://evil.example"), ("content-type", "text/plain")];
    for (path, headers) in
        [("/v1/chat/completions", &form[..]), ("/v1/chat/completions", &evil[..]), ("/admin/send", &evil[..])]
    {
        let (status, _, body) = post(&d.base, path, chat_body("rm -rf ~"), headers).await;
        assert_eq!(status, 403, "{path}: {body}");
        assert_eq!(body["error"]["code"], "origin_not_allowed");
    }
    let (status, _, _) = post(&d.base, "/v1/chat/completions", chat_body("x"), &[("origin", "null")]).await;
    assert_eq!(status, 403, "an opaque origin is foreign too");
    let (status, _, _) =
        post(&d.base, "/v1/chat/completions", chat_body("x"), &[("sec-fetch-site", "cross-site")]).await;
    assert_eq!(status, 403, "a browser's cross-site mark without Origin");

    let preflight = |origin: &'static str| {
        client()
            .request(reqwest::Method::OPTIONS, format!("{}/v1/chat/completions", d.base))
            .header("origin", origin)
            .header("access-control-request-method", "POST")
            .header("access-control-request-headers", "content-type")
            .send()
    };
    let refused = preflight("https://evil.example").await.unwrap();
    assert_eq!(refused.status(), 403);
    assert!(refused.headers().get("access-control-allow-origin").is_none());
    let allowed = preflight("http://ui.example:3000").await.unwrap();
    assert_eq!(allowed.status(), 204);
    assert_eq!(allowed.headers()["access-control-allow-origin"], "http://ui.example:3000");
    assert!(allowed.headers()["access-control-allow-headers"].to_str().unwrap().contains("content-type"));

    let (status, headers, body) =
        post(&d.base, "/v1/chat/completions", chat_body("hello"), &[("origin", "http://UI.example:3000")]).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(answer(&body), "echo: hello");
    assert_eq!(headers["access-control-allow-origin"], "http://ui.example:3000");
    assert_eq!(llm.count(), 1, "only the allowed origin's request reached the model");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_key_only_unrebindable_hosts_reach_the_api() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(&llm, "").replace("[http]\n", "[http]\nallowed_hosts = [\"hermes.internal\"]\n");
    let d = start_daemon(home.path(), &config, &[]).await;
    let port = d.base.rsplit(':').next().unwrap().to_owned();

    for host in [format!("evil.example:{port}"), format!("127.0.0.1.evil.example:{port}"), "attacker.test".into()] {
        let (status, _, body) = post(&d.base, "/v1/chat/completions", chat_body("run"), &[("host", &host)]).await;
        assert_eq!(status, 421, "{host}: {body}");
        assert_eq!(body["error"]["code"], "host_not_allowed");
        let (status, _, _) =
            post(&d.base, "/admin/send", json!({ "target": "local", "text": "x" }).to_string(), &[("host", &host)])
                .await;
        assert_eq!(status, 421, "admin with {host}");
        let models = client().get(format!("{}/v1/models", d.base)).header("host", &host).send().await.unwrap();
        assert_eq!(models.status(), 421);
    }
    assert_eq!(llm.count(), 0, "nothing ran for a rebinding name");

    for host in
        [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}"), "hermes.internal".into()]
    {
        let (status, _, body) = post(&d.base, "/v1/chat/completions", chat_body("hi"), &[("host", &host)]).await;
        assert_eq!(status, 200, "{host}: {body}");
    }
    assert_eq!(llm.count(), 4);
    // Health stays reachable by any name (probes behind proxies).
    let health = client().get(format!("{}/healthz", d.base)).header("host", "lb.example").send().await.unwrap();
    assert_eq!(health.status(), 200);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_key_any_host_may_call_the_api_with_it() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", "k-123")]).await;
    let headers = [("host", "hermes.example.com"), ("authorization", "Bearer k-123")];
    let (status, _, body) = post(&d.base, "/v1/chat/completions", chat_body("hi"), &headers).await;
    assert_eq!(status, 200, "{body}");
    let (status, _, _) =
        post(&d.base, "/v1/chat/completions", chat_body("hi"), &[("host", "hermes.example.com")]).await;
    assert_eq!(status, 401, "the key is what protects it then");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signed_webhooks_work_with_any_host_and_no_origin() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let routes = "[[webhooks]]\nroute = \"gh\"\nsecret_env = \"GH_SECRET\"\nprompt = \"x\"\ndeliver = \"local\"\n\
                  deliver_only = true\n";
    let d = start_daemon(home.path(), &config_for(&llm, routes), &[("GH_SECRET", "s3cret-hook")]).await;
    let body = br#"{"zen":"hi"}"#.to_vec();
    let response = client()
        .post(format!("{}/webhooks/gh", d.base))
        .header("host", "hooks.example.com")
        .header("x-hub-signature-256", sign_github(b"s3cret-hook", &body))
        .header("x-github-delivery", "d-1")
        .header("x-github-event", "ping")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202, "{:?}", response.text().await);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_posts_need_the_json_content_type() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"] {
        let (status, _, body) =
            post(&d.base, "/v1/chat/completions", chat_body("x"), &[("content-type", content_type)]).await;
        assert_eq!(status, 415, "{content_type}: {body}");
        let (status, _, _) = post(
            &d.base,
            "/admin/send",
            json!({ "target": "local", "text": "x" }).to_string(),
            &[("content-type", content_type)],
        )
        .await;
        assert_eq!(status, 415, "admin {content_type}");
    }
    let bare = client().post(format!("{}/v1/chat/completions", d.base)).body(chat_body("x")).send().await.unwrap();
    assert_eq!(bare.status(), 415, "no content type at all");
    assert_eq!(llm.count(), 0);
    let (status, _, _) =
        post(&d.base, "/v1/chat/completions", chat_body("x"), &[("content-type", "application/json; charset=utf-8")])
            .await;
    assert_eq!(status, 200);
    let models = client().get(format!("{}/v1/models", d.base)).send().await.unwrap();
    assert_eq!(models.status(), 200, "GETs need no content type");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_rate_limit_answers_429_with_retry_after() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config = config_for(&llm, "").replace("[http]\n", "[http]\nrate_limit_per_minute = 2\n");
    let d = start_daemon(home.path(), &config, &[]).await;
    for _ in 0..2 {
        let (status, _, _) = post(&d.base, "/v1/chat/completions", chat_body("x"), &[]).await;
        assert_eq!(status, 200);
    }
    let (status, headers, body) = post(&d.base, "/v1/chat/completions", chat_body("x"), &[]).await;
    assert_eq!(status, 429, "{body}");
    assert_eq!(body["error"]["code"], "rate_limited");
    let retry: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&retry), "retry after {retry}s");
    assert_eq!(llm.count(), 2, "the refused request never reached the model");
    // Health and metrics are not rate limited.
    assert_eq!(client().get(format!("{}/healthz", d.base)).send().await.unwrap().status(), 200);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_are_cut_off_and_connections_are_capped() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config =
        config_for(&llm, "").replace("[http]\n", "[http]\nheader_read_timeout = \"1s\"\nmax_connections = 1\n");
    let d = start_daemon(home.path(), &config, &[]).await;
    let addr = d.base.trim_start_matches("http://").to_owned();

    // A client that never finishes its headers loses the connection after the timeout.
    let started = Instant::now();
    let mut slow = TcpStream::connect(&addr).await.unwrap();
    slow.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n").await.unwrap();
    // While it holds the only connection slot, another client is not served.
    let mut waiting = TcpStream::connect(&addr).await.unwrap();
    waiting.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 256];
    let early = tokio::time::timeout(Duration::from_millis(400), waiting.read(&mut buf)).await;
    assert!(early.is_err(), "served past the connection cap");

    let mut rest = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), slow.read_to_end(&mut rest)).await;
    assert!(read.is_ok(), "the slow client was never cut off");
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(900), "cut off too early: {elapsed:?}");
    assert!(!String::from_utf8_lossy(&rest).contains("200 OK"), "the slow request was not served");

    // Its slot freed, the waiting client is answered.
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), waiting.read_to_end(&mut answer)).await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&answer).starts_with("HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    d.daemon.stop().await;
}

/// The HTTP/2 connection preface a client sends before anything else.
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// An empty HTTP/2 SETTINGS frame: with the preface, a finished handshake.
const H2_SETTINGS: &[u8] = &[0, 0, 0, 4, 0, 0, 0, 0, 0];

/// Config with two connection slots and 2 s bounds on headers, idle connections and bodies.
fn tight_config(llm: &FakeLlm, extra: &str) -> String {
    config_for(llm, extra).replace(
        "[http]\n",
        "[http]\nheader_read_timeout = \"2s\"\nidle_timeout = \"2s\"\nbody_timeout = \"2s\"\nmax_connections = 2\n",
    )
}

/// One raw request on a fresh connection; the status line of the answer, or what went wrong.
async fn raw_request(addr: &str, request: &[u8], within: Duration) -> Result<String, String> {
    let exchange = async {
        let mut tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
        tcp.write_all(request).await.map_err(|e| e.to_string())?;
        let mut answer = vec![0u8; 512];
        let n = tcp.read(&mut answer).await.map_err(|e| e.to_string())?;
        Ok(String::from_utf8_lossy(&answer[..n]).lines().next().unwrap_or_default().to_owned())
    };
    tokio::time::timeout(within, exchange).await.map_err(|_| format!("no answer within {within:?}"))?
}

/// Open a connection that then does what `kind` says and nothing more.
async fn idle_socket(addr: &str, kind: &str) -> TcpStream {
    let mut tcp = TcpStream::connect(addr).await.unwrap();
    match kind {
        "silent" => {}
        "h2 preface" => tcp.write_all(H2_PREFACE).await.unwrap(),
        "h2 handshake" => {
            tcp.write_all(H2_PREFACE).await.unwrap();
            tcp.write_all(H2_SETTINGS).await.unwrap();
        }
        "keep-alive" => {
            tcp.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").await.unwrap();
            let mut answer = vec![0u8; 512];
            let n = tokio::time::timeout(Duration::from_secs(10), tcp.read(&mut answer)).await.unwrap().unwrap();
            assert!(answer[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer[..n]));
        }
        "trickled body" => {
            let head = "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer k-1\r\n\
                        Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{";
            tcp.write_all(head.as_bytes()).await.unwrap();
        }
        other => unreachable!("{other}"),
    }
    tcp
}

/// What the server sent before it closed `tcp` (end of stream or a reset), if it did within
/// `within`; a trickling client meanwhile sends a byte every 300 ms.
async fn closed_by_server(tcp: TcpStream, within: Duration, trickle: bool) -> Option<String> {
    let (mut read, mut write) = tcp.into_split();
    let trickler = tokio::spawn(async move {
        if trickle {
            loop {
                tokio::time::sleep(Duration::from_millis(300)).await;
                if write.write_all(b" ").await.is_err() {
                    break;
                }
            }
        }
        // Holding the write half keeps the client's side open while it trickles nothing.
        std::future::pending::<()>().await;
    });
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(within, read.read_to_end(&mut rest)).await.is_ok();
    trickler.abort();
    closed.then(|| String::from_utf8_lossy(&rest).into_owned())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_and_slow_connections_cannot_pin_the_server() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &tight_config(&llm, ""), &[("API_SERVER_KEY", "k-1")]).await;
    let addr = d.base.trim_start_matches("http://").to_owned();
    let header_timeout = Duration::from_secs(2);
    let health = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";

    for kind in ["silent", "h2 preface", "h2 handshake", "keep-alive", "trickled body"] {
        let opened = Instant::now();
        let sockets = [idle_socket(&addr, kind).await, idle_socket(&addr, kind).await];
        // Both slots are held now; health is answered once the server frees one.
        let status = raw_request(&addr, health, header_timeout + Duration::from_secs(2)).await;
        assert_eq!(status.as_deref(), Ok("HTTP/1.1 200 OK"), "{kind}: /healthz after {:?}", opened.elapsed());
        for tcp in sockets {
            let left = (header_timeout + Duration::from_secs(5)).saturating_sub(opened.elapsed());
            let trickled = kind == "trickled body";
            let sent = closed_by_server(tcp, left, trickled).await;
            let sent = sent.unwrap_or_else(|| panic!("{kind}: the socket stayed open"));
            assert!(!trickled || sent.starts_with("HTTP/1.1 400"), "{kind}: the body deadline answers 400: {sent}");
        }
    }

    // A real HTTP/2 client that made one request and then stays idle.
    let clients: Vec<reqwest::Client> =
        (0..2).map(|_| reqwest::Client::builder().http2_prior_knowledge().build().unwrap()).collect();
    for h2 in &clients {
        let response = h2.get(format!("{}/healthz", d.base)).send().await.unwrap();
        assert_eq!(response.version(), reqwest::Version::HTTP_2);
        assert_eq!(response.status(), 200);
    }
    let status = raw_request(&addr, health, header_timeout + Duration::from_secs(2)).await;
    assert_eq!(status.as_deref(), Ok("HTTP/1.1 200 OK"), "idle HTTP/2 clients held every slot");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_requests_are_refused_before_their_body_is_read() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let routes = "[[webhooks]]\nroute = \"gh\"\nsecret_env = \"GH_SECRET\"\nprompt = \"x\"\ndeliver = \"local\"\n";
    let env = [("API_SERVER_KEY", "k-1"), ("GH_SECRET", "s3cret-hook")];
    let d = start_daemon(home.path(), &tight_config(&llm, routes), &env).await;
    let addr = d.base.trim_start_matches("http://").to_owned();
    // Headers announce a body that never comes: a handler that read it first would hang until
    // the body deadline and answer 400; refused on its headers, it answers 401 at once.
    for (path, auth) in [
        ("/v1/chat/completions", "Authorization: Bearer wrong\r\n"),
        ("/v1/chat/completions", ""),
        ("/admin/send", "Authorization: Bearer wrong\r\n"),
        ("/webhooks/gh", ""),
    ] {
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Type: application/json\r\n\
             Content-Length: 1000\r\n\r\n"
        );
        let status = raw_request(&addr, request.as_bytes(), Duration::from_secs(10)).await;
        assert_eq!(status.as_deref(), Ok("HTTP/1.1 401 Unauthorized"), "{path} {auth:?}");
    }
    assert_eq!(llm.count(), 0);
    d.daemon.stop().await;
}
