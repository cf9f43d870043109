//! The Home Assistant adapter against a small fake websocket API: the shared conformance kit,
//! the receive loop (auth, subscriptions, events into the ingress) and heartbeats.

mod conformance;
mod support;
