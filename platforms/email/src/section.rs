//! `[platforms.email]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. The password comes from `EMAIL_PASSWORD`, allowed senders from
//! `EMAIL_ALLOWED_USERS` (addresses, case-insensitive).

use std::sync::Arc;

use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{BuildContext, Checks, Section};
use hermesd_platform::{AccessRules, Platform};
use serde::{Deserialize, Serialize};

use crate::{EmailPlatform, EmailSettings, NAME};

/// `[platforms.email]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmailConfig {
    /// Run the adapter; the password comes from `EMAIL_PASSWORD`.
    pub enabled: bool,
    /// IMAP server: `imaps://host[:993]`, `imap://host[:143]?tls=required` (STARTTLS), or plain
    /// `imap://` to a loopback host only.
    pub imap_url: String,
    /// SMTP submission server: `smtps://host[:465]`, `smtp://host[:587]?tls=required`
    /// (STARTTLS), or plain `smtp://` to a loopback host only.
    pub smtp_url: String,
    /// The agent's own address: the From of replies; mail from it is never answered.
    pub address: String,
    /// The mailbox watched.
    pub folder: String,
    /// IMAP and SMTP login name; empty: `address`.
    pub username: String,
    /// How often the folder is polled when the server has no IDLE.
    pub poll_interval: HumanDuration,
    /// How long one IDLE lasts before it is renewed (at most 29m).
    pub idle_timeout: HumanDuration,
    /// The authserv-id of the `Authentication-Results` header your own receiving server adds;
    /// only that header is believed.
    pub authserv_id: String,
    /// Refuse mail without `dmarc=pass` from `authserv_id` (set false only where your server
    /// does not check senders, and you accept that anyone can claim an allowed address).
    pub require_auth: bool,
    /// Largest attachment kept (in) or sent (out), in MB.
    pub max_file_mb: u64,
    /// Answer unknown senders with a pairing code. Off: a reply to a spoofed sender is
    /// backscatter.
    pub pairing: bool,
}

impl Default for EmailConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            imap_url: String::new(),
            smtp_url: String::new(),
            address: String::new(),
            folder: "INBOX".into(),
            username: String::new(),
            poll_interval: HumanDuration::secs(60),
            idle_timeout: HumanDuration::secs(25 * 60),
            authserv_id: String::new(),
            require_auth: true,
            max_file_mb: 20,
            pairing: false,
        }
    }
}

impl EmailConfig {
    /// The adapter's settings, with `password`, media under `media_dir`.
    pub fn settings(&self, password: String, media_dir: std::path::PathBuf) -> EmailSettings {
        let username = if self.username.trim().is_empty() { self.address.clone() } else { self.username.clone() };
        EmailSettings {
            imap_url: self.imap_url.clone(),
            smtp_url: self.smtp_url.clone(),
            address: self.address.clone(),
            username,
            password,
            folder: self.folder.clone(),
            poll_interval: self.poll_interval.get(),
            idle_timeout: self.idle_timeout.get(),
            authserv_id: self.authserv_id.clone(),
            require_auth: self.require_auth,
            media_dir,
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            pairing: self.pairing,
            ..EmailSettings::default()
        }
    }
}

impl Section for EmailConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    /// The adapter's own checks (URLs, plain only to loopback, address, durations,
    /// `authserv_id` unless `require_auth = false`) plus the password.
    fn check(&self, checks: &mut Checks<'_>) {
        checks.secret("EMAIL_PASSWORD");
        for problem in self.settings(String::new(), std::path::PathBuf::new()).problems() {
            checks.keyed(problem);
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let password = cx.env.required_secret("EMAIL_PASSWORD")?;
        Ok(Arc::new(EmailPlatform::new(self.settings(password, cx.media_dir(NAME)))))
    }

    fn access_rules(&self) -> AccessRules {
        AccessRules { pairs_strangers: self.pairing, ..AccessRules::DEFAULT }
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::conformance::section_problems;

    use super::*;

    #[test]
    fn the_password_and_the_adapters_own_checks_are_listed() {
        let config = EmailConfig { enabled: true, imap_url: "ftp://x".into(), ..EmailConfig::default() };
        let problems = section_problems(&config, &[]);
        assert_eq!(problems[0], "platforms.email: EMAIL_PASSWORD is not set");
        assert!(problems.iter().any(|p| p.starts_with("platforms.email.imap_url: ")), "{problems:?}");
        assert!(problems.iter().all(|p| p.starts_with("platforms.email")), "{problems:?}");
        assert!(!config.access_rules().pairs_strangers, "mail pairs no stranger unless asked");
        let settings =
            EmailConfig { username: " ".into(), address: "a@b.c".into(), ..config }.settings("pw".into(), "m".into());
        assert_eq!(settings.username, "a@b.c", "the address is the login by default");
    }
}
