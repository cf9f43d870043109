//! The system prompt in three tiers — stable (identity, tool guidance), context (project files
//! from the workdir), volatile (memory, today's date) — built once per session and stored, so
//! it is byte-identical across the session's turns until a compaction rebuilds it.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::agent::tools::memory::memory_snapshot;

/// Identity used when `agent.system_prompt` is not set.
pub const DEFAULT_IDENTITY: &str = "You are Hermes, a capable assistant reached through the hermesd gateway. \
Answer clearly and concisely; the user may be on a phone, so prefer short paragraphs and lists. \
When a task needs several steps, use your tools, check their results, and finish with a direct answer.";

/// Project files read into the context tier, in order; the first few that exist are used.
const CONTEXT_FILES: &[&str] = &["AGENTS.md", "HERMES.md", ".hermes.md", "CLAUDE.md"];
/// Largest context tier, in chars; longer files are cut with a note.
const CONTEXT_CAP: usize = 20_000;

/// Builds system prompts.
#[derive(Debug, Clone)]
pub struct PromptBuilder {
    identity: String,
    workdir: PathBuf,
    data_dir: PathBuf,
}

impl PromptBuilder {
    /// A builder with `identity` (the stable tier's first part), reading project files from
    /// `workdir` and memory from `data_dir`.
    pub fn new(identity: Option<String>, workdir: PathBuf, data_dir: PathBuf) -> Self {
        Self { identity: identity.unwrap_or_else(|| DEFAULT_IDENTITY.to_owned()), workdir, data_dir }
    }

    /// The full prompt for a session starting `today` with tools of `toolsets` (one entry per
    /// tool, in the tools' order).
    pub fn build(&self, toolsets: &[&str], today: NaiveDate) -> String {
        let mut prompt = self.identity.trim().to_owned();
        if !toolsets.is_empty() {
            prompt.push_str("\n\n# Tools\n");
            prompt.push_str(TOOL_GUIDANCE);
            let mut sets: Vec<&str> = toolsets.to_vec();
            sets.dedup();
            prompt.push_str(&format!("\nAvailable toolsets: {}.", sets.join(", ")));
        }
        let context = project_context(&self.workdir);
        if !context.is_empty() {
            prompt.push_str("\n\n# Project context\n");
            prompt.push_str(&context);
        }
        let memory = memory_snapshot(&self.data_dir);
        if !memory.trim().is_empty() {
            prompt.push_str("\n\n");
            prompt.push_str(memory.trim());
        }
        prompt.push_str(&format!("\n\nToday is {}.", today.format("%A, %Y-%m-%d")));
        prompt
    }
}

const TOOL_GUIDANCE: &str = "Call tools when they help; independent calls may be made together. \
Read a tool's result before deciding the next step. Do not invent tool results. \
Destructive commands need the user's approval; if one is denied, explain and offer an alternative. \
Keep durable facts about the user in memory; keep the task list current with todo on multi-step work.";

fn project_context(workdir: &Path) -> String {
    let mut out = String::new();
    for name in CONTEXT_FILES {
        let path = workdir.join(name);
        let Ok(text) = std::fs::read_to_string(&path) else { continue };
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        out.push_str(&format!("## {name}\n{text}\n\n"));
        if out.chars().count() > CONTEXT_CAP {
            let cut: String = out.chars().take(CONTEXT_CAP).collect();
            return format!("{cut}\n[… project context truncated]");
        }
    }
    out.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_in_order_and_deterministic() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Use tabs.").unwrap();
        let builder = PromptBuilder::new(Some("I am a test.".into()), dir.path().into(), dir.path().join("home"));
        let day = NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();
        let first = builder.build(&[], day);
        assert_eq!(first, builder.build(&[], day), "same inputs, same bytes");
        let identity = first.find("I am a test.").unwrap();
        let context = first.find("## AGENTS.md\nUse tabs.").unwrap();
        let date = first.find("Today is Sunday, 2026-11-22.").unwrap();
        assert!(identity < context && context < date, "{first}");
    }
}
