//! `[platforms.*]`: which chat platforms run and how each receives (polling, sockets, webhooks).
//! Tokens never live here, only in the environment (see `secrets.rs`).

use serde::{Deserialize, Serialize};

use super::HumanDuration;

/// `[platforms]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PlatformsConfig {
    /// The OpenAI-compatible API.
    pub api: ApiPlatformConfig,
    /// Telegram.
    pub telegram: TelegramConfig,
    /// Discord.
    pub discord: DiscordConfig,
    /// Slack.
    pub slack: SlackConfig,
    /// Home Assistant.
    pub homeassistant: super::HomeAssistantConfig,
    /// WhatsApp (Business Cloud API).
    pub whatsapp: WhatsAppConfig,
    /// Signal, through a local signal-cli daemon.
    pub signal: super::SignalConfig,
    /// E-mail (IMAP in, SMTP out).
    pub email: EmailConfig,
}

/// `[platforms.api]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ApiPlatformConfig {
    /// Serve `/v1/*`. The bearer key comes from `API_SERVER_KEY`.
    pub enabled: bool,
    /// The model id advertised by `/v1/models`.
    pub model_id: String,
}

impl Default for ApiPlatformConfig {
    fn default() -> Self {
        Self { enabled: true, model_id: "hermes-agent".into() }
    }
}

/// How a platform receives events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiveMode {
    /// Telegram long polling.
    Polling,
    /// Telegram webhook.
    Webhook,
    /// Slack Socket Mode.
    Socket,
    /// Slack Events API over HTTP.
    Events,
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
    pub mode: ReceiveMode,
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
}

impl Default for TelegramConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            api_url: "https://api.telegram.org".into(),
            mode: ReceiveMode::Polling,
            webhook_url: String::new(),
            require_mention: false,
            mention_patterns: Vec::new(),
            channel_posts: false,
            edited_messages: false,
            max_file_mb: 20,
            poll_timeout: HumanDuration::secs(10),
            streaming: false,
        }
    }
}

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
        }
    }
}

/// `[platforms.slack]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SlackConfig {
    /// Run the adapter (`SLACK_BOT_TOKEN`, plus `SLACK_APP_TOKEN` or `SLACK_SIGNING_SECRET`).
    pub enabled: bool,
    /// `socket` or `events`.
    pub mode: ReceiveMode,
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
            mode: ReceiveMode::Socket,
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

/// `[platforms.whatsapp]`: the WhatsApp Business Cloud API. Meta posts webhooks to
/// `/whatsapp/webhook`; secrets come from `WHATSAPP_ACCESS_TOKEN`, `WHATSAPP_APP_SECRET` and
/// `WHATSAPP_VERIFY_TOKEN`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WhatsAppConfig {
    /// Run the adapter.
    pub enabled: bool,
    /// The business phone number id replies are sent from (Meta's numeric id, not the number).
    pub phone_number_id: String,
    /// Graph API base URL.
    pub api_url: String,
    /// Graph API version.
    pub api_version: String,
    /// An approved message template sent instead of a reply outside the 24-hour customer
    /// service window (the user's answer opens the window again); empty: such replies fail.
    pub reengage_template: String,
    /// The template's language code.
    pub reengage_language: String,
    /// Largest inbound media file downloaded, in MB.
    pub max_file_mb: u64,
    /// How often the access token is checked against the Graph API (health).
    pub token_check_interval: HumanDuration,
    /// The longest one Graph API call may take before it fails as transient (and is retried).
    pub api_timeout: HumanDuration,
}

impl Default for WhatsAppConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            phone_number_id: String::new(),
            api_url: "https://graph.facebook.com".into(),
            api_version: "v26.0".into(),
            reengage_template: String::new(),
            reengage_language: "en_US".into(),
            max_file_mb: 20,
            token_check_interval: HumanDuration::secs(300),
            api_timeout: HumanDuration::secs(30),
        }
    }
}

/// `[platforms.email]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EmailConfig {
    /// Run the adapter; the password comes from `EMAIL_PASSWORD`, allowed senders from
    /// `EMAIL_ALLOWED_USERS` (addresses, case-insensitive).
    pub enabled: bool,
    /// IMAP server: `imaps://host[:993]`, `imap://host[:143]?tls=required` (STARTTLS), or plain
    /// `imap://` to a loopback host only.
    pub imap_url: String,
    /// SMTP submission server: `smtps://host[:465]`, `smtp://host[:587]?tls=required`
    /// (STARTTLS), or plain `smtp://` to a loopback host only.
    pub smtp_url: String,
    /// The agent's own address: the From of replies; mail from it is never answered.
    pub address: String,
    /// The mailbox watched.
    pub folder: String,
    /// IMAP and SMTP login name; empty: `address`.
    pub username: String,
    /// How often the folder is polled when the server has no IDLE.
    pub poll_interval: HumanDuration,
    /// How long one IDLE lasts before it is renewed (at most 29m).
    pub idle_timeout: HumanDuration,
    /// The authserv-id of the `Authentication-Results` header your own receiving server adds;
    /// only that header is believed.
    pub authserv_id: String,
    /// Refuse mail without `dmarc=pass` from `authserv_id` (set false only where your server
    /// does not check senders, and you accept that anyone can claim an allowed address).
    pub require_auth: bool,
    /// Largest attachment kept (in) or sent (out), in MB.
    pub max_file_mb: u64,
    /// Answer unknown senders with a pairing code. Off: a reply to a spoofed sender is
    /// backscatter.
    pub pairing: bool,
}

impl Default for EmailConfig {
    fn default() -> Self {
        Self {
            enabled: false,
            imap_url: String::new(),
            smtp_url: String::new(),
            address: String::new(),
            folder: "INBOX".into(),
            username: String::new(),
            poll_interval: HumanDuration::secs(60),
            idle_timeout: HumanDuration::secs(25 * 60),
            authserv_id: String::new(),
            require_auth: true,
            max_file_mb: 20,
            pairing: false,
        }
    }
}

#[cfg(feature = "email")]
impl EmailConfig {
    /// The adapter's settings, with `password` (pure: `hermesd check` checks them too).
    pub fn settings(&self, password: String, home: &std::path::Path) -> hermesd_email::EmailSettings {
        let username = if self.username.trim().is_empty() { self.address.clone() } else { self.username.clone() };
        hermesd_email::EmailSettings {
            imap_url: self.imap_url.clone(),
            smtp_url: self.smtp_url.clone(),
            address: self.address.clone(),
            username,
            password,
            folder: self.folder.clone(),
            poll_interval: self.poll_interval.get(),
            idle_timeout: self.idle_timeout.get(),
            authserv_id: self.authserv_id.clone(),
            require_auth: self.require_auth,
            media_dir: home.join("media").join(hermesd_email::NAME),
            max_file_bytes: self.max_file_mb.saturating_mul(1024 * 1024),
            ..hermesd_email::EmailSettings::default()
        }
    }
}

impl PlatformsConfig {
    /// The chat platforms that stream answers as previews (`streaming = true`).
    pub fn streaming(&self) -> Vec<String> {
        let flags = [
            ("telegram", self.telegram.streaming),
            ("discord", self.discord.streaming),
            ("slack", self.slack.streaming),
        ];
        flags.into_iter().filter(|(_, on)| *on).map(|(name, _)| name.to_owned()).collect()
    }
}
