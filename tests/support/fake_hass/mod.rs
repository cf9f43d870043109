//! A fake Home Assistant websocket API (`/api/websocket`, axum on 127.0.0.1:0) speaking HA's
//! real messages: `auth_required` → `auth` → `auth_ok` / `auth_invalid`; then commands with
//! ids (`subscribe_events`, `ping`, `get_states`, the entity/device/area registries,
//! `fire_event`, `call_service`) answered by `result` frames, and `event` frames for the
//! subscriptions. Records every message received; tests fire events, change states and drop
//! the sockets.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

/// The HA version the fake reports.
pub const HA_VERSION: &str = "2026.11.0";

enum Out {
    Frame(Value),
    Drop,
}

struct Conn {
    id: u64,
    tx: mpsc::UnboundedSender<Out>,
    /// Subscription id → event type (`None`: every event).
    subscriptions: Vec<(u64, Option<String>)>,
}

#[derive(Default)]
struct Inner {
    token: String,
    next_conn: u64,
    next_context: u64,
    conns: Vec<Conn>,
    /// (connection, message) for every frame received after the socket opened.
    received: Vec<(u64, Value)>,
    auth_failures: u64,
    states: BTreeMap<String, Value>,
    entities: Vec<Value>,
    devices: Vec<Value>,
    areas: Vec<Value>,
    mute_pongs: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    /// Bumped on every recorded change, so waits sleep instead of polling.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n += 1);
    }
}

/// A running fake Home Assistant.
#[derive(Clone)]
pub struct FakeHass {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

fn context(id: String, user: Option<&str>) -> Value {
    json!({ "id": id, "parent_id": null, "user_id": user })
}

fn now_iso() -> &'static str {
    "2026-11-25T10:00:00.000000+00:00"
}

impl FakeHass {
    /// A fake that accepts `token`, with no entities.
    pub async fn start(token: &str) -> Self {
        let shared = Arc::new(Shared { inner: Mutex::default(), changed: watch::Sender::new(0) });
        shared.lock().token = token.to_owned();
        let app = Router::new().route("/api/websocket", get(upgrade)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake hass");
        let addr = listener.local_addr().expect("fake hass addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, shared }
    }

    /// `http://127.0.0.1:PORT` (the adapter adds `/api/websocket`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Add an entity with its state, area and device (entity registry + `get_states`).
    pub fn entity(&self, entity_id: &str, state: &str, area: Option<&str>, device: Option<&str>) -> &Self {
        let mut inner = self.shared.lock();
        let name = entity_id.split_once('.').map_or(entity_id, |(_, n)| n).replace('_', " ");
        inner.states.insert(
            entity_id.to_owned(),
            json!({"entity_id": entity_id, "state": state, "attributes": {"friendly_name": name},
                "last_changed": now_iso(), "last_updated": now_iso(),
                "context": {"id": "01INITIAL", "parent_id": null, "user_id": null}}),
        );
        inner.entities.push(json!({"entity_id": entity_id, "area_id": area, "device_id": device,
            "platform": "fake", "disabled_by": null, "hidden_by": null}));
        self
    }

    /// Add a device in `area`.
    pub fn device(&self, id: &str, area: Option<&str>) -> &Self {
        self.shared.lock().devices.push(json!({"id": id, "area_id": area, "name": id}));
        self
    }

    /// Add an area.
    pub fn area(&self, id: &str, name: &str) -> &Self {
        self.shared.lock().areas.push(json!({"area_id": id, "name": name, "floor_id": null}));
        self
    }

    /// Stop answering pings (a half-dead connection).
    pub fn mute_pongs(&self, mute: bool) {
        self.shared.lock().mute_pongs = mute;
    }

    /// Every message received, with its connection number (1, 2, …).
    pub fn received(&self) -> Vec<(u64, Value)> {
        self.shared.lock().received.clone()
    }

    /// Messages of `kind` (`type`) received.
    pub fn of_type(&self, kind: &str) -> Vec<Value> {
        self.received().into_iter().filter(|(_, m)| m["type"] == kind).map(|(_, m)| m).collect()
    }

    /// `event_data` of every `hermesd_response` fired.
    pub fn responses(&self) -> Vec<Value> {
        self.of_type("fire_event")
            .into_iter()
            .filter(|m| m["event_type"] == "hermesd_response")
            .map(|m| m["event_data"].clone())
            .collect()
    }

    /// Every `call_service` received.
    pub fn service_calls(&self) -> Vec<Value> {
        self.of_type("call_service")
    }

    /// Sockets opened so far.
    pub fn connections(&self) -> u64 {
        self.shared.lock().next_conn
    }

    /// `auth` messages refused.
    pub fn auth_failures(&self) -> u64 {
        self.shared.lock().auth_failures
    }

    /// Event types subscribed on the newest live connection.
    pub fn subscriptions(&self) -> Vec<String> {
        let inner = self.shared.lock();
        inner
            .conns
            .last()
            .map(|c| c.subscriptions.iter().map(|(_, t)| t.clone().unwrap_or_else(|| "*".into())).collect())
            .unwrap_or_default()
    }

    /// Fire an event on the bus (to every live subscription for it); returns its context id.
    pub fn fire(&self, event_type: &str, data: Value, user: Option<&str>) -> String {
        let mut inner = self.shared.lock();
        inner.next_context += 1;
        let id = format!("01FAKECTX{:06}", inner.next_context);
        Self::deliver(&mut inner, event_type, data, context(id.clone(), user));
        drop(inner);
        self.shared.bump();
        id
    }

    /// Fire the same event again with context id `id` (a redelivery).
    pub fn refire(&self, event_type: &str, data: Value, user: Option<&str>, id: &str) {
        let mut inner = self.shared.lock();
        Self::deliver(&mut inner, event_type, data, context(id.to_owned(), user));
        drop(inner);
        self.shared.bump();
    }

    fn deliver(inner: &mut Inner, event_type: &str, data: Value, context: Value) {
        let event = json!({"event_type": event_type, "data": data, "origin": "LOCAL",
            "time_fired": now_iso(), "context": context});
        for conn in &inner.conns {
            for (sub, wanted) in &conn.subscriptions {
                if wanted.as_deref().is_none_or(|w| w == event_type) {
                    let _ = conn.tx.send(Out::Frame(json!({"id": sub, "type": "event", "event": event})));
                }
            }
        }
    }

    /// `hermesd_request` from `user` (`None`: no user in the context); returns its context id.
    pub fn request(&self, text: &str, conversation: Option<&str>, user: Option<&str>) -> String {
        let mut data = json!({ "text": text });
        if let Some(conversation) = conversation {
            data["conversation_id"] = Value::from(conversation);
        }
        self.fire("hermesd_request", data, user)
    }

    /// Change an entity's state and fire `state_changed`; returns the new state's context id.
    pub fn set_state(&self, entity_id: &str, state: &str) -> String {
        let mut inner = self.shared.lock();
        inner.next_context += 1;
        let id = format!("01FAKESTATE{:06}", inner.next_context);
        let old = inner.states.get(entity_id).cloned();
        let mut new = old.clone().unwrap_or_else(|| json!({"entity_id": entity_id, "attributes": {}}));
        new["state"] = Value::from(state);
        new["context"] = context(id.clone(), None);
        inner.states.insert(entity_id.to_owned(), new.clone());
        let data = json!({"entity_id": entity_id, "old_state": old, "new_state": new});
        Self::deliver(&mut inner, "state_changed", data, context(id.clone(), None));
        drop(inner);
        self.shared.bump();
        id
    }

    /// Cut every live socket without a close frame.
    pub fn drop_connections(&self) {
        let mut inner = self.shared.lock();
        for conn in inner.conns.drain(..) {
            let _ = conn.tx.send(Out::Drop);
        }
    }

    /// Waits until `check` holds (re-checked on every change) or `timeout` passes.
    pub async fn wait_until(&self, timeout: Duration, check: impl Fn(&FakeHass) -> bool) -> bool {
        let mut changed = self.shared.changed.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if check(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed.changed()).await.is_err() {
                return check(self);
            }
        }
    }
}

async fn upgrade(State(shared): State<Arc<Shared>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| serve(shared, socket))
}

async fn serve(shared: Arc<Shared>, socket: WebSocket) {
    let (mut sink, mut source) = socket.split();
    let send = |v: Value| Message::Text(v.to_string().into());
    if sink.send(send(json!({"type": "auth_required", "ha_version": HA_VERSION}))).await.is_err() {
        return;
    }
    let auth = match source.next().await {
        Some(Ok(Message::Text(text))) => serde_json::from_str::<Value>(text.as_str()).unwrap_or(Value::Null),
        _ => return,
    };
    let id = {
        let mut inner = shared.lock();
        inner.next_conn += 1;
        inner.next_conn
    };
    shared.lock().received.push((id, auth.clone()));
    let token = shared.lock().token.clone();
    if auth["type"] != "auth" || auth["access_token"] != token.as_str() {
        shared.lock().auth_failures += 1;
        shared.bump();
        let _ = sink.send(send(json!({"type": "auth_invalid", "message": "Invalid access token or password"}))).await;
        let _ = sink.close().await;
        return;
    }
    if sink.send(send(json!({"type": "auth_ok", "ha_version": HA_VERSION}))).await.is_err() {
        return;
    }
    let (tx, mut rx) = mpsc::unbounded_channel();
    shared.lock().conns.push(Conn { id, tx: tx.clone(), subscriptions: Vec::new() });
    shared.bump();
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Frame(frame)) => {
                    if sink.send(send(frame)).await.is_err() {
                        break;
                    }
                }
                // Dropping the socket halves ends the TCP connection without a close frame.
                Some(Out::Drop) | None => return,
            },
            frame = source.next() => {
                let Some(Ok(Message::Text(text))) = frame else { break };
                let Ok(message) = serde_json::from_str::<Value>(text.as_str()) else { continue };
                let answer = handle(&shared, id, &message);
                shared.lock().received.push((id, message));
                shared.bump();
                if let Some(answer) = answer {
                    let _ = tx.send(Out::Frame(answer));
                }
            }
        }
    }
    shared.lock().conns.retain(|c| c.id != id);
    shared.bump();
}

fn result(id: &Value, result: Value) -> Value {
    json!({"id": id, "type": "result", "success": true, "result": result})
}

fn error(id: &Value, code: &str, message: &str) -> Value {
    json!({"id": id, "type": "result", "success": false, "error": {"code": code, "message": message}})
}

fn handle(shared: &Shared, conn: u64, message: &Value) -> Option<Value> {
    let id = &message["id"];
    if !id.is_u64() {
        return Some(error(id, "invalid_format", "Message incorrectly formatted."));
    }
    let mut inner = shared.lock();
    let kind = message["type"].as_str().unwrap_or_default();
    let answer = match kind {
        "ping" if inner.mute_pongs => return None,
        "ping" => json!({"id": id, "type": "pong"}),
        "subscribe_events" => {
            let wanted = message["event_type"].as_str().map(str::to_owned);
            if let Some(c) = inner.conns.iter_mut().find(|c| c.id == conn) {
                c.subscriptions.push((id.as_u64().unwrap_or_default(), wanted));
            }
            result(id, Value::Null)
        }
        "get_states" => result(id, Value::Array(inner.states.values().cloned().collect())),
        "config/entity_registry/list" => result(id, Value::Array(inner.entities.clone())),
        "config/device_registry/list" => result(id, Value::Array(inner.devices.clone())),
        "config/area_registry/list" => result(id, Value::Array(inner.areas.clone())),
        "fire_event" | "call_service" => {
            inner.next_context += 1;
            let ctx = context(format!("01FAKEOUT{:06}", inner.next_context), Some("hermesd-user"));
            if kind == "call_service" {
                json!({"id": id, "type": "result", "success": true, "result": {"context": ctx, "response": null}})
            } else {
                result(id, json!({"context": ctx}))
            }
        }
        _ => error(id, "unknown_command", "Unknown command."),
    };
    Some(answer)
}
