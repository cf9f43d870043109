//! hermesd: a durable multi-platform messaging gateway for an AI agent.
//!
//! The binary in `main.rs` is a thin shell over this library; tests and benchmarks drive the
//! same entry points. ARCHITECTURE.md has the map: the pipeline, the floors, a paragraph per
//! folder and the invariants; each module's own doc has the detail.
//!
//! Floors (ARCHITECTURE.md's table, enforced by `tests/floors.rs`): a file imports only from its
//! own floor or below.
//! - 0 words: `vocab`, `clock`, `metrics`, `redact`, `logging`, `failpoint`, `net_guard`, `http_client`
//! - 1 state: `config`, `store`
//! - 2 services: `outbox`, `delivery`, `access`, `sandbox`, `usage`, `retention`, `systemd`
//! - 3 agent: `agent`
//! - 4 turn: `turn`
//! - 5 router: `router`
//! - 6 ingress: `ingress`, `recovery`
//! - 7 edges: `http`, `cron`, `webhooks`, `platforms`
//! - 8 process: `daemon`, `cli`
//!
//! The modules:
//! - `access`: who may talk to the agent (allowlists, DM pairing, admins).
//! - `agent`: the agent runtime: providers, tools, skills, media, the loop.
//! - `cli`: the command line (`hermesd run | check | chat | send | …`).
//! - `clock`: wall-clock helpers.
//! - `config`: the TOML schema, loading with located problems, validation, secrets.
//! - `cron`: the scheduler tick that runs due jobs as turns.
//! - `daemon`: wiring, the home's lease (standby) and the shutdown sequence.
//! - `delivery`: delivery targets (`origin`, `local`, a home channel, a chat) and their routing.
//! - `failpoint`: test-only failpoints on the durable path.
//! - `fuzzing`: the fuzz targets' checks (fuzz and test builds only).
//! - `http`: the one HTTP server: health, metrics, the OpenAI-compatible API, `/admin/*`, webhooks.
//! - `http_client`: how outbound HTTP clients for the providers are built.
//! - `ingress`: `HostIngress`, where every platform's events are admitted, stored and deduplicated.
//! - `logging`: log lines to stderr, secrets masked, and the filter a reload changes.
//! - `metrics`: metric names and the Prometheus registry.
//! - `net_guard`: which addresses a fetch on the model's behalf may reach.
//! - `outbox`: the durable outbox, per-chat pacers and streamed previews.
//! - `platforms`: in-process platforms (the API, the terminal) and the adapters' builders.
//! - `recovery`: what a start does with what a crash left.
//! - `redact`: the daemon's one redaction of secrets.
//! - `retention`: the `[retention]` pruning task.
//! - `router`: session actors, mailboxes, batching and the control lane of chat commands.
//! - `sandbox`: the tools' sandbox (Landlock, namespaces, the egress proxy, workdir handles).
//! - `store`: the `Store` boundary and its SQLite backend.
//! - `systemd`: READY, WATCHDOG and STOPPING.
//! - `turn`: one agent turn, gateway side: session, heartbeats, approvals, the reply.
//! - `usage`: tokens, cost and daily caps.
//! - `vocab`: the words every floor speaks (messages, origins, targets, schedules, the scanner).
//! - `webhooks`: signed webhook routes, their signatures and prompt templates.

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
pub mod logging;
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
