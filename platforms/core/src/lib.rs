//! hermesd-platform: the shared message model, the `Platform` trait, capabilities and chunking.
//!
//! Every adapter (Telegram, Discord, Slack, the HTTP API, the terminal) normalises into these
//! types. This crate knows nothing of sessions, SQL or language models, and it must stay that way:
//! adapters depend on it alone.

mod backoff;
pub mod chunk;
pub mod conformance;
pub mod corpus;
pub mod duration;
mod environment;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
pub mod health;
pub mod hmac_sha256;
mod http_pool;
pub mod media;
mod model;
mod platform;
mod redact;
pub mod section;
pub mod sse;

pub use backoff::Backoff;
pub use environment::{Environment, Secret};
pub use http_pool::{HTTP_POOL_IDLE_TIMEOUT, HTTP_POOL_MAX_IDLE_PER_HOST};
pub use model::{
    Attachment, AttachmentKind, Button, ChatRef, ChatType, ClientOutput, ClientTool, ClientTurn, HistoryMessage,
    InboundAction, InboundEvent, InboundMessage, MessageRef, OutboundFile, OutboundKind, OutboundMessage, ReplyContext,
    Sender,
};
pub use platform::{
    Accepted, AccessRules, Admission, Capabilities, DeliveryStatus, FileLimits, Ingress, IngressError, LengthUnit,
    MAX_RETRY_AFTER, MarkdownDialect, PROBE_TIMEOUT, Platform, PlatformContext, PlatformError, PlatformHealth,
    WebhookRequest, WebhookResponse, clamp_retry_after,
};
pub use redact::Redactor;
