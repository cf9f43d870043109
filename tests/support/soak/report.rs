//! The soak's printed report: the plan, figures per quarter, every quiet point, the answers,
//! the pass/fail table, what went wrong, and where the CSV is.

use std::fmt::Write as _;
use std::process::ExitStatus;
use std::time::Duration;

use super::Plan;
use super::sample::{Phase, Sample};
use super::verdict::{Answers, Check, quantile};

/// Everything the report shows.
pub struct Inputs<'a> {
    /// The run's shape.
    pub plan: &'a Plan,
    /// Every sample.
    pub samples: &'a [Sample],
    /// The answer counts.
    pub answers: &'a Answers,
    /// The criteria.
    pub checks: &'a [Check],
    /// Failures and unmatched sends the driver noted.
    pub notes: &'a [String],
    /// ERROR lines of the daemon's log.
    pub errors: &'a [String],
    /// How long SIGTERM took.
    pub stop_took: Duration,
    /// The exit status (`None`: killed after the timeout).
    pub status: Option<ExitStatus>,
    /// The log's end when the daemon died during the run.
    pub log_tail: &'a str,
}

/// A row of figures: its label and how a sample gives its value.
type Row<'a> = (&'a str, &'a dyn Fn(&Sample) -> Option<f64>);

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// The report as Markdown-ish text.
pub fn render(i: &Inputs<'_>) -> String {
    let p = i.plan;
    let r = &p.rates;
    let mut out = String::new();
    let cycles: Vec<&Sample> = i.samples.iter().filter(|s| s.phase != Phase::Drain).collect();
    let end = cycles.last().map_or(0.0, |s| s.t);
    let _ = writeln!(
        out,
        "\n## hermesd soak: {:.0} s in {} cycles of {} s (quiet {} s, fakes down {} s at +{} s), samples every {} s\n",
        end,
        cycles.iter().filter(|s| s.phase == Phase::QuietEnd).count(),
        p.cycle.as_secs(),
        p.quiet.as_secs(),
        p.outage.as_secs(),
        p.outage_at.as_secs(),
        p.sample_every.as_secs()
    );
    let _ = writeln!(
        out,
        "Load while on: API {}/s over {} live sessions (a new one every {:?}; every {}th streamed), Telegram {}/s over {} \
         live DMs (a new chat every {:?}), webhooks {}/s (every 10th id repeated), {} cron jobs every minute; model latency {:?}.\n",
        r.api_per_s,
        r.api_population,
        r.api_rotate,
        r.api_stream_every,
        r.tg_per_s,
        r.tg_population,
        r.tg_rotate,
        r.webhook_per_s,
        p.cron_jobs,
        p.model_latency
    );
    figures(&mut out, &cycles, end, i.answers);
    let _ = writeln!(out, "\nQuiet points (the first is the baseline):\n");
    let _ = writeln!(out, "| t s | RSS MB | fds | threads | tasks | actors | pacers | DB MB | WAL MB |");
    let _ = writeln!(out, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let opt = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.0}"));
    for s in cycles.iter().filter(|s| s.phase == Phase::QuietEnd) {
        let _ = writeln!(
            out,
            "| {:.0} | {:.1} | {} | {} | {} | {} | {} | {:.1} | {:.1} |",
            s.t,
            s.rss_mb,
            s.fds,
            s.threads,
            opt(s.tasks),
            opt(s.actors),
            opt(s.pacers),
            mb(s.db_bytes),
            mb(s.wal_bytes)
        );
    }
    let _ = writeln!(out, "\n| criterion | result | figures |\n|---|---|---|");
    for c in i.checks {
        let _ = writeln!(out, "| {} | {} | {} |", c.name, if c.pass { "PASS" } else { "FAIL" }, c.detail);
    }
    if !i.notes.is_empty() {
        let _ = writeln!(out, "\nNoted during the run (first {}):", i.notes.len());
        for note in i.notes {
            let _ = writeln!(out, "- {note}");
        }
    }
    if !i.errors.is_empty() {
        let _ = writeln!(out, "\nERROR lines of the daemon's log ({}; first 10):", i.errors.len());
        for line in i.errors.iter().take(10) {
            let _ = writeln!(out, "  {line}");
        }
    }
    if !i.log_tail.is_empty() {
        let _ = writeln!(out, "\nThe daemon died; the end of its log:\n{}", i.log_tail);
    }
    let status = i.status.map_or_else(|| "killed after the timeout".to_owned(), |s| s.to_string());
    let _ = writeln!(out, "\nShutdown: SIGTERM to exit {:.1} s ({status}).", i.stop_took.as_secs_f64());
    let _ = writeln!(out, "CSV ({} rows): {}", i.samples.len(), p.csv.display());
    if !super::verdict::judges_store_flat(end, &p.limits) {
        let _ = writeln!(
            out,
            "The store's flatness after retention is judged only in runs of {:.0} min or more (the shortest \
             retention age is 1 h); shorter runs judge its growth per answer.",
            (p.limits.retention_settled_s + 1800.0) / 60.0
        );
    }
    let pass = i.checks.iter().all(|c| c.pass);
    let _ = writeln!(out, "\nsoak verdict: {}", if pass { "PASS" } else { "FAIL" });
    out
}

/// Peaks and rates per quarter (the first quarter is the warm-up).
fn figures(out: &mut String, cycles: &[&Sample], end: f64, answers: &Answers) {
    let quarter = |q: f64| -> Vec<&Sample> {
        cycles.iter().copied().filter(|s| s.t >= q * end / 4.0 && s.t < (q + 1.0) * end / 4.0).collect()
    };
    let peak = |samples: &[&Sample], f: &dyn Fn(&Sample) -> Option<f64>| -> String {
        samples.iter().filter_map(|s| f(s)).reduce(f64::max).map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1}"))
    };
    let rate = |samples: &[&Sample]| -> String {
        match (samples.first(), samples.last()) {
            (Some(a), Some(b)) if b.t > a.t => format!("{:.1}", (b.turns - a.turns) as f64 / (b.t - a.t)),
            _ => "n/a".to_owned(),
        }
    };
    let latency = |q: f64| -> String {
        let mut v: Vec<f64> = answers
            .api_latency
            .iter()
            .filter(|(t, _, outage)| !outage && *t >= q * end / 4.0 && *t < (q + 1.0) * end / 4.0)
            .map(|l| l.1 * 1e3)
            .collect();
        match (quantile(&mut v, 0.5), quantile(&mut v, 0.99)) {
            (Some(p50), Some(p99)) => format!("{p50:.0} / {p99:.0}"),
            _ => "n/a".to_owned(),
        }
    };
    let _ = writeln!(out, "| per quarter | 1 (warm-up) | 2 | 3 | 4 |\n|---|---:|---:|---:|---:|");
    let rows: [Row<'_>; 9] = [
        ("RSS peak MB", &|s| Some(s.rss_mb)),
        ("open fds peak", &|s| Some(s.fds)),
        ("threads peak", &|s| Some(s.threads)),
        ("tokio tasks peak", &|s| s.tasks),
        ("actors peak", &|s| s.actors),
        ("pacers peak", &|s| s.pacers),
        ("queue depth peak", &|s| s.queue),
        ("DB MB at the end", &|s| Some(mb(s.db_bytes))),
        ("WAL MB peak", &|s| Some(mb(s.wal_bytes))),
    ];
    let quarters: Vec<Vec<&Sample>> = (0..4).map(|q| quarter(f64::from(q))).collect();
    for (label, f) in rows {
        let cells: Vec<String> = if label.ends_with("at the end") {
            quarters
                .iter()
                .map(|q| q.last().map_or_else(|| "n/a".to_owned(), |s| format!("{:.1}", mb(s.db_bytes))))
                .collect()
        } else {
            quarters.iter().map(|q| peak(q, f)).collect()
        };
        let _ = writeln!(out, "| {label} | {} |", cells.join(" | "));
    }
    let rates: Vec<String> = quarters.iter().map(|q| rate(q)).collect();
    let _ = writeln!(out, "| answers/s | {} |", rates.join(" | "));
    let latencies: Vec<String> = (0..4).map(|q| latency(f64::from(q))).collect();
    let _ = writeln!(out, "| API p50 / p99 ms (clear of outages) | {} |", latencies.join(" | "));
    let mut hit: Vec<f64> = answers.api_latency.iter().filter(|l| l.2).map(|l| l.1).collect();
    if let (Some(p50), Some(max)) = (quantile(&mut hit, 0.5), quantile(&mut hit, 1.0)) {
        let _ = writeln!(
            out,
            "\nAPI answers overlapping an outage: {} (p50 {p50:.1} s, slowest {max:.1} s: the turn waited out the model's absence).",
            hit.len()
        );
    }
    let total = cycles.last().map_or(0, |s| s.turns);
    let _ = writeln!(
        out,
        "\nAnswers in all: {total} over {end:.0} s ({:.1}/s, quiet windows included).",
        total as f64 / end.max(1.0)
    );
}
