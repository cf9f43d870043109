//! A fake search service on 127.0.0.1:0 speaking SearXNG's JSON API (`GET /search?q=…&format=json`)
//! and Brave Search's (`GET /res/v1/web/search?q=…&count=…` with `X-Subscription-Token`); it
//! records every query and the key header it got.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};

/// One search the fake answered (or refused).
#[derive(Debug, Clone)]
pub struct Search {
    /// The query string's parameters.
    pub params: HashMap<String, String>,
    /// `X-Subscription-Token` or `Authorization`, when sent.
    pub key: Option<String>,
}

#[derive(Default)]
struct Shared {
    searches: Mutex<Vec<Search>>,
    brave_key: Mutex<Option<String>>,
}

/// The running fake.
pub struct FakeSearch {
    addr: std::net::SocketAddr,
    shared: Arc<Shared>,
}

impl FakeSearch {
    /// Start it; Brave requests must carry `brave_key`.
    pub async fn start(brave_key: &str) -> Self {
        let shared = Arc::new(Shared::default());
        *shared.brave_key.lock().unwrap() = Some(brave_key.to_owned());
        let app = Router::new()
            .route("/search", get(searxng))
            .route("/res/v1/web/search", get(brave))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Self { addr, shared }
    }

    /// The SearXNG instance's base URL.
    pub fn searxng_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The Brave endpoint.
    pub fn brave_url(&self) -> String {
        format!("http://{}/res/v1/web/search", self.addr)
    }

    /// Every search so far.
    pub fn searches(&self) -> Vec<Search> {
        self.shared.searches.lock().unwrap().clone()
    }
}

fn record(shared: &Shared, params: &HashMap<String, String>, headers: &HeaderMap) {
    let key = headers.get("x-subscription-token").or_else(|| headers.get("authorization"));
    let key = key.and_then(|v| v.to_str().ok()).map(str::to_owned);
    shared.searches.lock().unwrap().push(Search { params: params.clone(), key });
}

/// Three results about the query, the way SearXNG shapes them.
async fn searxng(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    record(&shared, &params, &headers);
    if params.get("format").map(String::as_str) != Some("json") {
        return (StatusCode::FORBIDDEN, "403 Forbidden").into_response();
    }
    let q = params.get("q").cloned().unwrap_or_default();
    let results: Vec<Value> = (1..=3)
        .map(|i| {
            json!({"url": format!("https://searx{i}.example/{}", q.replace(' ', "-")), "title": format!("{q} — result {i}"),
                   "content": format!("What page {i} says about {q}."), "engine": "duckduckgo", "engines": ["duckduckgo"], "score": 1.0, "category": "general"})
        })
        .collect();
    axum::Json(json!({"query": q, "number_of_results": 3, "results": results, "answers": [], "corrections": [],
                      "infoboxes": [], "suggestions": [], "unresponsive_engines": []}))
    .into_response()
}

/// `count` results the way Brave shapes them (bold markup in descriptions), or its 401.
async fn brave(
    State(shared): State<Arc<Shared>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Response {
    record(&shared, &params, &headers);
    let expected = shared.brave_key.lock().unwrap().clone();
    let sent = headers.get("x-subscription-token").and_then(|v| v.to_str().ok()).map(str::to_owned);
    if sent.is_none() || sent != expected {
        let error = json!({"type": "ErrorResponse", "error": {"id": "x", "status": 401, "code": "SUBSCRIPTION_TOKEN_INVALID", "detail": "The provided subscription token is invalid."}});
        return (StatusCode::UNAUTHORIZED, axum::Json(error)).into_response();
    }
    let q = params.get("q").cloned().unwrap_or_default();
    let count: usize = params.get("count").and_then(|c| c.parse().ok()).unwrap_or(20).min(20);
    let results: Vec<Value> = (1..=count)
        .map(|i| {
            json!({"type": "search_result", "title": format!("Brave {i}: {q}"), "url": format!("https://brave{i}.example/"),
                   "description": format!("All about <strong>{q}</strong>, part {i}."), "age": "3 days", "language": "en"})
        })
        .collect();
    axum::Json(json!({"type": "search", "query": {"original": q}, "mixed": {"type": "mixed", "main": []},
                      "web": {"type": "search", "results": results, "family_friendly": true}}))
    .into_response()
}
