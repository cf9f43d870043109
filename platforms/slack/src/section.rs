//! `[platforms.slack]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. Tokens come from `SLACK_BOT_TOKEN`, plus `SLACK_APP_TOKEN` (Socket
//! Mode) or `SLACK_SIGNING_SECRET` (Events API), never from the file; nothing here logs them.
//! Each app of `[platforms.slack.accounts.<a>]` names the variables of its own
//! (`bot_token_env`, `app_token_env`, `signing_secret_env`) and runs as `slack@<a>`, its events
//! at `/slack/<a>/events`, beside the table's own app when `SLACK_BOT_TOKEN` is set.

use std::sync::Arc;

use hermesd_platform::Platform;
use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{Accounts, BuildContext, Checks, Section};
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
    /// The variable holding the bot token (`xoxb-…`).
    pub bot_token_env: String,
    /// The variable holding the app-level token (`xapp-…`, Socket Mode).
    pub app_token_env: String,
    /// The variable holding the signing secret (Events API).
    pub signing_secret_env: String,
    /// The profile this app's chats belong to; absent: `default`.
    pub profile: Option<String>,
    /// More apps: `[platforms.slack.accounts.<name>]`, each with this table's keys (its own
    /// token variables above all) laid over the table's.
    pub accounts: Accounts,
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
            bot_token_env: "SLACK_BOT_TOKEN".into(),
            app_token_env: "SLACK_APP_TOKEN".into(),
            signing_secret_env: "SLACK_SIGNING_SECRET".into(),
            profile: None,
            accounts: Accounts::new(),
        }
    }
}

impl SlackConfig {
    /// The secrets this mode needs, each with the prefix its kind of token starts with.
    fn secrets(&self) -> [(&str, Option<&'static str>); 2] {
        let second = match self.mode {
            Receive::Events => (self.signing_secret_env.as_str(), None),
            Receive::Socket => (self.app_token_env.as_str(), Some("xapp-")),
        };
        [(self.bot_token_env.as_str(), Some("xoxb-")), second]
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
            Receive::Events => SlackMode::Events { signing_secret: secret(&self.signing_secret_env)? },
            Receive::Socket => SlackMode::Socket { app_token: secret(&self.app_token_env)? },
        };
        let settings = SlackSettings {
            account: cx.account.map(str::to_owned),
            bot_token: secret(&self.bot_token_env)?,
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

    fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    fn own_credential(&self) -> Option<&str> {
        Some(&self.bot_token_env)
    }

    fn profile(&self) -> Option<&str> {
        self.profile.as_deref()
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

    #[test]
    fn accounts_are_apps_of_their_own_with_their_own_secrets() {
        let table = serde_json::json!({"enabled": true, "mode": "events", "accounts": {
            "work": {"bot_token_env": "SLACK_WORK_BOT", "signing_secret_env": "SLACK_WORK_SECRET", "profile": "work"},
        }});
        let config: SlackConfig = serde_json::from_value(table).unwrap();
        assert_eq!(
            problems(&config, &[("SLACK_WORK_BOT", "xapp-wrong")]),
            [
                "platforms.slack.accounts.work: SLACK_WORK_BOT must start with xoxb-",
                "platforms.slack.accounts.work: SLACK_WORK_SECRET is not set",
            ]
        );
        let registered: &dyn hermesd_platform::section::Registered = &config;
        let env = |vars: &[(&str, &str)]| -> std::collections::HashMap<String, String> {
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let names = |vars: &[(&str, &str)]| -> Vec<String> {
            registered.instances(&env(vars)).unwrap().iter().map(|i| i.name()).collect()
        };
        assert_eq!(names(&[]), ["slack@work"], "no SLACK_BOT_TOKEN: only the accounts run");
        assert_eq!(names(&[("SLACK_BOT_TOKEN", "xoxb-1")]), ["slack", "slack@work"]);
        let vars = env(&[("SLACK_WORK_BOT", "xoxb-w"), ("SLACK_WORK_SECRET", "s")]);
        let work = registered.instances(&vars).unwrap().remove(0);
        assert_eq!(work.section.profile(), Some("work"));
        let cx = BuildContext { env: &vars, home: std::path::Path::new("/h"), account: Some("work") };
        let adapter = work.section.build(&cx).unwrap();
        assert_eq!((adapter.name(), adapter.webhook_path().as_deref()), ("slack@work", Some("/slack/work/events")));
    }
}
