//! Builds the e-mail adapter from `[platforms.email]` and the environment. The adapter itself
//! lives in `platforms/email` (crate `hermesd-email`).

use std::path::Path;
use std::sync::Arc;

use hermesd_email::{EmailPlatform, EmailSettings};
use hermesd_platform::Platform;

use crate::config::{EmailConfig, Env};

/// The settings for `config`, with `password` (pure: `validate` checks them too).
pub fn settings(config: &EmailConfig, password: String, home: &Path) -> EmailSettings {
    let username = if config.username.trim().is_empty() { config.address.clone() } else { config.username.clone() };
    EmailSettings {
        imap_url: config.imap_url.clone(),
        smtp_url: config.smtp_url.clone(),
        address: config.address.clone(),
        username,
        password,
        folder: config.folder.clone(),
        poll_interval: config.poll_interval.get(),
        idle_timeout: config.idle_timeout.get(),
        authserv_id: config.authserv_id.clone(),
        require_auth: config.require_auth,
        media_dir: home.join("media").join(hermesd_email::NAME),
        max_file_bytes: config.max_file_mb.saturating_mul(1024 * 1024),
        ..EmailSettings::default()
    }
}

/// The adapter for `config`, with its password from `env`.
pub fn build(config: &EmailConfig, env: &Env, home: &Path) -> Result<Arc<dyn Platform>, String> {
    let password = env.required_secret("EMAIL_PASSWORD")?;
    Ok(Arc::new(EmailPlatform::new(settings(config, password, home))))
}
