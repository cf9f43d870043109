//! The `send_message` tool: send a message to a delivery target (`origin`, `local`, a platform's
//! home channel, or an explicit chat) through the outbox and that chat's pacer. It reports
//! "delivered" only once the platform returned a message id.
//!
//! A message to any chat other than the one the turn answers (or the operator's `local` file)
//! needs an admin's turn or the user's approval, so content the model read (a web page, a file)
//! cannot make it post elsewhere; where nobody can approve it is refused.
//!
//! That rule is `authorise_elsewhere`, which the `cronjob` tool applies too when a job is created
//! or retargeted to deliver elsewhere.

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};
use crate::delivery::Targets;
use crate::delivery::send::{SendOutcome, send};
use crate::outbox::Outbox;
use crate::vocab::target::Target;

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

    /// Allow a send elsewhere: an admin's turn, else the user's approval.
    async fn authorise(&self, ctx: &ToolContext, target: &Target, text: &str) -> Result<(), ToolError> {
        let action = format!("send a message to {target}: \"{}\"", preview(text));
        authorise_elsewhere(&self.targets, ctx, target, &action, self.approval_timeout)
            .await
            .map_err(|refusal| ToolError::Denied(refusal.for_what(&format!("the message to {target}"))))
    }
}

/// Whether `target` reaches only the turn's own chat or the operator's `local` file.
async fn stays_here(targets: &Targets, ctx: &ToolContext, target: &Target) -> bool {
    match target {
        Target::Origin | Target::Local => true,
        other => match targets.resolve(other, Some(&ctx.chat)).await {
            // Same chat, same audience, whichever thread.
            Ok(chat) => chat.platform == ctx.chat.platform && chat.chat_id == ctx.chat.chat_id,
            Err(_) => false,
        },
    }
}

/// The first 200 characters of `text`, for an approval question.
pub(super) fn preview(text: &str) -> String {
    let mut preview: String = text.chars().take(200).collect();
    if text.chars().count() > 200 {
        preview.push('…');
    }
    preview
}

/// Why a post elsewhere was not allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The user said no.
    Denied,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody can answer here (a cron run, a webhook, the API).
    Unavailable,
}

impl Refusal {
    /// The refusal as a tool's error text, `what` naming the thing refused.
    pub(super) fn for_what(self, what: &str) -> String {
        match self {
            Refusal::Denied => format!("the user refused {what}"),
            Refusal::TimedOut => format!("nobody approved {what} in time"),
            Refusal::Unavailable => {
                format!("{what} (not this chat) needs an admin or the user's approval, and nobody can approve here")
            }
        }
    }
}

/// The rule for anything that posts to a chat other than the turn's own (a message now, a cron
/// job's runs later): allowed for an admin's turn or into this chat (or `local`), else only
/// after the user approved `action`. So content the model read cannot make it post elsewhere.
pub(super) async fn authorise_elsewhere(
    targets: &Targets,
    ctx: &ToolContext,
    target: &Target,
    action: &str,
    timeout: Duration,
) -> Result<(), Refusal> {
    if ctx.admin || stays_here(targets, ctx, target).await {
        return Ok(());
    }
    match ctx.human.approve(action, timeout).await {
        Approval::Approved => Ok(()),
        Approval::Denied => Err(Refusal::Denied),
        Approval::TimedOut => Err(Refusal::TimedOut),
        Approval::Unavailable => Err(Refusal::Unavailable),
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
