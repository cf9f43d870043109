//! The gateway connection: one serenity shard at a time, its dispatches handed to the adapter in
//! order, rebuilt with backoff when it ends.
//!
//! serenity resumes a dropped session by itself (RESUME with the last sequence number; Discord
//! replays what was missed) and tears the old socket down before opening the next. This module
//! never runs two clients for one token: the old shard manager is shut down and awaited first.
//!
//! Intents: `GUILDS`, `GUILD_MESSAGES`, `DIRECT_MESSAGES`, `MESSAGE_CONTENT`. A raw event handler
//! feeds a bounded queue (`QUEUE`); what is queued together is put back in message-id order, which
//! is Discord's creation order. Health comes from dispatches and acknowledged heartbeats.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{Backoff, PlatformContext, PlatformError};
use serenity::all::{
    Client, ClientBuilder, ConnectionStage, Context, Event, GatewayIntents, RawEventHandler, ShardManager,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{DiscordPlatform, NAME};

/// Dispatches waiting for the adapter; a full queue makes serenity's handler tasks wait.
const QUEUE: usize = 256;

/// How often the shard's heartbeat state is read for health.
const PROBE: Duration = Duration::from_secs(5);

/// Guild messages, DMs and their content (a privileged intent the bot must be granted).
pub(crate) fn intents() -> GatewayIntents {
    GatewayIntents::GUILDS
        | GatewayIntents::GUILD_MESSAGES
        | GatewayIntents::DIRECT_MESSAGES
        | GatewayIntents::MESSAGE_CONTENT
}

/// Hands every dispatch to the adapter's queue.
struct Forward {
    tx: mpsc::Sender<Event>,
}

#[async_trait]
impl RawEventHandler for Forward {
    async fn raw_event(&self, _ctx: Context, event: Event) {
        // A closed queue means the adapter is stopping; the event is not needed any more.
        let _ = self.tx.send(event).await;
    }
}

/// Connects and handles dispatches until cancelled; rebuilds the client when it stops.
pub(crate) async fn run(
    platform: &DiscordPlatform,
    ctx: &PlatformContext,
    cancel: &CancellationToken,
) -> Result<(), PlatformError> {
    let rest = platform.rest()?;
    let mut backoff = Backoff::new();
    loop {
        let url = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            url = rest.gateway_url() => url,
        };
        let url = match url {
            Ok(url) => url,
            Err(PlatformError::Unauthorized(detail)) => return Err(PlatformError::Unauthorized(detail)),
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "cannot get the gateway url; retrying");
                platform.health.failing(format!("gateway url: {error}"));
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
                continue;
            }
        };
        let (tx, mut rx) = mpsc::channel(QUEUE);
        let builder = ClientBuilder::new_with_http(rest.gateway_http(), intents()).raw_event_handler(Forward { tx });
        let built = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            built = builder => built,
        };
        let mut client = match built {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(platform = NAME, error = %describe(&error), "cannot build the gateway client; retrying");
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
                continue;
            }
        };
        *client.ws_url.lock().await = url;
        let manager = Arc::clone(&client.shard_manager);
        let mut shard = tokio::spawn(async move { start(&mut client).await });
        let mut probe = tokio::time::interval(PROBE);
        let mut worked = false;
        let ended = loop {
            tokio::select! {
                () = cancel.cancelled() => break None,
                ended = &mut shard => break Some(ended),
                Some(first) = rx.recv() => {
                    worked = true;
                    for event in ordered(first, &mut rx).await {
                        platform.health.dispatched();
                        platform.handle(ctx, event, cancel).await;
                    }
                }
                _ = probe.tick() => probe_heartbeat(platform, &manager).await,
            }
        };
        manager.shutdown_all().await;
        let outcome = match ended {
            Some(outcome) => outcome,
            None => {
                // Shut down: the runner exits once the manager told it to; never leave it behind.
                let _ = shard.await;
                crate::backfill::persist(platform, ctx, true).await;
                return Ok(());
            }
        };
        match outcome {
            Ok(Err(PlatformError::Unauthorized(detail))) => {
                tracing::error!(platform = NAME, "discord refused the bot token");
                platform.health.failing("gateway: the bot token was refused".into());
                return Err(PlatformError::Unauthorized(detail));
            }
            Ok(Err(error)) => {
                tracing::warn!(platform = NAME, %error, "gateway connection ended; reconnecting");
                platform.health.failing(format!("gateway: {error}"));
            }
            Ok(Ok(())) => tracing::info!(platform = NAME, "gateway connection ended; reconnecting"),
            Err(error) => tracing::error!(platform = NAME, %error, "gateway task failed; reconnecting"),
        }
        if worked {
            backoff.reset();
        }
        if !backoff.wait(cancel).await {
            return Ok(());
        }
    }
}

async fn start(client: &mut Client) -> Result<(), PlatformError> {
    client.start().await.map_err(|error| match &error {
        serenity::Error::Gateway(serenity::gateway::GatewayError::InvalidAuthentication) => {
            PlatformError::Unauthorized("gateway: authentication failed".into())
        }
        _ => PlatformError::Transient(describe(&error)),
    })
}

/// serenity spawns one task per dispatch, so a burst (a replay after a resume) can reach the queue
/// out of order. Everything already queued is taken together and put back in snowflake order,
/// which is Discord's creation order.
async fn ordered(first: Event, rx: &mut mpsc::Receiver<Event>) -> Vec<Event> {
    tokio::task::yield_now().await;
    let mut batch = vec![first];
    while let Ok(more) = rx.try_recv() {
        batch.push(more);
    }
    batch.sort_by_key(|event| match event {
        Event::MessageCreate(created) => created.message.id.get(),
        Event::InteractionCreate(created) => created.interaction.id().get(),
        _ => 0,
    });
    batch
}

/// Counts a connected shard with acknowledged heartbeats as progress: a quiet server sends no
/// dispatches, but a dead connection stops acknowledging (and serenity reconnects it).
async fn probe_heartbeat(platform: &DiscordPlatform, manager: &ShardManager) {
    let runners = manager.runners.lock().await;
    if runners.values().any(|runner| runner.stage == ConnectionStage::Connected && runner.latency.is_some()) {
        platform.health.heartbeat();
    }
}

/// A serenity error in words, without payloads that could hold a token.
fn describe(error: &serenity::Error) -> String {
    match error {
        serenity::Error::Gateway(gateway) => format!("gateway: {gateway}"),
        serenity::Error::Tungstenite(_) => "websocket error".to_owned(),
        serenity::Error::Http(_) => "http error".to_owned(),
        _ => "client error".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use serenity::all::MessageCreateEvent;

    use super::*;

    fn created(id: u64) -> Event {
        let message = json!({ "id": id.to_string(), "channel_id": "1", "author": { "id": "2", "username": "u" },
            "content": "x", "timestamp": "2026-01-02T03:04:05.000000+00:00", "edited_timestamp": null,
            "tts": false, "mention_everyone": false, "mentions": [], "mention_roles": [], "attachments": [],
            "embeds": [], "pinned": false, "type": 0 });
        let event: MessageCreateEvent = serde_json::from_value(message).expect("a valid MESSAGE_CREATE");
        Event::MessageCreate(event)
    }

    fn id(event: &Event) -> u64 {
        match event {
            Event::MessageCreate(created) => created.message.id.get(),
            _ => 0,
        }
    }

    #[tokio::test]
    async fn a_burst_is_put_back_in_creation_order() {
        let (tx, mut rx) = mpsc::channel(8);
        for queued in [30, 10, 20] {
            tx.send(created(queued)).await.expect("queue open");
        }
        let batch = ordered(created(25), &mut rx).await;
        assert_eq!(batch.iter().map(id).collect::<Vec<_>>(), vec![10, 20, 25, 30]);
        assert!(rx.try_recv().is_err(), "everything queued was taken");
    }

    #[test]
    fn intents_cover_guild_messages_dms_and_content() {
        let intents = intents();
        assert!(intents.contains(GatewayIntents::GUILD_MESSAGES | GatewayIntents::DIRECT_MESSAGES));
        assert!(intents.contains(GatewayIntents::MESSAGE_CONTENT));
        assert!(!intents.contains(GatewayIntents::GUILD_PRESENCES), "no privileged intent beyond content");
    }
}
