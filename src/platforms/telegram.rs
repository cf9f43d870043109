//! Builds the Telegram adapter from `[platforms.telegram]` and the environment. The adapter
//! itself lives in `platforms/telegram` (crate `hermesd-telegram`).

use std::path::Path;
use std::sync::Arc;

use hermesd_platform::Platform;
use hermesd_telegram::{TelegramMode, TelegramPlatform, TelegramSettings};

use crate::config::{Env, ReceiveMode, TelegramConfig};

/// The adapter for `config`, with its token (and webhook secret) from `env`.
pub fn build(config: &TelegramConfig, env: &Env, home: &Path) -> Result<Arc<dyn Platform>, String> {
    let secret = |name: &str| env.required_secret(name);
    let mode = match config.mode {
        ReceiveMode::Webhook => {
            TelegramMode::Webhook { url: config.webhook_url.clone(), secret: secret("TELEGRAM_WEBHOOK_SECRET")? }
        }
        _ => TelegramMode::Polling,
    };
    let settings = TelegramSettings {
        token: secret("TELEGRAM_BOT_TOKEN")?,
        api_url: config.api_url.clone(),
        mode,
        require_mention: config.require_mention,
        mention_patterns: config.mention_patterns.clone(),
        channel_posts: config.channel_posts,
        edited_messages: config.edited_messages,
        media_dir: home.join("media").join("telegram"),
        max_file_bytes: config.max_file_mb.saturating_mul(1024 * 1024),
        poll_timeout: config.poll_timeout.get(),
    };
    Ok(Arc::new(TelegramPlatform::new(settings)))
}
