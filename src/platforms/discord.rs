//! Builds the Discord adapter from `[platforms.discord]` and the environment. The adapter itself
//! lives in `platforms/discord` (crate `hermesd-discord`); this file never talks to Discord.

use std::path::Path;
use std::sync::Arc;

use hermesd_discord::{DiscordPlatform, DiscordSettings, Reactions};
use hermesd_platform::Platform;

use crate::config::{DiscordConfig, Env};

/// The adapter for `config`, with its token and channel filters from `env`.
pub fn build(config: &DiscordConfig, env: &Env, home: &Path) -> Result<Arc<dyn Platform>, String> {
    let token = env.required_secret("DISCORD_BOT_TOKEN")?;
    let channels = |listed: &[String], var: &str| {
        let mut ids = listed.to_vec();
        let from_env = env.var(var).unwrap_or_default();
        ids.extend(from_env.split(',').map(str::trim).filter(|id| !id.is_empty()).map(str::to_owned));
        ids
    };
    let emoji = |text: &str| Some(text.trim().to_owned()).filter(|e| !e.is_empty());
    let settings = DiscordSettings {
        token,
        api_url: config.api_url.clone(),
        require_mention: config.require_mention,
        auto_thread: config.auto_thread,
        allowed_channels: channels(&config.allowed_channels, "DISCORD_ALLOWED_CHANNELS"),
        ignored_channels: channels(&config.ignored_channels, "DISCORD_IGNORED_CHANNELS"),
        media_dir: home.join("media").join("discord"),
        max_file_bytes: config.max_file_mb.saturating_mul(1024 * 1024),
        reactions: Reactions {
            received: emoji(&config.reaction_received),
            done: emoji(&config.reaction_done),
            failed: emoji(&config.reaction_failed),
        },
        ..DiscordSettings::default()
    };
    settings.validate().map_err(|problems| problems.join("; "))?;
    Ok(Arc::new(DiscordPlatform::new(settings)))
}
