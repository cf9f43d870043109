//! The fake's Socket Mode server: every websocket gets a hello (with `num_connections`), then
//! every envelope not yet acknowledged. Like Slack, it keeps an envelope until an ack names its
//! `envelope_id`, sends it again (retry_attempt + 1) on the next socket when the one it went out
//! on closes first, and splits nothing: the newest socket gets new envelopes.

use std::net::SocketAddr;
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;

use super::{FakeSlack, Shared};

/// An envelope the fake sent (or will send).
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    pub envelope_id: String,
    /// Slack's event id inside the payload (empty for interactions).
    pub event_id: String,
    pub kind: &'static str,
    pub payload: Value,
    pub retry_attempt: u32,
    /// The connection it last went out on.
    sent_on: Option<u64>,
}

enum Out {
    Frame(String),
    /// Drop the TCP connection without a close frame.
    Drop,
    /// Keep the connection open but stop reading it, so pings go unanswered.
    Mute,
}

struct Conn {
    id: u64,
    tx: mpsc::UnboundedSender<Out>,
}

#[derive(Default)]
pub(crate) struct SocketState {
    addr: Option<SocketAddr>,
    pub(crate) opens: u64,
    next_conn: u64,
    next_id: u64,
    conns: Vec<Conn>,
    /// Sent or waiting, not yet acknowledged.
    pending: Vec<Envelope>,
    /// Every envelope frame sent, in order (redeliveries included).
    sent: Vec<Envelope>,
    acks: Vec<String>,
    hellos: u64,
    /// Sockets another consumer of the same app token holds (counted in `num_connections`).
    others: u32,
}

impl SocketState {
    pub(crate) fn addr_text(&self) -> String {
        self.addr.map(|a| a.to_string()).unwrap_or_default()
    }

    fn frame(envelope: &Envelope) -> String {
        json!({
            "type": envelope.kind, "envelope_id": envelope.envelope_id, "payload": envelope.payload,
            "accepts_response_payload": envelope.kind == "interactive", "retry_attempt": envelope.retry_attempt,
            "retry_reason": if envelope.retry_attempt > 0 { "timeout" } else { "" },
        })
        .to_string()
    }

    /// Sends `envelope` on the newest socket, if any, and records it.
    fn deliver(&mut self, mut envelope: Envelope) {
        if let Some(conn) = self.conns.last() {
            envelope.sent_on = Some(conn.id);
            let _ = conn.tx.send(Out::Frame(Self::frame(&envelope)));
            self.sent.push(envelope.clone());
        }
        self.pending.retain(|p| p.envelope_id != envelope.envelope_id);
        self.pending.push(envelope);
    }
}

/// Binds the websocket listener and serves it.
pub(crate) async fn listen(shared: Arc<Shared>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake socket mode");
    let addr = listener.local_addr().expect("socket mode addr");
    shared.lock().socket.addr = Some(addr);
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(shared.clone(), stream));
        }
    });
    addr
}

async fn serve(shared: Arc<Shared>, stream: tokio::net::TcpStream) {
    let Ok(ws) = tokio_tungstenite::accept_async(stream).await else { return };
    let (mut sink, mut source) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let id = {
        let mut store = shared.lock();
        let socket = &mut store.socket;
        socket.next_conn += 1;
        let id = socket.next_conn;
        socket.conns.push(Conn { id, tx: tx.clone() });
        socket.hellos += 1;
        let connections = socket.conns.len() as u32 + socket.others;
        let hello = json!({
            "type": "hello", "num_connections": connections,
            "debug_info": {"host": "fake-slack", "approximate_connection_time": 18060},
            "connection_info": {"app_id": "A1"},
        });
        let _ = tx.send(Out::Frame(hello.to_string()));
        // Whatever is unacknowledged and not out on another live socket goes out again.
        let live: Vec<u64> = socket.conns.iter().map(|c| c.id).collect();
        let resend: Vec<Envelope> =
            socket.pending.iter().filter(|p| p.sent_on.is_none_or(|on| !live.contains(&on))).cloned().collect();
        for mut envelope in resend {
            if envelope.sent_on.is_some() {
                envelope.retry_attempt += 1;
            }
            socket.deliver(envelope);
        }
        id
    };
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Frame(text)) => {
                    if sink.send(Message::Text(text.into())).await.is_err() {
                        break;
                    }
                }
                Some(Out::Drop) | None => break,
                Some(Out::Mute) => {
                    // Hold the socket open without reading: no pongs, no acks, until dropped.
                    while let Some(out) = rx.recv().await {
                        if matches!(out, Out::Drop) {
                            break;
                        }
                    }
                    break;
                }
            },
            frame = source.next() => match frame {
                Some(Ok(Message::Text(text))) => {
                    let ack: Value = serde_json::from_str(text.as_str()).unwrap_or(Value::Null);
                    if let Some(envelope_id) = ack["envelope_id"].as_str() {
                        let mut store = shared.lock();
                        store.socket.acks.push(envelope_id.to_owned());
                        store.socket.pending.retain(|p| p.envelope_id != envelope_id);
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => {}
            },
        }
    }
    shared.lock().socket.conns.retain(|c| c.id != id);
}

impl FakeSlack {
    fn envelope(&self, kind: &'static str, event_id: String, payload: Value) -> Envelope {
        let mut store = self.shared.lock();
        store.socket.next_id += 1;
        let envelope_id = format!("env-{}", store.socket.next_id);
        Envelope { envelope_id, event_id, kind, payload, retry_attempt: 0, sent_on: None }
    }

    /// Wraps `event` in an `event_callback` with a fresh event id.
    pub fn callback(&self, event: Value) -> Value {
        let id = {
            let mut store = self.shared.lock();
            store.socket.next_id += 1;
            store.socket.next_id
        };
        json!({
            "token": "legacy", "team_id": "T1", "api_app_id": "A1", "type": "event_callback",
            "event_id": format!("Ev{id:08}"), "event_time": 1_700_000_000, "event": event,
            "authorizations": [{"team_id": "T1", "user_id": super::BOT_USER, "is_bot": true}],
        })
    }

    /// Sends `event` as an `events_api` envelope (now, or when a socket connects).
    pub fn push_event(&self, event: Value) -> Envelope {
        let payload = self.callback(event);
        let event_id = payload["event_id"].as_str().unwrap_or_default().to_owned();
        let envelope = self.envelope("events_api", event_id, payload);
        self.shared.lock().socket.deliver(envelope.clone());
        envelope
    }

    /// Sends a `block_actions` payload as an `interactive` envelope.
    pub fn push_interaction(&self, payload: Value) -> Envelope {
        let envelope = self.envelope("interactive", String::new(), payload);
        self.shared.lock().socket.deliver(envelope.clone());
        envelope
    }

    /// Sends `envelope`'s payload again under a new envelope id, as Slack does when it thinks an
    /// ack was lost.
    pub fn redeliver(&self, envelope: &Envelope) -> Envelope {
        let mut again = self.envelope(envelope.kind, envelope.event_id.clone(), envelope.payload.clone());
        again.retry_attempt = envelope.retry_attempt + 1;
        self.shared.lock().socket.deliver(again.clone());
        again
    }

    /// Controls of the socket side.
    pub fn sockets(&self) -> SocketControl {
        SocketControl { shared: self.shared.clone() }
    }
}

/// What a test can see and do on the Socket Mode side.
pub struct SocketControl {
    shared: Arc<Shared>,
}

impl SocketControl {
    /// Envelope ids acknowledged, in order.
    pub fn acks(&self) -> Vec<String> {
        self.shared.lock().socket.acks.clone()
    }

    /// Whether `envelope` was acknowledged.
    pub fn acked(&self, envelope: &Envelope) -> bool {
        self.acks().contains(&envelope.envelope_id)
    }

    /// Every envelope frame sent, redeliveries included.
    pub fn sent(&self) -> Vec<Envelope> {
        self.shared.lock().socket.sent.clone()
    }

    /// How many sockets said hello so far.
    pub fn hellos(&self) -> u64 {
        self.shared.lock().socket.hellos
    }

    /// How many sockets are open now.
    pub fn open(&self) -> usize {
        self.shared.lock().socket.conns.len()
    }

    /// Sends a `disconnect` envelope (Slack's "please reconnect") on every open socket.
    pub fn disconnect(&self, reason: &str) {
        let frame = json!({"type": "disconnect", "reason": reason, "debug_info": {"host": "fake-slack"}}).to_string();
        for conn in &self.shared.lock().socket.conns {
            let _ = conn.tx.send(Out::Frame(frame.clone()));
        }
    }

    /// Drops every open socket without a close frame.
    pub fn drop_all(&self) {
        for conn in &self.shared.lock().socket.conns {
            let _ = conn.tx.send(Out::Drop);
        }
    }

    /// Keeps every open socket open but silent: nothing is read, so pings go unanswered.
    pub fn mute_all(&self) {
        for conn in &self.shared.lock().socket.conns {
            let _ = conn.tx.send(Out::Mute);
        }
    }

    /// Pretends another process holds `n` sockets of the same app token.
    pub fn other_consumers(&self, n: u32) {
        self.shared.lock().socket.others = n;
    }
}
