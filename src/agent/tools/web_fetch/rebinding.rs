//! DNS rebinding and redirect tests with a scripted resolver and the strict policy (no loopback
//! allowance). A "public" answer (93.184.215.14) is checked as such, and only its socket is
//! served by a fake on 127.0.0.1 (the test-only stand-in), so nothing leaves the machine. A second
//! fake on 127.0.0.1 plays the internal service and counts every request it gets: it must get
//! none.

use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::response::Redirect;
use axum::routing::get;

use super::resolve::GuardedResolver;
use super::*;
use crate::agent::tools::Nobody;
use crate::agent::tools::test_support;

const PUBLIC: &str = "93.184.215.14";

/// Answers scripted lookups in order, then 127.0.0.1 for ever (the rebinding); records every
/// name it was asked.
#[derive(Default)]
struct ScriptedLookup {
    answers: Mutex<VecDeque<Vec<IpAddr>>>,
    asked: Mutex<Vec<String>>,
}

impl ScriptedLookup {
    fn new(answers: &[&[&str]]) -> Arc<Self> {
        let answers = answers.iter().map(|a| a.iter().map(|ip| ip.parse().unwrap()).collect()).collect();
        Arc::new(Self { answers: Mutex::new(answers), asked: Mutex::default() })
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Lookup for ScriptedLookup {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        self.asked.lock().unwrap().push(host.to_owned());
        let next = self.answers.lock().unwrap().pop_front();
        Ok(next.unwrap_or_else(|| vec!["127.0.0.1".parse().unwrap()]))
    }
}

struct Fakes {
    /// The "public" site's real socket.
    public: SocketAddr,
    /// The internal service.
    internal: SocketAddr,
    internal_hits: Arc<AtomicUsize>,
}

async fn serve(app: Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn fakes() -> Fakes {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let internal = serve(Router::new().fallback(move || {
        counter.fetch_add(1, Ordering::SeqCst);
        async { "internal secret" }
    }))
    .await;
    let port = internal.port();
    let public = serve(
        Router::new()
            .route("/page", get(|| async { "public page" }))
            .route("/to-literal", get(move || async move { Redirect::to(&format!("http://127.0.0.1:{port}/secret")) }))
            .route("/to-mapped", get(move || async move { Redirect::to(&format!("http://[::ffff:7f00:1]:{port}/")) }))
            .route(
                "/to-name",
                get(move || async move { Redirect::to(&format!("http://inner.example:{port}/secret")) }),
            ),
    )
    .await;
    Fakes { public, internal, internal_hits: hits }
}

fn tool(lookup: Arc<ScriptedLookup>, fakes: &Fakes) -> WebFetchTool {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let stand_ins = HashMap::from([(PUBLIC.parse().unwrap(), fakes.public)]);
    let resolver = GuardedResolver { lookup, policy: AddressPolicy::default(), stand_ins: Arc::new(stand_ins) };
    WebFetchTool::with_resolver(resolver).unwrap()
}

async fn fetch(tool: &WebFetchTool, url: &str) -> Result<String, ToolError> {
    let dir = tempfile::tempdir().unwrap();
    let ctx = test_support::context(dir.path(), dir.path().into(), dir.path().into(), Arc::new(Nobody)).await;
    tool.call(&ctx, json!({"url": url})).await
}

fn assert_denied(result: Result<String, ToolError>, needle: &str) {
    match result {
        Err(ToolError::Denied(why)) => assert!(why.contains(needle), "{why}"),
        other => panic!("expected a refusal naming {needle}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_name_is_resolved_once_and_the_checked_answer_is_the_one_connected_to() {
    let fakes = fakes().await;
    // First answer public, every later one 127.0.0.1: a checker that resolved again to connect
    // would end up on loopback.
    let lookup = ScriptedLookup::new(&[&[PUBLIC]]);
    let tool = tool(lookup.clone(), &fakes);
    let page = fetch(&tool, "http://rebind.example/page").await.unwrap();
    assert_eq!(page, "URL: http://rebind.example/page\n\npublic page");
    assert_eq!(lookup.asked(), ["rebind.example"], "one lookup per connection, none to check first");

    // A new name now answers loopback: refused at the resolver, nothing reaches the service.
    let port = fakes.internal.port();
    assert_denied(
        fetch(&tool, &format!("http://other.example:{port}/secret")).await,
        "resolves to 127.0.0.1, loopback",
    );
    assert_eq!(lookup.asked(), ["rebind.example", "other.example"]);
    assert_eq!(fakes.internal_hits.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn an_answer_mixing_public_and_special_addresses_is_refused_whole() {
    let fakes = fakes().await;
    let lookup = ScriptedLookup::new(&[&[PUBLIC, "10.0.0.7"], &["2606:4700::1", "fe80::1"]]);
    let tool = tool(lookup.clone(), &fakes);
    assert_denied(fetch(&tool, "http://mixed.example/page").await, "resolves to 10.0.0.7, private-use");
    assert_denied(fetch(&tool, "http://mixed6.example/page").await, "resolves to fe80::1, link-local");
    assert_eq!(lookup.asked().len(), 2);
}

#[tokio::test]
async fn every_redirect_hop_is_checked() {
    let fakes = fakes().await;
    let lookup = ScriptedLookup::new(&[&[PUBLIC], &[PUBLIC], &[PUBLIC]]);
    let tool = tool(lookup.clone(), &fakes);
    let port = fakes.internal.port();
    let cases = [
        ("to-literal", "127.0.0.1 is loopback"),
        ("to-mapped", "::ffff:127.0.0.1 is IPv4-mapped (::ffff:0:0/96) embedding 127.0.0.1"),
        ("to-name", "inner.example resolves to 127.0.0.1, loopback"),
    ];
    for (i, (path, needle)) in cases.iter().enumerate() {
        // A fresh name per case, so each first hop resolves (and is checked) anew.
        let result = fetch(&tool, &format!("http://site{i}.example/{path}")).await;
        assert_denied(result, needle);
    }
    assert_eq!(fakes.internal_hits.load(Ordering::SeqCst), 0, "the internal service on port {port} was reached");
    assert_eq!(lookup.asked(), ["site0.example", "site1.example", "site2.example", "inner.example"]);
}
