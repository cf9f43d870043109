//! The receive loop: connect, authenticate, subscribe, then read events, results and pongs
//! until the socket ends; reconnect with backoff and subscribe again. A heartbeat `ping` goes
//! out every `ping_interval`; no `pong` by the next one drops the connection.
//!
//! HA keeps no backlog for websocket subscribers: events fired while the connection is down
//! are not delivered later (README: the automation should check for a response).
//!
//! The handshake is `auth_required` → `auth` → `auth_ok`; an `auth_invalid` ends `run` as
//! `Unauthorized`, never retried in a loop. It then subscribes to `hermesd_request` and, when
//! watching, `state_changed`, and reconnects with the core `Backoff`.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hermesd_platform::Backoff;
use hermesd_platform::{PlatformContext, PlatformError};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

use crate::HassPlatform;
use crate::config::{REQUEST_EVENT, websocket_url};
use crate::inbound::{normalise_request, state_change, watch_event};
use crate::link::result_of;

type Socket = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// How a connection ended.
enum End {
    Cancelled,
    /// HA refused the token: retrying cannot help.
    AuthInvalid(String),
    Dropped(String),
}

pub(crate) async fn run(
    platform: &HassPlatform,
    ctx: &PlatformContext,
    cancel: &CancellationToken,
) -> Result<(), PlatformError> {
    let url = websocket_url(&platform.settings.url).map_err(PlatformError::Permanent)?;
    let mut backoff = Backoff::new();
    platform.health.started();
    loop {
        let connected = tokio::select! {
            () = cancel.cancelled() => return Ok(()),
            connected = tokio::time::timeout(platform.settings.request_timeout, tokio_tungstenite::connect_async(url.as_str())) => connected,
        };
        let end = match connected {
            Ok(Ok((socket, _))) => session(platform, ctx, socket, cancel, &mut backoff).await,
            Ok(Err(error)) => End::Dropped(format!("connect failed: {}", platform.redactor.redact(&error.to_string()))),
            Err(_) => End::Dropped("connect timed out".to_owned()),
        };
        match end {
            End::Cancelled => return Ok(()),
            End::AuthInvalid(why) => {
                let why = format!("home assistant refused HASS_TOKEN: {}", platform.redactor.redact(&why));
                tracing::error!(platform = crate::NAME, "{why}");
                platform.health.disconnected(why.clone());
                return Err(PlatformError::Unauthorized(why));
            }
            End::Dropped(why) => {
                tracing::warn!(platform = crate::NAME, reason = %why, "home assistant connection lost; reconnecting");
                platform.health.disconnected(format!("reconnecting: {why}"));
                if !backoff.wait(cancel).await {
                    return Ok(());
                }
            }
        }
    }
}

/// `hermesd doctor`'s check: connect and authenticate once, then close.
pub(crate) async fn probe(platform: &HassPlatform) -> Result<String, String> {
    let url = websocket_url(&platform.settings.url)?;
    let bound = hermesd_platform::PROBE_TIMEOUT;
    let (mut socket, _) = match tokio::time::timeout(bound, tokio_tungstenite::connect_async(url.as_str())).await {
        Err(_) => return Err(format!("{url}: no answer in 15 s")),
        Ok(Err(error)) => return Err(format!("{url}: {}", platform.redactor.redact(&error.to_string()))),
        Ok(Ok(connected)) => connected,
    };
    let outcome = match authenticate(platform, &mut socket).await {
        Ok(()) => Ok(format!("authenticated at {}", platform.settings.url)),
        Err(End::AuthInvalid(why)) => Err(format!(
            "home assistant refused the token ({}): make a new long-lived access token (profile → security)",
            platform.redactor.redact(&why)
        )),
        Err(End::Dropped(why)) => Err(why),
        Err(End::Cancelled) => Err("cancelled".into()),
    };
    let _ = socket.close(None).await;
    outcome
}

/// Reads the next text frame as JSON within `deadline`.
async fn next_json(socket: &mut Socket, deadline: Duration) -> Result<Value, String> {
    loop {
        let frame =
            tokio::time::timeout(deadline, socket.next()).await.map_err(|_| "no answer during auth".to_owned())?;
        match frame {
            None => return Err("socket closed".to_owned()),
            Some(Err(error)) => return Err(format!("socket error: {error}")),
            Some(Ok(Message::Text(text))) => {
                return serde_json::from_str(text.as_str()).map_err(|_| "a frame that is not JSON".to_owned());
            }
            Some(Ok(Message::Close(_))) => return Err("closed by home assistant".to_owned()),
            Some(Ok(_)) => {}
        }
    }
}

async fn authenticate(platform: &HassPlatform, socket: &mut Socket) -> Result<(), End> {
    let timeout = platform.settings.request_timeout;
    let first = next_json(socket, timeout).await.map_err(End::Dropped)?;
    if first["type"] != "auth_required" {
        return Err(End::Dropped(format!("expected auth_required, got {}", first["type"])));
    }
    let auth = json!({ "type": "auth", "access_token": platform.settings.token });
    socket.send(Message::Text(auth.to_string().into())).await.map_err(|e| End::Dropped(format!("send auth: {e}")))?;
    let answer = next_json(socket, timeout).await.map_err(End::Dropped)?;
    match answer["type"].as_str() {
        Some("auth_ok") => Ok(()),
        Some("auth_invalid") => Err(End::AuthInvalid(answer["message"].as_str().unwrap_or("auth_invalid").to_owned())),
        other => Err(End::Dropped(format!("unexpected answer to auth: {other:?}"))),
    }
}

/// One connection, from auth to its end.
async fn session(
    platform: &HassPlatform,
    ctx: &PlatformContext,
    mut socket: Socket,
    cancel: &CancellationToken,
    backoff: &mut Backoff,
) -> End {
    let authenticated = tokio::select! {
        () = cancel.cancelled() => return End::Cancelled,
        authenticated = authenticate(platform, &mut socket) => authenticated,
    };
    if let Err(end) = authenticated {
        return end;
    }
    let (writer, mut outgoing) = mpsc::channel::<String>(64);
    let generation = platform.link.attach(writer);
    let end = commands(platform, ctx, &mut socket, &mut outgoing, generation, cancel, backoff).await;
    platform.link.detach(generation);
    let _ = socket.close(None).await;
    end
}

/// The subscriptions of one connection: requests always, state changes only when watching.
async fn subscribe(platform: &HassPlatform) -> Result<(), String> {
    let mut events = vec![REQUEST_EVENT];
    if platform.settings.watch.active() {
        events.push("state_changed");
    }
    for event_type in events {
        let command = json!({ "type": "subscribe_events", "event_type": event_type });
        platform
            .link
            .request(command, platform.settings.request_timeout)
            .await
            .map_err(|e| format!("subscribe to {event_type}: {e}"))?;
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
async fn commands(
    platform: &HassPlatform,
    ctx: &PlatformContext,
    socket: &mut Socket,
    outgoing: &mut mpsc::Receiver<String>,
    generation: u64,
    cancel: &CancellationToken,
    backoff: &mut Backoff,
) -> End {
    let interval = platform.settings.ping_interval;
    let mut ping = tokio::time::interval_at(Instant::now() + interval, interval);
    let mut awaiting_pong: Option<u64> = None;
    let setup = subscribe(platform);
    tokio::pin!(setup);
    let mut subscribed = false;
    loop {
        let frame = tokio::select! {
            () = cancel.cancelled() => return End::Cancelled,
            done = &mut setup, if !subscribed => {
                if let Err(why) = done {
                    return End::Dropped(why);
                }
                subscribed = true;
                backoff.reset();
                platform.health.connected();
                tracing::info!(platform = crate::NAME, watching = platform.settings.watch.active(), "connected to home assistant");
                continue;
            }
            _ = ping.tick() => {
                if awaiting_pong.is_some() {
                    return End::Dropped(format!("no pong within {interval:?}"));
                }
                let Some(id) = platform.link.next_id(generation) else { return End::Dropped("detached".into()) };
                if let Err(e) = socket.send(Message::Text(json!({"id": id, "type": "ping"}).to_string().into())).await {
                    return End::Dropped(format!("ping failed: {e}"));
                }
                awaiting_pong = Some(id);
                continue;
            }
            Some(text) = outgoing.recv() => {
                if let Err(e) = socket.send(Message::Text(text.into())).await {
                    return End::Dropped(format!("send failed: {e}"));
                }
                continue;
            }
            frame = socket.next() => frame,
        };
        let text = match frame {
            None => return End::Dropped("socket closed".to_owned()),
            Some(Err(error)) => return End::Dropped(format!("socket error: {error}")),
            Some(Ok(Message::Close(_))) => return End::Dropped("closed by home assistant".to_owned()),
            Some(Ok(Message::Text(text))) => text,
            Some(Ok(_)) => continue,
        };
        let Ok(frame) = serde_json::from_str::<Value>(text.as_str()) else {
            tracing::debug!(platform = crate::NAME, "ignoring a frame that is not JSON");
            continue;
        };
        // HA may batch several messages into one frame as a JSON array.
        let frames = match frame {
            Value::Array(frames) => frames,
            frame => vec![frame],
        };
        for frame in frames {
            let id = frame.get("id").and_then(Value::as_u64);
            match frame.get("type").and_then(Value::as_str) {
                Some("pong") => {
                    if id.is_some() && id == awaiting_pong {
                        awaiting_pong = None;
                    }
                    platform.health.alive();
                }
                Some("result") => {
                    platform.health.alive();
                    if let Some(id) = id {
                        platform.link.complete(generation, id, result_of(&frame));
                    }
                }
                Some("event") => {
                    platform.health.alive();
                    if let Some(event) = frame.get("event") {
                        platform.on_event(ctx, event).await;
                    }
                }
                _ => {}
            }
        }
    }
}

impl HassPlatform {
    /// One subscribed event: a request from a person, or a state change to consider.
    async fn on_event(&self, ctx: &PlatformContext, event: &Value) {
        if let Some(request) = normalise_request(event) {
            match ctx.ingress.admit(&request).await {
                Ok(admission) if admission.admitted() => {}
                Ok(_) => {
                    tracing::info!(
                        platform = crate::NAME,
                        user = %request.sender().id,
                        "hermesd_request from a user not in HASS_ALLOWED_USERS ignored"
                    );
                    return;
                }
                Err(e) => {
                    tracing::error!(platform = crate::NAME, error = %e, "hermesd_request not admitted; it is lost");
                    return;
                }
            }
            if let Err(e) = ctx.ingress.accept(request).await {
                tracing::error!(platform = crate::NAME, error = %e, "hermesd_request not stored; it is lost");
            }
            return;
        }
        let Some(change) = state_change(event, &self.settings.watch_prompt) else { return };
        if !self.settings.watch.matches(&change.entity_id) || !self.cooldowns.admit(&change.entity_id, Instant::now()) {
            return;
        }
        let event = watch_event(&change);
        let outcome = match ctx.ingress.admit(&event).await {
            Ok(admission) if admission.admitted() => ctx.ingress.accept(event).await.map(|_| ()),
            Ok(_) => Ok(()),
            Err(e) => Err(e),
        };
        if let Err(e) = outcome {
            tracing::error!(platform = crate::NAME, entity = %change.entity_id, error = %e, "watched change not stored");
        }
    }
}
