//! The system prompt in three tiers — stable (identity, tool guidance, the skill index), context
//! (project files from the workdir), volatile (memory, today's date) — built once per session and
//! stored, so it is byte-identical across the session's turns until a compaction rebuilds it.

use std::path::{Path, PathBuf};

use chrono::NaiveDate;

use crate::agent::skills::Skills;
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
    /// Skills whose index the stable tier lists (when the `skills` toolset is on).
    skills: Option<Skills>,
    /// The chat platform the prompt is for (skills can be limited to platforms).
    platform: Option<String>,
}

impl PromptBuilder {
    /// A builder with `identity` (the stable tier's first part), reading project files from
    /// `workdir` and memory from `data_dir`.
    pub fn new(identity: Option<String>, workdir: PathBuf, data_dir: PathBuf) -> Self {
        Self {
            identity: identity.unwrap_or_else(|| DEFAULT_IDENTITY.to_owned()),
            workdir,
            data_dir,
            skills: None,
            platform: None,
        }
    }

    /// This builder listing `skills` in the stable tier.
    pub fn with_skills(mut self, skills: Skills) -> Self {
        self.skills = Some(skills);
        self
    }

    /// The skills, when configured.
    pub fn skills(&self) -> Option<&Skills> {
        self.skills.as_ref()
    }

    /// This builder for prompts of sessions on `platform`.
    pub fn for_platform(&self, platform: &str) -> Self {
        Self { platform: Some(platform.to_owned()), ..self.clone() }
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
        if let Some(skills) = self.skills.as_ref().filter(|_| toolsets.contains(&"skills")) {
            let index = skills.index(self.platform.as_deref());
            if !index.is_empty() {
                prompt.push_str("\n\n");
                prompt.push_str(&index);
            }
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

    #[test]
    fn skill_index_in_the_stable_tier_for_the_platform() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("skills");
        for (name, platforms) in [("pdf", ""), ("tg-only", "platforms: [telegram]\n")] {
            std::fs::create_dir_all(root.join(name)).unwrap();
            let text = format!("---\nname: {name}\ndescription: About {name}.\n{platforms}---\nBody\n");
            std::fs::write(root.join(name).join("SKILL.md"), text).unwrap();
        }
        std::fs::write(dir.path().join("AGENTS.md"), "Use tabs.").unwrap();
        let skills = Skills::new(root, crate::config::SkillsConfig::default(), Vec::new());
        let builder = PromptBuilder::new(None, dir.path().into(), dir.path().join("home")).with_skills(skills);
        let day = NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();
        let telegram = builder.for_platform("telegram").build(&["memory", "skills"], day);
        let (index, context) = (telegram.find("# Skills\n").unwrap(), telegram.find("## AGENTS.md").unwrap());
        assert!(index < context, "{telegram}");
        assert!(telegram.contains("- pdf: About pdf.\n- tg-only: About tg-only."), "{telegram}");
        let slack = builder.for_platform("slack").build(&["memory", "skills"], day);
        assert!(slack.contains("- pdf: About pdf.") && !slack.contains("tg-only"), "{slack}");
        let without = builder.for_platform("telegram").build(&["memory"], day);
        assert!(!without.contains("# Skills"), "no skills toolset, no index");
    }
}
