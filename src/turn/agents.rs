//! Each profile's agent: its model chain, its prompts (persona, skills, memory folder), its tools
//! and its turn limits. A turn takes the agent of its session key's profile (`agent:<profile>:…`),
//! so two profiles never share a persona, a memory or a model.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use crate::agent::runtime::chain::ProviderChain;
use crate::agent::runtime::prompt::PromptBuilder;
use crate::agent::tools::{Registry, ToolPolicy};
use crate::config::{BusyPolicy, DEFAULT_PROFILE};

/// One profile's agent.
pub struct ProfileAgent {
    /// The profile's name.
    pub name: String,
    /// Its providers, primary first.
    pub chain: ProviderChain,
    /// Its system prompts: persona, skills and memory from the profile's folder.
    pub prompts: PromptBuilder,
    /// Its tools (memory, skills and the terminal's root are the profile's own).
    pub registry: Registry,
    /// The root of its tools' folders.
    pub workdir: PathBuf,
    /// The toolsets it narrows every platform's to; `None`: the platform's as they are.
    pub toolsets: Option<Vec<String>>,
    /// Model calls per turn.
    pub max_iterations: u32,
    /// What a message arriving during one of its turns does.
    pub busy_policy: BusyPolicy,
}

impl ProfileAgent {
    /// `policy` narrowed to the profile's toolsets: neither widens the other.
    pub fn narrow(&self, policy: ToolPolicy) -> ToolPolicy {
        match &self.toolsets {
            Some(sets) => policy.narrow(&ToolPolicy::new(sets)),
            None => policy,
        }
    }
}

/// Every profile's agent; the default answers a profile that is not configured (a key stored
/// before its profile was removed from the config). A reload replaces the whole set at once
/// (`replace`); a turn holds the agent it started with.
pub struct Agents {
    current: std::sync::RwLock<Arc<AgentSet>>,
}

struct AgentSet {
    default: Arc<ProfileAgent>,
    named: HashMap<String, Arc<ProfileAgent>>,
}

impl Agents {
    /// Agents with `default` as the default profile's.
    pub fn new(default: ProfileAgent) -> Self {
        let set = AgentSet { default: Arc::new(default), named: HashMap::new() };
        Self { current: std::sync::RwLock::new(Arc::new(set)) }
    }

    /// These agents with a named profile's.
    pub fn with(self, agent: ProfileAgent) -> Self {
        let set = self.set();
        let mut named = set.named.clone();
        named.insert(agent.name.clone(), Arc::new(agent));
        Self { current: std::sync::RwLock::new(Arc::new(AgentSet { default: set.default.clone(), named })) }
    }

    fn set(&self) -> Arc<AgentSet> {
        self.current.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// Take `other`'s agents in place of these (a reload): turns already running keep theirs.
    pub fn replace(&self, other: Agents) {
        *self.current.write().unwrap_or_else(std::sync::PoisonError::into_inner) = other.set();
    }

    /// The agent of `profile`, else the default's.
    pub fn get(&self, profile: &str) -> Arc<ProfileAgent> {
        let set = self.set();
        if profile == DEFAULT_PROFILE {
            return set.default.clone();
        }
        match set.named.get(profile) {
            Some(agent) => agent.clone(),
            None => {
                tracing::warn!(profile, "no such profile any more; its session is answered by the default");
                set.default.clone()
            }
        }
    }

    /// The agent of the profile a session key belongs to.
    pub fn of_key(&self, key: &str) -> Arc<ProfileAgent> {
        self.get(super::session_key::profile_of(key))
    }

    /// The default profile's agent.
    pub fn default_agent(&self) -> Arc<ProfileAgent> {
        self.set().default.clone()
    }

    /// Whether `profile` has an agent.
    pub fn has(&self, profile: &str) -> bool {
        profile == DEFAULT_PROFILE || self.set().named.contains_key(profile)
    }
}
