//! `delegate_task`: run a child agent on a self-contained task with its own iteration budget and
//! a restricted toolset (no further delegation, no questions to the user); only its final text
//! returns to the parent's context. A child never gets a tool its parent's policy refuses.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Registry, Tool, ToolContext, ToolError, ToolPolicy, ToolSpec};
use crate::agent::runtime::agent_loop::{AgentLoop, LoopLimits, LoopOutcome};
use crate::agent::runtime::chain::ProviderChain;
use crate::agent::runtime::compress::Compressor;
use crate::agent::runtime::prompt::PromptBuilder;
use crate::vocab::message::{Message, Role};

const CHILD_PROMPT: &str = "You are a sub-agent working on one delegated task. Work independently with your tools; \
you cannot ask the user anything. Finish with a concise report of the result, including any facts, paths or \
commands the caller needs.";

/// The tool.
pub struct DelegateTool {
    chain: ProviderChain,
    tools: Registry,
    max_iterations: u32,
    prompts: PromptBuilder,
}

impl DelegateTool {
    /// Children use `chain`, may call `tools` (which must not contain `delegate_task` or
    /// `clarify`), and get `max_iterations` model calls.
    pub fn new(chain: ProviderChain, tools: Registry, max_iterations: u32, prompts: PromptBuilder) -> Self {
        Self { chain, tools, max_iterations, prompts }
    }
}

#[async_trait]
impl Tool for DelegateTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "delegate_task".into(),
            description:
                "Hand a self-contained sub-task (research, a focused investigation, a batch of file edits) to a \
                          sub-agent with its own step budget. Give it everything it needs in `task` and `context`; \
                          only its final report comes back."
                    .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "task": { "type": "string", "description": "What to do and what to report back." },
                    "context": { "type": "string", "description": "Background the sub-agent needs." }
                },
                "required": ["task"],
                "additionalProperties": false
            }),
            toolset: "delegate".into(),
            parallel_safe: true,
            max_result_chars: 16_000,
            timeout: Duration::from_secs(30 * 60),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let task = args["task"].as_str().map(str::trim).filter(|t| !t.is_empty());
        let task = task.ok_or_else(|| ToolError::InvalidArguments("`task` must be a non-empty string".into()))?;
        let mut text = task.to_owned();
        if let Some(context) = args["context"].as_str().filter(|c| !c.trim().is_empty()) {
            text = format!("{text}\n\nContext:\n{context}");
        }
        // The child's tools: the ones children may have, narrowed to what the parent may use.
        let tools = self.tools.allowed(&ctx.policy);
        let policy = ToolPolicy::new(tools.toolsets()).narrow(&ctx.policy);
        let child_ctx = ToolContext { policy, ..ctx.clone() };
        let ctx = &child_ctx;
        let system = format!(
            "{CHILD_PROMPT}\n\n{}",
            self.prompts.for_platform(&ctx.chat.platform).build(&tools.toolsets(), chrono::Utc::now().date_naive())
        );
        // The child keeps nothing in the store: its compressor has no session to compact.
        let compressor = Compressor {
            store: ctx.store.clone(),
            session_id: String::new(),
            threshold: 0.99,
            prompts: self.prompts.clone(),
            toolsets: Vec::new(),
            before: None,
        };
        let child = AgentLoop {
            chain: &self.chain,
            tools: &tools,
            ctx,
            compressor: &compressor,
            events: &|_| {},
            steer: &|| None,
            limits: LoopLimits { max_iterations: self.max_iterations, max_nudges: 2, stream: false },
            media: None,
            client_tools: &[],
            resumed: &[],
        };
        let result = child.run(system, vec![Message::text(Role::User, text)], &ctx.cancel).await;
        match result.outcome {
            LoopOutcome::Answered | LoopOutcome::Summarised => Ok(result.text),
            LoopOutcome::Stopped => Err(ToolError::Failed("the sub-agent was stopped".into())),
            LoopOutcome::Failed | LoopOutcome::NotConfigured => Err(ToolError::Failed(result.text)),
            // The sub-agent is offered no client functions.
            LoopOutcome::ClientCalls => Err(ToolError::Failed("the sub-agent called a client function".into())),
        }
    }
}
