//! `[platforms.signal]`: a local signal-cli daemon (`signal-cli -a +NUMBER daemon --http`): the
//! table's keys and defaults, its checks for `hermesd check`, and the adapter built from it.
//! `http_url` and `account` may come from `SIGNAL_HTTP_URL` and `SIGNAL_ACCOUNT` instead; the
//! file wins. signal-cli's HTTP daemon has no authentication, so the URL must be loopback
//! unless `allow_remote` says otherwise. Each number of `[platforms.signal.accounts.<a>]` sets
//! its own `account` (and `http_url` when another signal-cli serves it) and runs as `signal@<a>`,
//! beside the table's own number when that is set (here or in `SIGNAL_ACCOUNT`).

use std::path::PathBuf;
use std::sync::Arc;

use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{Accounts, BuildContext, Checks, Section};
use hermesd_platform::{Environment, Platform};
use serde::{Deserialize, Serialize};

use crate::{DEFAULT_HTTP_URL, NAME, SignalPlatform, SignalSettings};

/// `[platforms.signal]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SignalConfig {
    /// Run the adapter.
    pub enabled: bool,
    /// signal-cli's HTTP daemon; else `SIGNAL_HTTP_URL`, else `http://127.0.0.1:8080`.
    pub http_url: Option<String>,
    /// The account's number (`+15550001111`); else `SIGNAL_ACCOUNT`.
    pub account: Option<String>,
    /// The account's own ACI UUID, so @-mentions of it address the bot in groups (mentions of
    /// the number always do).
    pub account_uuid: Option<String>,
    /// In groups, answer only messages that mention the account, quote it, start with `/` or
    /// match a `mention_patterns` word. DMs always work.
    pub require_mention: bool,
    /// Words (case-insensitive) that address the bot in a group, e.g. `["hermes"]`.
    pub mention_patterns: Vec<String>,
    /// Largest attachment fetched (`getAttachment`), in MB.
    pub max_file_mb: u64,
    /// Replace the event stream when neither bytes nor a keepalive came for this long
    /// (signal-cli sends one every 15 s).
    pub stream_deadline: HumanDuration,
    /// The longest one JSON-RPC call may take before it fails as transient (and is retried).
    pub api_timeout: HumanDuration,
    /// Accept a non-loopback `http_url` (only behind your own authenticating proxy).
    pub allow_remote: bool,
    /// The profile this number's chats belong to; absent: `default`.
    pub profile: Option<String>,
    /// More numbers: `[platforms.signal.accounts.<name>]`, each with this table's keys (its own
    /// `account` above all) laid over the table's.
    pub accounts: Accounts,
}

impl Default for SignalConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            http_url: None,
            account: None,
            account_uuid: None,
            require_mention: true,
            mention_patterns: Vec::new(),
            max_file_mb: 20,
            stream_deadline: HumanDuration::secs(45),
            api_timeout: HumanDuration::secs(30),
            allow_remote: false,
            profile: None,
            accounts: Accounts::new(),
        }
    }
}

impl SignalConfig {
    /// The daemon's URL: the file, else `SIGNAL_HTTP_URL`, else the default.
    pub fn http_url(&self, env: &dyn Environment) -> String {
        self.http_url.clone().or_else(|| env.var("SIGNAL_HTTP_URL")).unwrap_or_else(|| DEFAULT_HTTP_URL.to_owned())
    }

    /// The account: the file, else `SIGNAL_ACCOUNT`.
    pub fn account(&self, env: &dyn Environment) -> Option<String> {
        self.account.clone().or_else(|| env.var("SIGNAL_ACCOUNT")).map(|a| a.trim().to_owned())
    }

    /// The adapter's settings, media under `media_dir`.
    pub fn settings(&self, env: &dyn Environment, media_dir: PathBuf) -> SignalSettings {
        SignalSettings {
            account_name: None,
            http_url: self.http_url(env),
            account: self.account(env).unwrap_or_default(),
            account_uuid: self.account_uuid.clone(),
            require_mention: self.require_mention,
            mention_patterns: self.mention_patterns.clone(),
            media_dir,
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            stream_deadline: self.stream_deadline.get(),
            api_timeout: self.api_timeout.get(),
            allow_remote: self.allow_remote,
        }
    }
}

impl Section for SignalConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self, checks: &mut Checks<'_>) {
        let missing_account = self.account(checks.env()).is_none();
        if missing_account {
            checks.key("account", "not set (set it here or SIGNAL_ACCOUNT)");
        }
        let Err(found) = self.settings(checks.env(), PathBuf::from(".")).validate() else { return };
        for problem in found {
            // The missing account is already said above, with where to set it.
            if missing_account && problem.contains("account must be") {
                continue;
            }
            let problem = problem.strip_prefix("signal: ").unwrap_or(&problem);
            checks.table(problem);
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let settings =
            SignalSettings { account_name: cx.account.map(str::to_owned), ..self.settings(cx.env, cx.media_dir(NAME)) };
        settings.validate().map_err(|problems| problems.join("; "))?;
        if settings.deadline_below_keepalive() {
            tracing::warn!(
                platform = NAME,
                deadline_s = settings.stream_deadline.as_secs_f64(),
                "signal stream_deadline is not above signal-cli's 15 s keepalive; quiet streams will be replaced"
            );
        }
        Ok(Arc::new(SignalPlatform::new(settings)?))
    }

    fn advice(&self, env: &dyn Environment) -> Vec<String> {
        let mut advice = Vec::new();
        if self.enabled && self.settings(env, PathBuf::from(".")).deadline_below_keepalive() {
            advice.push(format!(
                "platforms.signal.stream_deadline: {} is not above signal-cli's 15 s keepalive; quiet streams will be \
                 replaced needlessly",
                self.stream_deadline
            ));
        }
        advice
    }

    fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    fn runs_beside_accounts(&self, env: &dyn Environment) -> bool {
        self.account(env).is_some_and(|number| !number.is_empty())
    }

    fn identity(&self, env: &dyn Environment) -> Option<String> {
        self.account(env).map(|number| format!("the number {number}"))
    }

    fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::path::Path;

    use hermesd_platform::conformance::section_problems as problems;

    use super::*;

    fn env(vars: &[(&str, &str)]) -> HashMap<String, String> {
        vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let config = SignalConfig {
            enabled: true,
            http_url: Some("http://10.1.2.3:8080".into()),
            account_uuid: Some("x".into()),
            max_file_mb: 0,
            stream_deadline: HumanDuration::secs(0),
            ..SignalConfig::default()
        };
        assert_eq!(
            problems(&config, &[]),
            [
                "platforms.signal.account: not set (set it here or SIGNAL_ACCOUNT)",
                "platforms.signal: http_url `http://10.1.2.3:8080` is not loopback; signal-cli's HTTP daemon has no \
                 authentication (set allow_remote = true only behind your own authenticating proxy)",
                "platforms.signal: account_uuid must be a UUID",
                "platforms.signal: max_file_mb must be positive",
                "platforms.signal: stream_deadline must be at least 1s",
            ],
        );
    }

    #[test]
    fn the_environment_fills_url_and_account() {
        let config = SignalConfig { enabled: true, ..SignalConfig::default() };
        assert_eq!(problems(&config, &[("SIGNAL_ACCOUNT", "+15550001111")]), Vec::<String>::new());
        let vars = env(&[("SIGNAL_ACCOUNT", "+15550001111"), ("SIGNAL_HTTP_URL", "http://127.0.0.1:9999")]);
        assert_eq!(config.http_url(&vars), "http://127.0.0.1:9999");
        assert_eq!(config.http_url(&env(&[])), DEFAULT_HTTP_URL);
        let settings = config.settings(&vars, PathBuf::from("/home/media/signal"));
        assert_eq!(settings.account, "+15550001111");
        assert_eq!(settings.media_dir, Path::new("/home/media/signal"));
        let file_wins = SignalConfig { account: Some("+15559990000".into()), ..config.clone() };
        assert_eq!(file_wins.account(&vars).as_deref(), Some("+15559990000"));
        let bad = [("SIGNAL_ACCOUNT", "15550001111"), ("SIGNAL_HTTP_URL", "ftp://x")];
        assert_eq!(problems(&config, &bad).len(), 2, "{:?}", problems(&config, &bad));
    }

    #[test]
    fn a_short_deadline_is_advice_not_an_error() {
        let config = SignalConfig { enabled: true, stream_deadline: HumanDuration::secs(5), ..SignalConfig::default() };
        let vars = env(&[("SIGNAL_ACCOUNT", "+15550001111")]);
        assert!(problems(&config, &[("SIGNAL_ACCOUNT", "+15550001111")]).is_empty());
        assert_eq!(config.advice(&vars).len(), 1);
        assert!(SignalConfig::default().advice(&vars).is_empty());
    }

    #[test]
    fn accounts_are_numbers_of_their_own_and_one_number_cannot_be_two_accounts() {
        let table = serde_json::json!({"enabled": true, "accounts": {
            "work": {"account": "+15550002222", "profile": "work"},
            "copy": {"profile": "work"},
        }});
        let config: SignalConfig = serde_json::from_value(table).unwrap();
        let registered: &dyn hermesd_platform::section::Registered = &config;
        let names = |vars: &[(&str, &str)]| -> Vec<String> {
            registered.instances(&env(vars)).unwrap().iter().map(|i| i.name()).collect()
        };
        assert_eq!(names(&[]), ["signal@copy", "signal@work"], "no number of the table's own: only the accounts");
        let own = [("SIGNAL_ACCOUNT", "+15550001111")];
        assert_eq!(names(&own), ["signal", "signal@copy", "signal@work"]);
        assert_eq!(
            problems(&config, &own),
            [
                "platforms.signal.accounts.copy: the same account as platforms.signal (set its own credentials or number; \
              two adapters would answer each message twice)"
            ],
            "an account without a number of its own would be the table's number again"
        );
        let work = registered.instances(&env(&[])).unwrap().remove(1);
        assert_eq!(work.section.profile(), Some("work"));
    }
}
