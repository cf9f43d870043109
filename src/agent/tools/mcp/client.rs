//! hermesd's own small MCP client interface. Everything that knows rmcp lives in `rmcp_client.rs`
//! behind these two traits, so a transport or SDK version change stays in one module. Tests
//! drive the supervisor with fakes of them.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};
use tokio::sync::mpsc;

/// A tool as a server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct RemoteTool {
    /// The server's name for it.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON schema of its arguments object.
    pub input_schema: Value,
}

/// One piece of a call's result.
#[derive(Debug, Clone, PartialEq)]
pub enum Part {
    /// Text for the model.
    Text(String),
    /// An image (base64-decoded bytes).
    Image {
        /// Its MIME type.
        mime: String,
        /// The bytes.
        data: Vec<u8>,
    },
    /// A resource: its URI and, when it is text, the text.
    Resource {
        /// The resource URI.
        uri: String,
        /// Its text contents, when given.
        text: Option<String>,
    },
}

/// What a tool call returned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CallOutput {
    /// The server marked the result as an error (`isError`): the model sees a tool error.
    pub is_error: bool,
    /// The content, in order.
    pub parts: Vec<Part>,
    /// Structured content, when the server sent some and no text.
    pub structured: Option<Value>,
}

/// Why an MCP operation failed. Messages never contain secrets (header values, tokens).
#[derive(Debug, Clone, thiserror::Error)]
pub enum McpError {
    /// The server could not be started or reached.
    #[error("connect: {0}")]
    Connect(String),
    /// The connection is gone (process exited, HTTP session dropped).
    #[error("the connection to the server is closed")]
    Closed,
    /// The server answered with a JSON-RPC error.
    #[error("server error: {0}")]
    Remote(String),
    /// The answer did not make sense.
    #[error("protocol: {0}")]
    Protocol(String),
}

/// A live connection to one server.
#[async_trait]
pub trait McpSession: Send + Sync {
    /// Every tool the server offers (all pages).
    async fn list_tools(&self) -> Result<Vec<RemoteTool>, McpError>;
    /// Call `name`. Dropping the future cancels the call on the server
    /// (`notifications/cancelled`).
    async fn call_tool(&self, name: &str, arguments: Map<String, Value>) -> Result<CallOutput, McpError>;
    /// Resolves when the connection has ended.
    async fn closed(&self);
    /// End the connection (and stop a stdio server).
    async fn close(&self);
}

/// Opens sessions to one configured server.
#[async_trait]
pub trait McpConnector: Send + Sync {
    /// Connect and initialise. Each `notifications/tools/list_changed` sends on `changed`.
    async fn connect(&self, changed: mpsc::Sender<()>) -> Result<Arc<dyn McpSession>, McpError>;
}
