//! The `send_message` tool: send a message to a delivery target (`origin`, `local`, a platform's
//! home channel, or an explicit chat) through the outbox and that chat's pacer. It reports
//! "delivered" only once the platform returned a message id.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::delivery::Targets;
use crate::delivery::send::{SendOutcome, send};
use crate::outbox::Outbox;

/// How long the tool waits for the platform's receipt.
const WAIT: Duration = Duration::from_secs(20);

/// Sends messages to targets.
pub struct SendMessageTool {
    targets: Targets,
    outbox: Outbox,
}

impl SendMessageTool {
    /// A tool delivering through `outbox`.
    pub fn new(targets: Targets, outbox: Outbox) -> Self {
        Self { targets, outbox }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    target: String,
    text: String,
}

#[async_trait]
impl Tool for SendMessageTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send_message".into(),
            description: "Send a message to a chat other than this conversation's reply: 'origin' (this chat), \
                          'local' (a file on the server), '<platform>' (its home channel) or \
                          '<platform>:<chat_id>[:<thread_id>]'."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "target": {"type": "string"},
                    "text": {"type": "string", "description": "Markdown text"}
                },
                "required": ["target", "text"],
                "additionalProperties": false
            }),
            toolset: "messaging".into(),
            parallel_safe: false,
            max_result_chars: 2_000,
            timeout: WAIT + Duration::from_secs(5),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let sent =
            send(ctx.store.as_ref(), &self.outbox, &self.targets, &args.target, Some(&ctx.chat), &args.text, WAIT)
                .await
                .map_err(ToolError::Failed)?;
        Ok(match sent {
            (chat, SendOutcome::Delivered(ids)) => {
                format!("delivered to {} (message ids: {})", chat.key(), ids.join(", "))
            }
            (chat, SendOutcome::Queued) => format!("queued for {}; the platform has not confirmed it yet", chat.key()),
        })
    }
}
