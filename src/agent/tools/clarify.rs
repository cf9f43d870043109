//! `clarify`: ask the user a question (optionally with choices, shown as buttons) and wait for
//! the answer. Where nobody can answer, it says so at once and the model proceeds on its best
//! judgement.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolSpec};

/// The tool.
#[derive(Debug)]
pub struct ClarifyTool {
    timeout: Duration,
}

impl ClarifyTool {
    /// Questions wait up to `timeout` for an answer.
    pub fn new(timeout: Duration) -> Self {
        Self { timeout }
    }
}

#[async_trait]
impl Tool for ClarifyTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "clarify".into(),
            description: "Ask the user a clarifying question when the request is ambiguous and a wrong guess would be \
                          costly. Offer choices when there are a few clear options."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "question": { "type": "string" },
                    "choices": { "type": "array", "items": { "type": "string" }, "maxItems": 8 }
                },
                "required": ["question"],
                "additionalProperties": false
            }),
            toolset: "clarify".into(),
            parallel_safe: false,
            max_result_chars: 4_000,
            timeout: self.timeout + Duration::from_secs(30),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let question = args["question"].as_str().map(str::trim).filter(|q| !q.is_empty());
        let question =
            question.ok_or_else(|| ToolError::InvalidArguments("`question` must be a non-empty string".into()))?;
        let choices: Vec<String> = args["choices"]
            .as_array()
            .map(|c| c.iter().filter_map(Value::as_str).map(str::to_owned).take(8).collect())
            .unwrap_or_default();
        match ctx.human.clarify(question, &choices, self.timeout).await {
            Some(answer) => Ok(format!("The user answered: {answer}")),
            None => Ok("No answer (nobody can answer here, or the question timed out). Proceed with your best \
                        judgement and state your assumption."
                .into()),
        }
    }
}
