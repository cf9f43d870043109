//! `session_search`: full-text search (FTS5, words then substrings) over the user's past
//! conversations in this chat, archived (compacted) messages included.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolSpec};

/// The tool.
#[derive(Debug, Default)]
pub struct SessionSearchTool;

#[async_trait]
impl Tool for SessionSearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "session_search".into(),
            description: "Search earlier conversations with this user (including summarised history) for words or a \
                          fragment. Use it to recall facts, decisions or files mentioned before."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "Words or a fragment to find." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 50 }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            toolset: "session_search".into(),
            parallel_safe: true,
            max_result_chars: 12_000,
            timeout: Duration::from_secs(20),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let query = args["query"].as_str().map(str::trim).filter(|q| !q.is_empty());
        let query = query.ok_or_else(|| ToolError::InvalidArguments("`query` must be a non-empty string".into()))?;
        let limit = args["limit"].as_u64().unwrap_or(10).clamp(1, 50) as u32;
        // Search wide, then keep this conversation's sessions: one user's history, never another's.
        let hits =
            ctx.store.search(query, None, limit * 10).await.map_err(|e| ToolError::Failed(format!("search: {e}")))?;
        let mut lines = Vec::new();
        for hit in hits {
            let Ok(Some(session)) = ctx.store.session(&hit.session_id).await else { continue };
            if session.key != ctx.session_key {
                continue;
            }
            let when = chrono::DateTime::<chrono::Utc>::from_timestamp_millis(hit.created_at)
                .map(|t| t.format("%Y-%m-%d").to_string())
                .unwrap_or_default();
            lines.push(format!("[{when}] {}: {}", hit.role, hit.snippet.replace('\n', " ")));
            if lines.len() as u32 >= limit {
                break;
            }
        }
        Ok(if lines.is_empty() { format!("No earlier messages match {query:?}.") } else { lines.join("\n") })
    }
}
