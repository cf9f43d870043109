//! The one internal message format (OpenAI-style role/content/tool_calls). Provider adapters
//! translate to and from their dialect at the edge; everything else speaks this.

use serde::{Deserialize, Serialize};

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
        Self { role, content: Some(content.into()), tool_calls: Vec::new(), tool_call_id: None, reasoning: None }
    }
}
