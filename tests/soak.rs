//! The soak's CI form: the debug `hermesd` binary for 180 s of mixed load (API sessions,
//! Telegram DMs through the fake Bot API, cron, signed webhooks, both fakes going away once a
//! minute), sampled every 5 s and judged by the same flat-line criteria as the hour-long
//! `benches/soak.rs` (the driver is `tests/support/soak/`). The criteria's own tests (each
//! fails on a series that breaks it) live in `tests/support/soak/verdict_tests.rs` and run here.

#[allow(dead_code, unreachable_pub)]
#[path = "support/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code, unreachable_pub)]
#[path = "support/fake_telegram/mod.rs"]
mod fake_telegram;
#[allow(dead_code, unreachable_pub)]
#[path = "support/soak/mod.rs"]
mod soak;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_minutes_of_mixed_load_stay_flat() {
    let mut plan = soak::Plan::ci();
    if std::env::var_os("HERMESD_SOAK_CSV").is_none() {
        plan.csv = std::env::temp_dir().join(format!("hermesd-soak-ci-{}.csv", std::process::id()));
    }
    let outcome = soak::run(&plan).await;
    println!("{}", outcome.report);
    assert!(outcome.samples.len() >= 30, "too few samples: {}", outcome.samples.len());
    assert!(outcome.passed(), "the soak failed:\n{}", outcome.report);
}
