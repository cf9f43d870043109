//! `[platforms.slack]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. Tokens come from `SLACK_BOT_TOKEN`, plus `SLACK_APP_TOKEN` (Socket
//! Mode) or `SLACK_SIGNING_SECRET` (Events API), never from the file; nothing here logs them.

use std::sync::Arc;

use hermesd_platform::Platform;
use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{BuildContext, Checks, Section};
use serde::{Deserialize, Serialize};

use crate::{NAME, SlackMode, SlackPlatform, SlackSettings};

/// How events arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Receive {
    /// Socket Mode: a websocket the adapter opens (`SLACK_APP_TOKEN`).
    Socket,
    /// The Events API: Slack posts to `/slack/events` (`SLACK_SIGNING_SECRET`).
    Events,
}

/// `[platforms.slack]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackConfig {
    /// Run the adapter (`SLACK_BOT_TOKEN`, plus `SLACK_APP_TOKEN` or `SLACK_SIGNING_SECRET`).
    pub enabled: bool,
    /// `socket` or `events`.
    pub mode: Receive,
    /// Web API base URL.
    pub api_url: String,
    /// In channels, answer only messages that mention the bot; replies in a thread the bot is in
    /// need no mention.
    pub require_mention: bool,
    /// Channel ids the bot answers in; empty: every channel it is a member of. DMs always work.
    pub allowed_channels: Vec<String>,
    /// Show tool progress messages in channels (always shown in DMs).
    pub progress_in_channels: bool,
    /// Treat edited messages as new messages.
    pub edited_messages: bool,
    /// Largest attachment downloaded, in MB.
    pub max_file_mb: u64,
    /// Socket Mode: replace a socket that brought no envelope or hello for this long.
    pub socket_idle_reconnect: HumanDuration,
    /// Stream answers while the model writes them: a preview message edited through the chat's
    /// pacer (`chat.update`), replaced by the final answer.
    pub streaming: bool,
    /// The longest one Web API call may take before it fails as transient (and is retried).
    pub api_timeout: HumanDuration,
}

impl Default for SlackConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            mode: Receive::Socket,
            api_url: "https://slack.com/api".into(),
            require_mention: true,
            allowed_channels: Vec::new(),
            progress_in_channels: false,
            edited_messages: false,
            max_file_mb: 20,
            socket_idle_reconnect: HumanDuration::secs(30 * 60),
            streaming: false,
            api_timeout: HumanDuration::secs(30),
        }
    }
}

impl SlackConfig {
    /// The secrets this mode needs, each with the prefix its kind of token starts with.
    fn secrets(&self) -> [(&'static str, Option<&'static str>); 2] {
        let second = match self.mode {
            Receive::Events => ("SLACK_SIGNING_SECRET", None),
            Receive::Socket => ("SLACK_APP_TOKEN", Some("xapp-")),
        };
        [("SLACK_BOT_TOKEN", Some("xoxb-")), second]
    }
}

impl Section for SlackConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self, checks: &mut Checks<'_>) {
        for (var, prefix) in self.secrets() {
            // Slack's token kinds are told apart by prefix; a user token in place of the bot
            // token, or a bot token in place of the app token, fails only at the first call.
            let wrong = |value: &str| prefix.filter(|p| !value.starts_with(p));
            if let Some(prefix) = checks.secret(var).and_then(|value| wrong(value.expose())) {
                checks.table(format_args!("{var} must start with {prefix}"));
            }
        }
        checks.http_url("api_url", &self.api_url);
        checks.positive("max_file_mb", self.max_file_mb);
        if self.allowed_channels.iter().any(|c| c.trim().is_empty()) {
            checks.key("allowed_channels", "blank entries are not allowed");
        }
        if self.socket_idle_reconnect.get() < std::time::Duration::from_secs(60) {
            checks.key("socket_idle_reconnect", "must be at least 1m");
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let secret = |name: &str| cx.env.required_secret(name);
        let mode = match self.mode {
            Receive::Events => SlackMode::Events { signing_secret: secret("SLACK_SIGNING_SECRET")? },
            Receive::Socket => SlackMode::Socket { app_token: secret("SLACK_APP_TOKEN")? },
        };
        let settings = SlackSettings {
            bot_token: secret("SLACK_BOT_TOKEN")?,
            api_url: self.api_url.clone(),
            mode,
            require_mention: self.require_mention,
            allowed_channels: self.allowed_channels.clone(),
            progress_in_channels: self.progress_in_channels,
            edited_messages: self.edited_messages,
            media_dir: cx.media_dir(NAME),
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            socket_idle_reconnect: self.socket_idle_reconnect.get(),
            api_timeout: self.api_timeout.get(),
            ..SlackSettings::default()
        };
        settings.validate().map_err(|problems| problems.join("; "))?;
        Ok(Arc::new(SlackPlatform::new(settings)))
    }

    fn streaming(&self) -> bool {
        self.streaming
    }

    fn signed_requests(&self) -> Option<&'static str> {
        (self.mode == Receive::Events).then_some("events mode")
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::conformance::section_problems as problems;

    use super::*;

    #[test]
    fn tokens_of_the_wrong_kind_and_bad_keys_are_listed() {
        let config = SlackConfig {
            enabled: true,
            allowed_channels: vec![" ".into()],
            max_file_mb: 0,
            socket_idle_reconnect: HumanDuration::secs(5),
            ..SlackConfig::default()
        };
        assert_eq!(
            problems(&config, &[("SLACK_BOT_TOKEN", "xoxp-user"), ("SLACK_APP_TOKEN", "xoxb-bot")]),
            [
                "platforms.slack: SLACK_BOT_TOKEN must start with xoxb-",
                "platforms.slack: SLACK_APP_TOKEN must start with xapp-",
                "platforms.slack.max_file_mb: must be positive",
                "platforms.slack.allowed_channels: blank entries are not allowed",
                "platforms.slack.socket_idle_reconnect: must be at least 1m",
            ]
        );
        let events = SlackConfig { enabled: true, mode: Receive::Events, ..SlackConfig::default() };
        assert_eq!(
            problems(&events, &[("SLACK_BOT_TOKEN", "xoxb-1")]),
            ["platforms.slack: SLACK_SIGNING_SECRET is not set"]
        );
    }
}
