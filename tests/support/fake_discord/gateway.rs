//! The fake's gateway websocket: HELLO on connect, IDENTIFY → READY (a new session), RESUME →
//! the missed dispatches then RESUMED (or INVALID_SESSION), heartbeats acknowledged, bad tokens
//! closed with 4004. Plain-text JSON frames, as Discord sends without compression.

use std::sync::Arc;

use axum::extract::State;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{Control, Session, Shared};

pub async fn upgrade(State(shared): State<Arc<Shared>>, upgrade: WebSocketUpgrade) -> Response {
    upgrade.on_upgrade(move |socket| serve(shared, socket))
}

/// What to do after an op from the client.
enum Reply {
    Frames(Vec<String>),
    Close(u16),
}

async fn serve(shared: Arc<Shared>, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let me = {
        let mut store = shared.lock();
        store.next_socket += 1;
        let me = store.next_socket;
        store.open.insert(me);
        store.max_open_sockets = store.max_open_sockets.max(store.open.len());
        me
    };
    let hello = json!({ "op": 10, "d": { "heartbeat_interval": shared.heartbeat_ms } });
    if socket.send(Message::Text(hello.to_string().into())).await.is_ok() {
        loop {
            tokio::select! {
                control = rx.recv() => match control {
                    Some(Control::Send(frame)) => {
                        if socket.send(Message::Text(frame.into())).await.is_err() {
                            break;
                        }
                    }
                    Some(Control::Drop) | None => {
                        // Closed from this side: it counts as gone now, whatever the client does
                        // with the close frame.
                        forget(&shared, me);
                        let close = CloseFrame { code: 4000, reason: "dropped by the test".into() };
                        let _ = socket.send(Message::Close(Some(close))).await;
                        break;
                    }
                },
                incoming = socket.recv() => {
                    let text = match incoming {
                        Some(Ok(Message::Text(text))) => text.to_string(),
                        Some(Ok(Message::Close(_)) | Err(_)) | None => break,
                        Some(Ok(_)) => continue,
                    };
                    let Ok(op) = serde_json::from_str::<Value>(&text) else { break };
                    match handle(&shared, me, &tx, &op) {
                        Reply::Frames(frames) => {
                            for frame in frames {
                                if socket.send(Message::Text(frame.into())).await.is_err() {
                                    break;
                                }
                            }
                        }
                        Reply::Close(code) => {
                            let close = CloseFrame { code, reason: "closed by the fake".into() };
                            let _ = socket.send(Message::Close(Some(close))).await;
                            break;
                        }
                    }
                }
            }
        }
    }
    forget(&shared, me);
}

/// Counts socket `me` as closed (once) and stops dispatching to it.
fn forget(shared: &Shared, me: u64) {
    let mut store = shared.lock();
    if store.open.remove(&me) {
        store.sessions_open.remove(&me);
    }
    if store.live.as_ref().is_some_and(|(socket, _)| *socket == me) {
        store.live = None;
    }
}

fn handle(shared: &Shared, me: u64, tx: &mpsc::UnboundedSender<Control>, op: &Value) -> Reply {
    let mut store = shared.lock();
    let token_ok = |token: &Value| token.as_str().map(|t| t.trim_start_matches("Bot ")) == Some(shared.token.as_str());
    match op["op"].as_u64() {
        Some(1) if store.silent_sockets.contains(&me) => Reply::Frames(Vec::new()),
        Some(1) => {
            store.heartbeats += 1;
            Reply::Frames(vec![json!({ "op": 11 }).to_string()])
        }
        Some(2) => {
            store.identifies.push(op["d"].clone());
            if !token_ok(&op["d"]["token"]) {
                return Reply::Close(4004);
            }
            let session_id = format!("session-{}", store.identifies.len());
            let mut session = Session { id: session_id.clone(), seq: 1, log: Vec::new() };
            let ready = json!({ "op": 0, "t": "READY", "s": 1, "d": {
                "v": 10, "user": shared.bot.json(), "guilds": [], "session_id": session_id,
                "resume_gateway_url": format!("{}/gateway", shared.base().replacen("http://", "ws://", 1)),
                "shard": [0, 1], "application": { "id": shared.bot.id.to_string(), "flags": 0 } } });
            session.log.push((1, ready.clone()));
            store.session = Some(session);
            store.live = Some((me, tx.clone()));
            store.session_opened(me);
            let mut frames = vec![ready.to_string()];
            for (event, data) in std::mem::take(&mut store.waiting) {
                store.dispatch_quietly(&event, data, &mut frames);
            }
            Reply::Frames(frames)
        }
        Some(6) => {
            store.resumes.push(op["d"].clone());
            if !token_ok(&op["d"]["token"]) {
                return Reply::Close(4004);
            }
            let known = store.session.as_ref().is_some_and(|s| Some(s.id.as_str()) == op["d"]["session_id"].as_str());
            if !known || std::mem::take(&mut store.invalidate_next_resume) {
                store.session = None;
                store.sessions_open.remove(&me);
                return Reply::Frames(vec![json!({ "op": 9, "d": false }).to_string()]);
            }
            let after = if shared.replay_all { 0 } else { op["d"]["seq"].as_u64().unwrap_or(0) };
            let session = store.session.as_mut().expect("checked above");
            let mut frames: Vec<String> = session
                .log
                .iter()
                .filter(|(seq, frame)| *seq > after && frame["t"] != "READY")
                .map(|(_, frame)| frame.to_string())
                .collect();
            session.seq += 1;
            frames.push(json!({ "op": 0, "t": "RESUMED", "s": session.seq, "d": {} }).to_string());
            store.live = Some((me, tx.clone()));
            store.session_opened(me);
            Reply::Frames(frames)
        }
        _ => Reply::Frames(Vec::new()),
    }
}

impl super::Store {
    /// Logs a dispatch and returns its frame in `frames` instead of sending it to the live socket.
    fn dispatch_quietly(&mut self, event: &str, data: Value, frames: &mut Vec<String>) {
        if let Some(session) = &mut self.session {
            session.seq += 1;
            let frame = json!({ "op": 0, "t": event, "s": session.seq, "d": data });
            session.log.push((session.seq, frame.clone()));
            frames.push(frame.to_string());
        }
    }
}
