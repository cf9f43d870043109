//! The Telegram adapter against a fake Bot API: the shared conformance kit, polling, webhook,
//! outbound calls and attachment downloads.

mod conformance;
mod media;
mod outbound;
mod polling;
mod support;
mod webhook;
