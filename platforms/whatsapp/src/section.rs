//! `[platforms.whatsapp]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. Meta posts webhooks to `/whatsapp/webhook`; the secrets come from
//! `WHATSAPP_ACCESS_TOKEN`, `WHATSAPP_APP_SECRET` and `WHATSAPP_VERIFY_TOKEN`, never from the
//! file, and nothing here logs them.

use std::sync::Arc;

use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{BuildContext, Checks, Section};
use hermesd_platform::{AccessRules, Platform};
use serde::{Deserialize, Serialize};

use crate::{ACCESS_RULES, DEFAULT_API_VERSION, NAME, WhatsAppPlatform, WhatsAppSettings, check_fields};

/// The largest webhook body Meta's notifications are read up to (they batch at most a few
/// hundred messages; media comes by id, never inline).
const MAX_WEBHOOK_BYTES: usize = 1024 * 1024;

/// The secrets the adapter needs.
const SECRETS: [&str; 3] = ["WHATSAPP_ACCESS_TOKEN", "WHATSAPP_APP_SECRET", "WHATSAPP_VERIFY_TOKEN"];

/// `[platforms.whatsapp]`: the WhatsApp Business Cloud API.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WhatsAppConfig {
    /// Run the adapter.
    pub enabled: bool,
    /// The business phone number id replies are sent from (Meta's numeric id, not the number).
    pub phone_number_id: String,
    /// Graph API base URL.
    pub api_url: String,
    /// Graph API version.
    pub api_version: String,
    /// An approved message template sent instead of a reply outside the 24-hour customer
    /// service window (the user's answer opens the window again); empty: such replies fail.
    pub reengage_template: String,
    /// The template's language code.
    pub reengage_language: String,
    /// Largest inbound media file downloaded, in MB.
    pub max_file_mb: u64,
    /// How often the access token is checked against the Graph API (health).
    pub token_check_interval: HumanDuration,
    /// The longest one Graph API call may take before it fails as transient (and is retried).
    pub api_timeout: HumanDuration,
}

impl Default for WhatsAppConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            phone_number_id: String::new(),
            api_url: "https://graph.facebook.com".into(),
            api_version: DEFAULT_API_VERSION.into(),
            reengage_template: String::new(),
            reengage_language: "en_US".into(),
            max_file_mb: 20,
            token_check_interval: HumanDuration::secs(300),
            api_timeout: HumanDuration::secs(30),
        }
    }
}

impl Section for WhatsAppConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self, checks: &mut Checks<'_>) {
        for var in SECRETS {
            checks.secret(var);
        }
        for problem in check_fields(&self.phone_number_id, &self.api_url, &self.api_version) {
            checks.keyed(problem);
        }
        checks.positive("max_file_mb", self.max_file_mb);
        if !self.reengage_template.is_empty() && self.reengage_language.trim().is_empty() {
            checks.key("reengage_language", "must be set with reengage_template");
        }
        if self.token_check_interval.get() < std::time::Duration::from_secs(10) {
            checks.key("token_check_interval", "must be at least 10s");
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let [access_token, app_secret, verify_token] = SECRETS.map(|name| cx.env.required_secret(name));
        let settings = WhatsAppSettings {
            access_token: access_token?,
            app_secret: app_secret?,
            verify_token: verify_token?,
            phone_number_id: self.phone_number_id.clone(),
            api_url: self.api_url.clone(),
            api_version: self.api_version.clone(),
            reengage_template: self.reengage_template.clone(),
            reengage_language: self.reengage_language.clone(),
            media_dir: cx.media_dir(NAME),
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            api_timeout: self.api_timeout.get(),
            token_check_interval: self.token_check_interval.get(),
            max_body_bytes: MAX_WEBHOOK_BYTES,
        };
        settings.validate().map_err(|problems| problems.join("; "))?;
        Ok(Arc::new(WhatsAppPlatform::new(settings)))
    }

    fn access_rules(&self) -> AccessRules {
        ACCESS_RULES
    }

    fn signed_requests(&self) -> Option<&'static str> {
        Some("")
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::conformance::section_problems;

    use super::*;

    #[test]
    fn every_problem_is_listed_with_its_key() {
        let config = WhatsAppConfig {
            enabled: true,
            phone_number_id: "+1555".into(),
            api_version: "26".into(),
            reengage_template: "hello".into(),
            reengage_language: " ".into(),
            token_check_interval: HumanDuration::secs(1),
            ..WhatsAppConfig::default()
        };
        let vars = [("WHATSAPP_ACCESS_TOKEN", "t"), ("WHATSAPP_APP_SECRET", "s")];
        assert_eq!(
            section_problems(&config, &vars),
            [
                "platforms.whatsapp: WHATSAPP_VERIFY_TOKEN is not set",
                "platforms.whatsapp.phone_number_id: \"+1555\" must be the numeric id of the business number",
                "platforms.whatsapp.api_version: \"26\" must look like \"v26.0\"",
                "platforms.whatsapp.reengage_language: must be set with reengage_template",
                "platforms.whatsapp.token_check_interval: must be at least 10s",
            ]
        );
    }
}
