//! The Signal adapter's settings, their defaults and a pure validation pass.
//!
//! The host reads config and the environment; nothing here does IO. signal-cli's HTTP daemon has
//! no authentication, so a URL that is not loopback is refused unless the operator says so.

use std::path::PathBuf;
use std::time::Duration;

/// Everything the Signal adapter needs; the host fills it from config and the environment.
#[derive(Debug, Clone)]
pub struct SignalSettings {
    /// The hermesd account this number is (`[platforms.signal.accounts.<name>]`): the adapter
    /// is then `signal@<name>`, with chats and sessions of its own.
    pub account_name: Option<String>,
    /// signal-cli's HTTP daemon, e.g. `http://127.0.0.1:8080`.
    pub http_url: String,
    /// The account signal-cli serves (`+15550001111`); sent with every call, which a
    /// multi-account daemon needs and a single-account one accepts.
    pub account: String,
    /// The account's own ACI UUID, when known: mentions of it address the bot.
    pub account_uuid: Option<String>,
    /// In groups, answer only messages that mention the account, quote it, or match a pattern.
    pub require_mention: bool,
    /// Words that address the bot in a group (case-insensitive substrings, e.g. `hermes`).
    pub mention_patterns: Vec<String>,
    /// Where attachments are saved, normally `$HERMESD_HOME/media/signal`.
    pub media_dir: PathBuf,
    /// Files larger than this are not fetched; the message text says so instead.
    pub max_file_bytes: u64,
    /// The stream is dead when neither bytes nor a keepalive came for this long (signal-cli
    /// sends a `:` comment every 15 s); it is then dropped and opened again.
    pub stream_deadline: Duration,
    /// The longest one JSON-RPC call may take.
    pub api_timeout: Duration,
    /// Accept an `http_url` that is not loopback (signal-cli's HTTP daemon has no auth).
    pub allow_remote: bool,
}

impl Default for SignalSettings {
    fn default() -> Self {
        Self {
            account_name: None,
            http_url: DEFAULT_HTTP_URL.to_owned(),
            account: String::new(),
            account_uuid: None,
            require_mention: true,
            mention_patterns: Vec::new(),
            media_dir: PathBuf::from("media/signal"),
            max_file_bytes: 20 * 1024 * 1024,
            stream_deadline: Duration::from_secs(45),
            api_timeout: Duration::from_secs(30),
            allow_remote: false,
        }
    }
}

/// Where signal-cli's HTTP daemon listens by default (`daemon --http`).
pub const DEFAULT_HTTP_URL: &str = "http://127.0.0.1:8080";

/// signal-cli's keepalive period on the event stream (`HttpServerHandler`, 15 s).
pub const KEEPALIVE: Duration = Duration::from_secs(15);

impl SignalSettings {
    /// Checks the settings without IO and returns every problem found, one line each.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        match host_of(&self.http_url) {
            None => problems.push(format!("signal: http_url `{}` is not an http(s) URL", self.http_url)),
            Some(host) if !self.allow_remote && !is_loopback(host) => problems.push(format!(
                "signal: http_url `{}` is not loopback; signal-cli's HTTP daemon has no authentication (set \
                 allow_remote = true only behind your own authenticating proxy)",
                self.http_url
            )),
            Some(_) => {}
        }
        if !is_account(&self.account) {
            problems.push("signal: account must be the E.164 number signal-cli serves, e.g. +15550001111".to_owned());
        }
        if self.account_uuid.as_deref().is_some_and(|u| !is_uuid(u)) {
            problems.push("signal: account_uuid must be a UUID".to_owned());
        }
        if self.max_file_bytes == 0 {
            problems.push("signal: max_file_mb must be positive".to_owned());
        }
        if self.mention_patterns.iter().any(|p| p.trim().is_empty()) {
            problems.push("signal: mention_patterns must not contain blank entries".to_owned());
        }
        if self.stream_deadline < Duration::from_secs(1) {
            problems.push("signal: stream_deadline must be at least 1s".to_owned());
        }
        if self.api_timeout < Duration::from_millis(100) {
            problems.push("signal: api_timeout must be at least 100ms".to_owned());
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// The base URL without a trailing slash.
    pub(crate) fn base(&self) -> &str {
        self.http_url.trim_end_matches('/')
    }

    /// Whether the stream deadline allows for signal-cli's keepalive period; a shorter deadline
    /// replaces healthy quiet streams (the host warns about it).
    pub fn deadline_below_keepalive(&self) -> bool {
        self.stream_deadline <= KEEPALIVE
    }
}

/// The host of an http(s) URL, brackets removed; `None` when it is not one.
pub fn host_of(url: &str) -> Option<&str> {
    let rest = url.strip_prefix("http://").or_else(|| url.strip_prefix("https://"))?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.is_empty() || authority.contains(char::is_whitespace) || authority.contains('@') {
        return None;
    }
    let host = if let Some(v6) = authority.strip_prefix('[') {
        v6.split(']').next().unwrap_or_default()
    } else {
        authority
            .rsplit_once(':')
            .map_or(authority, |(host, port)| if port.chars().all(|c| c.is_ascii_digit()) { host } else { authority })
    };
    (!host.is_empty()).then_some(host)
}

/// Whether `host` names this machine.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// `+` and 6 to 15 digits.
pub fn is_account(text: &str) -> bool {
    text.strip_prefix('+').is_some_and(|d| (6..=15).contains(&d.len()) && d.chars().all(|c| c.is_ascii_digit()))
}

/// A UUID in its 8-4-4-4-12 hex form.
pub fn is_uuid(text: &str) -> bool {
    let parts: Vec<&str> = text.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12]) && parts.iter().all(|p| p.chars().all(|c| c.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> SignalSettings {
        SignalSettings { account: "+15550001111".into(), ..SignalSettings::default() }
    }

    #[test]
    fn defaults_with_an_account_are_valid() {
        assert_eq!(valid().validate(), Ok(()));
        let ipv6 = SignalSettings { http_url: "http://[::1]:8080/".into(), ..valid() };
        assert_eq!(ipv6.validate(), Ok(()));
        assert_eq!(ipv6.base(), "http://[::1]:8080");
    }

    #[test]
    fn validate_lists_every_problem() {
        let settings = SignalSettings {
            http_url: "ftp://x".into(),
            account: "15550001111".into(),
            account_uuid: Some("nope".into()),
            max_file_bytes: 0,
            mention_patterns: vec![" ".into()],
            stream_deadline: Duration::ZERO,
            api_timeout: Duration::ZERO,
            ..SignalSettings::default()
        };
        let problems = settings.validate().err().unwrap_or_default();
        assert_eq!(problems.len(), 7, "{problems:#?}");
    }

    #[test]
    fn a_remote_daemon_is_refused_unless_allowed() {
        for url in ["http://10.0.0.5:8080", "https://signal.example.com", "http://0.0.0.0:8080"] {
            let remote = SignalSettings { http_url: url.into(), ..valid() };
            let problems = remote.validate().err().unwrap_or_default();
            assert!(problems.len() == 1 && problems[0].contains("no authentication"), "{url}: {problems:?}");
            assert_eq!(SignalSettings { allow_remote: true, ..remote }.validate(), Ok(()));
        }
        for url in ["http://localhost:8080", "http://127.0.0.2:9", "http://user@127.0.0.1:8080"] {
            let ok = SignalSettings { http_url: url.into(), ..valid() }.validate().is_ok();
            assert_eq!(ok, !url.contains('@'), "{url}");
        }
    }

    #[test]
    fn ids_have_their_shapes() {
        assert!(is_uuid("0d6a0c8e-6f0c-4a54-9c3a-2b1d4c5e6f70"));
        assert!(!is_uuid("0d6a0c8e6f0c4a549c3a2b1d4c5e6f70"));
        assert!(is_account("+15550001111") && !is_account("+1") && !is_account("+1555x001111"));
        assert!(!valid().deadline_below_keepalive());
        let short = SignalSettings { stream_deadline: Duration::from_secs(5), ..valid() };
        assert!(short.deadline_below_keepalive());
    }
}
