//! Memory tool tests: the entry format on disk, the caps, ambiguity errors and the snapshot.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::agent::tools::Nobody;
use crate::agent::tools::test_support;

async fn context(dir: &tempfile::TempDir) -> ToolContext {
    test_support::context(dir.path(), dir.path().to_path_buf(), dir.path().join("home"), Arc::new(Nobody)).await
}

async fn call(tool: &MemoryTool, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
    tool.call(ctx, args).await
}

fn file(ctx: &ToolContext, name: &str) -> String {
    std::fs::read_to_string(ctx.data_dir.join("memory").join(name)).unwrap()
}

#[tokio::test]
async fn add_replace_remove_keep_the_file_format() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir).await;
    let tool = MemoryTool::default();
    let out =
        call(&tool, &ctx, json!({"action": "add", "target": "memory", "content": "  uses cargo nextest  "})).await;
    assert_eq!(out.unwrap(), "added to MEMORY.md (19/2,200 chars, 1 entries)");
    call(&tool, &ctx, json!({"action": "add", "target": "memory", "content": "deploys on fridays\nvia ci"}))
        .await
        .unwrap();
    assert_eq!(file(&ctx, "MEMORY.md"), "uses cargo nextest\n§\ndeploys on fridays\nvia ci\n");

    let out = call(&tool, &ctx, json!({"action": "replace", "target": "memory", "old": "fridays", "content": "never"}));
    assert!(out.await.unwrap().starts_with("replaced an entry in MEMORY.md"));
    assert_eq!(file(&ctx, "MEMORY.md"), "uses cargo nextest\n§\nnever\n");

    call(&tool, &ctx, json!({"action": "remove", "target": "memory", "old": "nextest"})).await.unwrap();
    assert_eq!(file(&ctx, "MEMORY.md"), "never\n");
    let dupe = call(&tool, &ctx, json!({"action": "add", "target": "memory", "content": "never"})).await.unwrap();
    assert!(dupe.contains("already has that entry"), "{dupe}");

    let read = call(&tool, &ctx, json!({"action": "read", "target": "memory"})).await.unwrap();
    assert_eq!(read, "MEMORY.md (6/2,200 chars):\nnever\n");
    let empty = call(&tool, &ctx, json!({"action": "read", "target": "user"})).await.unwrap();
    assert_eq!(empty, "USER.md is empty (0/1,375 chars)");
    let names: Vec<_> =
        std::fs::read_dir(ctx.data_dir.join("memory")).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names, ["MEMORY.md"], "no temporary files left behind");
}

#[tokio::test]
async fn old_must_match_exactly_one_entry() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir).await;
    let tool = MemoryTool::default();
    for entry in ["likes tea", "likes coffee"] {
        call(&tool, &ctx, json!({"action": "add", "target": "user", "content": entry})).await.unwrap();
    }
    let many = call(&tool, &ctx, json!({"action": "remove", "target": "user", "old": "likes"})).await.unwrap_err();
    assert!(many.to_string().contains("2 entries in USER.md contain \"likes\""), "{many}");
    let none = call(&tool, &ctx, json!({"action": "remove", "target": "user", "old": "juice"})).await.unwrap_err();
    assert!(none.to_string().contains("no entry in USER.md contains \"juice\""), "{none}");
    let blank = call(&tool, &ctx, json!({"action": "replace", "target": "user", "content": "x"})).await.unwrap_err();
    assert!(matches!(blank, ToolError::InvalidArguments(_)), "{blank}");
    let sep = call(&tool, &ctx, json!({"action": "add", "target": "user", "content": "a\n§\nb"})).await.unwrap_err();
    assert!(sep.to_string().contains("separates entries"), "{sep}");
    let bad = call(&tool, &ctx, json!({"action": "forget", "target": "user"})).await.unwrap_err();
    assert!(matches!(bad, ToolError::InvalidArguments(_)), "{bad}");
    assert_eq!(file(&ctx, "USER.md"), "likes tea\n§\nlikes coffee\n");
}

#[tokio::test]
async fn caps_refuse_growth_with_usage() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir).await;
    let tool = MemoryTool::new(1_100, 50);
    let long = "x".repeat(1_000);
    call(&tool, &ctx, json!({"action": "add", "target": "memory", "content": long})).await.unwrap();
    let err = call(&tool, &ctx, json!({"action": "add", "target": "memory", "content": "y".repeat(100)}));
    let err = err.await.unwrap_err().to_string();
    assert!(err.contains("(1,001/1,100 chars used now)") && err.contains("replace or remove entries first"), "{err}");
    assert_eq!(file(&ctx, "MEMORY.md").chars().count(), 1_001, "unchanged after a refused add");
    let shrink = json!({"action": "replace", "target": "memory", "old": "xxx", "content": "short"});
    call(&tool, &ctx, shrink).await.unwrap();
    let user = call(&tool, &ctx, json!({"action": "add", "target": "user", "content": "z".repeat(51)})).await;
    assert!(user.unwrap_err().to_string().contains("(0/50 chars used now)"));
}

#[tokio::test]
async fn snapshot_renders_both_files() {
    let dir = tempfile::tempdir().unwrap();
    let ctx = context(&dir).await;
    assert_eq!(memory_snapshot(&ctx.data_dir), "");
    let tool = MemoryTool::default();
    call(&tool, &ctx, json!({"action": "add", "target": "user", "content": "name: Ada"})).await.unwrap();
    assert_eq!(memory_snapshot(&ctx.data_dir), "## About the user\nname: Ada");
    for note in ["a", "b"] {
        call(&tool, &ctx, json!({"action": "add", "target": "memory", "content": note})).await.unwrap();
    }
    assert_eq!(memory_snapshot(&ctx.data_dir), "## Memory\na\n§\nb\n\n## About the user\nname: Ada");
}

#[test]
fn entries_parse_leniently() {
    assert_eq!(parse_entries("\n a \n\n  §  \n\n§\nb\nc\n"), ["a", "b\nc"]);
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(2_200), "2,200");
    assert_eq!(thousands(1_234_567), "1,234,567");
}
