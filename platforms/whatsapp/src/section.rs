//! `[platforms.whatsapp]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. Meta posts webhooks to `/whatsapp/webhook`; the secrets come from
//! `WHATSAPP_ACCESS_TOKEN`, `WHATSAPP_APP_SECRET` and `WHATSAPP_VERIFY_TOKEN`, never from the
//! file, and nothing here logs them. Each number of `[platforms.whatsapp.accounts.<a>]` sets its
//! own `phone_number_id` (and, where its app differs, the variables of its own secrets) and runs
//! as `whatsapp@<a>`, its webhooks at `/whatsapp/<a>/webhook` (Meta's per-number callback
//! override); the table's own number runs beside the accounts when its `phone_number_id` is set.

use std::sync::Arc;

use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{Accounts, BuildContext, Checks, Section};
use hermesd_platform::{AccessRules, Platform};
use serde::{Deserialize, Serialize};

use crate::{ACCESS_RULES, DEFAULT_API_VERSION, NAME, WhatsAppPlatform, WhatsAppSettings, check_fields};

/// The largest webhook body Meta's notifications are read up to (they batch at most a few
/// hundred messages; media comes by id, never inline).
const MAX_WEBHOOK_BYTES: usize = 1024 * 1024;

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
    /// The variable holding the Graph API access token.
    pub access_token_env: String,
    /// The variable holding the app secret (`X-Hub-Signature-256`).
    pub app_secret_env: String,
    /// The variable holding the webhook verify token.
    pub verify_token_env: String,
    /// The profile this number's chats belong to; absent: `default`.
    pub profile: Option<String>,
    /// More numbers: `[platforms.whatsapp.accounts.<name>]`, each with this table's keys (its own
    /// `phone_number_id` above all) laid over the table's.
    pub accounts: Accounts,
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
            access_token_env: "WHATSAPP_ACCESS_TOKEN".into(),
            app_secret_env: "WHATSAPP_APP_SECRET".into(),
            verify_token_env: "WHATSAPP_VERIFY_TOKEN".into(),
            profile: None,
            accounts: Accounts::new(),
        }
    }
}

impl WhatsAppConfig {
    /// The variables of the secrets the adapter needs: access token, app secret, verify token.
    fn secrets(&self) -> [&str; 3] {
        [&self.access_token_env, &self.app_secret_env, &self.verify_token_env]
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
        for var in self.secrets() {
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
        let [access_token, app_secret, verify_token] = self.secrets().map(|name| cx.env.required_secret(name));
        let settings = WhatsAppSettings {
            account: cx.account.map(str::to_owned),
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

    fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    /// Numbers often share one business's token, so the table's own number runs beside the
    /// accounts when it names one.
    fn runs_beside_accounts(&self, _env: &dyn hermesd_platform::Environment) -> bool {
        !self.phone_number_id.trim().is_empty()
    }

    fn identity(&self, _env: &dyn hermesd_platform::Environment) -> Option<String> {
        let number = self.phone_number_id.trim();
        (!number.is_empty()).then(|| format!("number {number}"))
    }

    fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
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

    #[test]
    fn accounts_are_numbers_of_their_own_beside_the_tables_number_when_it_names_one() {
        let table = serde_json::json!({"enabled": true, "accounts": {
            "work": {"phone_number_id": "200", "app_secret_env": "WA_WORK_SECRET", "profile": "work"},
        }});
        let config: WhatsAppConfig = serde_json::from_value(table).unwrap();
        let vars = [("WHATSAPP_ACCESS_TOKEN", "t"), ("WHATSAPP_VERIFY_TOKEN", "v")];
        assert_eq!(section_problems(&config, &vars), ["platforms.whatsapp.accounts.work: WA_WORK_SECRET is not set"]);
        let env: std::collections::HashMap<String, String> =
            vars.iter().chain(&[("WA_WORK_SECRET", "w")]).map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        let registered: &dyn hermesd_platform::section::Registered = &config;
        let only = registered.instances(&env).unwrap();
        assert_eq!(only.iter().map(|i| i.name()).collect::<Vec<_>>(), ["whatsapp@work"]);
        assert_eq!(only[0].section.profile(), Some("work"));
        let _ = rustls::crypto::ring::default_provider().install_default();
        let cx = BuildContext { env: &env, home: std::path::Path::new("/h"), account: Some("work") };
        let adapter = only[0].section.build(&cx).unwrap();
        assert_eq!(
            (adapter.name(), adapter.webhook_path().as_deref()),
            ("whatsapp@work", Some("/whatsapp/work/webhook"))
        );
        let both = WhatsAppConfig { phone_number_id: "100".into(), ..config };
        let registered: &dyn hermesd_platform::section::Registered = &both;
        let names: Vec<String> = registered.instances(&env).unwrap().iter().map(|i| i.name()).collect();
        assert_eq!(names, ["whatsapp", "whatsapp@work"]);
    }
}
