//! hermesd: a durable multi-platform messaging gateway for an AI agent.
//!
//! The binary in `main.rs` is a thin shell over this library; tests and benchmarks drive the
//! same entry points. See ARCHITECTURE.md for the map.

pub mod access;
pub mod agent;
pub mod cli;
pub mod clock;
pub mod config;
pub mod cron;
pub mod daemon;
pub mod delivery;
pub mod failpoint;
/// Fuzz target entry points (tests/fuzz); cargo-afl builds with `--cfg fuzzing`.
#[cfg(any(fuzzing, test))]
pub mod fuzzing;
pub mod http;
pub mod http_client;
pub mod ingress;
pub mod metrics;
pub mod net_guard;
pub mod outbox;
pub mod platforms;
pub mod recovery;
pub mod redact;
pub mod retention;
pub mod router;
pub mod sandbox;
pub mod store;
pub mod systemd;
pub mod turn;
pub mod usage;
pub mod vocab;
pub mod webhooks;
