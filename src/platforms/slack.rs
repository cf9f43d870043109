//! Builds the Slack adapter from `[platforms.slack]` and the environment. The adapter itself
//! lives in `platforms/slack` (crate `hermesd-slack`); this file never logs a token.

use std::path::Path;
use std::sync::Arc;

use hermesd_platform::Platform;
use hermesd_slack::{SlackMode, SlackPlatform, SlackSettings};

use crate::config::{Env, ReceiveMode, SlackConfig};

/// The adapter for `config`, with its tokens (or signing secret) from `env`.
pub fn build(config: &SlackConfig, env: &Env, home: &Path) -> Result<Arc<dyn Platform>, String> {
    let secret = |name: &str| env.required_secret(name);
    let mode = match config.mode {
        ReceiveMode::Events => SlackMode::Events { signing_secret: secret("SLACK_SIGNING_SECRET")? },
        _ => SlackMode::Socket { app_token: secret("SLACK_APP_TOKEN")? },
    };
    let settings = SlackSettings {
        bot_token: secret("SLACK_BOT_TOKEN")?,
        api_url: config.api_url.clone(),
        mode,
        require_mention: config.require_mention,
        allowed_channels: config.allowed_channels.clone(),
        progress_in_channels: config.progress_in_channels,
        edited_messages: config.edited_messages,
        media_dir: home.join("media").join("slack"),
        max_file_bytes: config.max_file_mb.saturating_mul(1024 * 1024),
        socket_idle_reconnect: config.socket_idle_reconnect.get(),
        api_timeout: config.api_timeout.get(),
        ..SlackSettings::default()
    };
    settings.validate().map_err(|problems| problems.join("; "))?;
    Ok(Arc::new(SlackPlatform::new(settings)))
}
