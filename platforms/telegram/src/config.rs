//! The Telegram adapter's settings, their defaults and a pure validation pass.
//!
//! The host reads the environment and files; nothing here does IO, and the token is never part of
//! a validation message.

use std::path::PathBuf;
use std::time::Duration;

/// teloxide's HTTP client gives up after 17 s, so a long poll must return well before that.
pub const MAX_POLL_TIMEOUT: Duration = Duration::from_secs(14);

/// Where the host's HTTP server routes Telegram's webhook requests.
pub const WEBHOOK_PATH: &str = "/telegram/webhook";

/// How updates reach the adapter. `Debug` never shows the webhook secret.
#[derive(Clone, PartialEq, Eq)]
pub enum TelegramMode {
    /// Long polling with `getUpdates`; the offset is kept as the platform's cursor.
    Polling,
    /// Telegram POSTs updates to the host's `/telegram/webhook` route.
    Webhook {
        /// Public URL to register with `setWebhook`; empty means the operator registers it.
        url: String,
        /// Expected in the `X-Telegram-Bot-Api-Secret-Token` header of every request.
        secret: String,
    },
}

/// Everything the Telegram adapter needs; the host fills it from config and the environment.
/// `Debug` never shows the token.
#[derive(Clone)]
pub struct TelegramSettings {
    /// The bot token (from `TELEGRAM_BOT_TOKEN`); never logged.
    pub token: String,
    /// The account this bot is (`[platforms.telegram.accounts.<name>]`): the adapter is then
    /// `telegram@<name>`, with its own chats, cursor and webhook route; `None`: `telegram`.
    pub account: Option<String>,
    /// Bot API base URL, e.g. `https://api.telegram.org`, a local Bot API server, or a fake.
    pub api_url: String,
    /// Polling or webhook.
    pub mode: TelegramMode,
    /// In groups, drop messages that do not address the bot.
    pub require_mention: bool,
    /// Extra case-insensitive substrings that count as addressing the bot (e.g. `hermes`).
    pub mention_patterns: Vec<String>,
    /// Handle channel posts (ignored otherwise).
    pub channel_posts: bool,
    /// Treat edited messages as new messages (ignored otherwise).
    pub edited_messages: bool,
    /// Where attachments are saved, normally `$HERMESD_HOME/media/telegram`; attachment paths are
    /// reported relative to this directory's grandparent (the data dir).
    pub media_dir: PathBuf,
    /// Files larger than this are not downloaded; the message text says so instead.
    pub max_file_bytes: u64,
    /// Long-poll timeout; at most [`MAX_POLL_TIMEOUT`].
    pub poll_timeout: Duration,
}

impl std::fmt::Debug for TelegramMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TelegramMode::Polling => f.write_str("Polling"),
            TelegramMode::Webhook { url, .. } => {
                f.debug_struct("Webhook").field("url", url).field("secret", &"[redacted]").finish()
            }
        }
    }
}

impl std::fmt::Debug for TelegramSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramSettings")
            .field("token", &"[redacted]")
            .field("account", &self.account)
            .field("api_url", &self.api_url)
            .field("mode", &self.mode)
            .field("require_mention", &self.require_mention)
            .field("mention_patterns", &self.mention_patterns)
            .field("channel_posts", &self.channel_posts)
            .field("edited_messages", &self.edited_messages)
            .field("media_dir", &self.media_dir)
            .field("max_file_bytes", &self.max_file_bytes)
            .field("poll_timeout", &self.poll_timeout)
            .finish()
    }
}

impl Default for TelegramSettings {
    fn default() -> Self {
        Self {
            token: String::new(),
            account: None,
            api_url: "https://api.telegram.org".to_owned(),
            mode: TelegramMode::Polling,
            require_mention: false,
            mention_patterns: Vec::new(),
            channel_posts: false,
            edited_messages: false,
            media_dir: PathBuf::from("media/telegram"),
            max_file_bytes: 20 * 1024 * 1024,
            poll_timeout: Duration::from_secs(10),
        }
    }
}

impl TelegramSettings {
    /// Checks the settings without IO and returns every problem found, one line each.
    pub fn validate(&self) -> Result<(), Vec<String>> {
        let mut problems = Vec::new();
        if self.token.trim().is_empty() {
            problems.push("telegram: the bot token is empty (set TELEGRAM_BOT_TOKEN)".to_owned());
        }
        if !is_http_url(&self.api_url) {
            problems.push(format!("telegram: api_url `{}` is not an http(s) URL", self.api_url));
        }
        if self.poll_timeout > MAX_POLL_TIMEOUT {
            problems.push(format!(
                "telegram: poll_timeout {:?} is over {MAX_POLL_TIMEOUT:?} (the HTTP client gives up at 17 s)",
                self.poll_timeout
            ));
        }
        if self.max_file_bytes == 0 {
            problems.push("telegram: max_file_bytes must be positive".to_owned());
        }
        if self.mention_patterns.iter().any(|p| p.trim().is_empty()) {
            problems.push("telegram: mention_patterns must not contain blank entries".to_owned());
        }
        if let TelegramMode::Webhook { url, secret } = &self.mode {
            if !url.is_empty() && !url.starts_with("https://") {
                problems.push(format!("telegram: webhook url `{url}` must be https"));
            }
            if !is_valid_secret(secret) {
                problems.push("telegram: webhook secret must be 1-256 characters of A-Z, a-z, 0-9, _ and -".to_owned());
            }
        }
        if problems.is_empty() { Ok(()) } else { Err(problems) }
    }

    /// The poll timeout actually used: clamped so teloxide's client never times out first.
    pub(crate) fn effective_poll_timeout(&self) -> Duration {
        self.poll_timeout.min(MAX_POLL_TIMEOUT)
    }
}

fn is_http_url(url: &str) -> bool {
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|host| !host.is_empty() && !host.contains(char::is_whitespace))
}

/// Telegram's own rule for `secret_token`.
fn is_valid_secret(secret: &str) -> bool {
    (1..=256).contains(&secret.len()) && secret.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_token_or_the_webhook_secret() {
        let settings = TelegramSettings {
            token: "123:SECRET-TOKEN".into(),
            mode: TelegramMode::Webhook { url: "https://x".into(), secret: "hook-secret".into() },
            ..TelegramSettings::default()
        };
        let shown = format!("{settings:?}");
        assert!(!shown.contains("SECRET-TOKEN") && !shown.contains("hook-secret"), "{shown}");
        assert!(shown.contains("https://x"));
    }

    fn valid() -> TelegramSettings {
        TelegramSettings { token: "123:abc".into(), ..TelegramSettings::default() }
    }

    #[test]
    fn defaults_with_a_token_are_valid() {
        assert_eq!(valid().validate(), Ok(()));
    }

    #[test]
    fn validate_collects_every_problem() {
        let settings = TelegramSettings {
            token: " ".into(),
            api_url: "ftp://x".into(),
            poll_timeout: Duration::from_secs(20),
            max_file_bytes: 0,
            mention_patterns: vec![String::new()],
            mode: TelegramMode::Webhook { url: "http://example.com/hook".into(), secret: "has space".into() },
            ..TelegramSettings::default()
        };
        let problems = settings.validate().err().unwrap_or_default();
        assert_eq!(problems.len(), 7, "{problems:#?}");
        assert!(problems.iter().all(|p| !p.contains("123:abc")));
    }

    #[test]
    fn webhook_without_url_is_valid_with_a_secret() {
        let settings = TelegramSettings {
            mode: TelegramMode::Webhook { url: String::new(), secret: "s3cret_-X".into() },
            ..valid()
        };
        assert_eq!(settings.validate(), Ok(()));
    }

    #[test]
    fn poll_timeout_is_clamped_below_the_client_timeout() {
        let settings = TelegramSettings { poll_timeout: Duration::from_secs(60), ..valid() };
        assert_eq!(settings.effective_poll_timeout(), MAX_POLL_TIMEOUT);
    }
}
