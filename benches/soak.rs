//! The soak bench: the release `hermesd` binary under an hour of mixed load — API chat
//! completions over a rotating population of server-side sessions (some streamed), Telegram
//! DMs through the fake Bot API over a rotating population of chats, cron jobs every minute,
//! signed webhooks (repeats included) — in 3-minute cycles of load and quiet, with the fake
//! model and the fake Bot API going away for 10 s in every cycle. Every 10 s it samples RSS,
//! open fds and threads (`/proc`), the `/metrics` gauges (tokio tasks, actors, pacers, queue
//! depth, turns running) and `state.db` / WAL size; it prints per-quarter figures, the quiet
//! points and a PASS/FAIL table of flat-line criteria, writes one CSV row per sample, and exits
//! non-zero on FAIL.
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target cargo bench --bench soak
//! HERMESD_SOAK_SECS=600 HERMESD_SOAK_CSV=/tmp/soak.csv cargo bench --bench soak
//! ```
//!
//! `HERMESD_SOAK_SECS` (default 3600) is rounded to whole 3-minute cycles; the CSV goes to
//! `$HERMESD_SOAK_CSV` or `target/soak.csv`. The same driver runs for 3 minutes in CI as
//! `tests/soak.rs`. Linux only (it reads `/proc`); all traffic stays on 127.0.0.1; arguments
//! cargo passes are ignored.

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_telegram/mod.rs"]
mod fake_telegram;
#[path = "support/profile.rs"]
mod profile;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/soak/mod.rs"]
mod soak;

use std::process::ExitCode;

fn main() -> ExitCode {
    let plan = soak::Plan::hour();
    println!("hermesd soak: binary built with the `{}` profile", profile::of(env!("CARGO_BIN_EXE_hermesd")));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build the soak runtime");
    let outcome = runtime.block_on(soak::run(&plan));
    println!("{}", outcome.report);
    if outcome.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
