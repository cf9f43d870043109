//! Failpoints: named places on the durable path (accept → turn → reply → outbox → receipt) and
//! at the store boundary where a test can make the real binary die, fail or stall.
//!
//! They exist only in builds with the `failpoints` feature, which the test build turns on
//! through hermesd's dev-dependency on itself; without it `failpoint!` expands to nothing and
//! `failpoint_error!` to `false`, so a release binary carries neither the code nor the names.
//!
//! With the feature, `HERMESD_FAILPOINTS` arms them once at start:
//! `name=action[@N][*M]` separated by `;`, where the action is `abort` (`std::process::abort`,
//! like `kill -9`: no drain, no flush), `error` (the place fails as it would on a real fault),
//! `sleep(MS)` (the thread stalls), `panic`, or `value(TEXT)` (a setting a hook reads, such as
//! `store.max_page_count=value(64)`); `@N` fires first at the N-th hit (default 1), `*M` fires on
//! M hits (default: every hit from N on). Loopback `POST /admin/failpoints` re-arms them at run
//! time in such builds.
//!
//! `hermesd --version` says `(failpoints)` when they are compiled in. The durable path's places, in
//! order: `ingress.accepted` (event committed, platform not acknowledged), `router.batched`,
//! `turn.start` (dispatched, turn not begun), `turn.begun` (event running, user message stored),
//! `turn.answered` (model replied, nothing stored), `turn.stored` (`finish_turn` committed the
//! reply, the event's end and its outbox rows in one transaction — there is no step between them),
//! `outbox.send` (row taken, before the platform call), `outbox.sent` (the platform took it,
//! receipt not committed), `outbox.receipt` (after the receipt). At the store, `store.write` fails
//! a write attempt with an I/O error and `store.max_page_count=value(N)` caps the writer's pages
//! (`SQLITE_FULL`); the sandbox reads `sandbox.namespaces`, `sandbox.landlock_abi` and
//! `sandbox.proxy_test_port`. `tests/crash_points.rs` aborts the real binary at each durable place,
//! `tests/store_faults.rs` injects the store faults; both judge with `tests/support/checker.rs`.
//! `failpoint/armed.rs` holds the armed table; `http/failpoints.rs` the route.

#[cfg(feature = "failpoints")]
mod armed;
#[cfg(feature = "failpoints")]
pub use armed::*;

/// A failpoint on the durable path: may abort, stall or panic the process here (test builds
/// only; nothing at all otherwise).
#[macro_export]
macro_rules! failpoint {
    ($name:literal) => {
        $crate::failpoint::fire_point($name)
    };
}

/// A failpoint that can also make its place fail: true when the armed action is `error` (test
/// builds only; always false otherwise).
#[macro_export]
macro_rules! failpoint_error {
    ($name:literal) => {
        $crate::failpoint::fire($name)
    };
}

/// Without the feature a failpoint is an empty inline function: nothing is left of it.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn fire_point(_name: &str) {}

/// Without the feature no failpoint ever fires.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub fn fire(_name: &str) -> bool {
    false
}

/// Whether this build has failpoints compiled in.
pub const ENABLED: bool = cfg!(feature = "failpoints");
