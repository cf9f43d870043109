//! One MCP server tool as a hermesd `Tool`: approval when the server asks for it, the call on
//! the server's current session, and the result mapped to tool output (text joined, images
//! saved under the data dir, resources by URI and text, `isError` as a tool error).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;

use super::client::{CallOutput, Part};
use super::server::ServerState;
use crate::agent::tools::{Approval, Tool, ToolContext, ToolError, ToolSpec};

/// A tool of an MCP server.
pub(super) struct McpTool {
    spec: ToolSpec,
    remote_name: String,
    server: Arc<ServerState>,
    approve: bool,
    approval_timeout: Duration,
}

impl McpTool {
    /// The tool `remote_name` of `server`, offered as `spec`.
    pub(super) fn new(
        spec: ToolSpec,
        remote_name: String,
        server: Arc<ServerState>,
        approve: bool,
        approval_timeout: Duration,
    ) -> Self {
        Self { spec, remote_name, server, approve, approval_timeout }
    }
}

#[async_trait]
impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        self.spec.clone()
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let Value::Object(arguments) = args else {
            return Err(ToolError::InvalidArguments("arguments must be a JSON object".into()));
        };
        if self.approve {
            let preview: String = Value::Object(arguments.clone()).to_string().chars().take(300).collect();
            let action = format!("MCP server {}: call {} with {preview}", self.server.name, self.remote_name);
            match ctx.human.approve(&action, self.approval_timeout).await {
                Approval::Approved => {}
                Approval::Denied => return Err(ToolError::Denied("the user refused this call".into())),
                Approval::TimedOut => return Err(ToolError::Denied("nobody approved this call in time".into())),
                Approval::Unavailable => {
                    return Err(ToolError::Denied(
                        "this server's calls need approval and nobody here can give it".into(),
                    ));
                }
            }
        }
        let Some(session) = self.server.session() else {
            return Err(ToolError::Failed(format!(
                "MCP server {} is not connected ({}); try again later",
                self.server.name,
                self.server.status().describe()
            )));
        };
        let started = Instant::now();
        let outcome = session.call_tool(&self.remote_name, arguments).await;
        let result = match outcome {
            Ok(output) => {
                let text = render(&output, &ctx.data_dir, &self.server.name);
                if output.is_error { Err(ToolError::Failed(text)) } else { Ok(text) }
            }
            Err(e) => Err(ToolError::Failed(format!("MCP server {}: {e}", self.server.name))),
        };
        self.server.stats.record(started.elapsed(), result.is_err());
        result
    }
}

/// Tool output text for a call's result. Images are saved under
/// `media/mcp/<server>/` in the data dir and named in the text.
pub(super) fn render(output: &CallOutput, data_dir: &std::path::Path, server: &str) -> String {
    let mut pieces = Vec::new();
    for part in &output.parts {
        match part {
            Part::Text(text) => pieces.push(text.clone()),
            Part::Resource { uri, text: Some(text) } => pieces.push(format!("[resource {uri}]\n{text}")),
            Part::Resource { uri, text: None } => pieces.push(format!("[resource {uri}]")),
            Part::Image { mime, data } => pieces.push(save_image(data_dir, server, mime, data)),
        }
    }
    if pieces.iter().all(|p| p.trim().is_empty())
        && let Some(structured) = &output.structured
    {
        return structured.to_string();
    }
    if pieces.is_empty() {
        return "(no output)".into();
    }
    pieces.join("\n")
}

fn save_image(data_dir: &std::path::Path, server: &str, mime: &str, data: &[u8]) -> String {
    let ext = match mime {
        "image/png" => "png",
        "image/jpeg" => "jpg",
        "image/gif" => "gif",
        "image/webp" => "webp",
        _ => "bin",
    };
    let relative =
        std::path::PathBuf::from("media").join("mcp").join(server).join(format!("{}.{ext}", uuid::Uuid::now_v7()));
    let path = data_dir.join(&relative);
    let saved = path.parent().map(std::fs::create_dir_all).transpose().and_then(|_| std::fs::write(&path, data));
    match saved {
        Ok(()) => format!("[image {mime}, {} bytes, saved as {}]", data.len(), relative.display()),
        Err(e) => format!("[image {mime}, {} bytes, could not be saved: {e}]", data.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_joined_and_resources_named() {
        let output = CallOutput {
            is_error: false,
            parts: vec![
                Part::Text("one".into()),
                Part::Text("two".into()),
                Part::Resource { uri: "file:///a.txt".into(), text: Some("body".into()) },
                Part::Resource { uri: "file:///b.bin".into(), text: None },
            ],
            structured: None,
        };
        let dir = tempfile::tempdir().expect("tempdir");
        assert_eq!(
            render(&output, dir.path(), "s"),
            "one\ntwo\n[resource file:///a.txt]\nbody\n[resource file:///b.bin]"
        );
    }

    #[test]
    fn images_are_saved_under_the_data_dir() {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = CallOutput {
            is_error: false,
            parts: vec![Part::Image { mime: "image/png".into(), data: vec![1, 2, 3] }],
            structured: None,
        };
        let text = render(&output, dir.path(), "shots");
        let saved = text.split("saved as ").nth(1).expect("saved").trim_end_matches(']');
        assert!(saved.starts_with("media/mcp/shots/") && saved.ends_with(".png"), "{text}");
        assert_eq!(std::fs::read(dir.path().join(saved)).expect("file"), [1, 2, 3]);
    }

    #[test]
    fn structured_content_is_used_without_text() {
        let output = CallOutput { is_error: false, parts: vec![], structured: Some(serde_json::json!({"t": 1})) };
        assert_eq!(render(&output, std::path::Path::new("/nonexistent"), "s"), r#"{"t":1}"#);
        let empty = CallOutput::default();
        assert_eq!(render(&empty, std::path::Path::new("/nonexistent"), "s"), "(no output)");
    }
}
