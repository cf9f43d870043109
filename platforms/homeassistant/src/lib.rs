//! hermesd's Home Assistant adapter: one websocket to HA's API (`/api/websocket`). Inbound are
//! `hermesd_request` events (fired by an HA automation or script) and, when watching, state
//! changes matching the watch rules; outbound are `hermesd_response` events and `notify`
//! service calls. The same connection serves the agent's HA tools through `HassClient`.
//!
//! Allowlists, deduplication, pacing and chunking belong to the host; the token never leaves
//! the `auth` frame.
//!
//! `wss` goes through rustls on ring. A request's event id is its `context.id`, so a request fired
//! twice runs once; requests are accepted only from users in the Home Assistant allowlists (no
//! pairing code is ever sent), and the answer names that id. One websocket at a time.

pub mod config;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
pub mod inbound;
pub mod link;
pub mod outbound;

mod health;
mod section;
mod socket;
mod watch;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::Redactor;
use hermesd_platform::{
    Capabilities, ChatRef, LengthUnit, MarkdownDialect, MessageRef, OutboundMessage, Platform, PlatformContext,
    PlatformError, PlatformHealth,
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

pub use config::{HassSettings, NAME, REQUEST_EVENT, RESPONSE_EVENT, WATCH_PLATFORM, WatchRules};
pub use link::HassError;
pub use section::{DEFAULT_SENSITIVE_DOMAINS, HomeAssistantConfig};

use health::HealthTracker;
use link::Link;
use watch::Cooldowns;

/// The Home Assistant adapter.
pub struct HassPlatform {
    settings: HassSettings,
    link: Arc<Link>,
    health: HealthTracker,
    cooldowns: Cooldowns,
    redactor: Redactor,
    sent: AtomicU64,
}

/// A handle on the adapter's connection for HA commands (`get_states`, `call_service`, the
/// registries): what the host hands to the agent's tools. It never exposes the token.
#[derive(Clone)]
pub struct HassClient {
    link: Arc<Link>,
    timeout: Duration,
}

impl HassClient {
    /// Send `command` (a JSON object with `type` and its fields, no `id`) and wait for its result.
    pub async fn command(&self, command: Value) -> Result<Value, HassError> {
        self.link.request(command, self.timeout).await
    }
}

impl HassPlatform {
    /// An adapter for `settings`; nothing connects before `run`.
    pub fn new(settings: HassSettings) -> Self {
        let mut redactor = Redactor::new("[redacted]", &[]).with_token_shapes();
        if !settings.token.is_empty() {
            redactor.add_secret(&settings.token);
        }
        Self {
            link: Arc::new(Link::new(settings.max_pending)),
            health: HealthTracker::new(settings.ping_interval * 2 + settings.request_timeout),
            cooldowns: Cooldowns::new(settings.watch.cooldown),
            redactor,
            sent: AtomicU64::new(0),
            settings,
        }
    }

    /// The handle the agent's tools use.
    pub fn client(&self) -> HassClient {
        HassClient { link: self.link.clone(), timeout: self.settings.request_timeout }
    }
}

/// Home Assistant's access variables are `HASS_*` (Hermes' names); its requests come from
/// automations, so an unknown user id is never paired: the operator lists HA users by id.
pub const ACCESS_RULES: hermesd_platform::AccessRules =
    hermesd_platform::AccessRules { env_prefix: Some("HASS"), phone_number_ids: false, pairs_strangers: false };

#[async_trait]
impl Platform for HassPlatform {
    fn name(&self) -> &str {
        NAME
    }

    async fn probe(&self) -> Option<Result<String, String>> {
        Some(socket::probe(self).await)
    }

    fn access_rules(&self) -> hermesd_platform::AccessRules {
        ACCESS_RULES
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            // Mobile app notifications are cut near 4 KB; events carry more, but one size keeps
            // a reply's chunks the same whichever way it goes.
            max_message_len: 4000,
            length_unit: LengthUnit::Chars,
            edits: false,
            threads: true,
            buttons: false,
            typing: false,
            // A person can answer an approval with another request (`/approve`).
            interactive: true,
            request_response: true,
            markdown: MarkdownDialect::Plain,
            per_chat_rate: 5.0,
            per_chat_burst: 10,
            group_rate: 5.0,
            global_rate: 50.0,
        }
    }

    async fn run(&self, ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        socket::run(self, &ctx, &cancel).await
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        let command = outbound::command_for(message, &self.settings.notify_title);
        let what = if message.chat.chat_id.starts_with("notify.") { "notify" } else { "fire hermesd_response" };
        let result = self
            .link
            .request(command, self.settings.request_timeout)
            .await
            .map_err(|e| outbound::map_error(e, what))?;
        let n = self.sent.fetch_add(1, Ordering::Relaxed) + 1;
        let id = outbound::message_id(&result, format!("hass-{n}"));
        Ok(MessageRef { chat: message.chat.clone(), message_id: id })
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Permanent("home assistant events cannot be edited".into()))
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        Ok(())
    }

    /// Progress lines would reach the automation as extra responses; only answers go out.
    fn shows_progress(&self, _chat: &ChatRef) -> bool {
        false
    }

    fn health(&self) -> Option<PlatformHealth> {
        self.health.report()
    }
}
