//! The built-in tool registry, assembled from configuration.

use std::sync::Arc;

use super::Registry;
use super::clarify::ClarifyTool;
use super::cronjob::CronJobTool;
use super::delegate::DelegateTool;
use super::files::{PatchTool, ReadFileTool, SearchFilesTool, WriteFileTool};
use super::memory::MemoryTool;
use super::send_file::SendFileTool;
use super::send_message::SendMessageTool;
use super::session_search::SessionSearchTool;
use super::skills::{SkillManageTool, SkillViewTool, SkillsListTool};
use super::terminal::TerminalTool;
use super::todo::TodoTool;
use super::web_fetch::WebFetchTool;
use super::web_search::WebSearchTool;
use crate::agent::auxiliary::Summarizer;
use crate::agent::runtime::chain::ProviderChain;
use crate::agent::runtime::prompt::PromptBuilder;
use crate::config::{AgentConfig, CronConfig, LimitsConfig, ToolsConfig};
use crate::delivery::Targets;
use crate::outbox::Outbox;
use crate::redact::Redaction;
use crate::sandbox::Sandbox;

/// Tools that reach into the rest of the daemon: cron jobs and deliveries.
#[derive(Clone)]
pub struct ExtraTools {
    /// `[cron]`: time zone and default target of new jobs.
    pub cron: CronConfig,
    /// `[limits]`: how many jobs one person may make from chat, and how often they may run.
    pub limits: LimitsConfig,
    /// Delivery targets.
    pub targets: Targets,
    /// The outbox `send_message` delivers through.
    pub outbox: Outbox,
    /// Masks the daemon's secrets in every tool result (children of `delegate_task` too).
    pub redaction: Redaction,
    /// The sandbox terminal commands run in.
    pub sandbox: Arc<Sandbox>,
    /// `web_search`, when `[tools.web_search]` names a backend.
    pub web_search: Option<WebSearchTool>,
    /// The summary model (`[auxiliary.summary]`): `session_search` summarises its hits with it.
    pub summary: Option<Arc<Summarizer>>,
}

/// Every built-in tool. `delegate_task` children get all the others except `clarify`.
pub fn builtin(
    tools: &ToolsConfig,
    agent: &AgentConfig,
    web: WebFetchTool,
    chain: &ProviderChain,
    prompts: &PromptBuilder,
    extras: ExtraTools,
) -> Registry {
    let approval = tools.approval_timeout.get();
    let mut registry = Registry::default();
    registry.set_redaction(extras.redaction.clone());
    registry.register(Arc::new(
        MemoryTool::new(tools.memory_chars, tools.user_chars)
            .with_config(prompts.memory().clone())
            .in_folder(prompts.folder()),
    ));
    registry.register(Arc::new(SessionSearchTool::new(extras.summary.clone())));
    registry.register(Arc::new(TodoTool::new()));
    registry.register(Arc::new(ReadFileTool::new()));
    registry.register(Arc::new(WriteFileTool::new(approval)));
    registry.register(Arc::new(SearchFilesTool::new()));
    registry.register(Arc::new(PatchTool::new(approval)));
    registry.register(Arc::new(
        TerminalTool::new(approval, extras.sandbox.clone())
            .confined_by(&tools.terminal)
            .beneath_root(prompts.workdir()),
    ));
    registry.register(Arc::new(web.clone()));
    if let Some(search) = extras.web_search {
        registry.register(Arc::new(search));
    }
    if let Some(skills) = prompts.skills() {
        registry.register(Arc::new(SkillsListTool::new(skills.clone())));
        registry.register(Arc::new(SkillViewTool::new(skills.clone())));
        registry.register(Arc::new(SkillManageTool::new(skills.clone(), approval)));
    }
    let child_tools = registry.clone();
    registry.register(Arc::new(CronJobTool::new(
        extras.cron,
        extras.targets.clone(),
        chain.models(),
        extras.limits,
        approval,
    )));
    registry.register(Arc::new(SendFileTool::new(extras.outbox.clone(), web)));
    registry.register(Arc::new(SendMessageTool::new(extras.targets, extras.outbox, approval)));
    registry.register(Arc::new(ClarifyTool::new(tools.clarify_timeout.get())));
    registry.register(Arc::new(DelegateTool::new(
        chain.clone(),
        child_tools,
        agent.delegate_max_iterations,
        prompts.clone(),
    )));
    registry
}
