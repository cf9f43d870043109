//! Webhook building blocks (DESIGN.md §7): signature verification for each sender scheme and the
//! prompt templates that turn a payload into an agent turn. Pure: the `POST /webhooks/{route}`
//! handler owns the IO, body cap, rate limit and idempotency, and calls into these.

pub mod handler;
pub mod route;
pub mod signature;
pub mod template;
