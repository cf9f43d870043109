//! The `send_file` tool: send a workdir file, or a public http(s) URL downloaded with
//! `web_fetch`'s protections, to the chat the turn answers, as a document or a photo. The file is
//! copied into the data dir before its message is stored (`stage.rs`), then delivered through the
//! outbox like text: durable, paced per chat, reported delivered only with the platform's
//! message id. It must never read a path outside the workdir nor a secret-looking file.

mod media;
pub mod stage;

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{ChatRef, FileLimits, OutboundFile, OutboundKind, OutboundMessage};
use reqwest::Url;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::web_fetch::{WebFetchTool, request_error};
use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::delivery::send::{SendOutcome, WaitError, store_and_wait};
use crate::outbox::Outbox;
pub use media::attach_media;
pub use stage::split_media_lines;
use stage::{Slot, check_size, stage_workdir_file};

/// How long the tool waits for the platform's receipt. The file is durable once stored, so a slow
/// upload is reported as queued rather than holding the turn.
const WAIT: Duration = Duration::from_secs(5);
/// How long a download may take.
const DOWNLOAD_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest caption kept (Telegram's caption limit; longer text belongs in the answer).
const MAX_CAPTION_CHARS: usize = 1_024;

/// Sends files to the turn's chat.
pub struct SendFileTool {
    outbox: Outbox,
    fetch: WebFetchTool,
}

impl SendFileTool {
    /// A tool delivering through `outbox`, downloading URLs with `fetch`'s checked client.
    pub fn new(outbox: Outbox, fetch: WebFetchTool) -> Self {
        Self { outbox, fetch }
    }

    /// The file limits of `chat`'s platform, or why it cannot receive files.
    fn limits(&self, chat: &ChatRef) -> Result<FileLimits, ToolError> {
        let platform = self.outbox.platforms().get(&chat.platform);
        platform.and_then(|p| p.file_limits()).ok_or_else(|| {
            ToolError::Failed(format!(
                "this chat ({}) cannot receive files from a tool; put a line `MEDIA:<path>` in your final \
                 answer instead, and the file goes wherever the answer goes",
                chat.platform
            ))
        })
    }

    /// Download `url` into a fresh slot in the data dir, streaming, at most `limits` bytes.
    async fn download(&self, url: &str, data_dir: &Path, limits: FileLimits) -> Result<OutboundFile, ToolError> {
        let parsed =
            Url::parse(url).map_err(|e| ToolError::InvalidArguments(format!("{url:?} is not a valid URL ({e})")))?;
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(ToolError::InvalidArguments("URLs with a user name or password are not supported".into()));
        }
        let mut response = self.fetch.get_checked(parsed.clone(), "*/*").await?;
        if !response.status().is_success() {
            return Err(ToolError::Failed(format!("GET {url} returned HTTP {}", response.status())));
        }
        if let Some(length) = response.content_length() {
            check_size(url, length, limits)?;
        }
        let name = response
            .url()
            .path_segments()
            .and_then(|mut s| s.next_back().map(str::to_owned))
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "download".into());
        let slot = Slot::new(data_dir, &name).map_err(|e| ToolError::Failed(format!("cannot stage {url}: {e}")))?;
        let (part, mut out) = match slot.part() {
            Ok(part) => part,
            Err(e) => {
                slot.discard();
                return Err(ToolError::Failed(format!("cannot stage {url}: {e}")));
            }
        };
        let mut size = 0u64;
        let written = loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                Ok(None) => break Ok(()),
                Err(e) => break Err(request_error(&parsed, &e)),
            };
            size += chunk.len() as u64;
            if let Err(e) = check_size(url, size, limits) {
                break Err(e);
            }
            if let Err(e) = out.write_all(&chunk) {
                break Err(ToolError::Failed(format!("cannot write the download of {url}: {e}")));
            }
        };
        match written.and_then(|()| {
            slot.finish(&part, out, size).map_err(|e| ToolError::Failed(format!("cannot stage {url}: {e}")))
        }) {
            Ok(file) => Ok(file),
            Err(e) => {
                // `finish` consumed the slot on its own failure; remove what a failed copy left.
                let _ = std::fs::remove_file(&part);
                if let Some(dir) = part.parent() {
                    let _ = std::fs::remove_dir(dir);
                }
                Err(e)
            }
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    path: String,
    caption: Option<String>,
}

#[async_trait]
impl Tool for SendFileTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send_file".into(),
            description: "Send a file to this chat as a document (pictures as photos): a path in the workdir, or \
                          a public http(s) URL to download. Use it for files the user should receive; in a final \
                          answer a line `MEDIA:<path>` does the same."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Workdir path (relative or absolute inside it) or http(s) URL"},
                    "caption": {"type": "string", "description": "Short text shown with the file"}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
            toolset: "messaging".into(),
            parallel_safe: false,
            max_result_chars: 2_000,
            timeout: DOWNLOAD_TIMEOUT + WAIT + Duration::from_secs(5),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let limits = self.limits(&ctx.chat)?;
        let raw = args.path.trim().to_owned();
        let file = if raw.starts_with("http://") || raw.starts_with("https://") {
            tokio::time::timeout(DOWNLOAD_TIMEOUT, self.download(&raw, &ctx.data_dir, limits))
                .await
                .unwrap_or_else(|_| Err(ToolError::Failed(format!("downloading {raw} took too long"))))?
        } else {
            let (workdir, data_dir) = (ctx.workdir.clone(), ctx.data_dir.clone());
            tokio::task::spawn_blocking(move || stage_workdir_file(&workdir, &data_dir, &raw, limits))
                .await
                .map_err(|_| ToolError::Failed("the file copy crashed".into()))??
        };
        let caption: String = args.caption.unwrap_or_default().chars().take(MAX_CAPTION_CHARS).collect();
        let name = file.name.clone();
        let message = OutboundMessage {
            chat: ctx.chat.clone(),
            text: self.outbox.redaction().redact(&caption),
            reply_to: None,
            kind: OutboundKind::Notice,
            buttons: Vec::new(),
            chunk: (0, 1),
            file: Some(file),
        };
        let sent = store_and_wait(ctx.store.as_ref(), &self.outbox, &ctx.chat, &[message], WAIT).await;
        match sent {
            Ok(SendOutcome::Delivered(ids)) => Ok(format!("sent {name} (message id {})", ids.join(", "))),
            Ok(SendOutcome::Queued) => {
                Ok(format!("{name} is stored and queued; it will be delivered (also after a restart)"))
            }
            Err(WaitError::Failed(error)) => Err(ToolError::Failed(format!("{name} was not delivered: {error}"))),
            Err(WaitError::Store(error)) => Err(ToolError::Failed(error)),
        }
    }
}

#[cfg(test)]
mod tests;
