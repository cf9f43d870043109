//! `[platforms.signal]`: a local signal-cli daemon (`signal-cli -a +NUMBER daemon --http`).
//! `http_url` and `account` may come from `SIGNAL_HTTP_URL` and `SIGNAL_ACCOUNT` instead; the
//! file wins. signal-cli's HTTP daemon has no authentication, so the URL must be loopback
//! unless `allow_remote` says otherwise.

use serde::{Deserialize, Serialize};

use super::{Env, HumanDuration};

/// Where signal-cli's HTTP daemon listens by default.
pub const DEFAULT_SIGNAL_URL: &str = "http://127.0.0.1:8080";

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
        }
    }
}

impl SignalConfig {
    /// The daemon's URL: the file, else `SIGNAL_HTTP_URL`, else the default.
    pub fn http_url(&self, env: &Env) -> String {
        self.http_url.clone().or_else(|| env.var("SIGNAL_HTTP_URL")).unwrap_or_else(|| DEFAULT_SIGNAL_URL.to_owned())
    }

    /// The account: the file, else `SIGNAL_ACCOUNT`.
    pub fn account(&self, env: &Env) -> Option<String> {
        self.account.clone().or_else(|| env.var("SIGNAL_ACCOUNT")).map(|a| a.trim().to_owned())
    }

    /// The adapter's settings, media under `home/media/signal`.
    #[cfg(feature = "signal")]
    pub fn settings(&self, env: &Env, home: &std::path::Path) -> hermesd_signal::SignalSettings {
        hermesd_signal::SignalSettings {
            http_url: self.http_url(env),
            account: self.account(env).unwrap_or_default(),
            account_uuid: self.account_uuid.clone(),
            require_mention: self.require_mention,
            mention_patterns: self.mention_patterns.clone(),
            media_dir: home.join("media").join("signal"),
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            stream_deadline: self.stream_deadline.get(),
            api_timeout: self.api_timeout.get(),
            allow_remote: self.allow_remote,
        }
    }

    /// Every problem of an enabled `[platforms.signal]`, as `platforms.signal: …` lines.
    #[cfg(feature = "signal")]
    pub(super) fn check(&self, env: &Env, problems: &mut Vec<String>) {
        if self.account(env).is_none() {
            problems.push("platforms.signal.account: not set (set it here or SIGNAL_ACCOUNT)".into());
        }
        let settings = self.settings(env, std::path::Path::new("."));
        if let Err(found) = settings.validate() {
            let missing_account = self.account(env).is_none();
            for problem in found {
                // The missing account is already said above, with where to set it.
                if missing_account && problem.contains("account must be") {
                    continue;
                }
                problems.push(format!("platforms.{problem}"));
            }
        }
    }

    /// What `hermesd check` suggests without failing.
    #[cfg(feature = "signal")]
    pub fn advice(&self, env: &Env) -> Vec<String> {
        let mut advice = Vec::new();
        if self.enabled && self.settings(env, std::path::Path::new(".")).deadline_below_keepalive() {
            advice.push(format!(
                "platforms.signal.stream_deadline: {} is not above signal-cli's 15 s keepalive; quiet streams will be \
                 replaced needlessly",
                self.stream_deadline
            ));
        }
        advice
    }
}

#[cfg(all(test, feature = "signal"))]
mod tests {
    use std::collections::HashMap;

    use super::super::Config;
    use super::*;

    fn env(vars: &[(&str, &str)]) -> Env {
        Env::from_map(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>())
    }

    #[test]
    fn every_problem_is_listed_at_once() {
        let config = Config::parse(
            "[platforms.signal]\nenabled = true\nhttp_url = \"http://10.1.2.3:8080\"\naccount_uuid = \"x\"\nmax_file_mb = 0\n\
             stream_deadline = \"0s\"\n",
        )
        .expect("parses");
        let problems = config.validate(&env(&[]));
        assert_eq!(
            problems,
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
        let config = Config::parse("[platforms.signal]\nenabled = true\n").expect("parses");
        assert_eq!(config.validate(&env(&[("SIGNAL_ACCOUNT", "+15550001111")])), Vec::<String>::new());
        let signal = &config.platforms.signal;
        let vars = env(&[("SIGNAL_ACCOUNT", "+15550001111"), ("SIGNAL_HTTP_URL", "http://127.0.0.1:9999")]);
        assert_eq!(signal.http_url(&vars), "http://127.0.0.1:9999");
        assert_eq!(signal.http_url(&env(&[])), DEFAULT_SIGNAL_URL);
        let settings = signal.settings(&vars, std::path::Path::new("/home"));
        assert_eq!(settings.account, "+15550001111");
        assert_eq!(settings.media_dir, std::path::Path::new("/home/media/signal"));
        let file_wins =
            Config::parse("[platforms.signal]\nenabled = true\naccount = \"+15559990000\"\n").expect("parses");
        assert_eq!(file_wins.platforms.signal.account(&vars).as_deref(), Some("+15559990000"));
        let bad = env(&[("SIGNAL_ACCOUNT", "15550001111"), ("SIGNAL_HTTP_URL", "ftp://x")]);
        assert_eq!(config.validate(&bad).len(), 2, "{:?}", config.validate(&bad));
    }

    #[test]
    fn a_short_deadline_is_advice_not_an_error() {
        let config = Config::parse("[platforms.signal]\nenabled = true\nstream_deadline = \"5s\"\n").expect("parses");
        let vars = env(&[("SIGNAL_ACCOUNT", "+15550001111")]);
        assert!(config.validate(&vars).is_empty());
        assert_eq!(config.platforms.signal.advice(&vars).len(), 1);
        assert!(Config::default().platforms.signal.advice(&vars).is_empty());
    }

    #[test]
    fn a_delivery_target_on_signal_needs_it_enabled() {
        let off = Config::default();
        assert!(off.check_target("signal:group:R3JvdXA=", false).is_err());
        let on = Config::parse("[platforms.signal]\nenabled = true\n").expect("parses");
        assert!(on.check_target("signal", false).is_ok());
    }
}
