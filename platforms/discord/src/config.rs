//! The Discord adapter's settings, their defaults and a pure validation pass.
//!
//! The host reads the environment and files; nothing here does IO, and the token is never part of
//! a validation message.

use std::path::PathBuf;
use std::time::Duration;

/// Emoji reactions put on the user's message at points of a turn; `None` leaves that point alone.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reactions {
    /// When the message was accepted (stored) by the host.
    pub received: Option<String>,
    /// When the last chunk of the reply was sent.
    pub done: Option<String>,
    /// When the last chunk of an error reply was sent.
    pub failed: Option<String>,
}

/// Everything the Discord adapter needs; the host fills it from config and the environment.
/// `Debug` shows everything but the token.
#[derive(Clone)]
pub struct DiscordSettings {
    /// The bot token (from `DISCORD_BOT_TOKEN`); never logged.
    pub token: String,
    /// The account this bot is (`[platforms.discord.accounts.<name>]`): the adapter is then
    /// `discord@<name>`, with its own chats and cursor; `None`: `discord`.
    pub account: Option<String>,
    /// REST base URL, e.g. `https://discord.com`, a proxy, or a fake; the gateway URL is asked
    /// from it.
    pub api_url: String,
    /// In guild text channels, drop messages that do not mention the bot (by user or role) or
    /// reply to it.
    pub require_mention: bool,
    /// For a mention in a guild text channel, open a thread on the message and answer there.
    pub auto_thread: bool,
    /// When not empty, only these channel ids (or threads under them) are served in guilds.
    pub allowed_channels: Vec<String>,
    /// Channel ids (or threads under them) never served.
    pub ignored_channels: Vec<String>,
    /// Where attachments are saved, normally `$HERMESD_HOME/media/discord`; attachment paths are
    /// reported relative to this directory's grandparent (the data dir).
    pub media_dir: PathBuf,
    /// Files larger than this are not downloaded; the message text says so instead.
    pub max_file_bytes: u64,
    /// A typing indicator lasts about ten seconds; calls closer together than this are skipped.
    pub typing_interval: Duration,
    /// Reactions on the user's message; all off by default.
    pub reactions: Reactions,
}

impl Default for DiscordSettings {
    fn default() -> Self {
        Self {
            token: String::new(),
            account: None,
            api_url: "https://discord.com".to_owned(),
            require_mention: true,
            auto_thread: true,
            allowed_channels: Vec::new(),
            ignored_channels: Vec::new(),
            media_dir: PathBuf::from("media/discord"),
            max_file_bytes: 25 * 1024 * 1024,
            typing_interval: Duration::from_secs(8),
            reactions: Reactions::default(),
        }
    }
}

impl std::fmt::Debug for DiscordSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DiscordSettings")
            .field("token", &"<redacted>")
            .field("account", &self.account)
            .field("api_url", &self.api_url)
            .field("require_mention", &self.require_mention)
            .field("auto_thread", &self.auto_thread)
            .field("allowed_channels", &self.allowed_channels)
            .field("ignored_channels", &self.ignored_channels)
            .field("media_dir", &self.media_dir)
            .field("max_file_bytes", &self.max_file_bytes)
            .field("typing_interval", &self.typing_interval)
            .field("reactions", &self.reactions)
            .finish()
    }
}

impl DiscordSettings {
    /// Checks the settings without IO and returns every problem found, one line each.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if self.token.trim().is_empty() {
            problems.push("discord: the bot token is empty (set DISCORD_BOT_TOKEN)".to_owned());
        }
        if !is_http_url(&self.api_url) {
            problems.push(format!("discord: api_url `{}` is not an http(s) URL", self.api_url));
        }
        if self.max_file_bytes == 0 {
            problems.push("discord: max_file_bytes must be positive".to_owned());
        }
        for (name, ids) in [("allowed_channels", &self.allowed_channels), ("ignored_channels", &self.ignored_channels)]
        {
            if let Some(bad) = ids.iter().find(|id| !is_snowflake(id)) {
                problems.push(format!("discord: {name} entry `{bad}` is not a channel id"));
            }
        }
        let reactions = &self.reactions;
        for (name, emoji) in
            [("received", &reactions.received), ("done", &reactions.done), ("failed", &reactions.failed)]
        {
            if emoji.as_deref().is_some_and(|e| e.trim().is_empty()) {
                problems.push(format!("discord: reaction `{name}` must not be blank"));
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }
}

/// Whether `id` looks like a Discord snowflake (a positive decimal u64).
pub fn is_snowflake(id: &str) -> bool {
    id.parse::<u64>().is_ok_and(|n| n > 0)
}

fn is_http_url(url: &str) -> bool {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|host| !host.is_empty() && !host.contains(char::is_whitespace))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> DiscordSettings {
        DiscordSettings { token: "Nzk.secret.token".into(), ..DiscordSettings::default() }
    }

    #[test]
    fn defaults_with_a_token_are_valid_and_gate_on_mentions() {
        let settings = valid();
        assert_eq!(settings.validate(), Ok(()));
        assert!(settings.require_mention && settings.auto_thread);
        assert_eq!(settings.reactions, Reactions::default());
    }

    #[test]
    fn validate_collects_every_problem_without_the_token() {
        let settings = DiscordSettings {
            token: " ".into(),
            api_url: "ws://x".into(),
            max_file_bytes: 0,
            allowed_channels: vec!["general".into()],
            ignored_channels: vec!["0".into()],
            reactions: Reactions { received: Some(" ".into()), ..Reactions::default() },
            ..DiscordSettings::default()
        };
        let problems = settings.validate().err().unwrap_or_default();
        assert_eq!(problems.len(), 6, "{problems:#?}");
        let with_token = DiscordSettings { api_url: "nope".into(), ..valid() };
        let problems = with_token.validate().err().unwrap_or_default();
        assert!(problems.iter().all(|p| !p.contains("Nzk.secret.token")), "{problems:?}");
        let shown = format!("{with_token:?}");
        assert!(!shown.contains("Nzk.secret.token") && shown.contains("<redacted>"), "{shown}");
    }

    #[test]
    fn snowflakes_are_positive_decimal_ids() {
        assert!(is_snowflake("81384788765712384"));
        assert!(!is_snowflake("0") && !is_snowflake("-1") && !is_snowflake("abc") && !is_snowflake(""));
    }
}
