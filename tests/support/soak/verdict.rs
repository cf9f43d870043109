//! The soak's flat-line criteria, judged over the samples after a warm-up, and the answer
//! counts: pure functions of the data, so each criterion is shown to fail on a series that
//! breaks it (the tests below).
//!
//! Quarters are by time over the cycles (the drain after them excluded); the first quarter is
//! the warm-up. "Quiet points" are the samples at the end of each cycle's quiet window; the
//! first is the baseline, the later ones must come back to it.

use super::sample::{Phase, Sample};

/// The margins of the criteria.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Last quarter's peak RSS may be this times the second quarter's…
    pub rss_ratio: f64,
    /// …plus this many MB.
    pub rss_slack_mb: f64,
    /// Open fds at a quiet point above the baseline's.
    pub fd_slack: f64,
    /// Threads at a quiet point above the baseline's.
    pub thread_slack: f64,
    /// Tokio tasks at a quiet point above the baseline's.
    pub task_slack: f64,
    /// Actors above the live keys (plus the cron jobs) at any sample after the warm-up.
    pub actor_slack: f64,
    /// Pacers the outbox keeps before pruning (`PRUNE_ABOVE` in `src/outbox/pacer.rs`).
    pub pacer_floor: f64,
    /// Pacers above `max(pacer_floor, 2 × chats active in the last 4 min)`.
    pub pacer_slack: f64,
    /// Last quarter's peak WAL may be this times the second quarter's…
    pub wal_ratio: f64,
    /// …plus this many MB.
    pub wal_slack_mb: f64,
    /// Last quarter's store growth per answer may be this times the second quarter's…
    pub db_ratio: f64,
    /// …plus this many bytes per answer.
    pub db_slack_per_turn: f64,
    /// Last quarter's API p99 (requests clear of outages) may be this times the second's…
    pub latency_ratio: f64,
    /// …plus this many seconds.
    pub latency_slack_s: f64,
    /// From this many seconds on retention prunes (its shortest age is 1 h, every minute) and
    /// idle sessions are gone (`sessions prune` every cycle): a run lasting 30 min longer
    /// also judges the store flat from there on.
    pub retention_settled_s: f64,
    /// The store's last-quarter peak may be this times its size when retention settled…
    pub store_flat_ratio: f64,
    /// …plus this many MB.
    pub store_flat_slack_mb: f64,
    /// ERROR lines tolerated in the daemon's log.
    pub max_error_lines: usize,
    /// Cron jobs running (each may hold an actor).
    pub cron_jobs: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            rss_ratio: 1.15,
            rss_slack_mb: 6.0,
            fd_slack: 12.0,
            thread_slack: 4.0,
            task_slack: 16.0,
            actor_slack: 8.0,
            pacer_floor: 4096.0,
            pacer_slack: 64.0,
            wal_ratio: 1.5,
            wal_slack_mb: 8.0,
            db_ratio: 2.0,
            db_slack_per_turn: 2048.0,
            latency_ratio: 2.0,
            latency_slack_s: 0.25,
            retention_settled_s: 3900.0,
            store_flat_ratio: 1.1,
            store_flat_slack_mb: 4.0,
            max_error_lines: 0,
            cron_jobs: 0,
        }
    }
}

/// What was sent and answered, at the end of the run.
#[derive(Debug, Clone, Default)]
pub struct Answers {
    /// API requests sent.
    pub api_sent: u64,
    /// Answered with their echo.
    pub api_ok: u64,
    /// Answered 200 with other text.
    pub api_wrong: u64,
    /// Failed (status, transport, timeout).
    pub api_failed: u64,
    /// (sent at s, seconds, overlapped an outage) of each echoed API answer.
    pub api_latency: Vec<(f64, f64, bool)>,
    /// Telegram messages sent.
    pub tg_sent: u64,
    /// Without a reply.
    pub tg_lost: u64,
    /// Answered more than once.
    pub tg_duplicated: u64,
    /// Webhook posts accepted (202).
    pub wh_accepted: u64,
    /// Webhook posts refused.
    pub wh_refused: u64,
    /// Accepted without a reply delivered.
    pub wh_lost: u64,
    /// Replied to more than once.
    pub wh_duplicated: u64,
    /// Delivery ids sent twice.
    pub wh_repeats: u64,
    /// Repeated delivery ids that were not answered as duplicates.
    pub wh_repeats_run: u64,
    /// Deliveries per cron job, with the (least, most) its schedule allows.
    pub cron: Vec<(u32, u32, u32)>,
    /// ERROR lines of the daemon's log.
    pub error_lines: usize,
    /// Whether the daemon lived through the run and exited 0 on SIGTERM.
    pub clean_exit: bool,
}

/// One criterion's result.
#[derive(Debug, Clone)]
pub struct Check {
    /// What is judged.
    pub name: &'static str,
    /// PASS or FAIL.
    pub pass: bool,
    /// The figures behind it.
    pub detail: String,
}

fn check(name: &'static str, pass: bool, detail: String) -> Check {
    Check { name, pass, detail }
}

/// Every criterion over `samples` and `answers`.
pub fn judge(samples: &[Sample], answers: &Answers, limits: &Limits) -> Vec<Check> {
    let cycles: Vec<&Sample> = samples.iter().filter(|s| s.phase != Phase::Drain).collect();
    let end = cycles.last().map_or(0.0, |s| s.t);
    let quarter = |q: f64| -> Vec<&Sample> {
        cycles.iter().copied().filter(|s| s.t >= q * end / 4.0 && s.t < (q + 1.0) * end / 4.0).collect()
    };
    let (second, last) = (quarter(1.0), quarter(3.0));
    let judged: Vec<&Sample> = cycles.iter().copied().filter(|s| s.t >= end / 4.0).collect();
    let quiet: Vec<&Sample> = cycles.iter().copied().filter(|s| s.phase == Phase::QuietEnd).collect();
    let mut checks = vec![
        growth(
            "RSS flat (last vs second quarter peak)",
            &second,
            &last,
            |s| Some(s.rss_mb),
            limits.rss_ratio,
            limits.rss_slack_mb,
            "MB",
        ),
        back_to_baseline("open fds back to baseline at quiet points", &quiet, |s| Some(s.fds), limits.fd_slack),
        back_to_baseline("threads back to baseline at quiet points", &quiet, |s| Some(s.threads), limits.thread_slack),
        back_to_baseline("tokio tasks back to baseline at quiet points", &quiet, |s| s.tasks, limits.task_slack),
        actors(&judged, &quiet, limits),
        pacers(&judged, limits),
        growth(
            "WAL bounded (last vs second quarter peak)",
            &second,
            &last,
            |s| Some(s.wal_bytes as f64 / 1e6),
            limits.wal_ratio,
            limits.wal_slack_mb,
            "MB",
        ),
        db_per_turn(&second, &last, limits),
        latency(&answers.api_latency, end, limits),
        answered(answers),
        check(
            "daemon log has no ERROR lines above the limit",
            answers.error_lines <= limits.max_error_lines,
            format!("{} ERROR lines (limit {})", answers.error_lines, limits.max_error_lines),
        ),
        check(
            "daemon alive throughout and exits 0 on SIGTERM",
            answers.clean_exit,
            format!("clean exit: {}", answers.clean_exit),
        ),
    ];
    if judges_store_flat(end, limits) {
        checks.push(store_flat(&cycles, &last, limits));
    }
    checks
}

/// Whether a run is long enough to judge the store flat after retention (see `Limits`).
pub fn judges_store_flat(end: f64, limits: &Limits) -> bool {
    end >= limits.retention_settled_s + 1800.0
}

fn store_flat(cycles: &[&Sample], last: &[&Sample], limits: &Limits) -> Check {
    let name = "store flat once retention prunes";
    let store = |s: &Sample| (s.db_bytes + s.wal_bytes) as f64 / 1e6;
    let settled = cycles.iter().find(|s| s.t >= limits.retention_settled_s).map(|s| store(s));
    match (settled, last.iter().map(|s| store(s)).reduce(f64::max)) {
        (Some(at), Some(peak)) => {
            let limit = at * limits.store_flat_ratio + limits.store_flat_slack_mb;
            let detail =
                format!("{at:.1} MB when retention settled, last quarter peak {peak:.1} MB, limit {limit:.1} MB");
            check(name, peak <= limit, detail)
        }
        _ => check(name, false, "no samples after retention settled".into()),
    }
}

fn peak(samples: &[&Sample], value: impl Fn(&Sample) -> Option<f64>) -> Option<f64> {
    samples
        .iter()
        .map(|s| value(s))
        .collect::<Option<Vec<f64>>>()?
        .into_iter()
        .reduce(f64::max)
        .filter(|v| v.is_finite())
}

fn growth(
    name: &'static str,
    second: &[&Sample],
    last: &[&Sample],
    value: impl Fn(&Sample) -> Option<f64> + Copy,
    ratio: f64,
    slack: f64,
    unit: &str,
) -> Check {
    match (peak(second, value), peak(last, value)) {
        (Some(before), Some(after)) => {
            let limit = before * ratio + slack;
            check(
                name,
                after <= limit,
                format!("second {before:.1} {unit}, last {after:.1} {unit}, limit {limit:.1} {unit}"),
            )
        }
        _ => check(name, false, "a quarter has no samples or a value is missing".into()),
    }
}

fn back_to_baseline(
    name: &'static str,
    quiet: &[&Sample],
    value: impl Fn(&Sample) -> Option<f64>,
    slack: f64,
) -> Check {
    let values: Option<Vec<f64>> = quiet.iter().map(|s| value(s).filter(|v| v.is_finite())).collect();
    match values.as_deref() {
        Some([baseline, rest @ ..]) if !rest.is_empty() => {
            let worst = rest.iter().copied().fold(f64::MIN, f64::max);
            let limit = baseline + slack;
            let all: Vec<String> = rest.iter().map(|v| format!("{v:.0}")).collect();
            check(
                name,
                worst <= limit,
                format!("baseline {baseline:.0}, later quiet points [{}], limit {limit:.0}", all.join(" ")),
            )
        }
        Some(_) => check(name, false, format!("{} quiet points; at least 2 are needed", quiet.len())),
        None => check(name, false, "a quiet point lacks the value".into()),
    }
}

fn actors(judged: &[&Sample], quiet: &[&Sample], limits: &Limits) -> Check {
    let name = "actors bounded by live sessions, none left at quiet points";
    let mut worst: Option<String> = None;
    for s in judged {
        let Some(actors) = s.actors else {
            return check(name, false, format!("no hermesd_active_sessions at t={:.0}s", s.t));
        };
        let bound = s.live_keys as f64 + limits.cron_jobs as f64 + limits.actor_slack;
        if actors > bound {
            worst
                .get_or_insert_with(|| format!("t={:.0}s: {actors} actors > {bound} (live keys {})", s.t, s.live_keys));
        }
    }
    for s in quiet.iter().skip(1) {
        // A missing gauge is NaN, which is never settled.
        let busy = s.actors.unwrap_or(f64::NAN) + s.queue.unwrap_or(f64::NAN) + s.running.unwrap_or(f64::NAN);
        let settled = busy <= limits.cron_jobs as f64;
        if !settled {
            worst.get_or_insert_with(|| {
                format!(
                    "quiet point t={:.0}s: actors {:?}, queued {:?}, running {:?}",
                    s.t, s.actors, s.queue, s.running
                )
            });
        }
    }
    let most = judged.iter().filter_map(|s| s.actors).fold(0.0, f64::max);
    let keys = judged.iter().map(|s| s.live_keys).max().unwrap_or(0);
    match worst {
        Some(detail) => check(name, false, detail),
        None => check(name, true, format!("peak {most} actors, peak {keys} live keys")),
    }
}

fn pacers(judged: &[&Sample], limits: &Limits) -> Check {
    let name = "pacers bounded by chats active in the last 4 min";
    let mut most = 0.0f64;
    for s in judged {
        let Some(pacers) = s.pacers else {
            return check(name, false, format!("no hermesd_pacers at t={:.0}s", s.t));
        };
        let bound = limits.pacer_floor.max(2.0 * s.live_chats as f64) + limits.pacer_slack;
        if pacers > bound {
            return check(
                name,
                false,
                format!("t={:.0}s: {pacers} pacers > {bound} ({} live chats)", s.t, s.live_chats),
            );
        }
        most = most.max(pacers);
    }
    let chats = judged.iter().map(|s| s.live_chats).max().unwrap_or(0);
    check(name, !judged.is_empty(), format!("peak {most} pacers, peak {chats} chats active in the last 4 min"))
}

/// Bytes of `state.db` + WAL per answer across a quarter.
fn per_turn(samples: &[&Sample]) -> Option<f64> {
    let (first, last) = (samples.first()?, samples.last()?);
    let turns = last.turns.checked_sub(first.turns).filter(|&t| t > 0)? as f64;
    let bytes = (last.db_bytes + last.wal_bytes) as f64 - (first.db_bytes + first.wal_bytes) as f64;
    Some(bytes.max(0.0) / turns)
}

fn db_per_turn(second: &[&Sample], last: &[&Sample], limits: &Limits) -> Check {
    let name = "store growth per answer not accelerating";
    match (per_turn(second), per_turn(last)) {
        (Some(before), Some(after)) => {
            let limit = before * limits.db_ratio + limits.db_slack_per_turn;
            check(
                name,
                after <= limit,
                format!("second {before:.0} B/answer, last {after:.0} B/answer, limit {limit:.0}"),
            )
        }
        _ => check(name, false, "no answers in a quarter".into()),
    }
}

/// The `q` quantile of `values` (sorted here).
pub fn quantile(values: &mut [f64], q: f64) -> Option<f64> {
    values.sort_by(f64::total_cmp);
    let last = values.len().checked_sub(1)?;
    Some(values[((last as f64) * q).round() as usize])
}

fn latency(all: &[(f64, f64, bool)], end: f64, limits: &Limits) -> Check {
    let name = "API p99 latency flat (requests clear of outages)";
    let window = |q: f64| -> Vec<f64> {
        all.iter()
            .filter(|(t, _, outage)| !outage && *t >= q * end / 4.0 && *t < (q + 1.0) * end / 4.0)
            .map(|l| l.1)
            .collect()
    };
    match (quantile(&mut window(1.0), 0.99), quantile(&mut window(3.0), 0.99)) {
        (Some(before), Some(after)) => {
            let limit = before * limits.latency_ratio + limits.latency_slack_s;
            check(
                name,
                after <= limit,
                format!("second {:.0} ms, last {:.0} ms, limit {:.0} ms", before * 1e3, after * 1e3, limit * 1e3),
            )
        }
        _ => check(name, false, "no API answers in a quarter".into()),
    }
}

fn answered(a: &Answers) -> Check {
    let name = "every request answered once (API, Telegram, webhooks, cron)";
    let mut problems = Vec::new();
    if a.api_ok != a.api_sent || a.api_wrong + a.api_failed > 0 {
        problems.push(format!(
            "API {} sent, {} echoed, {} wrong, {} failed",
            a.api_sent, a.api_ok, a.api_wrong, a.api_failed
        ));
    }
    if a.tg_lost + a.tg_duplicated > 0 || a.tg_sent == 0 {
        problems.push(format!("Telegram {} sent, {} lost, {} duplicated", a.tg_sent, a.tg_lost, a.tg_duplicated));
    }
    if a.wh_refused + a.wh_lost + a.wh_duplicated + a.wh_repeats_run > 0 || a.wh_accepted == 0 {
        problems.push(format!(
            "webhooks {} accepted, {} refused, {} lost, {} duplicated, {} repeats run",
            a.wh_accepted, a.wh_refused, a.wh_lost, a.wh_duplicated, a.wh_repeats_run
        ));
    }
    for (job, &(got, least, most)) in a.cron.iter().enumerate() {
        if got < least || got > most || most == 0 {
            problems.push(format!("cron job {job}: {got} deliveries, expected {least}..={most}"));
        }
    }
    let summary = format!(
        "API {}/{}, Telegram {} ({} lost, {} dup), webhooks {} ({} lost, {} dup, {} repeats refused), cron {:?}",
        a.api_ok,
        a.api_sent,
        a.tg_sent,
        a.tg_lost,
        a.tg_duplicated,
        a.wh_accepted,
        a.wh_lost,
        a.wh_duplicated,
        a.wh_repeats - a.wh_repeats_run,
        a.cron.iter().map(|c| c.0).collect::<Vec<_>>()
    );
    if problems.is_empty() { check(name, true, summary) } else { check(name, false, problems.join("; ")) }
}

#[cfg(test)]
#[path = "verdict_tests.rs"]
mod tests;
