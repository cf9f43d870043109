//! One MCP server tool as a hermesd `Tool`: approval when the server asks for it, the call on the
//! server's current session, and the result mapped to tool output (text joined, images saved in the
//! chat's media folder as `mcp_<server>_<id>.<ext>` and returned as image references, resources by
//! URI and text, `isError` as a tool error).

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::Value;

use super::client::{CallOutput, Part};
use super::server::ServerState;
use crate::agent::tools::{Approval, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use crate::vocab::message::ImageRef;

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
        self.call_output(ctx, args).await.map(|output| output.text)
    }

    async fn call_output(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
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
        // A server restarting after a crash is waited for, within half the call's own time: the
        // other half is the call's, and the executor's timeout never fires first.
        let Some(session) = self.server.session_within(self.spec.timeout / 2).await else {
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
                let folder = MediaFolder::of(ctx);
                let rendered = render(&output, &folder, &self.server.name);
                if output.is_error { Err(ToolError::Failed(rendered.text)) } else { Ok(rendered) }
            }
            Err(e) => Err(ToolError::Failed(format!("MCP server {}: {e}", self.server.name))),
        };
        self.server.stats.record(started.elapsed(), result.is_err());
        result
    }
}

/// Where a call's images are saved: the chat's media folder (`media/<platform>/<chat>/`), so
/// the file tools' media view opens them, retention ages them out with the chat's other files,
/// and erasing a person's data takes them too.
pub(super) struct MediaFolder {
    data_dir: std::path::PathBuf,
    relative: std::path::PathBuf,
}

impl MediaFolder {
    /// The folder of the turn's chat.
    pub(super) fn of(ctx: &ToolContext) -> Self {
        use hermesd_platform::media::sanitise;
        let relative =
            std::path::Path::new("media").join(sanitise(&ctx.chat.platform)).join(sanitise(&ctx.chat.chat_id));
        Self { data_dir: ctx.data_dir.clone(), relative }
    }
}

/// Tool output for a call's result. Images are saved in the chat's media folder, named in the
/// text and returned as references.
pub(super) fn render(output: &CallOutput, folder: &MediaFolder, server: &str) -> ToolOutput {
    let mut pieces = Vec::new();
    let mut images = Vec::new();
    for part in &output.parts {
        match part {
            Part::Text(text) => pieces.push(text.clone()),
            Part::Resource { uri, text: Some(text) } => pieces.push(format!("[resource {uri}]\n{text}")),
            Part::Resource { uri, text: None } => pieces.push(format!("[resource {uri}]")),
            Part::Image { mime, data } => pieces.push(save_image(folder, server, mime, data, &mut images)),
        }
    }
    let text = if pieces.iter().all(|p| p.trim().is_empty())
        && let Some(structured) = &output.structured
    {
        structured.to_string()
    } else if pieces.is_empty() {
        "(no output)".into()
    } else {
        pieces.join("\n")
    };
    ToolOutput { text, images }
}

/// Save one image; the line naming it (by the path the file tools open), and its reference
/// when it is of a type models take.
fn save_image(folder: &MediaFolder, server: &str, mime: &str, data: &[u8], images: &mut Vec<ImageRef>) -> String {
    let ext = match mime {
        "image/png" => Some("png"),
        "image/jpeg" => Some("jpg"),
        "image/gif" => Some("gif"),
        "image/webp" => Some("webp"),
        _ => None,
    };
    let server = hermesd_platform::media::sanitise(server);
    let name = format!("mcp_{server}_{}.{}", uuid::Uuid::now_v7(), ext.unwrap_or("bin"));
    let relative = folder.relative.join(&name);
    let path = folder.data_dir.join(&relative);
    let saved = path.parent().map(std::fs::create_dir_all).transpose().and_then(|_| std::fs::write(&path, data));
    match saved {
        Ok(()) => {
            let reference = ImageRef::new(relative.to_string_lossy(), mime);
            let shown = reference.model_path();
            if ext.is_some() {
                images.push(reference);
            }
            format!("[image {mime}, {} bytes, saved as {shown}]", data.len())
        }
        Err(e) => format!("[image {mime}, {} bytes, could not be saved: {e}]", data.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn folder(data_dir: &std::path::Path) -> MediaFolder {
        MediaFolder { data_dir: data_dir.to_owned(), relative: "media/telegram/42".into() }
    }

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
        let rendered = render(&output, &folder(dir.path()), "s");
        assert_eq!(rendered.text, "one\ntwo\n[resource file:///a.txt]\nbody\n[resource file:///b.bin]");
        assert!(rendered.images.is_empty());
    }

    #[test]
    fn images_are_saved_in_the_chat_media_folder_and_returned_as_references() {
        let dir = tempfile::tempdir().expect("tempdir");
        let output = CallOutput {
            is_error: false,
            parts: vec![
                Part::Image { mime: "image/png".into(), data: vec![1, 2, 3] },
                Part::Image { mime: "application/x-thing".into(), data: vec![4] },
            ],
            structured: None,
        };
        let rendered = render(&output, &folder(dir.path()), "sh/ots");
        let [image] = rendered.images.as_slice() else { panic!("one image of a model type: {rendered:?}") };
        assert!(image.path.starts_with("media/telegram/42/mcp_sh_ots_") && image.path.ends_with(".png"), "{image:?}");
        assert_eq!(image.mime, "image/png");
        assert_eq!(std::fs::read(dir.path().join(&image.path)).expect("file"), [1, 2, 3]);
        let shown = format!("saved as {}]", image.model_path());
        assert!(shown.starts_with("saved as media/mcp_sh_ots_"), "the file tools' view path: {shown}");
        assert!(rendered.text.contains(&shown), "{}", rendered.text);
        assert!(
            rendered.text.contains("[image application/x-thing, 1 bytes, saved as media/mcp_"),
            "{}",
            rendered.text
        );
    }

    #[test]
    fn structured_content_is_used_without_text() {
        let output = CallOutput { is_error: false, parts: vec![], structured: Some(serde_json::json!({"t": 1})) };
        let nowhere = folder(std::path::Path::new("/nonexistent"));
        assert_eq!(render(&output, &nowhere, "s").text, r#"{"t":1}"#);
        let empty = CallOutput::default();
        assert_eq!(render(&empty, &nowhere, "s").text, "(no output)");
    }
}
