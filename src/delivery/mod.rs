//! Delivery targets (DESIGN.md §8): where cron output, webhook replies, `send_message` and
//! `hermesd send` go. `origin`, `local`, `<platform>` (its home channel) and
//! `<platform>:<chat_id>[:<thread_id>]` all resolve to a `ChatRef` of a registered platform, so
//! every delivery goes through the outbox and that chat's pacer like any reply.
//!
//! Never guesses where a message should go: an unresolvable target is an error the user sees.
//!
//! `Targets` resolves a `vocab::target::Target` against the running platforms: a platform's home
//! channel is the one `/sethome` stored, else `<PLATFORM>_HOME_CHANNEL`. Deliveries to targets are
//! outbound messages like any reply: stored, paced per chat, receipted.

pub mod local;
pub mod send;
pub mod turns;

use std::collections::HashMap;
use std::sync::Arc;

use hermesd_platform::{ChatRef, ChatType};

use crate::config::Env;
use crate::outbox::PlatformRegistry;
use crate::store::Store;
use crate::vocab::origin::Origin;
use crate::vocab::target::{Target, TargetError};

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
                    Target::Chat { platform, chat_id, thread_id } => {
                        Ok(self.explicit_chat(platform, chat_id, thread_id))
                    }
                    _ => Err(TargetError::Invalid(home.clone())),
                }
            }
            Target::Chat { platform, chat_id, thread_id } => {
                self.platform(&target.to_string(), platform)?;
                Ok(self.explicit_chat(platform.clone(), chat_id.clone(), thread_id.clone()))
            }
        }
    }

    fn platform(&self, target: &str, platform: &str) -> Result<(), TargetError> {
        // The API answers requests; nothing can be posted to it.
        let postable = |name: &str| Origin::of(name) != Origin::Api;
        if self.platforms.get(platform).is_some() && postable(platform) {
            return Ok(());
        }
        let mut running: Vec<&str> = self.platforms.all().map(|p| p.name()).filter(|p| postable(p)).collect();
        running.sort_unstable();
        Err(TargetError::UnknownPlatform {
            target: target.to_owned(),
            platform: platform.to_owned(),
            running: running.join(", "),
        })
    }

    /// A chat named by id alone. Its type only tunes pacing (groups get the slower group rate),
    /// so the platform reads it from the id's shape where it can (`Platform::chat_type_of`).
    fn explicit_chat(&self, platform: String, chat_id: String, thread_id: Option<String>) -> ChatRef {
        let chat_type = match (&thread_id, self.platforms.get(&platform)) {
            (Some(_), _) => ChatType::Thread,
            (None, Some(adapter)) => adapter.chat_type_of(&chat_id),
            (None, None) => ChatType::Dm,
        };
        ChatRef { platform, chat_id, chat_type, thread_id, guild: None }
    }
}

#[cfg(test)]
mod tests;
