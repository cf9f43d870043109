//! The Slack adapter's settings, their defaults and a pure validation pass.
//!
//! The host reads the environment and files; nothing here does IO, and no token or signing
//! secret is ever part of a validation message.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

/// Where the host's HTTP server routes Slack's Events API requests (`/slack/<account>/events`
/// for an account's app).
pub const EVENTS_PATH: &str = "/slack/events";

/// How events reach the adapter. `Debug` never shows the token or secret.
#[derive(Clone, PartialEq, Eq)]
pub enum SlackMode {
    /// One Socket Mode websocket per app token (`xapp-…`).
    Socket {
        /// The app-level token, from `SLACK_APP_TOKEN`.
        app_token: String,
    },
    /// Slack POSTs signed events to the host's `/slack/events` route.
    Events {
        /// The signing secret, from `SLACK_SIGNING_SECRET`.
        signing_secret: String,
    },
}

/// Everything the Slack adapter needs; the host fills it from config and the environment.
/// `Debug` never shows the tokens.
#[derive(Clone)]
pub struct SlackSettings {
    /// The account this app is (`[platforms.slack.accounts.<name>]`): the adapter is then
    /// `slack@<name>`, with chats, sessions and an events path of its own.
    pub account: Option<String>,
    /// The bot token (`xoxb-…`, from `SLACK_BOT_TOKEN`); never logged.
    pub bot_token: String,
    /// Web API base URL, e.g. `https://slack.com/api`, a proxy, or a fake.
    pub api_url: String,
    /// Socket Mode or the Events API.
    pub mode: SlackMode,
    /// In channels, drop top-level messages that do not mention the bot. Replies in a thread the
    /// bot takes part in need no mention.
    pub require_mention: bool,
    /// Channel ids the bot answers in; empty means every channel it is in. DMs are not affected.
    pub allowed_channels: Vec<String>,
    /// Show tool progress messages in channels (they are always shown in DMs).
    pub progress_in_channels: bool,
    /// Treat edited messages as new messages (ignored otherwise; deletions are always ignored).
    pub edited_messages: bool,
    /// Where attachments are saved, normally `$HERMESD_HOME/media/slack`; attachment paths are
    /// reported relative to this directory's grandparent (the data dir).
    pub media_dir: PathBuf,
    /// Files larger than this are not downloaded; the message text says so instead.
    pub max_file_bytes: u64,
    /// Socket Mode: a socket that brings neither an envelope nor a hello for this long is
    /// replaced, so a connection Slack stopped feeding cannot stay open for ever.
    pub socket_idle_reconnect: Duration,
    /// Socket Mode: how often the adapter pings Slack; a ping unanswered for three intervals
    /// drops the socket.
    pub socket_ping_interval: Duration,
    /// The longest one Web API call may take (slack-morphism has no bound of its own): a Slack,
    /// or a proxy, that takes a request and never answers fails the call as transient (the host
    /// retries it) instead of holding a chat's lane, the typing refresh or the receive loop.
    pub api_timeout: Duration,
}

impl Default for SlackSettings {
    fn default() -> Self {
        Self {
            account: None,
            bot_token: String::new(),
            api_url: "https://slack.com/api".to_owned(),
            mode: SlackMode::Socket { app_token: String::new() },
            require_mention: true,
            allowed_channels: Vec::new(),
            progress_in_channels: false,
            edited_messages: false,
            media_dir: PathBuf::from("media/slack"),
            max_file_bytes: 20 * 1024 * 1024,
            socket_idle_reconnect: Duration::from_secs(30 * 60),
            socket_ping_interval: Duration::from_secs(10),
            api_timeout: Duration::from_secs(30),
        }
    }
}

impl fmt::Debug for SlackMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SlackMode::Socket { .. } => f.write_str("Socket { app_token: <redacted> }"),
            SlackMode::Events { .. } => f.write_str("Events { signing_secret: <redacted> }"),
        }
    }
}

impl fmt::Debug for SlackSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SlackSettings")
            .field("account", &self.account)
            .field("bot_token", &"<redacted>")
            .field("api_url", &self.api_url)
            .field("mode", &self.mode)
            .field("require_mention", &self.require_mention)
            .field("allowed_channels", &self.allowed_channels)
            .field("progress_in_channels", &self.progress_in_channels)
            .field("edited_messages", &self.edited_messages)
            .field("media_dir", &self.media_dir)
            .field("max_file_bytes", &self.max_file_bytes)
            .field("socket_idle_reconnect", &self.socket_idle_reconnect)
            .field("socket_ping_interval", &self.socket_ping_interval)
            .field("api_timeout", &self.api_timeout)
            .finish()
    }
}

impl SlackSettings {
    /// Checks the settings without IO and returns every problem found, one line each.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if self.bot_token.trim().is_empty() {
            problems.push("slack: the bot token is empty (set SLACK_BOT_TOKEN)".to_owned());
        } else if !self.bot_token.starts_with("xoxb-") {
            problems.push("slack: SLACK_BOT_TOKEN must be a bot token (xoxb-…)".to_owned());
        }
        match &self.mode {
            SlackMode::Socket { app_token } if app_token.trim().is_empty() => {
                problems.push("slack: socket mode needs an app token (set SLACK_APP_TOKEN)".to_owned());
            }
            SlackMode::Socket { app_token } if !app_token.starts_with("xapp-") => {
                problems.push("slack: SLACK_APP_TOKEN must be an app-level token (xapp-…)".to_owned());
            }
            SlackMode::Events { signing_secret } if signing_secret.trim().is_empty() => {
                problems.push("slack: events mode needs a signing secret (set SLACK_SIGNING_SECRET)".to_owned());
            }
            _ => {}
        }
        if !is_http_url(&self.api_url) {
            problems.push(format!("slack: api_url `{}` is not an http(s) URL", self.api_url));
        }
        if self.max_file_bytes == 0 {
            problems.push("slack: max_file_bytes must be positive".to_owned());
        }
        if self.allowed_channels.iter().any(|c| c.trim().is_empty()) {
            problems.push("slack: allowed_channels must not contain blank entries".to_owned());
        }
        if self.socket_ping_interval.is_zero() || self.socket_idle_reconnect < self.socket_ping_interval {
            problems
                .push("slack: socket_idle_reconnect must be at least socket_ping_interval, both positive".to_owned());
        }
        if self.api_timeout < Duration::from_millis(100) {
            problems.push("slack: api_timeout must be at least 100ms".to_owned());
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// The path Slack posts this app's events and interactions to.
    pub fn events_path(&self) -> String {
        match &self.account {
            Some(account) => format!("/{}/{account}/events", crate::NAME),
            None => EVENTS_PATH.to_owned(),
        }
    }

    /// The Web API base without a trailing slash (slack-morphism appends `/{method}`).
    pub(crate) fn api_base(&self) -> &str {
        self.api_url.trim_end_matches('/')
    }
}

fn is_http_url(url: &str) -> bool {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|host| !host.is_empty() && !host.contains(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> SlackSettings {
        SlackSettings {
            bot_token: "xoxb-1-2-secret".into(),
            mode: SlackMode::Socket { app_token: "xapp-1-A-secret".into() },
            ..SlackSettings::default()
        }
    }

    #[test]
    fn defaults_with_tokens_are_valid() {
        assert_eq!(valid().validate(), Ok(()));
        let events = SlackSettings { mode: SlackMode::Events { signing_secret: "s3cret".into() }, ..valid() };
        assert_eq!(events.validate(), Ok(()));
    }

    #[test]
    fn validate_collects_every_problem_without_secrets() {
        let settings = SlackSettings {
            bot_token: "xoxp-user-secret".into(),
            mode: SlackMode::Socket { app_token: "xoxb-wrong-secret".into() },
            api_url: "ftp://x".into(),
            max_file_bytes: 0,
            allowed_channels: vec![" ".into()],
            socket_ping_interval: Duration::ZERO,
            ..SlackSettings::default()
        };
        let problems = settings.validate().err().unwrap_or_default();
        assert_eq!(problems.len(), 6, "{problems:#?}");
        assert!(problems.iter().all(|p| !p.contains("secret")), "{problems:#?}");
        let empty = SlackSettings { mode: SlackMode::Events { signing_secret: String::new() }, ..valid() };
        assert_eq!(empty.validate().err().map(|p| p.len()), Some(1));
    }

    #[test]
    fn debug_output_hides_every_secret() {
        let shown = format!("{:?}", valid());
        assert!(!shown.contains("secret") && shown.contains("<redacted>"), "{shown}");
        let events = SlackSettings { mode: SlackMode::Events { signing_secret: "s3cret".into() }, ..valid() };
        assert!(!format!("{events:?}").contains("s3cret"));
    }

    #[test]
    fn the_api_base_has_no_trailing_slash() {
        let settings = SlackSettings { api_url: "http://127.0.0.1:9/api/".into(), ..valid() };
        assert_eq!(settings.api_base(), "http://127.0.0.1:9/api");
    }
}
