//! Socket Mode: one websocket per app token, opened with `apps.connections.open`.
//!
//! Written on tokio-tungstenite rather than slack-morphism's listener because the adapter must
//! control what that listener hides: exactly one connection (the listener keeps two by
//! default), an envelope acknowledged only after `Ingress::accept` returned, a fresh socket on a
//! `disconnect` envelope or when Slack stops feeding a socket that still answers pings, health
//! judged by envelopes, and prompt cancellation. slack-morphism still opens the connection.
//!
//! A socket is replaced on a `disconnect` envelope, on pings left unanswered, or when no envelope
//! or hello came for `socket_idle_reconnect`; a failed one is opened again with `Backoff`.
//!
//! Invariant: an envelope is acknowledged only after its event was accepted (new or duplicate)
//! or ignored; a refused accept leaves it unacknowledged, so Slack delivers it again.

use futures_util::{SinkExt, StreamExt};
use hermesd_platform::{Backoff, PlatformContext, PlatformError};
use serde::Deserialize;
use slack_morphism::prelude::*;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::api::{self, map_error};
use crate::inbound::{BotIdentity, Callback, Interaction, normalise_interaction};
use crate::{NAME, SlackPlatform};

/// One Socket Mode frame: only the fields the loop reads.
#[derive(Debug, Deserialize)]
struct Frame {
    #[serde(rename = "type", default)]
    kind: String,
    envelope_id: Option<String>,
    payload: Option<serde_json::Value>,
    reason: Option<String>,
    num_connections: Option<u32>,
    retry_attempt: Option<u32>,
}

/// Why a socket ended.
enum End {
    Cancelled,
    /// Slack asked for a new socket (`disconnect`), or it went quiet: reconnect at once.
    Refresh(String),
    /// The socket failed: reconnect after a backoff.
    Dropped(String),
}

/// Keeps one socket open until cancelled. Returns an error only for a refused app token.
pub(crate) async fn run(
    platform: &SlackPlatform,
    identity: &BotIdentity,
    app_token: &SlackApiToken,
    ctx: &PlatformContext,
    cancel: &CancellationToken,
) -> Result<(), PlatformError> {
    let client = platform.client()?;
    let mut backoff = Backoff::new();
    tracing::info!(
        platform = NAME,
        "socket mode: one connection per app token; a second consumer of the same app token steals events"
    );
    let open_request = SlackApiAppsConnectionOpenRequest::new();
    loop {
        let api = client.open_session(app_token);
        let opened = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            opened = api::within(
                platform.settings.api_timeout,
                "apps.connections.open",
                async { api.apps_connections_open(&open_request).await.map_err(|e| map_error(&e, "apps.connections.open", &platform.redactor)) },
            ) => opened,
        };
        let url = match opened {
            Ok(opened) => opened.url.0.to_string(),
            Err(error) => {
                if let PlatformError::Unauthorized(_) = error {
                    tracing::error!(platform = NAME, %error, "slack refused the app token");
                    platform.health.failing(error.to_string());
                    return Err(error);
                }
                tracing::warn!(platform = NAME, %error, "cannot open a socket mode connection; retrying");
                platform.health.disconnected(error.to_string());
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
                continue;
            }
        };
        let connected = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            connected = tokio_tungstenite::connect_async(url.as_str()) => connected,
        };
        let socket = match connected {
            Ok((socket, _)) => socket,
            Err(error) => {
                let error = platform.redactor.redact(&error.to_string());
                tracing::warn!(platform = NAME, %error, "socket mode connect failed; retrying");
                platform.health.disconnected(format!("socket mode connect failing: {error}"));
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
                continue;
            }
        };
        let (end, said_hello) = session(platform, identity, ctx, socket, cancel).await;
        if said_hello {
            backoff.reset();
        }
        match end {
            End::Cancelled => return Ok(()),
            End::Refresh(why) => {
                tracing::info!(platform = NAME, reason = %why, "opening a fresh socket mode connection");
                platform.health.disconnected(format!("reconnecting: {why}"));
                // A socket told to go before it said hello, or Socket Mode switched off for the
                // app, must not turn into a tight reconnect loop.
                if (!said_hello || why == "link_disabled") && !backoff.wait(cancel).await {
                    return Ok(());
                }
            }
            End::Dropped(why) => {
                tracing::warn!(platform = NAME, reason = %why, "socket mode connection lost; reconnecting");
                platform.health.disconnected(format!("reconnecting: {why}"));
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
            }
        }
    }
}

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Reads one socket until it ends; the flag says whether Slack said hello on it.
async fn session(
    platform: &SlackPlatform,
    identity: &BotIdentity,
    ctx: &PlatformContext,
    socket: Socket,
    cancel: &CancellationToken,
) -> (End, bool) {
    let settings = &platform.settings;
    let (mut sink, mut stream) = socket.split();
    let mut ping =
        tokio::time::interval_at(Instant::now() + settings.socket_ping_interval, settings.socket_ping_interval);
    let mut last_frame = Instant::now();
    let mut last_delivery = Instant::now();
    let mut said_hello = false;
    let end = loop {
        let frame = tokio::select! {
            () = cancel.cancelled() => break End::Cancelled,
            _ = ping.tick() => {
                if last_frame.elapsed() > settings.socket_ping_interval * 3 {
                    break End::Dropped("no answer to pings".to_owned());
                }
                if last_delivery.elapsed() >= settings.socket_idle_reconnect {
                    break End::Refresh(format!("no envelope for {:?}", settings.socket_idle_reconnect));
                }
                if let Err(error) = sink.send(Message::Ping(Vec::new().into())).await {
                    break End::Dropped(format!("ping failed: {error}"));
                }
                continue;
            }
            frame = stream.next() => frame,
        };
        let text = match frame {
            None => break End::Dropped("socket closed".to_owned()),
            Some(Err(error)) => break End::Dropped(format!("socket error: {error}")),
            Some(Ok(Message::Close(close))) => {
                break End::Dropped(
                    close.map_or_else(|| "closed by slack".to_owned(), |c| format!("closed by slack: {}", c.reason)),
                );
            }
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(_)) => {
                last_frame = Instant::now();
                continue;
            }
        };
        last_frame = Instant::now();
        let Ok(frame) = serde_json::from_str::<Frame>(text.as_str()) else {
            tracing::debug!(platform = NAME, "ignoring a socket mode frame that is not JSON");
            continue;
        };
        match frame.kind.as_str() {
            "hello" => {
                said_hello = true;
                last_delivery = Instant::now();
                let connections = frame.num_connections.unwrap_or(1);
                platform.health.hello(connections);
                if connections > 1 {
                    tracing::error!(
                        platform = NAME,
                        connections,
                        "another consumer holds a socket mode connection for this app token and steals events"
                    );
                } else {
                    tracing::info!(platform = NAME, "socket mode connected");
                }
                continue;
            }
            "disconnect" => break End::Refresh(frame.reason.unwrap_or_else(|| "disconnect".to_owned())),
            _ => {}
        }
        let Some(envelope_id) = frame.envelope_id.clone() else { continue };
        last_delivery = Instant::now();
        platform.health.progressed();
        let handled = tokio::select! {
            () = cancel.cancelled() => break End::Cancelled,
            handled = handle(platform, identity, ctx, frame) => handled,
        };
        if !handled {
            // Not acknowledged: Slack delivers the envelope again.
            continue;
        }
        let ack = serde_json::json!({ "envelope_id": envelope_id }).to_string();
        if let Err(error) = sink.send(Message::Text(ack.into())).await {
            break End::Dropped(format!("ack failed: {error}"));
        }
    };
    if matches!(end, End::Cancelled | End::Refresh(_)) {
        // Best effort: Slack notices a vanished socket by itself.
        let _ = sink.send(Message::Close(None)).await;
    }
    (end, said_hello)
}

/// Normalises and accepts one envelope; `true` when it may be acknowledged.
async fn handle(platform: &SlackPlatform, identity: &BotIdentity, ctx: &PlatformContext, frame: Frame) -> bool {
    let payload = frame.payload.unwrap_or_default();
    let outcome = match frame.kind.as_str() {
        "events_api" => match serde_json::from_value::<Callback>(payload) {
            Ok(callback) => {
                if let Some(attempt) = frame.retry_attempt.filter(|&a| a > 0) {
                    tracing::debug!(platform = NAME, attempt, "slack redelivered an envelope");
                }
                platform.deliver(identity, ctx, &callback).await
            }
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "unreadable events_api payload acknowledged");
                Ok(())
            }
        },
        "interactive" => match serde_json::from_value::<Interaction>(payload) {
            Ok(interaction) => match normalise_interaction(&interaction, identity) {
                Some(event) => platform.deliver_press(ctx, event).await,
                None => Ok(()),
            },
            Err(error) => {
                tracing::warn!(platform = NAME, %error, "unreadable interactive payload acknowledged");
                Ok(())
            }
        },
        // Slash commands (`/` belongs to Slack; hermesd's commands use `!`) and newer kinds.
        other => {
            tracing::debug!(platform = NAME, kind = other, "envelope acknowledged without handling");
            Ok(())
        }
    };
    match outcome {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(platform = NAME, %error, "ingress refused an envelope; leaving it unacknowledged");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_read_only_what_they_need() {
        let hello: Frame = serde_json::from_str(r#"{"type":"hello","num_connections":2,"debug_info":{"host":"x"}}"#)
            .expect("hello parses");
        assert_eq!((hello.kind.as_str(), hello.num_connections), ("hello", Some(2)));
        let envelope: Frame =
            serde_json::from_str(r#"{"type":"events_api","envelope_id":"e1","retry_attempt":1,"payload":{}}"#)
                .expect("envelope parses");
        assert_eq!(envelope.envelope_id.as_deref(), Some("e1"));
        assert_eq!(envelope.retry_attempt, Some(1));
    }
}
