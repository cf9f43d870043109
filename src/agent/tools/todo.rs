//! The `todo` tool: a per-session task list the model keeps while working through a multi-step
//! job, stored as JSON at `<data_dir>/todos/<session>.json`. It must never touch a file outside
//! that folder, whatever the session id holds, nor hold more than `MAX_TODOS` items.

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::files::{parse_args, write_atomic};
use super::{Tool, ToolContext, ToolError, ToolSpec};

/// Most items one list holds.
pub const MAX_TODOS: usize = 100;
const MAX_CONTENT_CHARS: usize = 1_000;

/// Keeps each session's task list.
#[derive(Debug, Default)]
pub struct TodoTool {
    /// Edits are read-modify-write; one at a time.
    lock: tokio::sync::Mutex<()>,
}

impl TodoTool {
    /// A todo tool.
    pub fn new() -> Self {
        Self::default()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Status {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Todo {
    id: String,
    content: String,
    status: Status,
}

/// An item as the model sends it: in a merge, only `id` is needed to update an existing item.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    id: String,
    content: Option<String>,
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    todos: Option<Vec<Item>>,
    #[serde(default)]
    merge: bool,
}

#[async_trait]
impl Tool for TodoTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "todo".into(),
            description: "Track a task list for this session. With no arguments, show the list. With `todos`, \
                          replace the whole list, or with merge=true update items by id (only changed fields \
                          needed) and add new ones. Keep one item in_progress at a time; mark items completed \
                          as soon as they are done."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "maxItems": MAX_TODOS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "id": {"type": "string", "description": "Short unique id, e.g. \"1\""},
                                "content": {"type": "string", "description": "What to do (needed for new items)"},
                                "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "cancelled"]}
                            },
                            "required": ["id"],
                            "additionalProperties": false
                        }
                    },
                    "merge": {"type": "boolean", "description": "Update by id instead of replacing (default false)"}
                },
                "required": [],
                "additionalProperties": false
            }),
            toolset: "todo".into(),
            parallel_safe: false,
            max_result_chars: 20_000,
            timeout: Duration::from_secs(30),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let _guard = self.lock.lock().await;
        let path = todo_path(&ctx.data_dir, &ctx.session_id);
        let Some(items) = args.todos else {
            return Ok(render(&load(&path).await?));
        };
        check_ids(&items)?;
        let list = if args.merge { merge(load(&path).await?, items)? } else { replace(items)? };
        if list.len() > MAX_TODOS {
            return Err(ToolError::InvalidArguments(format!(
                "the list would hold {} items; at most {MAX_TODOS} fit; drop finished or cancelled ones",
                list.len()
            )));
        }
        let text = serde_json::to_vec_pretty(&list).expect("a task list always serialises");
        if let Some(dir) = path.parent() {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|e| ToolError::Failed(format!("cannot save the list: {e}")))?;
        }
        write_atomic(&path, &text).await.map_err(|e| ToolError::Failed(format!("cannot save the list: {e}")))?;
        Ok(render(&list))
    }
}

/// `<data_dir>/todos/<id>.json`, keeping only `[A-Za-z0-9_-]` of the id so it cannot name
/// another folder.
pub fn todo_path(data_dir: &Path, session_id: &str) -> PathBuf {
    let mut name: String =
        session_id.chars().take(100).map(|c| if c.is_ascii_alphanumeric() || c == '-' { c } else { '_' }).collect();
    if name.is_empty() {
        name.push('_');
    }
    data_dir.join("todos").join(format!("{name}.json"))
}

async fn load(path: &Path) -> Result<Vec<Todo>, ToolError> {
    let bytes = match tokio::fs::read(path).await {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(ToolError::Failed(format!("cannot read the task list: {e}"))),
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        ToolError::Failed(format!("the saved task list is unreadable ({e}); send the full list without merge"))
    })
}

fn check_ids(items: &[Item]) -> Result<(), ToolError> {
    let mut seen = std::collections::HashSet::new();
    for item in items {
        if item.id.trim().is_empty() {
            return Err(ToolError::InvalidArguments("every item needs a non-empty `id`".into()));
        }
        if !seen.insert(item.id.as_str()) {
            return Err(ToolError::InvalidArguments(format!("id {:?} appears twice; ids must be unique", item.id)));
        }
        if item.content.as_ref().is_some_and(|c| c.chars().count() > MAX_CONTENT_CHARS) {
            return Err(ToolError::InvalidArguments(format!(
                "item {:?} is longer than {MAX_CONTENT_CHARS} chars; keep items short",
                item.id
            )));
        }
    }
    Ok(())
}

fn content_of(item: &Item) -> Result<String, ToolError> {
    match item.content.as_deref().map(str::trim) {
        Some(content) if !content.is_empty() => Ok(content.to_string()),
        _ => Err(ToolError::InvalidArguments(format!(
            "item {:?} has no `content`; new items need it (only merge updates of existing ids may leave it out)",
            item.id
        ))),
    }
}

fn replace(items: Vec<Item>) -> Result<Vec<Todo>, ToolError> {
    items
        .iter()
        .map(|item| {
            Ok(Todo { id: item.id.clone(), content: content_of(item)?, status: item.status.unwrap_or(Status::Pending) })
        })
        .collect()
}

fn merge(mut list: Vec<Todo>, items: Vec<Item>) -> Result<Vec<Todo>, ToolError> {
    for item in items {
        if let Some(existing) = list.iter_mut().find(|t| t.id == item.id) {
            if item.content.as_deref().is_some_and(|c| !c.trim().is_empty()) {
                existing.content = content_of(&item)?;
            }
            if let Some(status) = item.status {
                existing.status = status;
            }
        } else {
            let content = content_of(&item)?;
            list.push(Todo { id: item.id, content, status: item.status.unwrap_or(Status::Pending) });
        }
    }
    Ok(list)
}

/// A summary line, then one line per item: `[x] 1. text` (`[ ]` pending, `[>]` in progress,
/// `[x]` completed, `[-]` cancelled).
fn render(list: &[Todo]) -> String {
    if list.is_empty() {
        return "The task list is empty.".into();
    }
    let count = |status: Status| list.iter().filter(|t| t.status == status).count();
    let mut out = format!(
        "{} tasks: {} completed, {} in progress, {} pending, {} cancelled",
        list.len(),
        count(Status::Completed),
        count(Status::InProgress),
        count(Status::Pending),
        count(Status::Cancelled)
    );
    for todo in list {
        let mark = match todo.status {
            Status::Pending => "[ ]",
            Status::InProgress => "[>]",
            Status::Completed => "[x]",
            Status::Cancelled => "[-]",
        };
        out.push_str(&format!("\n{mark} {}. {}", todo.id, todo.content));
    }
    out
}

#[cfg(test)]
mod tests;
