//! `[sessions]` (reset policies, per-platform and per-chat-type overrides), `[store]`,
//! `[recovery]` and `[retention]`: how long conversations and their rows live.

use std::path::PathBuf;

use hermesd_platform::ChatType;
use serde::{Deserialize, Serialize};

use super::HumanDuration;

/// When a session starts over on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResetMode {
    /// Never (only `/new`).
    #[default]
    None,
    /// After `idle_minutes` without a message.
    Idle,
    /// Once a day at `at_hour` (UTC).
    Daily,
    /// Whichever of idle and daily comes first.
    Both,
}

/// A reset policy, resolved for one platform and chat type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResetPolicy {
    /// The mode.
    pub reset: ResetMode,
    /// Idle minutes before an idle reset.
    pub idle_minutes: u32,
    /// Hour of day (0–23, UTC) of a daily reset.
    pub at_hour: u8,
}

/// A reset policy for one platform, optionally one chat type (`[[sessions.overrides]]`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResetOverride {
    /// The platform it applies to.
    pub platform: String,
    /// The chat type it applies to (all when absent).
    #[serde(default)]
    pub chat_type: Option<ChatType>,
    /// The mode.
    pub reset: ResetMode,
    /// Idle minutes before an idle reset (default: the `[sessions]` value).
    #[serde(default)]
    pub idle_minutes: Option<u32>,
    /// Hour of a daily reset (default: the `[sessions]` value).
    #[serde(default)]
    pub at_hour: Option<u8>,
}

/// `[sessions]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionsConfig {
    /// The default reset mode: none | idle | daily | both.
    pub reset: ResetMode,
    /// Idle minutes before an idle reset.
    pub idle_minutes: u32,
    /// Hour of day (0–23, UTC) of a daily reset.
    pub at_hour: u8,
    /// Give each user of a group or channel a session of their own (threads stay shared).
    pub group_per_user: bool,
    /// Per platform / chat type policies; the most specific match wins.
    pub overrides: Vec<ResetOverride>,
    /// How often the background sweep archives sessions the reset policy expired (flushing
    /// their memory first), so the user is told on their next message.
    pub sweep_interval: HumanDuration,
}

impl Default for SessionsConfig {
    fn default() -> Self {
        Self {
            reset: ResetMode::None,
            idle_minutes: 1440,
            at_hour: 4,
            group_per_user: true,
            overrides: Vec::new(),
            sweep_interval: HumanDuration::secs(60),
        }
    }
}

impl SessionsConfig {
    /// The policy for a chat: an override for its platform and chat type, else one for its
    /// platform, else the default.
    pub fn policy_for(&self, platform: &str, chat_type: ChatType) -> ResetPolicy {
        let exact = self.overrides.iter().find(|o| o.platform == platform && o.chat_type == Some(chat_type));
        let broad = || self.overrides.iter().find(|o| o.platform == platform && o.chat_type.is_none());
        match exact.or_else(broad) {
            Some(o) => ResetPolicy {
                reset: o.reset,
                idle_minutes: o.idle_minutes.unwrap_or(self.idle_minutes),
                at_hour: o.at_hour.unwrap_or(self.at_hour),
            },
            None => ResetPolicy { reset: self.reset, idle_minutes: self.idle_minutes, at_hour: self.at_hour },
        }
    }
}

/// `[store]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StoreConfig {
    /// Database file; relative paths are under `HERMESD_HOME`.
    pub path: PathBuf,
    /// How long a connection waits for a lock before SQLITE_BUSY.
    pub busy_timeout: HumanDuration,
    /// Read-only connections in the reader pool. One is fastest on small machines (each
    /// connection is a thread to wake); more help only with many cores and heavy searching.
    pub readers: u32,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self { path: PathBuf::from("state.db"), busy_timeout: HumanDuration::secs(5), readers: 1 }
    }
}

/// `[recovery]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RecoveryConfig {
    /// Unfinished messages older than this at start are answered with an apology instead of run.
    pub freshness: HumanDuration,
    /// Starts a message's turn may get before it is given up with an error reply.
    pub max_attempts: u32,
    /// Crashed turns in a row after which a session is suspended until `/new`.
    pub max_session_restarts: u32,
}

impl Default for RecoveryConfig {
    fn default() -> Self {
        Self { freshness: HumanDuration::secs(3600), max_attempts: 3, max_session_restarts: 3 }
    }
}

/// `[retention]`: how long records and files live before the background task removes them.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RetentionConfig {
    /// How long an `Idempotency-Key` and its stored response are kept, at most `inbound_events`
    /// (`retention::idempotency_age`); older ones are pruned and count as absent.
    pub idempotency: HumanDuration,
    /// Finished inbound events (the deduplication record of each platform event); a platform
    /// redelivering an event older than this would run it again.
    pub inbound_events: HumanDuration,
    /// Outbound rows once sent or failed (receipts).
    pub outbound: HumanDuration,
    /// Messages compaction replaced with a summary.
    pub archived_messages: HumanDuration,
    /// Files under `media/` (received and sent; sent ones at most `outbound`), by modification time.
    pub media: HumanDuration,
    /// Files under `cron/output/`.
    pub cron_output: HumanDuration,
    /// Responses API responses kept for `GET /v1/responses/{id}` and `previous_response_id`.
    pub responses: HumanDuration,
    /// How often the retention task runs.
    pub interval: HumanDuration,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Self {
            idempotency: HumanDuration::secs(DAY),
            inbound_events: HumanDuration::secs(30 * DAY),
            outbound: HumanDuration::secs(30 * DAY),
            archived_messages: HumanDuration::secs(180 * DAY),
            media: HumanDuration::secs(30 * DAY),
            cron_output: HumanDuration::secs(90 * DAY),
            responses: HumanDuration::secs(30 * DAY),
            interval: HumanDuration::secs(3600),
        }
    }
}
