//! `[platforms.telegram]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. The token comes from `TELEGRAM_BOT_TOKEN` (and the webhook secret from
//! `TELEGRAM_WEBHOOK_SECRET`), never from the file; each bot of `[platforms.telegram.accounts.<a>]`
//! names the variables of its own (`token_env`, `webhook_secret_env`) and runs as `telegram@<a>`,
//! beside the table's own bot when `TELEGRAM_BOT_TOKEN` is set.

use std::sync::Arc;

use hermesd_platform::Platform;
use hermesd_platform::duration::HumanDuration;
use hermesd_platform::section::{Accounts, BuildContext, Checks, Section};
use serde::{Deserialize, Serialize};

use crate::{NAME, TelegramMode, TelegramPlatform, TelegramSettings};

/// The variable holding the table's own bot token.
const TOKEN_ENV: &str = "TELEGRAM_BOT_TOKEN";

/// How updates arrive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Receive {
    /// Long polling (`getUpdates`).
    Polling,
    /// `setWebhook`: Telegram posts to `/telegram/webhook`.
    Webhook,
}

/// `[platforms.telegram]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TelegramConfig {
    /// Run the adapter; the token comes from `TELEGRAM_BOT_TOKEN`.
    pub enabled: bool,
    /// Bot API base URL (a local Bot API server or a proxy).
    pub api_url: String,
    /// `polling` or `webhook` (secret from `TELEGRAM_WEBHOOK_SECRET`, route `/telegram/webhook`).
    pub mode: Receive,
    /// Public URL registered with `setWebhook` in webhook mode; empty: register it yourself.
    pub webhook_url: String,
    /// In groups, answer only messages that mention the bot, reply to it, or are commands.
    pub require_mention: bool,
    /// Extra case-insensitive words that count as addressing the bot in groups.
    pub mention_patterns: Vec<String>,
    /// Handle channel posts.
    pub channel_posts: bool,
    /// Treat edited messages as new messages.
    pub edited_messages: bool,
    /// Largest attachment downloaded, in MB.
    pub max_file_mb: u64,
    /// Long-poll timeout (at most 15s: the Bot API client gives up at 17s).
    pub poll_timeout: HumanDuration,
    /// Stream answers while the model writes them: a preview message edited through the chat's
    /// pacer (a native draft in private chats), replaced by the final answer.
    pub streaming: bool,
    /// The variable holding the bot token.
    pub token_env: String,
    /// The variable holding the webhook secret (webhook mode).
    pub webhook_secret_env: String,
    /// The profile this bot's chats belong to; absent: `default`.
    pub profile: Option<String>,
    /// More bots: `[platforms.telegram.accounts.<name>]`, each with this table's keys (its own
    /// `token_env` above all) laid over the table's.
    pub accounts: Accounts,
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            api_url: "https://api.telegram.org".into(),
            mode: Receive::Polling,
            webhook_url: String::new(),
            require_mention: false,
            mention_patterns: Vec::new(),
            channel_posts: false,
            edited_messages: false,
            max_file_mb: 20,
            poll_timeout: HumanDuration::secs(10),
            streaming: false,
            token_env: TOKEN_ENV.into(),
            webhook_secret_env: "TELEGRAM_WEBHOOK_SECRET".into(),
            profile: None,
            accounts: Accounts::new(),
        }
    }
}

impl Section for TelegramConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self, checks: &mut Checks<'_>) {
        checks.secret(&self.token_env);
        if self.mode == Receive::Webhook {
            checks.secret(&self.webhook_secret_env);
        }
        checks.http_url("api_url", &self.api_url);
        if !(1..=15).contains(&self.poll_timeout.get().as_secs()) {
            checks.key("poll_timeout", "must be between 1s and 15s");
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let mode = match self.mode {
            Receive::Webhook => TelegramMode::Webhook {
                url: self.webhook_url.clone(),
                secret: cx.env.required_secret(&self.webhook_secret_env)?,
            },
            Receive::Polling => TelegramMode::Polling,
        };
        let settings = TelegramSettings {
            token: cx.env.required_secret(&self.token_env)?,
            account: cx.account.map(str::to_owned),
            api_url: self.api_url.clone(),
            mode,
            require_mention: self.require_mention,
            mention_patterns: self.mention_patterns.clone(),
            channel_posts: self.channel_posts,
            edited_messages: self.edited_messages,
            media_dir: cx.media_dir(NAME),
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            poll_timeout: self.poll_timeout.get(),
        };
        Ok(Arc::new(TelegramPlatform::new(settings)))
    }

    fn streaming(&self) -> bool {
        self.streaming
    }

    fn signed_requests(&self) -> Option<&'static str> {
        (self.mode == Receive::Webhook).then_some("webhook mode")
    }

    fn accounts(&self) -> &Accounts {
        &self.accounts
    }

    fn own_credential(&self) -> Option<&str> {
        Some(&self.token_env)
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
    fn every_problem_is_listed_with_its_key() {
        let config = TelegramConfig {
            enabled: true,
            mode: Receive::Webhook,
            api_url: "api.telegram.org".into(),
            poll_timeout: HumanDuration::secs(30),
            ..TelegramConfig::default()
        };
        assert_eq!(
            problems(&config, &[]),
            [
                "platforms.telegram: TELEGRAM_BOT_TOKEN is not set",
                "platforms.telegram: TELEGRAM_WEBHOOK_SECRET is not set",
                "platforms.telegram.api_url: \"api.telegram.org\" is not an http(s) URL",
                "platforms.telegram.poll_timeout: must be between 1s and 15s",
            ]
        );
        assert!(problems(&TelegramConfig { enabled: false, ..config }, &[]).is_empty(), "off: not checked");
        let on = TelegramConfig { enabled: true, ..TelegramConfig::default() };
        assert!(problems(&on, &[("TELEGRAM_BOT_TOKEN", "1:x")]).is_empty());
    }

    #[test]
    fn accounts_are_bots_of_their_own_beside_the_tables_bot_when_its_token_is_set() {
        let table = |third: &str, keys: serde_json::Value| {
            serde_json::json!({"enabled": true, "poll_timeout": "2s", "accounts": {
                "work": {"token_env": "TG_WORK", "profile": "work"}, third: keys,
            }})
        };
        let config: TelegramConfig = serde_json::from_value(table("Bad", serde_json::json!({}))).unwrap();
        let registered: &dyn hermesd_platform::section::Registered = &config;
        let env = |vars: &[(&str, &str)]| -> std::collections::HashMap<String, String> {
            vars.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
        };
        let bad = registered.instances(&env(&[])).unwrap_err();
        assert!(bad.starts_with("accounts.Bad: \"Bad\" is not an account name"), "{bad}");

        let config: TelegramConfig =
            serde_json::from_value(table("spare", serde_json::json!({"mode": "webhook"}))).unwrap();
        let registered: &dyn hermesd_platform::section::Registered = &config;
        assert_eq!(
            problems(&config, &[]),
            [
                "platforms.telegram.accounts.spare: TELEGRAM_BOT_TOKEN is not set",
                "platforms.telegram.accounts.spare: TELEGRAM_WEBHOOK_SECRET is not set",
                "platforms.telegram.accounts.work: TG_WORK is not set",
            ]
        );
        let only_accounts = registered.instances(&env(&[("TG_WORK", "1:w")])).unwrap();
        let names: Vec<String> = only_accounts.iter().map(|i| i.name()).collect();
        assert_eq!(names, ["telegram@spare", "telegram@work"], "no table token: only the accounts run");
        let work = &only_accounts[1].section;
        assert_eq!(work.profile(), Some("work"));
        let beside = registered.instances(&env(&[("TELEGRAM_BOT_TOKEN", "1:t")])).unwrap();
        let names: Vec<String> = beside.iter().map(|i| i.name()).collect();
        assert_eq!(names, ["telegram", "telegram@spare", "telegram@work"]);
        assert_eq!(beside[0].section.profile(), None);
    }
}
