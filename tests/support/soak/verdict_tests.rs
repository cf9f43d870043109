//! Each criterion fails on a synthetic run that breaks its property, and a healthy run passes
//! them all (so a failure below is the criterion's own).

use super::*;

/// A healthy 4-cycle run sampled every 5 s over 240 s: flat RSS, quiet points at the baseline,
/// actors and pacers within the live population, steady store growth.
fn healthy() -> (Vec<Sample>, Answers, Limits) {
    let mut samples = Vec::new();
    for i in 0..=48u64 {
        let t = i as f64 * 5.0;
        let in_cycle = t % 60.0;
        let phase = match in_cycle {
            x if x == 0.0 && i > 0 => Phase::QuietEnd,
            x if x >= 35.0 => Phase::Quiet,
            x if (10.0..20.0).contains(&x) => Phase::Outage,
            _ => Phase::Load,
        };
        let quiet = matches!(phase, Phase::Quiet | Phase::QuietEnd);
        samples.push(Sample {
            t,
            phase,
            rss_mb: if quiet { 40.0 } else { 44.0 + (i % 3) as f64 },
            fds: if quiet { 30.0 } else { 60.0 },
            threads: 9.0,
            tasks: Some(if quiet { 25.0 } else { 90.0 }),
            actors: Some(match phase {
                Phase::QuietEnd => 0.0,
                Phase::Quiet => 5.0,
                _ => 20.0,
            }),
            pacers: Some(300.0 + i as f64 * 10.0),
            queue: Some(0.0),
            running: Some(if quiet { 0.0 } else { 2.0 }),
            db_bytes: 1_000_000 + i * 40_000,
            wal_bytes: 4_000_000,
            turns: i * 20,
            live_chats: 400,
            live_keys: if quiet { 0 } else { 30 },
        });
    }
    let answers = Answers {
        api_sent: 100,
        api_ok: 100,
        api_latency: (0..240).map(|t| (f64::from(t), 0.02, false)).collect(),
        tg_sent: 50,
        wh_accepted: 10,
        wh_repeats: 1,
        cron: vec![(4, 3, 4)],
        clean_exit: true,
        ..Answers::default()
    };
    (samples, answers, Limits { cron_jobs: 1, ..Limits::default() })
}

/// The names of the failing criteria.
fn failing(samples: &[Sample], answers: &Answers, limits: &Limits) -> Vec<&'static str> {
    judge(samples, answers, limits).into_iter().filter(|c| !c.pass).map(|c| c.name).collect()
}

#[test]
fn a_healthy_run_passes_every_criterion() {
    let (samples, answers, limits) = healthy();
    let checks = judge(&samples, &answers, &limits);
    assert!(checks.iter().all(|c| c.pass), "{checks:#?}");
    assert_eq!(checks.len(), 12);
}

#[test]
fn growing_rss_fails() {
    let (mut samples, answers, limits) = healthy();
    // A leak of 1 MB per sample: the last quarter's peak is ~35 % above the second's.
    for (i, s) in samples.iter_mut().enumerate() {
        s.rss_mb += i as f64;
    }
    assert_eq!(failing(&samples, &answers, &limits), vec!["RSS flat (last vs second quarter peak)"]);
}

#[test]
fn fds_not_coming_back_fail() {
    let (mut samples, answers, limits) = healthy();
    // A connection leaked per cycle's load: the quiet points creep up by 10 per cycle.
    for s in &mut samples {
        s.fds += (s.t / 60.0).floor() * 10.0;
    }
    assert_eq!(failing(&samples, &answers, &limits), vec!["open fds back to baseline at quiet points"]);
}

#[test]
fn leaked_tasks_and_threads_fail() {
    let (mut samples, answers, limits) = healthy();
    for s in &mut samples {
        s.tasks = s.tasks.map(|n| n + s.t);
        s.threads += (s.t / 60.0).floor() * 3.0;
    }
    assert_eq!(
        failing(&samples, &answers, &limits),
        vec!["threads back to baseline at quiet points", "tokio tasks back to baseline at quiet points"]
    );
}

#[test]
fn a_missing_task_gauge_fails_rather_than_passes() {
    let (mut samples, answers, limits) = healthy();
    for s in &mut samples {
        s.tasks = None;
    }
    assert_eq!(failing(&samples, &answers, &limits), vec!["tokio tasks back to baseline at quiet points"]);
}

#[test]
fn actors_outliving_their_sessions_fail() {
    let (mut samples, answers, limits) = healthy();
    // Actors that never exit: one per key ever seen, growing with the run.
    for s in &mut samples {
        s.actors = Some(s.t);
    }
    assert_eq!(
        failing(&samples, &answers, &limits),
        vec!["actors bounded by live sessions, none left at quiet points"]
    );

    // Only the quiet points keep one more actor than the cron jobs explain.
    let (mut samples, answers, limits) = healthy();
    for s in samples.iter_mut().filter(|s| s.phase == Phase::QuietEnd) {
        s.actors = Some(2.0);
    }
    assert_eq!(
        failing(&samples, &answers, &limits),
        vec!["actors bounded by live sessions, none left at quiet points"]
    );
}

#[test]
fn pacers_growing_with_every_chat_ever_seen_fail() {
    let (mut samples, answers, limits) = healthy();
    for s in &mut samples {
        s.pacers = Some(s.t * 40.0);
    }
    assert_eq!(failing(&samples, &answers, &limits), vec!["pacers bounded by chats active in the last 4 min"]);
}

#[test]
fn a_growing_wal_and_accelerating_store_fail() {
    let (mut samples, answers, limits) = healthy();
    for s in &mut samples {
        s.wal_bytes += (s.t * s.t * 1_000.0) as u64;
    }
    let failed = failing(&samples, &answers, &limits);
    assert!(failed.contains(&"WAL bounded (last vs second quarter peak)"), "{failed:?}");
    assert!(failed.contains(&"store growth per answer not accelerating"), "{failed:?}");
}

#[test]
fn slower_answers_late_in_the_run_fail() {
    let (samples, mut answers, limits) = healthy();
    for l in &mut answers.api_latency {
        l.1 *= 1.0 + (l.0 / 60.0).powi(3);
    }
    assert_eq!(failing(&samples, &answers, &limits), vec!["API p99 latency flat (requests clear of outages)"]);
    // Slow answers during an outage do not count.
    let (samples, mut answers, limits) = healthy();
    for l in answers.api_latency.iter_mut().filter(|l| l.0 > 180.0) {
        *l = (l.0, 15.0, true);
    }
    assert!(failing(&samples, &answers, &limits).is_empty());
}

#[test]
fn a_lost_or_duplicated_answer_fails() {
    let name = "every request answered once (API, Telegram, webhooks, cron)";
    let (samples, base, limits) = healthy();
    let broken = [
        Answers { tg_duplicated: 1, ..base.clone() },
        Answers { tg_lost: 1, ..base.clone() },
        Answers { api_ok: 99, api_failed: 1, ..base.clone() },
        Answers { api_ok: 99, api_wrong: 1, ..base.clone() },
        Answers { wh_duplicated: 1, ..base.clone() },
        Answers { wh_lost: 1, ..base.clone() },
        Answers { wh_repeats_run: 1, ..base.clone() },
        Answers { cron: vec![(8, 3, 4)], ..base.clone() },
        Answers { cron: vec![(1, 3, 4)], ..base.clone() },
    ];
    for answers in broken {
        assert_eq!(failing(&samples, &answers, &limits), vec![name], "{answers:?}");
    }
}

#[test]
fn errors_in_the_log_and_an_unclean_exit_fail() {
    let (samples, answers, limits) = healthy();
    let logged = Answers { error_lines: 1, ..answers.clone() };
    assert_eq!(failing(&samples, &logged, &limits), vec!["daemon log has no ERROR lines above the limit"]);
    let died = Answers { clean_exit: false, ..answers };
    assert_eq!(failing(&samples, &died, &limits), vec!["daemon alive throughout and exits 0 on SIGTERM"]);
}

#[test]
fn a_run_too_short_for_two_quiet_points_fails() {
    let (samples, answers, limits) = healthy();
    let short: Vec<Sample> = samples.into_iter().filter(|s| s.t < 100.0).collect();
    let failed = failing(&short, &answers, &limits);
    assert!(failed.contains(&"open fds back to baseline at quiet points"), "{failed:?}");
}

#[test]
fn a_store_still_growing_after_retention_fails_a_long_run() {
    // Two hours sampled every minute: growth stops at 65 min when retention prunes as fast as
    // traffic writes; quiet points every 3 minutes.
    let long = |growing_after: bool| -> Vec<Sample> {
        let (samples, _, _) = healthy();
        let template = samples[1].clone();
        (0..=120u64)
            .map(|m| {
                let grown = if growing_after { m } else { m.min(65) };
                Sample {
                    t: m as f64 * 60.0,
                    phase: if m % 3 == 0 && m > 0 { Phase::QuietEnd } else { Phase::Load },
                    actors: Some(if m % 3 == 0 { 0.0 } else { 20.0 }),
                    running: Some(if m % 3 == 0 { 0.0 } else { 2.0 }),
                    db_bytes: 1_000_000 + grown * 500_000,
                    turns: m * 1_000,
                    ..template.clone()
                }
            })
            .collect()
    };
    let (_, answers, limits) = healthy();
    let answers = Answers { api_latency: (0..7200).map(|t| (f64::from(t), 0.02, false)).collect(), ..answers };
    let checks = judge(&long(false), &answers, &limits);
    assert_eq!(checks.len(), 13, "a two-hour run also judges the store after retention");
    assert!(checks.iter().all(|c| c.pass), "{checks:#?}");
    assert_eq!(failing(&long(true), &answers, &limits), vec!["store flat once retention prunes"]);
}
