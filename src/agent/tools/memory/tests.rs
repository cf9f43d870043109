//! Memory tool tests: the entry format on disk, the caps, ambiguity errors, the snapshot, and
//! whose files a call reaches in each scope and kind of chat.

use std::sync::Arc;

use hermesd_platform::{ChatRef, ChatType};
use serde_json::{Value, json};

use super::*;
use crate::agent::tools::Nobody;
use crate::agent::tools::test_support;
use crate::config::MemoryScope;

/// A context for Telegram user 42 in their DM.
async fn context(dir: &tempfile::TempDir) -> ToolContext {
    let ctx =
        test_support::context(dir.path(), dir.path().to_path_buf(), dir.path().join("home"), Arc::new(Nobody)).await;
    in_chat(&ctx, ChatRef::new("telegram", "42", ChatType::Dm), "42")
}

fn in_chat(ctx: &ToolContext, chat: ChatRef, user: &str) -> ToolContext {
    ToolContext { chat, user_id: user.into(), ..ctx.clone() }
}

/// The prompt's memory part for `ctx`'s chat and sender.
fn memory_snapshot(ctx: &ToolContext, config: &MemoryConfig) -> String {
    MemoryPlace::resolve(config, &ctx.data_dir, Some(&Whose::of(&ctx.chat, &ctx.user_id))).snapshot()
}

async fn call(tool: &MemoryTool, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
    tool.call(ctx, args).await
}

fn file(ctx: &ToolContext, name: &str) -> String {
    std::fs::read_to_string(ctx.data_dir.join("memory/users/telegram/42").join(name)).unwrap()
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
    let names: Vec<_> = std::fs::read_dir(ctx.data_dir.join("memory/users/telegram/42"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
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
    let config = MemoryConfig::default();
    assert_eq!(memory_snapshot(&ctx, &config), "");
    let tool = MemoryTool::default();
    call(&tool, &ctx, json!({"action": "add", "target": "user", "content": "name: Ada"})).await.unwrap();
    assert_eq!(memory_snapshot(&ctx, &config), "## About the user\nname: Ada");
    for note in ["a", "b"] {
        call(&tool, &ctx, json!({"action": "add", "target": "memory", "content": note})).await.unwrap();
    }
    assert_eq!(memory_snapshot(&ctx, &config), "## Memory\na\n§\nb\n\n## About the user\nname: Ada");
}

#[tokio::test]
async fn each_person_has_their_own_files_and_shared_chats_see_only_the_shared_file() {
    let dir = tempfile::tempdir().unwrap();
    let ann = context(&dir).await;
    let bob = in_chat(&ann, ChatRef::new("telegram", "43", ChatType::Dm), "43");
    let group = in_chat(&ann, ChatRef::new("telegram", "-100", ChatType::Group), "42");
    let config = MemoryConfig::default();
    std::fs::create_dir_all(ann.data_dir.join("memory")).unwrap();
    std::fs::write(ann.data_dir.join("memory/MEMORY.md"), "Office closes at 18:00.\n").unwrap();
    let tool = MemoryTool::default();
    call(&tool, &ann, json!({"action": "add", "target": "user", "content": "Ann's code is 4711"})).await.unwrap();
    call(&tool, &bob, json!({"action": "add", "target": "memory", "content": "Bob likes brevity"})).await.unwrap();

    let shared = "## Shared memory (the operator's notes for every conversation; read-only)\nOffice closes at 18:00.\n";
    let ann_prompt = memory_snapshot(&ann, &config);
    assert_eq!(ann_prompt, format!("{shared}\n## About the user\nAnn's code is 4711"));
    let bob_prompt = memory_snapshot(&bob, &config);
    assert!(bob_prompt.contains("Bob likes brevity") && !bob_prompt.contains("4711"), "{bob_prompt}");
    assert_eq!(memory_snapshot(&group, &config), shared.trim_end(), "a group sees only the shared file");
    let read = call(&tool, &bob, json!({"action": "read", "target": "user"})).await.unwrap();
    assert_eq!(read, "USER.md is empty (0/1,375 chars)", "Bob reads his own file, not Ann's");

    for args in [
        json!({"action": "read", "target": "user"}),
        json!({"action": "add", "target": "memory", "content": "group fact"}),
    ] {
        let refused = call(&tool, &group, args).await.unwrap_err();
        assert!(matches!(refused, ToolError::Denied(_)), "{refused}");
        assert!(refused.to_string().contains("only in direct conversations"), "{refused}");
    }
    let anonymous = in_chat(&ann, ChatRef::new("api", "0190-x", ChatType::Dm), "0190-x");
    let refused = call(&tool, &anonymous, json!({"action": "read", "target": "memory"})).await.unwrap_err();
    assert!(refused.to_string().contains("without `user`"), "{refused}");
    assert_eq!(memory_snapshot(&anonymous, &config), shared.trim_end());
    assert_eq!(file(&ann, "USER.md"), "Ann's code is 4711\n");
    assert_eq!(std::fs::read_to_string(ann.data_dir.join("memory/MEMORY.md")).unwrap(), "Office closes at 18:00.\n");
}

#[tokio::test]
async fn shared_scope_keeps_one_pair_of_files_for_everyone() {
    let dir = tempfile::tempdir().unwrap();
    let ann = context(&dir).await;
    let group = in_chat(&ann, ChatRef::new("telegram", "-100", ChatType::Group), "43");
    let config = MemoryConfig { scope: MemoryScope::Shared, ..MemoryConfig::default() };
    let tool = MemoryTool::default().with_config(config.clone());
    call(&tool, &ann, json!({"action": "add", "target": "user", "content": "name: Ann"})).await.unwrap();
    call(&tool, &group, json!({"action": "add", "target": "memory", "content": "team uses tabs"})).await.unwrap();
    let expected = "## Memory\nteam uses tabs\n\n## About the user\nname: Ann";
    assert_eq!(memory_snapshot(&ann, &config), expected);
    assert_eq!(memory_snapshot(&group, &config), expected);
    assert_eq!(std::fs::read_to_string(ann.data_dir.join("memory/USER.md")).unwrap(), "name: Ann\n");
    assert!(!ann.data_dir.join("memory/users").exists());
}

#[test]
fn entries_parse_leniently() {
    assert_eq!(parse_entries("\n a \n\n  §  \n\n§\nb\nc\n"), ["a", "b\nc"]);
    assert_eq!(thousands(0), "0");
    assert_eq!(thousands(2_200), "2,200");
    assert_eq!(thousands(1_234_567), "1,234,567");
}
