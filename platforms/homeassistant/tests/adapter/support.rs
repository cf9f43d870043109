//! A minimal fake of HA's websocket API for the adapter's own tests: auth, `subscribe_events`,
//! `ping`, `fire_event`/`call_service` results, and events pushed by the test.

#![allow(unreachable_pub)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use axum::routing::get;
use hermesd_homeassistant::HassSettings;
use serde_json::{Value, json};
use tokio::sync::mpsc;

#[derive(Default)]
pub struct Inner {
    pub received: Vec<Value>,
    pub subscriptions: Vec<(u64, String)>,
    pub conns: Vec<mpsc::UnboundedSender<Value>>,
    pub answer_pings: bool,
}

#[derive(Clone)]
pub struct FakeHa {
    pub addr: SocketAddr,
    pub inner: Arc<Mutex<Inner>>,
}

impl FakeHa {
    pub async fn start() -> Self {
        let inner = Arc::new(Mutex::new(Inner { answer_pings: true, ..Inner::default() }));
        let app = Router::new().route("/api/websocket", get(upgrade)).with_state(inner.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { addr, inner }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn received(&self, kind: &str) -> Vec<Value> {
        self.lock().received.iter().filter(|m| m["type"] == kind).cloned().collect()
    }

    /// Push an event to every subscription of its type.
    pub fn fire(&self, event: Value) {
        let inner = self.lock();
        let kind = event["event_type"].as_str().unwrap_or_default().to_owned();
        for (sub, wanted) in &inner.subscriptions {
            if *wanted == kind {
                for conn in &inner.conns {
                    let _ = conn.send(json!({"id": sub, "type": "event", "event": event}));
                }
            }
        }
    }

    pub async fn wait(&self, check: impl Fn(&Inner) -> bool) -> bool {
        for _ in 0..500 {
            if check(&self.lock()) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        false
    }

    pub fn settings(&self) -> HassSettings {
        HassSettings {
            url: format!("http://{}", self.addr),
            token: "adapter-test-token".into(),
            ping_interval: Duration::from_secs(1),
            request_timeout: Duration::from_secs(2),
            ..HassSettings::default()
        }
    }
}

async fn upgrade(State(inner): State<Arc<Mutex<Inner>>>, ws: WebSocketUpgrade) -> Response {
    ws.on_upgrade(move |socket| serve(inner, socket))
}

fn text(v: Value) -> Message {
    Message::Text(v.to_string().into())
}

async fn serve(inner: Arc<Mutex<Inner>>, mut socket: WebSocket) {
    let lock = || inner.lock().unwrap_or_else(PoisonError::into_inner);
    if socket.send(text(json!({"type": "auth_required", "ha_version": "2026.11.0"}))).await.is_err() {
        return;
    }
    let Some(Ok(Message::Text(auth))) = socket.recv().await else { return };
    let auth: Value = serde_json::from_str(auth.as_str()).unwrap_or(Value::Null);
    lock().received.push(auth.clone());
    if auth["access_token"] != "adapter-test-token" {
        let _ = socket.send(text(json!({"type": "auth_invalid", "message": "Invalid access token or password"}))).await;
        return;
    }
    let _ = socket.send(text(json!({"type": "auth_ok", "ha_version": "2026.11.0"}))).await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    lock().conns.push(tx);
    loop {
        tokio::select! {
            Some(frame) = rx.recv() => {
                if socket.send(text(frame)).await.is_err() {
                    return;
                }
            }
            frame = socket.recv() => {
                let Some(Ok(Message::Text(frame))) = frame else { return };
                let message: Value = serde_json::from_str(frame.as_str()).unwrap_or(Value::Null);
                let id = message["id"].clone();
                let answer = match message["type"].as_str() {
                    Some("ping") if lock().answer_pings => Some(json!({"id": id, "type": "pong"})),
                    Some("ping") => None,
                    Some("subscribe_events") => {
                        let wanted = message["event_type"].as_str().unwrap_or_default().to_owned();
                        lock().subscriptions.push((id.as_u64().unwrap_or_default(), wanted));
                        Some(json!({"id": id, "type": "result", "success": true, "result": null}))
                    }
                    Some("fire_event" | "call_service") => Some(json!({"id": id, "type": "result", "success": true,
                        "result": {"context": {"id": format!("ctx-{id}"), "parent_id": null, "user_id": "u"}}})),
                    _ => Some(json!({"id": id, "type": "result", "success": false,
                        "error": {"code": "unknown_command", "message": "Unknown command."}})),
                };
                lock().received.push(message);
                if let Some(answer) = answer && socket.send(text(answer)).await.is_err() {
                    return;
                }
            }
        }
    }
}
