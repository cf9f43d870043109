//! The one internal message format (OpenAI-style role/content/tool_calls). Provider adapters
//! translate to and from their dialect at the edge; everything else speaks this.
//!
//! `Message` has a `Role`, text, `ToolCall`s and, on assistant messages, `Reasoning`: readable text
//! plus opaque provider items to send back. An `ImageRef` is an image by path and MIME type, stored
//! as `messages.images`; its `data:` URL is built per call and never stored, and `model_path` gives
//! the `media/<file>` name the model sees. `Message::tool_images_after` gives the images a run of
//! tool results returned, which chat completions and Responses show in one user message after the
//! run (Anthropic inside its `tool_result`). `SUMMARY_PREFIX` marks a compaction's summary in a
//! transcript.

use serde::{Deserialize, Serialize};

/// Marks a compaction's summary message in the transcript (and finds the previous one to update).
pub const SUMMARY_PREFIX: &str = "[Summary of the earlier conversation]";

/// Who speaks a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions to the model.
    System,
    /// The human (or system acting as one: cron, webhooks).
    User,
    /// The model.
    Assistant,
    /// A tool's result.
    Tool,
}

impl Role {
    /// The lowercase wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    /// Parse a wire name.
    pub fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "system" => Role::System,
            "user" => Role::User,
            "assistant" => Role::Assistant,
            "tool" => Role::Tool,
            _ => return None,
        })
    }
}

/// A tool call the model proposed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id, echoed in the result.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as JSON text (as the model wrote them).
    pub arguments: String,
}

/// An image a message carries: a reference to a file under the data dir, never its bytes, so
/// the stored transcript stays small. The bytes are read and encoded only for the model call
/// that sends them (`data`, never stored).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ImageRef {
    /// Where the file is, relative to the data dir (`media/<platform>/<chat>/<file>`).
    pub path: String,
    /// Its MIME type, as sniffed from its bytes (`image/png`, `image/jpeg`, ...).
    pub mime: String,
    /// The `data:` URL built for this model call; `None` when not loaded (then providers send a
    /// text note naming the path instead).
    #[serde(skip)]
    pub data: Option<std::sync::Arc<str>>,
}

impl PartialEq for ImageRef {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path && self.mime == other.mime
    }
}

impl Eq for ImageRef {}

impl ImageRef {
    /// A reference to the image at `path` (relative to the data dir).
    pub fn new(path: impl Into<String>, mime: impl Into<String>) -> Self {
        Self { path: path.into(), mime: mime.into(), data: None }
    }

    /// The base64 payload of the loaded `data:` URL (what APIs taking raw base64 want).
    pub fn base64(&self) -> Option<&str> {
        self.data.as_deref().and_then(|url| url.split_once(";base64,")).map(|(_, data)| data)
    }

    /// The note a model reads in place of an image it is not shown.
    pub fn note(&self) -> String {
        format!("[image {} not shown to this model]", self.model_path())
    }

    /// The path the model names this image by: a chat's file `media/<platform>/<chat>/<file>`
    /// is `media/<file>` in the file tools' read-only view of the session's chat folder.
    pub fn model_path(&self) -> String {
        model_path(&self.path)
    }
}

/// The text of the user message that shows tool results' images to a model with vision.
pub const TOOL_IMAGES_INTRO: &str = "The images returned by the tool calls above:";

/// The model's name for a file saved under the data dir (see `ImageRef::model_path`).
pub fn model_path(path: &str) -> String {
    let parts: Vec<&str> = path.split('/').collect();
    match parts.as_slice() {
        ["media", _platform, _chat, file] => format!("media/{file}"),
        _ => path.to_owned(),
    }
}

/// One message of a transcript.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    /// Who speaks.
    pub role: Role,
    /// The text, absent for a pure tool-call message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Tool calls (assistant only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// The call this result answers (tool only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// Images that go with the text (user messages and tool results), by reference.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<ImageRef>,
    /// What the model reasoned before writing this message (assistant only), stored with it so
    /// showing it later never depends on the provider, and opaque items sent back on later calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
}

/// A model's reasoning attached to its assistant message.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// Readable reasoning (thinking text or a reasoning summary), shown by `/reasoning on`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// Provider items that must return verbatim on the next calls (Responses API `reasoning`
    /// items with `encrypted_content`). Each provider sends back only the item types it knows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<serde_json::Value>,
}

impl Reasoning {
    /// Reasoning from readable text and opaque items; `None` when both are empty.
    pub fn new(text: String, items: Vec<serde_json::Value>) -> Option<Self> {
        (!text.trim().is_empty() || !items.is_empty()).then_some(Self { text, items })
    }
}

impl Message {
    /// A message with text only.
    pub fn text(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: Some(content.into()),
            tool_calls: Vec::new(),
            tool_call_id: None,
            images: Vec::new(),
            reasoning: None,
        }
    }

    /// The images of tool results that a model with vision is shown after them (loaded ones),
    /// from the results at the end of `messages[..=at]` when `at` is the last of a run of them
    /// (tool results cannot carry images in every API, so they follow as one user message).
    pub fn tool_images_after(messages: &[Message], at: usize, vision: bool) -> Vec<&ImageRef> {
        let ends_run = messages.get(at).is_some_and(|m| m.role == Role::Tool)
            && messages.get(at + 1).is_none_or(|m| m.role != Role::Tool);
        if !vision || !ends_run {
            return Vec::new();
        }
        let start = messages[..=at].iter().rposition(|m| m.role != Role::Tool).map_or(0, |i| i + 1);
        messages[start..=at].iter().flat_map(|m| m.shown_images(true)).collect()
    }

    /// The images a model with (`vision`) or without vision is shown: the loaded ones, or none.
    pub fn shown_images(&self, vision: bool) -> impl Iterator<Item = &ImageRef> {
        self.images.iter().filter(move |i| vision && i.data.is_some())
    }

    /// The text, plus a note naming each image the model is not shown (all of them without
    /// `vision`; those not loaded with it), so it still knows they exist and where they are.
    /// A tool result names its images in its own text, so it gets no notes.
    pub fn text_with_notes(&self, vision: bool) -> Option<String> {
        if self.role == Role::Tool {
            return self.content.clone();
        }
        let mut notes = self.images.iter().filter(|i| !(vision && i.data.is_some())).map(ImageRef::note).peekable();
        if notes.peek().is_none() {
            return self.content.clone();
        }
        let mut text = self.content.clone().unwrap_or_default();
        for note in notes {
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&note);
        }
        Some(text)
    }
}
