//! Todo tool tests: replace, merge, validation, the cap and the file name sanitising.

use std::sync::Arc;

use serde_json::json;

use super::*;
use crate::agent::tools::Nobody;
use crate::agent::tools::test_support;

async fn context(dir: &tempfile::TempDir, session_id: &str) -> ToolContext {
    let home = dir.path().join("home");
    let ctx = test_support::context(dir.path(), dir.path().to_path_buf(), home, Arc::new(Nobody)).await;
    ToolContext { session_id: session_id.into(), ..ctx }
}

#[tokio::test]
async fn replace_then_merge_then_show() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir, "0190a6c4-1b2c-7d3e-8f40-123456789abc").await;
    let tool = TodoTool::new();
    assert_eq!(tool.call(&ctx, json!({})).await.unwrap(), "The task list is empty.");
    let list = json!({"todos": [
        {"id": "1", "content": "read the code", "status": "in_progress"},
        {"id": "2", "content": "write tests"},
    ]});
    let out = tool.call(&ctx, list).await.unwrap();
    assert_eq!(
        out,
        "2 tasks: 0 completed, 1 in progress, 1 pending, 0 cancelled\n[>] 1. read the code\n[ ] 2. write tests"
    );

    let update = json!({"merge": true, "todos": [
        {"id": "1", "status": "completed"},
        {"id": "2", "status": "in_progress", "content": "write more tests"},
        {"id": "3", "content": "ship", "status": "cancelled"},
    ]});
    let out = tool.call(&ctx, update).await.unwrap();
    assert_eq!(
        out,
        "3 tasks: 1 completed, 1 in progress, 0 pending, 1 cancelled\n\
         [x] 1. read the code\n[>] 2. write more tests\n[-] 3. ship"
    );
    assert_eq!(tool.call(&ctx, json!({})).await.unwrap(), out, "the list persists");
    let saved = ctx.data_dir.join("todos/0190a6c4-1b2c-7d3e-8f40-123456789abc.json");
    let saved: Value = serde_json::from_slice(&std::fs::read(saved).unwrap()).unwrap();
    assert_eq!(saved[0], json!({"id": "1", "content": "read the code", "status": "completed"}));

    let replaced = tool.call(&ctx, json!({"todos": [{"id": "a", "content": "fresh start"}]})).await.unwrap();
    assert!(replaced.starts_with("1 tasks:") && replaced.ends_with("[ ] a. fresh start"), "{replaced}");
}

#[tokio::test]
async fn sessions_have_separate_lists() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (context(&dir, "a").await, context(&dir, "b").await);
    let tool = TodoTool::new();
    tool.call(&a, json!({"todos": [{"id": "1", "content": "only in a"}]})).await.unwrap();
    assert_eq!(tool.call(&b, json!({})).await.unwrap(), "The task list is empty.");
}

#[tokio::test]
async fn bad_lists_are_refused_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir, "s").await;
    let tool = TodoTool::new();
    let too_many: Vec<Value> = (0..101).map(|i| json!({"id": i.to_string(), "content": "x"})).collect();
    let cases = [
        (json!({"todos": too_many}), "at most 100 fit"),
        (json!({"todos": [{"id": "1", "content": "a"}, {"id": "1", "content": "b"}]}), "appears twice"),
        (json!({"todos": [{"id": "1"}]}), "has no `content`"),
        (json!({"todos": [{"id": " ", "content": "a"}]}), "non-empty `id`"),
        (json!({"todos": [{"id": "1", "content": "a", "status": "done"}]}), "unknown variant `done`"),
        (json!({"todos": [{"id": "1", "content": "a"}], "mode": "x"}), "unknown field `mode`"),
        (json!({"merge": true, "todos": [{"id": "new", "status": "completed"}]}), "has no `content`"),
    ];
    for (args, needle) in cases {
        let err = tool.call(&ctx, args).await.unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
    assert!(!ctx.data_dir.join("todos").exists(), "nothing saved");
}

#[test]
fn file_names_stay_in_the_todos_folder() {
    let base = Path::new("/data");
    assert_eq!(todo_path(base, "../../etc/passwd"), Path::new("/data/todos/______etc_passwd.json"));
    assert_eq!(todo_path(base, ""), Path::new("/data/todos/_.json"));
    assert_eq!(todo_path(base, "ab-12"), Path::new("/data/todos/ab-12.json"));
}
