//! Executor tests with small in-test tools: ordering, concurrency, panics, hangs, bad JSON.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::super::{Nobody, Registry, Tool, ToolContext, ToolError, ToolSpec, test_support};
use super::{ExecutorLimits, cap, parse_arguments, run_calls};
use crate::vocab::message::ToolCall;

enum Behaviour {
    Sleep(Duration),
    Panic,
    Hang,
    Fail,
    Huge,
}

struct TestTool {
    name: &'static str,
    parallel_safe: bool,
    behaviour: Behaviour,
    running: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
}

#[async_trait]
impl Tool for TestTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.name.into(),
            description: "test".into(),
            parameters: json!({"type": "object"}),
            toolset: "test".into(),
            parallel_safe: self.parallel_safe,
            max_result_chars: 50,
            // Only the hanging tool waits out its timeout; the others get one no loaded machine
            // reaches, so a slow schedule never reads as "did not finish".
            timeout: match self.behaviour {
                Behaviour::Hang => Duration::from_millis(300),
                _ => Duration::from_secs(30),
            },
        }
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let result = match self.behaviour {
            Behaviour::Sleep(d) => {
                tokio::time::sleep(d).await;
                Ok(format!("{} {}", self.name, args["n"]))
            }
            Behaviour::Panic => panic!("tool bug"),
            Behaviour::Hang => {
                std::future::pending::<()>().await;
                unreachable!()
            }
            Behaviour::Fail => Err(ToolError::Failed("disk on fire".into())),
            Behaviour::Huge => Ok("x".repeat(500)),
        };
        self.running.fetch_sub(1, Ordering::SeqCst);
        result
    }
}

struct Fixture {
    registry: Registry,
    peak: Arc<AtomicUsize>,
    ctx: ToolContext,
    _dir: tempfile::TempDir,
}

async fn fixture() -> Fixture {
    let (running, peak) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut registry = Registry::default();
    let tools = [
        ("fast", true, Behaviour::Sleep(Duration::from_millis(100))),
        ("serial", false, Behaviour::Sleep(Duration::from_millis(10))),
        ("panics", true, Behaviour::Panic),
        ("hangs", true, Behaviour::Hang),
        ("fails", true, Behaviour::Fail),
        ("huge", true, Behaviour::Huge),
    ];
    for (name, parallel_safe, behaviour) in tools {
        registry.register(Arc::new(TestTool {
            name,
            parallel_safe,
            behaviour,
            running: running.clone(),
            peak: peak.clone(),
        }));
    }
    let dir = tempfile::tempdir().unwrap();
    let ctx = test_support::context(dir.path(), dir.path().into(), dir.path().into(), Arc::new(Nobody)).await;
    Fixture { registry, peak, ctx, _dir: dir }
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: args.into() }
}

#[tokio::test]
async fn parallel_calls_overlap_and_keep_order() {
    let f = fixture().await;
    let calls: Vec<_> = (0..4).map(|i| call(&format!("c{i}"), "fast", &format!("{{\"n\":{i}}}"))).collect();
    let started = std::time::Instant::now();
    let outcomes = run_calls(&f.registry, &f.ctx, &calls, ExecutorLimits::default()).await;
    assert!(started.elapsed() < Duration::from_millis(350), "ran concurrently: {:?}", started.elapsed());
    assert_eq!(f.peak.load(Ordering::SeqCst), 4);
    let ids: Vec<_> = outcomes.iter().map(|o| (o.call_id.as_str(), o.content.as_str())).collect();
    assert_eq!(ids, [("c0", "fast 0"), ("c1", "fast 1"), ("c2", "fast 2"), ("c3", "fast 3")]);
}

#[tokio::test]
async fn serial_calls_split_batches() {
    let f = fixture().await;
    let calls = [call("a", "fast", "{}"), call("b", "serial", "{}"), call("c", "fast", "{}")];
    let outcomes = run_calls(&f.registry, &f.ctx, &calls, ExecutorLimits::default()).await;
    assert_eq!(outcomes.iter().map(|o| o.call_id.as_str()).collect::<Vec<_>>(), ["a", "b", "c"]);
    assert_eq!(f.peak.load(Ordering::SeqCst), 1, "never two at once around a serial call");
}

#[tokio::test]
async fn failures_become_error_results() {
    let f = fixture().await;
    let calls = [
        call("1", "panics", "{}"),
        call("2", "hangs", "{}"),
        call("3", "fails", "{}"),
        call("4", "nope", "{}"),
        call("5", "fast", "{not json"),
        call("6", "fast", "[1,2]"),
        call("7", "huge", ""),
    ];
    let outcomes = run_calls(&f.registry, &f.ctx, &calls, ExecutorLimits::default()).await;
    let expect =
        ["crashed", "did not finish", "disk on fire", "no tool named", "not valid JSON", "must be a JSON object"];
    for (outcome, needle) in outcomes.iter().zip(expect) {
        assert!(outcome.error, "{outcome:?}");
        assert!(outcome.content.contains(needle), "{:?} should contain {needle:?}", outcome.content);
    }
    assert!(!outcomes[6].error);
    assert!(outcomes[6].content.contains("450 of 500 characters omitted"), "{}", outcomes[6].content);
}

#[tokio::test]
async fn cancel_stops_running_tools() {
    let f = fixture().await;
    let cancel = f.ctx.cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let started = std::time::Instant::now();
    let outcomes = run_calls(&f.registry, &f.ctx, &[call("x", "hangs", "{}")], ExecutorLimits::default()).await;
    assert!(started.elapsed() < Duration::from_millis(250));
    assert!(outcomes[0].content.contains("cancelled"), "{:?}", outcomes[0]);
}

#[test]
fn argument_parsing_and_capping() {
    assert_eq!(parse_arguments("").unwrap(), json!({}));
    assert_eq!(parse_arguments(" {\"a\":1} ").unwrap(), json!({"a": 1}));
    assert!(parse_arguments("null").is_err());
    assert_eq!(cap("héllo".into(), 10), "héllo");
    assert!(cap("héllo wörld".into(), 3).starts_with("hél\n[… output truncated: 8 of 11"));
}
