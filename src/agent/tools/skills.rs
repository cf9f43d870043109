//! The skills tools (toolset `skills`): `skills_list` and `skill_view` read the skills folder on
//! demand (progressive disclosure: the prompt holds only the index), `skill_manage` lets the
//! agent create and change skills. A changed skill reaches every user's new sessions, so by
//! default a human approves each change (fail closed: denied where nobody can answer), and its
//! text passes the same injection scanner as cron prompts.
//!
//! Admin-only: once `<PLATFORM>_ADMIN_USERS` exists, `skill_manage` should also require that
//! `ctx.user_id` is an admin before asking (see `SkillManageTool::call`).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::{Approval, Tool, ToolContext, ToolError, ToolSpec};
use crate::agent::skills::{Change, SkillError, Skills};

/// Lists the skills available on this chat's platform.
#[derive(Debug, Clone)]
pub struct SkillsListTool {
    skills: Skills,
}

impl SkillsListTool {
    /// A list tool over `skills`.
    pub fn new(skills: Skills) -> Self {
        Self { skills }
    }
}

#[async_trait]
impl Tool for SkillsListTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skills_list",
            description: "List the skills available here (name and full description), read from disk now: \
                          includes skills created or edited since this conversation started.",
            parameters: json!({ "type": "object", "properties": {}, "additionalProperties": false }),
            toolset: "skills",
            parallel_safe: true,
            max_result_chars: 24_000,
            timeout: Duration::from_secs(30),
        }
    }

    async fn call(&self, ctx: &ToolContext, _args: Value) -> Result<String, ToolError> {
        let (skills, platform) = (self.skills.clone(), ctx.chat.platform.clone());
        let listing = tokio::task::spawn_blocking(move || {
            let listing = skills.scan();
            let visible: Vec<_> =
                listing.skills.into_iter().filter(|m| skills.visibility(m, Some(&platform)).is_ok()).collect();
            (visible, listing.problems)
        })
        .await
        .map_err(|e| ToolError::Failed(format!("list skills: {e}")))?;
        let (visible, problems) = listing;
        if visible.is_empty() && problems.is_empty() {
            return Ok("No skills are available here yet.".into());
        }
        let mut out = format!("{} skill(s); load one with skill_view(name):\n", visible.len());
        for meta in &visible {
            out.push_str(&format!("- {}: {}\n", meta.name, meta.description));
        }
        if !problems.is_empty() {
            out.push_str("\nNot loaded:\n");
            for problem in &problems {
                out.push_str(&format!("- {problem}\n"));
            }
        }
        Ok(out.trim_end().to_owned())
    }
}

/// Shows a skill's instructions, or one of its files.
#[derive(Debug, Clone)]
pub struct SkillViewTool {
    skills: Skills,
}

impl SkillViewTool {
    /// A view tool over `skills`.
    pub fn new(skills: Skills) -> Self {
        Self { skills }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewArgs {
    name: String,
    file: Option<String>,
}

#[async_trait]
impl Tool for SkillViewTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill_view",
            description: "Load a skill's instructions (SKILL.md, with the list of files beside it), or one of \
                          those files (`file`, a path inside the skill's folder such as references/api.md). \
                          Load a skill before doing a task it covers, then follow it.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "name": { "type": "string", "description": "The skill's name, as in the index or skills_list." },
                    "file": { "type": "string", "description": "Optional: a file inside the skill's folder." }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
            toolset: "skills",
            parallel_safe: true,
            max_result_chars: 40_000,
            timeout: Duration::from_secs(30),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: ViewArgs = parse_args(args)?;
        let (skills, platform) = (self.skills.clone(), ctx.chat.platform.clone());
        tokio::task::spawn_blocking(move || skills.view(args.name.trim(), args.file.as_deref(), Some(&platform)))
            .await
            .map_err(|e| ToolError::Failed(format!("view skill: {e}")))?
            .map_err(to_tool_error)
    }
}

/// Creates and changes skills, each change approved by a human unless configured otherwise.
#[derive(Debug, Clone)]
pub struct SkillManageTool {
    skills: Skills,
    approval_timeout: Duration,
}

impl SkillManageTool {
    /// A manage tool over `skills`, waiting `approval_timeout` for a human's answer.
    pub fn new(skills: Skills, approval_timeout: Duration) -> Self {
        Self { skills, approval_timeout }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Action {
    Create,
    Edit,
    Patch,
    WriteFile,
    Delete,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ManageArgs {
    action: Action,
    name: String,
    content: Option<String>,
    old: Option<String>,
    new: Option<String>,
    file: Option<String>,
}

#[async_trait]
impl Tool for SkillManageTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "skill_manage",
            description: "Create or change a skill (a reusable SKILL.md with YAML front matter `name` and \
                          `description`, then instructions). Actions: create (name, content = the whole SKILL.md), \
                          edit (replace SKILL.md), patch (old → new, exact and unique; `file` for a file beside it), \
                          write_file (file, content), delete. Names: lowercase letters, digits, hyphens. Skills \
                          reach every user's new sessions, so each change may wait for a human's approval.",
            parameters: json!({
                "type": "object",
                "properties": {
                    "action": { "type": "string", "enum": ["create", "edit", "patch", "write_file", "delete"] },
                    "name": { "type": "string", "description": "The skill's name ([a-z0-9-], at most 64)." },
                    "content": { "type": "string", "description": "create/edit: the whole SKILL.md; write_file: the file's text." },
                    "old": { "type": "string", "description": "patch: the exact text to replace." },
                    "new": { "type": "string", "description": "patch: the replacement." },
                    "file": { "type": "string", "description": "patch/write_file: a path inside the skill's folder." }
                },
                "required": ["action", "name"],
                "additionalProperties": false
            }),
            toolset: "skills",
            parallel_safe: false,
            max_result_chars: 4_000,
            timeout: self.approval_timeout + Duration::from_secs(60),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: ManageArgs = parse_args(args)?;
        let missing = |what: &str| ToolError::InvalidArguments(format!("this action needs `{what}`"));
        let change = match args.action {
            Action::Create => Change::Create { content: args.content.ok_or_else(|| missing("content"))? },
            Action::Edit => Change::Edit { content: args.content.ok_or_else(|| missing("content"))? },
            Action::Patch => Change::Patch {
                file: args.file,
                old: args.old.ok_or_else(|| missing("old"))?,
                new: args.new.ok_or_else(|| missing("new"))?,
            },
            Action::WriteFile => Change::WriteFile {
                file: args.file.ok_or_else(|| missing("file"))?,
                content: args.content.ok_or_else(|| missing("content"))?,
            },
            Action::Delete => Change::Delete,
        };
        let name = args.name.trim().to_owned();
        let platform = ctx.chat.platform.clone();
        let skills = self.skills.clone();
        let prepared = tokio::task::spawn_blocking(move || skills.prepare(&name, change, Some(&platform)))
            .await
            .map_err(|e| ToolError::Failed(format!("prepare the change: {e}")))?
            .map_err(to_tool_error)?;
        // Where admins exist (`<PLATFORM>_ADMIN_USERS`), a non-admin `ctx.user_id` should be
        // refused here, before anyone is asked.
        if self.skills.config().require_approval {
            let mut action = format!("{} (skills reach every user's new sessions)", prepared.summary);
            if !prepared.preview.is_empty() {
                action.push_str(&format!(":\n{}", prepared.preview));
            }
            let secs = self.approval_timeout.as_secs();
            let why = match ctx.human.approve(&action, self.approval_timeout).await {
                Approval::Approved => None,
                Approval::Denied => Some("the user denied this skill change; nothing was written".to_owned()),
                Approval::TimedOut => Some(format!("no approval within {secs} s; nothing was written (fail closed)")),
                Approval::Unavailable => Some(
                    "skill changes need a human's approval, and nobody can approve here; nothing was written".into(),
                ),
            };
            if let Some(why) = why {
                return Err(ToolError::Denied(why));
            }
        }
        let skills = self.skills.clone();
        tokio::task::spawn_blocking(move || skills.apply(prepared))
            .await
            .map_err(|e| ToolError::Failed(format!("apply the change: {e}")))?
            .map_err(to_tool_error)
    }
}

fn to_tool_error(e: SkillError) -> ToolError {
    match e {
        SkillError::InvalidName { .. } | SkillError::Reserved { .. } | SkillError::BadPath { .. } => {
            ToolError::InvalidArguments(e.to_string())
        }
        SkillError::Refused(_) => ToolError::Denied(e.to_string()),
        _ => ToolError::Failed(e.to_string()),
    }
}

#[cfg(test)]
mod tests;
