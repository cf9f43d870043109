//! `[platforms.email]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. The password comes from `EMAIL_PASSWORD`, allowed senders from
//! `EMAIL_ALLOWED_USERS` (addresses, case-insensitive). Each mailbox of
//! `[platforms.email.accounts.<a>]` sets its own `address` and the variable of its own password
//! (`password_env`) and runs as `email@<a>`, beside the table's own mailbox when that has an
//! `address`.

use std::sync::Arc;

use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{Accounts, BuildContext, Checks, Section};
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
    /// The variable holding the IMAP and SMTP password.
    pub password_env: String,
    /// The profile this mailbox's chats belong to; absent: `default`.
    pub profile: Option<String>,
    /// More mailboxes: `[platforms.email.accounts.<name>]`, each with this table's keys (its
    /// own `address` and `password_env` above all) laid over the table's.
    pub accounts: Accounts,
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
            password_env: "EMAIL_PASSWORD".into(),
            profile: None,
            accounts: Accounts::new(),
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
        checks.secret(&self.password_env);
        for problem in self.settings(String::new(), std::path::PathBuf::new()).problems() {
            checks.keyed(problem);
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let password = cx.env.required_secret(&self.password_env)?;
        let settings = self.settings(password, cx.media_dir(NAME));
        Ok(Arc::new(EmailPlatform::new(EmailSettings { account: cx.account.map(str::to_owned), ..settings })))
    }

    fn access_rules(&self) -> AccessRules {
        AccessRules { pairs_strangers: self.pairing, ..AccessRules::DEFAULT }
    }

    fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    fn runs_beside_accounts(&self, _env: &dyn hermesd_platform::Environment) -> bool {
        !self.address.trim().is_empty()
    }

    /// The mailbox read: the IMAP server, the login (the address unless `username` says
    /// otherwise) and the folder. Two adapters reading one would answer each mail twice.
    fn identity(&self, _env: &dyn hermesd_platform::Environment) -> Option<String> {
        let login = if self.username.trim().is_empty() { &self.address } else { &self.username };
        let login = login.trim().to_ascii_lowercase();
        (!login.is_empty()).then(|| format!("mailbox {} {login} {}", self.imap_url.trim(), self.folder))
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

    #[test]
    fn accounts_are_mailboxes_of_their_own() {
        let table = serde_json::json!({"enabled": true, "imap_url": "imap://127.0.0.1:1", "smtp_url": "smtp://127.0.0.1:2",
            "require_auth": false, "accounts": {
                "work": {"address": "work@example.org", "password_env": "EMAIL_WORK_PASSWORD", "profile": "work"},
                "copy": {"address": "Work@Example.org"},
        }});
        let config: EmailConfig = serde_json::from_value(table).unwrap();
        let problems = section_problems(&config, &[("EMAIL_PASSWORD", "p"), ("EMAIL_WORK_PASSWORD", "w")]);
        assert_eq!(
            problems,
            [
                "platforms.email.accounts.work: the same account as platforms.email.accounts.copy (set its own credentials \
              or number; two adapters would answer each message twice)"
            ],
            "one mailbox cannot be two accounts"
        );
        let registered: &dyn hermesd_platform::section::Registered = &config;
        let env = std::collections::HashMap::<String, String>::new();
        let names: Vec<String> = registered.instances(&env).unwrap().iter().map(|i| i.name()).collect();
        assert_eq!(names, ["email@copy", "email@work"], "the table has no address: only the accounts run");
        let with_own = EmailConfig { address: "me@example.org".into(), ..config };
        let registered: &dyn hermesd_platform::section::Registered = &with_own;
        assert_eq!(registered.instances(&env).unwrap().len(), 3);
        assert_eq!(registered.instances(&env).unwrap()[2].section.profile(), Some("work"));
    }
}
