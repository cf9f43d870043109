//! The panel's chat: the operator talks to the agent from the browser. A message enters through
//! the ingress as an API platform event of the chat `panel` (so it is stored before it is
//! answered, runs in its session's actor, and survives a restart like any other), and the answer
//! comes back through the outbox to `ApiPlatform::send`.
//!
//! `POST /ui/chat` carries the session's CSRF token and must come from the panel's origin. A
//! plain form post waits for the answer and shows the page again; `panel.js` asks for
//! `text/event-stream` instead and gets the answer as it is written (`delta` events, then one
//! `done`). The API key never reaches the browser, and the cookie opens nothing under `/v1/`.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Form, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Redirect, Response};
use futures_util::StreamExt;
use hermesd_platform::{ChatRef, ChatType, InboundEvent, InboundMessage, Sender};
use serde::Deserialize;
use serde_json::json;

use super::super::AppState;
use super::html::{escape, page};
use crate::clock::now_ms;
use crate::platforms::api::{NAME, ReplyMeta, ReplyShape};
use crate::turn::session_key::session_key;
use crate::vocab::message::Role;

/// The API platform chat the panel talks in.
pub(super) const CHAT_ID: &str = "panel";
/// Longest message the form takes, in bytes.
const MAX_TEXT: usize = 64 * 1024;
/// How long a plain form post waits for the answer before showing the page without it.
const FORM_WAIT: Duration = Duration::from_secs(120);
/// Messages of the conversation the page shows (the newest).
const SHOWN: usize = 200;

fn chat() -> ChatRef {
    ChatRef::new(NAME, CHAT_ID, ChatType::Dm)
}

fn sender() -> Sender {
    Sender { id: CHAT_ID.to_owned(), name: Some("control panel".to_owned()), is_bot: false, roles: Vec::new() }
}

/// `GET /ui/chat`: the conversation so far and the form.
pub(super) async fn page_get(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = match super::pages::reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    if state.api.is_none() {
        return page(
            StatusCode::OK,
            "Chat",
            Some(&session.csrf),
            "<p class=\"bad\">The chat goes through the API platform, which is off (<code>[platforms.api]</code>).</p>",
        );
    }
    let key = session_key(crate::config::DEFAULT_PROFILE, &chat(), &sender(), false);
    let (session_id, messages) = match state.store.route(&key.key).await {
        Ok(Some(info)) => match state.store.full_history(&info.id).await {
            Ok(messages) => (info.id, messages),
            Err(e) => return super::html::failed(&session.csrf, "Chat", e),
        },
        Ok(None) => (String::new(), Vec::new()),
        Err(e) => return super::html::failed(&session.csrf, "Chat", e),
    };
    let shown: Vec<_> = messages.iter().filter(|m| m.message.role != Role::System).collect();
    let mut log = String::new();
    for message in &shown[shown.len().saturating_sub(SHOWN)..] {
        log.push_str(&super::pages::message_html(&session_id, message));
    }
    if log.is_empty() {
        log.push_str("<p class=\"muted\" id=\"empty\">No message yet. <code>/new</code> starts over.</p>");
    }
    let body = format!(
        "<div id=\"log\" aria-live=\"polite\">{log}</div>\
         <form id=\"chat\" method=\"post\" action=\"/ui/chat\"><input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <p><label for=\"text\">Message</label><br><textarea id=\"text\" name=\"text\" rows=\"3\" required></textarea></p>\
         <p><button type=\"submit\">Send</button> <span class=\"muted\" id=\"state\"></span></p></form>",
        escape(&session.csrf)
    );
    page(StatusCode::OK, "Chat", Some(&session.csrf), &body)
}

#[derive(Deserialize)]
pub(super) struct ChatForm {
    csrf: String,
    text: String,
}

/// `POST /ui/chat`: one message; streamed back as SSE when the browser asks for it.
pub(super) async fn send(State(state): State<AppState>, headers: HeaderMap, Form(form): Form<ChatForm>) -> Response {
    let Some(session) = super::checked(&state, &headers, &form.csrf) else { return super::refused() };
    let streamed =
        headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("text/event-stream"));
    let text = form.text.trim();
    let problem = if state.api.is_none() {
        Some((StatusCode::SERVICE_UNAVAILABLE, "the API platform is off"))
    } else if text.is_empty() {
        Some((StatusCode::BAD_REQUEST, "the message is empty"))
    } else if text.len() > MAX_TEXT {
        Some((StatusCode::PAYLOAD_TOO_LARGE, "the message is longer than 64 KiB"))
    } else if state.ingress.is_closed() {
        Some((StatusCode::SERVICE_UNAVAILABLE, "hermesd is shutting down; send it again shortly"))
    } else {
        None
    };
    if let Some((status, problem)) = problem {
        return not_sent(streamed, &session.csrf, status, problem);
    }
    let Some(api) = state.api.clone() else {
        return not_sent(streamed, &session.csrf, StatusCode::SERVICE_UNAVAILABLE, "the API platform is off");
    };
    let request_id = uuid::Uuid::now_v7().to_string();
    let event = InboundEvent::Message {
        event_id: request_id.clone(),
        message: InboundMessage {
            profile: None,
            message_id: request_id.clone(),
            chat: chat(),
            sender: sender(),
            text: text.to_owned(),
            attachments: Vec::new(),
            reply_to: None,
            addressed: true,
            timestamp_ms: now_ms(),
            history: Vec::new(),
            chat_title: None,
            client: None,
        },
    };
    let meta = ReplyMeta {
        model: state.model_id.clone(),
        created: now_ms() / 1000,
        idempotent: false,
        shape: ReplyShape::ChatCompletion,
    };
    tracing::info!(key = session.who, chars = text.chars().count(), "panel: chat message");
    if !streamed {
        let waiter = api.register(&request_id, meta);
        if let Some(refused) = super::super::api::admit(&state, event, None, false).await {
            api.forget(&request_id);
            return not_admitted(streamed, &session.csrf, refused.status());
        }
        // The answer is stored with the conversation whether or not it came in time.
        let _ = tokio::time::timeout(FORM_WAIT, waiter).await;
        api.forget(&request_id);
        return Redirect::to("/ui/chat#chat").into_response();
    }
    let (waiter, buffer) = api.register_stream(&request_id, meta);
    if let Some(refused) = super::super::api::admit(&state, event, None, true).await {
        api.forget(&request_id);
        return not_admitted(streamed, &session.csrf, refused.status());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Event>(64);
    tokio::spawn(async move {
        let mut waiter = waiter;
        let mut streamed = String::new();
        let delta = |text: &str| Event::default().event("delta").data(json!({ "text": text }).to_string());
        let reply = loop {
            tokio::select! {
                reply = &mut waiter => break reply,
                // The page went away: stop collecting its deltas (the answer is stored anyway).
                () = tx.closed() => {
                    api.forget(&request_id);
                    return;
                }
                _ = buffer.ready.notified() => {
                    // The chat shows no reasoning; it is not kept either.
                    drop(buffer.take_reasoning());
                    let text = buffer.take();
                    if !text.is_empty() {
                        streamed.push_str(&text);
                        if tx.send(delta(&text)).await.is_err() {
                            api.forget(&request_id);
                            return;
                        }
                    }
                }
            }
        };
        streamed.push_str(&buffer.take());
        let done = match reply {
            // What the final reply adds to the streamed text (all of it when nothing streamed,
            // as for a command's answer).
            Ok(reply) => {
                let rest = reply.text.strip_prefix(streamed.as_str()).unwrap_or(if streamed.is_empty() {
                    &reply.text
                } else {
                    ""
                });
                json!({ "text": format!("{streamed}{rest}"), "error": reply.error })
            }
            Err(_) => json!({
                "text": "hermesd is restarting; this message was saved and will be answered after the restart",
                "error": true
            }),
        };
        let _ = tx.send(Event::default().event("done").data(done.to_string())).await;
    });
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx).map(Ok::<_, Infallible>);
    let sse = Sse::new(stream).keep_alive(KeepAlive::new().interval(state.sse_keepalive)).into_response();
    super::html::harden(sse)
}

/// Why a message was not sent: plain text for the page's script, a page for a plain form.
fn not_sent(streamed: bool, csrf: &str, status: StatusCode, problem: &str) -> Response {
    if streamed {
        let text = format!("Not sent: {problem}.");
        return super::html::harden(
            (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response(),
        );
    }
    let body = format!("<p class=\"bad\">Not sent: {}. <a href=\"/ui/chat\">Back</a></p>", escape(problem));
    page(status, "Chat", Some(csrf), &body)
}

/// The ingress did not take the message (`status` is what it answered).
fn not_admitted(streamed: bool, csrf: &str, status: StatusCode) -> Response {
    let problem = match status {
        StatusCode::SERVICE_UNAVAILABLE => "the store did not take it; send it again shortly",
        _ => "the gateway did not take it",
    };
    not_sent(streamed, csrf, status, problem)
}
