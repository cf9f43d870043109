//! Builds the e-mail adapter from `[platforms.email]` and the environment. The adapter itself
//! lives in `platforms/email` (crate `hermesd-email`).
//!
//! The password comes from `EMAIL_PASSWORD`.

use std::path::Path;
use std::sync::Arc;

use hermesd_email::EmailPlatform;
use hermesd_platform::Platform;

use crate::config::{EmailConfig, Env};

/// The adapter for `config`, with its password from `env`.
pub fn build(config: &EmailConfig, env: &Env, home: &Path) -> Result<Arc<dyn Platform>, String> {
    let password = env.required_secret("EMAIL_PASSWORD")?;
    Ok(Arc::new(EmailPlatform::new(config.settings(password, home))))
}
