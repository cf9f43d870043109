//! Runs a batch of tool calls: parallel-safe calls concurrently (bounded), the others one at a
//! time, results in call order. Each call runs in its own task with a timeout, so a tool that
//! panics or hangs yields an error result instead of a dead turn; output has secrets masked and
//! is capped before it enters the context.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::Semaphore;

use super::{Registry, Tool, ToolContext, ToolOutput};
use crate::vocab::message::{ImageRef, ToolCall};

/// Bounds on a batch.
#[derive(Debug, Clone, Copy)]
pub struct ExecutorLimits {
    /// Parallel-safe calls running at once.
    pub max_parallel: usize,
}

impl Default for ExecutorLimits {
    fn default() -> Self {
        Self { max_parallel: 8 }
    }
}

/// One call's result, ready to become a `tool` message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    /// The call this answers.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The text the model sees.
    pub content: String,
    /// Whether the call failed (the content says why).
    pub error: bool,
    /// Images the tool returned (named in `content`).
    pub images: Vec<ImageRef>,
    /// How long it ran.
    pub elapsed: Duration,
}

/// Run `calls` in order, concurrently where every call of a run of neighbours is parallel-safe.
pub async fn run_calls(
    registry: &Registry,
    ctx: &ToolContext,
    calls: &[ToolCall],
    limits: ExecutorLimits,
) -> Vec<CallOutcome> {
    let permits = Arc::new(Semaphore::new(limits.max_parallel.max(1)));
    let mut outcomes = Vec::with_capacity(calls.len());
    let mut batch: Vec<&ToolCall> = Vec::new();
    for call in calls {
        let safe = registry.spec(&call.name).is_some_and(|spec| spec.parallel_safe);
        if safe {
            batch.push(call);
            continue;
        }
        outcomes.extend(run_batch(registry, ctx, &batch, &permits).await);
        batch.clear();
        outcomes.push(run_one(registry, ctx, call).await);
    }
    outcomes.extend(run_batch(registry, ctx, &batch, &permits).await);
    // A wait for a person cut off while parked left the turn without its worker permit.
    ctx.human.rejoin().await;
    outcomes
}

async fn run_batch(
    registry: &Registry,
    ctx: &ToolContext,
    batch: &[&ToolCall],
    permits: &Arc<Semaphore>,
) -> Vec<CallOutcome> {
    let runs = batch.iter().map(|call| async move {
        let _permit = permits.acquire().await.expect("executor semaphore is never closed");
        run_one(registry, ctx, call).await
    });
    futures_util::future::join_all(runs).await
}

async fn run_one(registry: &Registry, ctx: &ToolContext, call: &ToolCall) -> CallOutcome {
    let started = Instant::now();
    let (content, images, error) = match execute(registry, ctx, call).await {
        Ok(output) => (output.text, output.images, false),
        Err(text) => (text, Vec::new(), true),
    };
    let (call_id, name, elapsed) = (call.id.clone(), call.name.clone(), started.elapsed());
    CallOutcome { call_id, name, content, error, images, elapsed }
}

async fn execute(registry: &Registry, ctx: &ToolContext, call: &ToolCall) -> Result<ToolOutput, String> {
    let (Some(tool), Some(spec)) = (registry.get(&call.name).cloned(), registry.spec(&call.name).cloned()) else {
        let known = registry.specs().iter().map(|s| s.name.as_ref()).collect::<Vec<_>>().join(", ");
        return Err(format!("error: there is no tool named {:?}; available tools: {known}", call.name));
    };
    let args = parse_arguments(&call.arguments).map_err(|e| format!("error: {e}"))?;
    let task_ctx = ctx.clone();
    let task_tool: Arc<dyn Tool> = tool.clone();
    let mut handle = tokio::spawn(async move { task_tool.call_output(&task_ctx, args).await });
    let result = tokio::select! {
        joined = &mut handle => joined,
        _ = tokio::time::sleep(spec.timeout) => {
            handle.abort();
            return Err(format!("error: {} did not finish within {}s and was stopped", spec.name, spec.timeout.as_secs()));
        }
        _ = ctx.cancel.cancelled() => {
            handle.abort();
            return Err(format!("error: {} was cancelled because the turn was stopped", spec.name));
        }
    };
    // Masked before the cap, so a cut never leaves half a token unrecognised.
    let redact = |text: &str| registry.redaction().redact(text);
    match result {
        Ok(Ok(output)) => Ok(ToolOutput { text: cap(redact(&output.text), spec.max_result_chars), ..output }),
        Ok(Err(e)) => Err(cap(redact(&format!("error: {e}")), spec.max_result_chars)),
        Err(join) => {
            tracing::error!(tool = %spec.name, error = %join, "tool panicked");
            Err(format!("error: {} crashed; try another approach", spec.name))
        }
    }
}

/// Parse the model's argument text. Empty means no arguments; anything but a JSON object is
/// rejected with a message the model can act on.
pub(super) fn parse_arguments(text: &str) -> Result<Value, String> {
    if text.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(format!("arguments must be a JSON object, got {}", kind(&other))),
        Err(e) => {
            Err(format!("arguments are not valid JSON ({e}); resend the call with a JSON object matching the schema"))
        }
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Cut `text` to `max` chars on a char boundary, saying how much was cut.
pub(super) fn cap(text: String, max: usize) -> String {
    let total = text.chars().count();
    if total <= max {
        return text;
    }
    let kept: String = text.chars().take(max).collect();
    format!("{kept}\n[… output truncated: {} of {total} characters omitted]", total - max)
}

#[cfg(test)]
mod tests;
