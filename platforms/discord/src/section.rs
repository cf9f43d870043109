//! `[platforms.discord]`: the table's keys and defaults, its checks for `hermesd check`, and the
//! adapter built from it. The token comes from `DISCORD_BOT_TOKEN`; channel filters add to
//! `DISCORD_ALLOWED_CHANNELS` and `DISCORD_IGNORED_CHANNELS`. Each bot of
//! `[platforms.discord.accounts.<a>]` names its own token variable (`token_env`) and runs as
//! `discord@<a>`, beside the table's own bot when `DISCORD_BOT_TOKEN` is set.

use std::sync::Arc;

use hermesd_platform::section::{Accounts, BuildContext, Checks, Section};
use hermesd_platform::{Environment, Platform};
use serde::{Deserialize, Serialize};

use crate::{DiscordPlatform, DiscordSettings, NAME, Reactions};

/// `[platforms.discord]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DiscordConfig {
    /// Run the adapter; the token comes from `DISCORD_BOT_TOKEN`.
    pub enabled: bool,
    /// REST base URL; the gateway URL is asked from it.
    pub api_url: String,
    /// In guild text channels, answer only messages that mention the bot (user or role) or reply
    /// to it.
    pub require_mention: bool,
    /// For a mention in a guild text channel, open a thread on the message and answer there.
    pub auto_thread: bool,
    /// Only these channel ids (and threads under them) are served in guilds; empty: all. Adds to
    /// `DISCORD_ALLOWED_CHANNELS`.
    pub allowed_channels: Vec<String>,
    /// Channel ids (and threads under them) never served. Adds to `DISCORD_IGNORED_CHANNELS`.
    pub ignored_channels: Vec<String>,
    /// Largest attachment downloaded, in MB.
    pub max_file_mb: u64,
    /// Emoji put on the user's message once it is stored; empty: none.
    pub reaction_received: String,
    /// Emoji put on the user's message when the reply was sent; empty: none.
    pub reaction_done: String,
    /// Emoji put on the user's message when the turn ended in an error; empty: none.
    pub reaction_failed: String,
    /// Stream answers while the model writes them: a preview message edited through the chat's
    /// pacer, replaced by the final answer.
    pub streaming: bool,
    /// The variable holding the bot token.
    pub token_env: String,
    /// The profile this bot's chats belong to; absent: `default`.
    pub profile: Option<String>,
    /// More bots: `[platforms.discord.accounts.<name>]`, each with this table's keys (its own
    /// `token_env` above all) laid over the table's.
    pub accounts: Accounts,
}

impl Default for DiscordConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            api_url: "https://discord.com".into(),
            require_mention: true,
            auto_thread: true,
            allowed_channels: Vec::new(),
            ignored_channels: Vec::new(),
            max_file_mb: 25,
            reaction_received: String::new(),
            reaction_done: String::new(),
            reaction_failed: String::new(),
            streaming: false,
            token_env: TOKEN_ENV.into(),
            profile: None,
            accounts: Accounts::new(),
        }
    }
}

/// The variable holding the table's own bot token.
const TOKEN_ENV: &str = "DISCORD_BOT_TOKEN";

/// The variables whose channel ids add to the table's lists.
const ALLOWED_VAR: &str = "DISCORD_ALLOWED_CHANNELS";
const IGNORED_VAR: &str = "DISCORD_IGNORED_CHANNELS";

impl DiscordConfig {
    /// The table's channel list and the variable's, together.
    fn channels(listed: &[String], env: &dyn Environment, var: &str) -> Vec<String> {
        listed.iter().cloned().chain(env.list(var)).collect()
    }
}

impl Section for DiscordConfig {
    fn name(&self) -> &'static str {
        NAME
    }

    fn enabled(&self) -> bool {
        self.enabled
    }

    fn check(&self, checks: &mut Checks<'_>) {
        checks.secret(&self.token_env);
        checks.http_url("api_url", &self.api_url);
        checks.positive("max_file_mb", self.max_file_mb);
        let is_id = |id: &str| id.trim().parse::<u64>().is_ok_and(|n| n > 0);
        let bad =
            |listed: &[String]| listed.iter().find(|id| !is_id(id)).map(|id| format!("{id:?} is not a channel id"));
        for (key, listed) in
            [("allowed_channels", &self.allowed_channels), ("ignored_channels", &self.ignored_channels)]
        {
            if let Some(problem) = bad(listed) {
                checks.key(key, problem);
            }
        }
        for var in [ALLOWED_VAR, IGNORED_VAR] {
            if let Some(problem) = bad(&checks.env().list(var)) {
                checks.variable(var, problem);
            }
        }
    }

    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String> {
        let emoji = |text: &str| Some(text.trim().to_owned()).filter(|e| !e.is_empty());
        let settings = DiscordSettings {
            token: cx.env.required_secret(&self.token_env)?,
            account: cx.account.map(str::to_owned),
            api_url: self.api_url.clone(),
            require_mention: self.require_mention,
            auto_thread: self.auto_thread,
            allowed_channels: Self::channels(&self.allowed_channels, cx.env, ALLOWED_VAR),
            ignored_channels: Self::channels(&self.ignored_channels, cx.env, IGNORED_VAR),
            media_dir: cx.media_dir(NAME),
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            reactions: Reactions {
                received: emoji(&self.reaction_received),
                done: emoji(&self.reaction_done),
                failed: emoji(&self.reaction_failed),
            },
            ..DiscordSettings::default()
        };
        settings.validate().map_err(|problems| problems.join("; "))?;
        Ok(Arc::new(DiscordPlatform::new(settings)))
    }

    fn streaming(&self) -> bool {
        self.streaming
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
    use std::collections::HashMap;

    use hermesd_platform::conformance::section_problems;

    use super::*;

    #[test]
    fn channel_ids_from_the_table_and_the_environment_are_checked() {
        let config = DiscordConfig {
            enabled: true,
            api_url: "discord.com".into(),
            allowed_channels: vec!["12".into(), "general".into()],
            max_file_mb: 0,
            ..DiscordConfig::default()
        };
        let env: HashMap<String, String> =
            [(IGNORED_VAR, "5, x")].iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        assert_eq!(
            section_problems(&config, &[(IGNORED_VAR, "5, x")]),
            [
                "platforms.discord: DISCORD_BOT_TOKEN is not set",
                "platforms.discord.api_url: \"discord.com\" is not an http(s) URL",
                "platforms.discord.max_file_mb: must be positive",
                "platforms.discord.allowed_channels: \"general\" is not a channel id",
                "DISCORD_IGNORED_CHANNELS: \"x\" is not a channel id",
            ]
        );
        assert_eq!(DiscordConfig::channels(&config.allowed_channels, &env, IGNORED_VAR), ["12", "general", "5", "x"]);
    }

    #[test]
    fn accounts_are_bots_of_their_own_checked_under_their_key() {
        let table = serde_json::json!({"enabled": true, "accounts": {
            "work": {"token_env": "DC_WORK", "profile": "work", "max_file_mb": 0},
        }});
        let config: DiscordConfig = serde_json::from_value(table).unwrap();
        assert_eq!(
            section_problems(&config, &[]),
            [
                "platforms.discord.accounts.work: DC_WORK is not set",
                "platforms.discord.accounts.work.max_file_mb: must be positive",
            ]
        );
        let registered: &dyn hermesd_platform::section::Registered = &config;
        let env: HashMap<String, String> = HashMap::from([("DISCORD_BOT_TOKEN".to_owned(), "t".to_owned())]);
        let names: Vec<String> = registered.instances(&env).unwrap().iter().map(|i| i.name()).collect();
        assert_eq!(names, ["discord", "discord@work"], "the table's own bot runs beside: its token is set");
        let alone = registered.instances(&HashMap::<String, String>::new()).unwrap();
        assert_eq!(alone.len(), 1);
        assert_eq!(alone[0].section.profile(), Some("work"));
    }
}
