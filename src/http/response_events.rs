//! The Responses API's server-sent events: a streamed answer (`response.created` … deltas as the
//! model writes … `response.completed`), and a stored answer replayed as events for a streaming
//! retry under the same `Idempotency-Key`.

use std::convert::Infallible;
use std::sync::Arc;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt;
use serde_json::{Value, json};

use crate::platforms::api::{
    ApiReply, ReplyMeta, ResponseMeta, StreamBuffer, function_call_item, response_message_item, response_object,
};

/// One Responses stream event, numbered.
struct Events {
    next: u64,
}

impl Events {
    fn frame(&mut self, kind: &str, mut body: Value) -> (String, String) {
        body["type"] = json!(kind);
        body["sequence_number"] = json!(self.next);
        self.next += 1;
        (kind.to_owned(), body.to_string())
    }
}

/// The events of a whole answer after its start: the text, the item done, then completed (or
/// failed). `streamed` is what deltas already carried; `opened`: whether the message item was
/// (its first words came). The message item is there exactly when the final object has one
/// (`response_output`), so the stream's output indexes are the stored object's.
fn closing_events(
    events: &mut Events,
    meta: &ReplyMeta,
    response: &ResponseMeta,
    reply: &ApiReply,
    streamed: &str,
    opened: bool,
) -> Vec<(String, String)> {
    let item_id = format!("msg_{}", response.id.trim_start_matches("resp_"));
    let mut out = Vec::new();
    if reply.error {
        out.push(events.frame("response.failed", json!({ "response": response_object(meta, response, Some(reply)) })));
        return out;
    }
    let has_message = opened || reply.calls.is_empty() || !reply.text.trim().is_empty();
    if has_message {
        if !opened {
            out.extend(message_opening(events, response));
        }
        let rest = reply.text.strip_prefix(streamed).unwrap_or(if streamed.is_empty() { &reply.text } else { "" });
        if !rest.is_empty() {
            out.push(events.frame(
                "response.output_text.delta",
                json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "delta": rest, "logprobs": [] }),
            ));
        }
        let part = json!({ "type": "output_text", "text": reply.text, "annotations": [] });
        out.push(events.frame(
            "response.output_text.done",
            json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "text": reply.text, "logprobs": [] }),
        ));
        out.push(events.frame(
            "response.content_part.done",
            json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "part": part }),
        ));
        out.push(events.frame(
            "response.output_item.done",
            json!({ "output_index": 0, "item": response_message_item(&response.id, &reply.text, "completed") }),
        ));
    }
    for (i, call) in reply.calls.iter().enumerate() {
        let index = i + usize::from(has_message);
        let item = function_call_item(call);
        let mut started = item.clone();
        started["arguments"] = json!("");
        started["status"] = json!("in_progress");
        out.push(events.frame("response.output_item.added", json!({ "output_index": index, "item": started })));
        out.push(events.frame(
            "response.function_call_arguments.delta",
            json!({ "item_id": item["id"], "output_index": index, "delta": call.arguments }),
        ));
        out.push(events.frame(
            "response.function_call_arguments.done",
            json!({ "item_id": item["id"], "output_index": index, "name": call.name, "arguments": call.arguments }),
        ));
        out.push(events.frame("response.output_item.done", json!({ "output_index": index, "item": item })));
    }
    out.push(events.frame("response.completed", json!({ "response": response_object(meta, response, Some(reply)) })));
    out
}

/// The events that open an answer: created, in progress.
fn opening_events(events: &mut Events, meta: &ReplyMeta, response: &ResponseMeta) -> Vec<(String, String)> {
    let started = response_object(meta, response, None);
    vec![
        events.frame("response.created", json!({ "response": started })),
        events.frame("response.in_progress", json!({ "response": started })),
    ]
}

/// The events that open the message item and its text part (output index 0).
fn message_opening(events: &mut Events, response: &ResponseMeta) -> Vec<(String, String)> {
    let item_id = format!("msg_{}", response.id.trim_start_matches("resp_"));
    vec![
        events.frame(
            "response.output_item.added",
            json!({ "output_index": 0, "item": response_message_item(&response.id, "", "in_progress") }),
        ),
        events.frame(
            "response.content_part.added",
            json!({
                "item_id": item_id, "output_index": 0, "content_index": 0,
                "part": { "type": "output_text", "text": "", "annotations": [] },
            }),
        ),
    ]
}

fn sse(rx: tokio::sync::mpsc::Receiver<(String, String)>, keepalive: std::time::Duration) -> Response {
    let stream = tokio_stream::wrappers::ReceiverStream::new(rx)
        .map(|(kind, data)| Ok::<_, Infallible>(Event::default().event(kind).data(data)));
    Sse::new(stream).keep_alive(KeepAlive::new().interval(keepalive).text("keepalive")).into_response()
}

/// A streamed answer: deltas as the model writes them, then the closing events.
pub(super) fn stream(
    waiter: tokio::sync::oneshot::Receiver<ApiReply>,
    buffer: Arc<StreamBuffer>,
    meta: ReplyMeta,
    response: ResponseMeta,
    keepalive: std::time::Duration,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<(String, String)>(64);
    tokio::spawn(async move {
        let mut events = Events { next: 0 };
        for event in opening_events(&mut events, &meta, &response) {
            if tx.send(event).await.is_err() {
                return;
            }
        }
        let item_id = format!("msg_{}", response.id.trim_start_matches("resp_"));
        // The message item opens with the first words: an answer of function calls alone has
        // none, as its final object has none.
        let (mut streamed, mut opened) = (String::new(), false);
        let mut waiter = waiter;
        let reply = loop {
            tokio::select! {
                reply = &mut waiter => break reply,
                _ = buffer.ready.notified() => {
                    // Reasoning has no place in a plain message item: only the answer streams.
                    let _ = buffer.take_reasoning();
                    let text = buffer.take();
                    let held = streamed.len();
                    streamed.push_str(&text);
                    if streamed.trim().is_empty() {
                        continue;
                    }
                    let mut out = Vec::new();
                    if !opened {
                        opened = true;
                        out.extend(message_opening(&mut events, &response));
                    }
                    // Words held back while only blanks had come go out with these.
                    let delta = if out.is_empty() { text } else { streamed[..held].to_owned() + &text };
                    out.push(events.frame(
                        "response.output_text.delta",
                        json!({ "item_id": item_id, "output_index": 0, "content_index": 0, "delta": delta, "logprobs": [] }),
                    ));
                    for event in out {
                        if tx.send(event).await.is_err() {
                            return;
                        }
                    }
                }
            }
        };
        // What came after the last notice, and blanks held back, go out with the closing events.
        let sent = if opened { streamed } else { String::new() };
        let closing = match reply {
            Ok(reply) => closing_events(&mut events, &meta, &response, &reply, &sent, opened),
            Err(_) => vec![events.frame(
                "error",
                json!({ "code": "restarting", "message": "hermesd is restarting; this message was saved and will be answered after the restart" }),
            )],
        };
        for event in closing {
            if tx.send(event).await.is_err() {
                return;
            }
        }
    });
    sse(rx, keepalive)
}

/// The events of a stored response, for a streaming retry under the same `Idempotency-Key`.
pub(super) fn replay_events(body: &Value) -> Vec<(String, String)> {
    let mut events = Events { next: 0 };
    let mut started = body.clone();
    started["status"] = json!("in_progress");
    started["output"] = json!([]);
    let mut out = vec![events.frame("response.created", json!({ "response": started }))];
    if body["status"] == "completed" {
        for (index, item) in body["output"].as_array().into_iter().flatten().enumerate() {
            out.push(events.frame("response.output_item.added", json!({ "output_index": index, "item": item })));
            out.push(events.frame("response.output_item.done", json!({ "output_index": index, "item": item })));
        }
        out.push(events.frame("response.completed", json!({ "response": body })));
    } else {
        out.push(events.frame("response.failed", json!({ "response": body })));
    }
    out
}
