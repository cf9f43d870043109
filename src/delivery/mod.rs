//! Delivery targets (DESIGN.md §8): where cron output, webhook replies, `send_message` and
//! `hermesd send` go. `origin`, `local`, `<platform>` (its home channel) and
//! `<platform>:<chat_id>[:<thread_id>]` all resolve to a `ChatRef` of a registered platform, so
//! every delivery goes through the outbox and that chat's pacer like any reply.
//!
//! Never guesses where a message should go: an unresolvable target is an error the user sees.

pub mod local;
pub mod send;
pub mod turns;

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use hermesd_platform::{ChatRef, ChatType};

use crate::config::Env;
use crate::outbox::PlatformRegistry;
use crate::store::Store;

/// A delivery target as written in config, a tool call or the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The chat a job or message came from.
    Origin,
    /// A file under the data dir (`deliveries/inbox.md`).
    Local,
    /// A platform's home channel (`/sethome`, or `<PLATFORM>_HOME_CHANNEL`).
    Home(String),
    /// An explicit chat, optionally a thread in it.
    Chat {
        /// Platform name.
        platform: String,
        /// Chat id on that platform.
        chat_id: String,
        /// Thread id.
        thread_id: Option<String>,
    },
}

/// Why a target cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not in any accepted form.
    #[error("invalid delivery target {0:?}: use origin, local, <platform> or <platform>:<chat_id>[:<thread_id>]")]
    Invalid(String),
    /// `origin` where there is no originating chat.
    #[error("delivery target origin: there is no originating chat here")]
    NoOrigin,
    /// A platform that is not running in this daemon.
    #[error("delivery target {target}: platform {platform:?} is not enabled (running: {running})")]
    UnknownPlatform {
        /// The target as written.
        target: String,
        /// The platform named.
        platform: String,
        /// The platforms that are running.
        running: String,
    },
    /// `<platform>` without a home channel.
    #[error(
        "delivery target {0}: no home channel; send /sethome in the chat that should get deliveries, or set {upper}_HOME_CHANNEL",
        upper = .0.to_ascii_uppercase()
    )]
    NoHome(String),
    /// The store could not be read.
    #[error("delivery target: {0}")]
    Store(String),
}

impl Target {
    /// Parse a target.
    pub fn parse(text: &str) -> Result<Self, TargetError> {
        let text = text.trim();
        let invalid = || TargetError::Invalid(text.to_owned());
        let valid_part = |part: &str| !part.is_empty() && !part.chars().any(char::is_whitespace);
        match text {
            "origin" => return Ok(Target::Origin),
            "local" => return Ok(Target::Local),
            _ => {}
        }
        let mut parts = text.splitn(3, ':');
        let platform = parts.next().filter(|p| valid_part(p)).ok_or_else(invalid)?;
        if !platform.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_') {
            return Err(invalid());
        }
        match (parts.next(), parts.next()) {
            (None, _) => Ok(Target::Home(platform.to_owned())),
            (Some(chat), thread) if valid_part(chat) && thread.is_none_or(valid_part) => Ok(Target::Chat {
                platform: platform.to_owned(),
                chat_id: chat.to_owned(),
                thread_id: thread.map(str::to_owned),
            }),
            _ => Err(invalid()),
        }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Origin => f.write_str("origin"),
            Target::Local => f.write_str("local"),
            Target::Home(platform) => f.write_str(platform),
            Target::Chat { platform, chat_id, thread_id: None } => write!(f, "{platform}:{chat_id}"),
            Target::Chat { platform, chat_id, thread_id: Some(thread) } => write!(f, "{platform}:{chat_id}:{thread}"),
        }
    }
}

/// Resolves targets against the running platforms, home channels and the store.
#[derive(Clone)]
pub struct Targets {
    store: Arc<dyn Store>,
    platforms: PlatformRegistry,
    /// `<PLATFORM>_HOME_CHANNEL` values, by platform name.
    env_homes: HashMap<String, String>,
}

impl Targets {
    /// Targets for `platforms`, reading `<PLATFORM>_HOME_CHANNEL` from `env`.
    pub fn new(store: Arc<dyn Store>, platforms: PlatformRegistry, env: &Env) -> Self {
        let env_homes = platforms
            .all()
            .filter_map(|p| {
                let name = p.name().to_owned();
                env.var(&format!("{}_HOME_CHANNEL", name.to_ascii_uppercase())).map(|v| (name, v.trim().to_owned()))
            })
            .filter(|(_, v)| !v.is_empty())
            .collect();
        Self { store, platforms, env_homes }
    }

    /// Check a target's form and platform without resolving home channels or origins (for
    /// config validation and job creation, when the home may be set later).
    pub fn check(&self, text: &str) -> Result<Target, TargetError> {
        let target = Target::parse(text)?;
        if let Target::Home(platform) | Target::Chat { platform, .. } = &target {
            self.platform(text, platform)?;
        }
        Ok(target)
    }

    /// The chat `target` names; `origin` is the chat a job or message came from.
    pub async fn resolve(&self, target: &Target, origin: Option<&ChatRef>) -> Result<ChatRef, TargetError> {
        match target {
            Target::Origin => origin.cloned().ok_or(TargetError::NoOrigin),
            Target::Local => Ok(local::inbox()),
            Target::Home(platform) => {
                self.platform(&target.to_string(), platform)?;
                if let Some(chat) =
                    self.store.home_channel(platform).await.map_err(|e| TargetError::Store(e.to_string()))?
                {
                    return Ok(chat);
                }
                let Some(home) = self.env_homes.get(platform) else {
                    return Err(TargetError::NoHome(platform.clone()));
                };
                match Target::parse(&format!("{platform}:{home}"))? {
                    Target::Chat { platform, chat_id, thread_id } => Ok(explicit_chat(platform, chat_id, thread_id)),
                    _ => Err(TargetError::Invalid(home.clone())),
                }
            }
            Target::Chat { platform, chat_id, thread_id } => {
                self.platform(&target.to_string(), platform)?;
                Ok(explicit_chat(platform.clone(), chat_id.clone(), thread_id.clone()))
            }
        }
    }

    fn platform(&self, target: &str, platform: &str) -> Result<(), TargetError> {
        if self.platforms.get(platform).is_some() && !matches!(platform, "api") {
            return Ok(());
        }
        let mut running: Vec<&str> = self.platforms.all().map(|p| p.name()).filter(|p| *p != "api").collect();
        running.sort_unstable();
        Err(TargetError::UnknownPlatform {
            target: target.to_owned(),
            platform: platform.to_owned(),
            running: running.join(", "),
        })
    }
}

/// A chat named by id alone. Its type only tunes pacing (groups get the slower group rate), so
/// it is read from the id's shape where the platform makes that possible.
fn explicit_chat(platform: String, chat_id: String, thread_id: Option<String>) -> ChatRef {
    let chat_type = match (platform.as_str(), thread_id.is_some()) {
        (_, true) => ChatType::Thread,
        ("telegram", false) if chat_id.starts_with('-') => ChatType::Group,
        ("slack", false) if chat_id.starts_with('D') => ChatType::Dm,
        ("slack" | "discord", false) => ChatType::Channel,
        ("signal", false) if chat_id.starts_with("group:") => ChatType::Group,
        _ => ChatType::Dm,
    };
    ChatRef { platform, chat_id, chat_type, thread_id }
}

#[cfg(test)]
mod tests;
