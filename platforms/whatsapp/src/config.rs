//! The adapter's settings, built by the host from `[platforms.whatsapp]` and the environment.
//! Secrets arrive here already read; this module never reads the environment or logs them.

use std::path::PathBuf;
use std::time::Duration;

/// The route Meta posts webhooks to (and asks the verification handshake on); an account's
/// number has `/whatsapp/<account>/webhook`.
pub const WEBHOOK_PATH: &str = "/whatsapp/webhook";

/// The Graph API version used unless configured.
pub const DEFAULT_API_VERSION: &str = "v26.0";

/// Everything the WhatsApp adapter needs.
#[derive(Debug, Clone)]
pub struct WhatsAppSettings {
    /// The account this number is (`[platforms.whatsapp.accounts.<name>]`): the adapter is then
    /// `whatsapp@<name>`, with chats, sessions and a webhook path of its own.
    pub account: Option<String>,
    /// `WHATSAPP_ACCESS_TOKEN`: the bearer token for the Graph API.
    pub access_token: String,
    /// `WHATSAPP_APP_SECRET`: the key of `X-Hub-Signature-256`.
    pub app_secret: String,
    /// `WHATSAPP_VERIFY_TOKEN`: what the GET handshake must carry in `hub.verify_token`.
    pub verify_token: String,
    /// The business phone number id messages are sent from.
    pub phone_number_id: String,
    /// Graph API base URL (`https://graph.facebook.com`).
    pub api_url: String,
    /// Graph API version path segment (`v26.0`).
    pub api_version: String,
    /// The approved template sent before a reply outside the 24-hour window; empty: none.
    pub reengage_template: String,
    /// The template's language code (`en_US`).
    pub reengage_language: String,
    /// Where inbound media is saved (`$HERMESD_HOME/media/whatsapp`).
    pub media_dir: PathBuf,
    /// Largest inbound media file downloaded, in bytes.
    pub max_file_bytes: u64,
    /// The longest one Graph API call may take before it fails as transient.
    pub api_timeout: Duration,
    /// How often the token is checked against the Graph API (`health()`).
    pub token_check_interval: Duration,
    /// The largest webhook body read, in bytes.
    pub max_body_bytes: usize,
}

impl Default for WhatsAppSettings {
    fn default() -> Self {
        Self {
            account: None,
            access_token: String::new(),
            app_secret: String::new(),
            verify_token: String::new(),
            phone_number_id: String::new(),
            api_url: "https://graph.facebook.com".into(),
            api_version: DEFAULT_API_VERSION.into(),
            reengage_template: String::new(),
            reengage_language: "en_US".into(),
            media_dir: PathBuf::from("media/whatsapp"),
            max_file_bytes: 20 * 1024 * 1024,
            api_timeout: Duration::from_secs(30),
            token_check_interval: Duration::from_secs(300),
            max_body_bytes: 1024 * 1024,
        }
    }
}

impl WhatsAppSettings {
    /// Every problem with these settings, one a line (empty when they are usable).
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        for (name, value) in [
            ("WHATSAPP_ACCESS_TOKEN", &self.access_token),
            ("WHATSAPP_APP_SECRET", &self.app_secret),
            ("WHATSAPP_VERIFY_TOKEN", &self.verify_token),
        ] {
            if value.trim().is_empty() {
                problems.push(format!("{name} is empty"));
            }
        }
        problems.extend(check_fields(&self.phone_number_id, &self.api_url, &self.api_version));
        if self.max_file_bytes == 0 {
            problems.push("max_file_mb: must be positive".into());
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// The path Meta posts this number's webhooks to.
    pub fn webhook_path(&self) -> String {
        match &self.account {
            Some(account) => format!("/{}/{account}/webhook", crate::NAME),
            None => WEBHOOK_PATH.to_owned(),
        }
    }

    /// `{api_url}/{api_version}`, without a trailing slash.
    pub(crate) fn graph_base(&self) -> String {
        format!("{}/{}", self.api_url.trim_end_matches('/'), self.api_version.trim_matches('/'))
    }
}

/// The checks of the plain config fields, shared with the host's `hermesd check`.
pub fn check_fields(phone_number_id: &str, api_url: &str, api_version: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if phone_number_id.is_empty() || !phone_number_id.chars().all(|c| c.is_ascii_digit()) {
        problems.push(format!("phone_number_id: {phone_number_id:?} must be the numeric id of the business number"));
    }
    if !(api_url.starts_with("http://") || api_url.starts_with("https://")) {
        problems.push(format!("api_url: {api_url:?} is not an http(s) URL"));
    }
    let version_ok =
        api_version.strip_prefix('v').and_then(|rest| rest.split_once('.')).is_some_and(|(major, minor)| {
            !major.is_empty()
                && !minor.is_empty()
                && major.chars().all(|c| c.is_ascii_digit())
                && minor.chars().all(|c| c.is_ascii_digit())
        });
    if !version_ok {
        problems.push(format!("api_version: {api_version:?} must look like \"{DEFAULT_API_VERSION}\""));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_problem_is_listed() {
        let settings = WhatsAppSettings {
            phone_number_id: "+1555".into(),
            api_url: "graph.facebook.com".into(),
            api_version: "26".into(),
            max_file_bytes: 0,
            ..WhatsAppSettings::default()
        };
        let problems = settings.validate().unwrap_err();
        assert_eq!(problems.len(), 7, "{problems:?}");
        let good = WhatsAppSettings {
            access_token: "EAAtoken".into(),
            app_secret: "secret".into(),
            verify_token: "verify".into(),
            phone_number_id: "106540352242922".into(),
            ..WhatsAppSettings::default()
        };
        assert_eq!(good.validate(), Ok(()));
        assert_eq!(good.graph_base(), "https://graph.facebook.com/v26.0");
    }
}
