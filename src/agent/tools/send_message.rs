//! The `send_message` tool: send a message to a delivery target (`origin`, `local`, a platform's
//! home channel, or an explicit chat) through the outbox and that chat's pacer. It reports
//! "delivered" only once the platform returned a message id.
//!
//! A message to any chat other than the one the turn answers (or the operator's `local` file)
//! needs an admin's turn or the user's approval, so content the model read (a web page, a file)
//! cannot make it post elsewhere; where nobody can approve it is refused.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};
use crate::delivery::send::{SendOutcome, send};
use crate::delivery::{Target, Targets};
use crate::outbox::Outbox;

/// How long the tool waits for the platform's receipt.
const WAIT: Duration = Duration::from_secs(20);

/// Sends messages to targets.
pub struct SendMessageTool {
    targets: Targets,
    outbox: Outbox,
    approval_timeout: Duration,
}

impl SendMessageTool {
    /// A tool delivering through `outbox`, waiting `approval_timeout` for a user's approval.
    pub fn new(targets: Targets, outbox: Outbox, approval_timeout: Duration) -> Self {
        Self { targets, outbox, approval_timeout }
    }

    /// Whether `target` reaches only the turn's own chat or the operator's `local` file.
    async fn stays_here(&self, ctx: &ToolContext, target: &Target) -> bool {
        match target {
            Target::Origin | Target::Local => true,
            other => match self.targets.resolve(other, Some(&ctx.chat)).await {
                // Same chat, same audience, whichever thread.
                Ok(chat) => chat.platform == ctx.chat.platform && chat.chat_id == ctx.chat.chat_id,
                Err(_) => false,
            },
        }
    }

    /// Allow a send elsewhere: an admin's turn, else the user's approval.
    async fn authorise(&self, ctx: &ToolContext, target: &Target, text: &str) -> Result<(), ToolError> {
        if ctx.admin || self.stays_here(ctx, target).await {
            return Ok(());
        }
        let mut preview: String = text.chars().take(200).collect();
        if text.chars().count() > 200 {
            preview.push('…');
        }
        let action = format!("send a message to {target}: \"{preview}\"");
        match ctx.human.approve(&action, self.approval_timeout).await {
            Approval::Approved => Ok(()),
            Approval::Denied => Err(ToolError::Denied(format!("the user refused the message to {target}"))),
            Approval::TimedOut => Err(ToolError::Denied(format!("nobody approved the message to {target} in time"))),
            Approval::Unavailable => Err(ToolError::Denied(format!(
                "a message to {target} (not this chat) needs an admin or the user's approval, and nobody can \
                 approve here"
            ))),
        }
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
            timeout: self.approval_timeout + WAIT + Duration::from_secs(5),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let target = Target::parse(&args.target).map_err(|e| ToolError::InvalidArguments(e.to_string()))?;
        self.authorise(ctx, &target, &args.text).await?;
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
