//! Builds the WhatsApp adapter from `[platforms.whatsapp]` and the environment. The adapter
//! itself lives in `platforms/whatsapp` (crate `hermesd-whatsapp`); this file never logs a secret.

use std::path::Path;
use std::sync::Arc;

use hermesd_platform::Platform;
use hermesd_whatsapp::{WhatsAppPlatform, WhatsAppSettings};

use crate::config::{Env, WhatsAppConfig};

/// The largest webhook body Meta's notifications are read up to (they batch at most a few
/// hundred messages; media comes by id, never inline).
const MAX_WEBHOOK_BYTES: usize = 1024 * 1024;

/// The adapter for `config`, with its token and secrets from `env`.
pub fn build(config: &WhatsAppConfig, env: &Env, home: &Path) -> Result<Arc<dyn Platform>, String> {
    let secret = |name: &str| env.required_secret(name);
    let settings = WhatsAppSettings {
        access_token: secret("WHATSAPP_ACCESS_TOKEN")?,
        app_secret: secret("WHATSAPP_APP_SECRET")?,
        verify_token: secret("WHATSAPP_VERIFY_TOKEN")?,
        phone_number_id: config.phone_number_id.clone(),
        api_url: config.api_url.clone(),
        api_version: config.api_version.clone(),
        reengage_template: config.reengage_template.clone(),
        reengage_language: config.reengage_language.clone(),
        media_dir: home.join("media").join("whatsapp"),
        max_file_bytes: config.max_file_mb.saturating_mul(1024 * 1024),
        api_timeout: config.api_timeout.get(),
        token_check_interval: config.token_check_interval.get(),
        max_body_bytes: MAX_WEBHOOK_BYTES,
    };
    settings.validate().map_err(|problems| problems.join("; "))?;
    Ok(Arc::new(WhatsAppPlatform::new(settings)))
}
