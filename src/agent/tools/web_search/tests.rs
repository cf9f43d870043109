//! `web_search` against a fake search service on 127.0.0.1:0 speaking SearXNG's and Brave's
//! JSON: requests as the services expect them, results capped and cleaned, errors the model can
//! act on, no redirect followed, the key never shown.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

use super::*;
use crate::agent::tools::Nobody;
use crate::agent::tools::test_support;
use crate::config::HumanDuration;

const KEY: &str = "BSA-secret-test-key-123";

#[derive(Default)]
struct Seen {
    queries: Vec<HashMap<String, String>>,
    tokens: Vec<Option<String>>,
    paths: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

fn record(seen: &Shared, path: &str, query: HashMap<String, String>, headers: &HeaderMap) {
    let mut seen = seen.lock().unwrap();
    let token = headers.get("x-subscription-token").or_else(|| headers.get("authorization"));
    seen.tokens.push(token.and_then(|v| v.to_str().ok()).map(str::to_owned));
    seen.queries.push(query);
    seen.paths.push(path.to_owned());
}

fn searx_results(n: usize) -> Value {
    let results: Vec<Value> = (1..=n)
        .map(|i| json!({"url": format!("https://site{i}.example/page"), "title": format!("Result &amp; {i}"), "content": format!("Snippet {i} with <b>markup</b>\nand lines"), "engine": "duckduckgo", "score": 1.0}))
        .collect();
    json!({"query": "q", "number_of_results": n, "results": results, "answers": [], "suggestions": [], "unresponsive_engines": []})
}

async fn searx(
    State(seen): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    record(&seen, "/search", query.clone(), &headers);
    if query.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, "format not allowed").into_response();
    }
    let mut answer = searx_results(8);
    answer["results"]
        .as_array_mut()
        .unwrap()
        .insert(1, json!({"url": "javascript:alert(1)", "title": "Bad", "content": "never shown"}));
    answer["results"][0]["content"] = json!("x".repeat(2_000));
    axum::Json(answer).into_response()
}

async fn brave(
    State(seen): State<Shared>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    record(&seen, "/res/v1/web/search", query.clone(), &headers);
    if headers.get("x-subscription-token").and_then(|v| v.to_str().ok()) != Some(KEY) {
        return (
            StatusCode::UNAUTHORIZED,
            axum::Json(
                json!({"type": "ErrorResponse", "error": {"code": "SUBSCRIPTION_TOKEN_INVALID", "status": 401}}),
            ),
        )
            .into_response();
    }
    let count: usize = query.get("count").and_then(|c| c.parse().ok()).unwrap_or(20);
    let results: Vec<Value> = (1..=count)
        .map(|i| json!({"type": "search_result", "title": format!("Brave {i}"), "url": format!("https://b{i}.example/"), "description": format!("About <strong>{}</strong>", query.get("q").cloned().unwrap_or_default()), "age": "2 days"}))
        .collect();
    axum::Json(
        json!({"type": "search", "query": {"original": query.get("q")}, "web": {"type": "search", "results": results}}),
    )
    .into_response()
}

async fn server() -> (SocketAddr, Shared) {
    let seen = Shared::default();
    let app = Router::new()
        .route("/search", get(searx))
        .route("/res/v1/web/search", get(brave))
        .route("/moved/search", get(|| async { Redirect::temporary("http://10.0.0.1/search") }))
        .route(
            "/limited/search",
            get(|| async { (StatusCode::TOO_MANY_REQUESTS, [("retry-after", "30")], "slow down").into_response() }),
        )
        .route("/garbage/search", get(|| async { "<html>not json</html>" }))
        .route("/huge/search", get(|| async { "x".repeat(2 * MAX_BODY_BYTES) }))
        .with_state(seen.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (addr, seen)
}

fn tool(backend: SearchBackend, url: String, key_env: Option<&str>, env: &[(&str, &str)]) -> WebSearchTool {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let config = WebSearchConfig {
        backend: Some(backend),
        url: Some(url),
        api_key_env: key_env.map(str::to_owned),
        max_results: 5,
        timeout: HumanDuration::secs(5),
    };
    let env = Env::from_map(env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
    WebSearchTool::from_config(&config, &env).unwrap().expect("configured")
}

async fn context(dir: &tempfile::TempDir) -> ToolContext {
    test_support::context(dir.path(), dir.path().into(), dir.path().into(), Arc::new(Nobody)).await
}

#[tokio::test]
async fn searxng_results_are_titled_linked_capped_and_cleaned() {
    let ((addr, seen), dir) = (server().await, tempfile::tempdir().unwrap());
    let ctx = context(&dir).await;
    let tool = tool(SearchBackend::Searxng, format!("http://{addr}"), None, &[]);
    assert_eq!(tool.spec().toolset, "web");
    let out = tool.call(&ctx, json!({"query": "  rust\nasync  "})).await.unwrap();
    assert!(
        out.starts_with("Results for \"rust async\":\n\n1. Result & 1\n   https://site1.example/page\n   xxx"),
        "{out}"
    );
    assert!(out.contains(&format!("   {}…\n", "x".repeat(SNIPPET_CAP))), "snippets capped: {out}");
    assert!(out.contains("2. Result & 2\n   https://site2.example/page\n   Snippet 2 with markup and lines"), "{out}");
    assert!(!out.contains("javascript:") && !out.contains("never shown"), "only http(s) results: {out}");
    assert!(out.contains("5. Result & 5") && !out.contains("6. "), "max_results caps the list: {out}");
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.paths, ["/search"]);
        assert_eq!(seen.queries[0].get("q").map(String::as_str), Some("rust async"));
        assert_eq!(seen.queries[0].get("format").map(String::as_str), Some("json"));
        assert_eq!(seen.tokens[0], None, "keyless");
    }
    let two = tool.call(&ctx, json!({"query": "x", "max_results": 2})).await.unwrap();
    assert!(two.contains("2. Result & 2") && !two.contains("3. "), "{two}");
    let many = tool.call(&ctx, json!({"query": "x", "max_results": 50})).await.unwrap();
    assert!(many.contains("5. ") && !many.contains("6. "), "the model cannot raise the cap: {many}");
}

#[tokio::test]
async fn brave_gets_its_key_header_and_count() {
    let ((addr, seen), dir) = (server().await, tempfile::tempdir().unwrap());
    let ctx = context(&dir).await;
    let url = format!("http://{addr}/res/v1/web/search");
    let good = tool(SearchBackend::Brave, url.clone(), Some("MY_BRAVE_KEY"), &[("MY_BRAVE_KEY", KEY)]);
    let out = good.call(&ctx, json!({"query": "hermes gateway", "max_results": 3})).await.unwrap();
    assert_eq!(
        out,
        "Results for \"hermes gateway\":\n\n1. Brave 1\n   https://b1.example/\n   About hermes gateway\n\n\
         2. Brave 2\n   https://b2.example/\n   About hermes gateway\n\n3. Brave 3\n   https://b3.example/\n   About hermes gateway"
    );
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.queries[0].get("count").map(String::as_str), Some("3"));
        assert_eq!(seen.tokens[0].as_deref(), Some(KEY));
    }
    assert!(!format!("{good:?}").contains(KEY), "Debug hides the key");
    let wrong = tool(SearchBackend::Brave, url, Some("MY_BRAVE_KEY"), &[("MY_BRAVE_KEY", "BSA-wrong-key-000")]);
    let err = wrong.call(&ctx, json!({"query": "x"})).await.unwrap_err().to_string();
    assert!(err.contains("refused the API key (HTTP 401"), "{err}");
    assert!(!err.contains("BSA-wrong-key-000") && !err.contains(KEY), "{err}");
}

#[tokio::test]
async fn errors_say_what_to_do_and_redirects_are_not_followed() {
    let ((addr, seen), dir) = (server().await, tempfile::tempdir().unwrap());
    let ctx = context(&dir).await;
    let call = |path: &str| {
        let tool = tool(SearchBackend::Searxng, format!("http://{addr}{path}"), None, &[]);
        let ctx = &ctx;
        async move { tool.call(ctx, json!({"query": "x"})).await.unwrap_err().to_string() }
    };
    let moved = call("/moved").await;
    assert!(moved.contains("redirect") && moved.contains("does not follow"), "{moved}");
    let limited = call("/limited").await;
    assert!(limited.contains("HTTP 429") && limited.contains("after 30 s"), "{limited}");
    assert!(call("/garbage").await.contains("not the expected JSON"));
    assert!(call("/huge").await.contains("more than 1024 KB"));
    assert_eq!(seen.lock().unwrap().paths.len(), 0, "none of these reached the recorder");
    let tool = tool(SearchBackend::Searxng, format!("http://{addr}"), None, &[]);
    let empty = tool.call(&ctx, json!({"query": " \n "})).await.unwrap_err().to_string();
    assert!(empty.contains("the query is empty"), "{empty}");
    let long = tool.call(&ctx, json!({"query": "q".repeat(MAX_QUERY_CHARS + 1)})).await.unwrap_err().to_string();
    assert!(long.contains("longer than"), "{long}");
    let extra = tool.call(&ctx, json!({"query": "x", "url": "http://169.254.169.254/"})).await.unwrap_err();
    assert!(matches!(extra, ToolError::InvalidArguments(_)), "the model cannot pass a URL: {extra}");
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let down = WebSearchTool { endpoint: Url::parse(&format!("http://{closed}")).unwrap(), ..tool };
    let err = down.call(&ctx, json!({"query": "x"})).await.unwrap_err().to_string();
    assert!(err.contains("cannot reach SearXNG at 127.0.0.1"), "{err}");
}

#[test]
fn not_offered_without_a_backend_and_refused_without_a_key() {
    let env = Env::from_map(HashMap::new());
    assert!(WebSearchTool::from_config(&WebSearchConfig::default(), &env).unwrap().is_none());
    let brave = WebSearchConfig { backend: Some(SearchBackend::Brave), ..WebSearchConfig::default() };
    let err = WebSearchTool::from_config(&brave, &env).unwrap_err().to_string();
    assert!(err.contains("BRAVE_SEARCH_API_KEY is not set"), "{err}");
}
