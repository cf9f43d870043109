//! The printed report: the workload table, a summary, the targets (each naming the row it is
//! judged on), the compression section and any problems.

use std::process::ExitStatus;
use std::time::Duration;

use crate::Settings;
use crate::compress::CompressionReport;
use crate::load::{Metrics, median};

/// What a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    /// Each session sends its next message when the reply is in (saturation).
    Closed(usize),
    /// Each session sends one message per interval (open loop, well under capacity).
    Paced(usize, Duration),
    /// Closed loop, every turn a tool call then text: two model calls (own daemon).
    Tool(usize),
    /// Closed loop of realistic traffic: a key, messages of a few hundred bytes, paragraph
    /// answers with usage, each session's history growing to 40 turns (own daemon).
    Realistic(usize),
}

impl Workload {
    /// Messages each session sends in this workload: the one-session row sends ten times the
    /// others', so its p99 is a percentile rather than the maximum of a handful.
    pub(crate) fn messages(self, per_session: usize) -> usize {
        match self {
            Workload::Closed(1) => per_session * 10,
            Workload::Realistic(_) => per_session * 2,
            _ => per_session,
        }
    }

    fn label(self, messages: usize) -> String {
        let messages = self.messages(messages);
        match self {
            Workload::Closed(1) => format!("1 session × {messages}, closed loop"),
            Workload::Closed(n) => format!("{n} sessions × {messages}, closed loop"),
            Workload::Paced(n, every) => {
                format!("{n} sessions × {messages}, paced (1 msg / {} ms each)", every.as_millis())
            }
            Workload::Tool(n) => format!("{n} sessions × {messages}, tool turn, closed loop"),
            Workload::Realistic(1) => format!("1 session × {messages}, realistic, closed loop"),
            Workload::Realistic(n) => format!("{n} sessions × {messages}, realistic, closed loop"),
        }
    }
}

/// One row of the results table.
pub(crate) struct Row {
    pub(crate) workload: Workload,
    pub(crate) metrics: Metrics,
}

/// How a daemon ended.
pub(crate) struct Exit {
    pub(crate) name: &'static str,
    pub(crate) status: ExitStatus,
    pub(crate) log: String,
}

/// Everything printed at the end.
pub(crate) struct Report {
    pub(crate) ready_ms: Vec<f64>,
    pub(crate) idle_rss_mb: f64,
    pub(crate) rows: Vec<Row>,
    /// The realistic workloads (a daemon of their own).
    pub(crate) realistic: Vec<Row>,
    /// CPU ms of each thread of the main daemon over its whole life (warm-up and its workloads).
    pub(crate) threads: Vec<(String, f64)>,
    pub(crate) errors: Vec<String>,
    pub(crate) exits: Vec<Exit>,
    pub(crate) compression: CompressionReport,
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "MISS" }
}

impl Report {
    fn row(&self, workload: Workload) -> Option<&Metrics> {
        self.rows.iter().find(|r| r.workload == workload).map(|r| &r.metrics)
    }

    fn find(&self, pick: impl Fn(Workload) -> bool) -> Option<&Row> {
        self.rows.iter().find(|r| pick(r.workload))
    }

    pub(crate) fn print(&self, settings: &Settings) {
        let mode = if settings.quick { "quick (HERMESD_BENCH_QUICK=1)" } else { "full" };
        println!("## hermesd gateway benchmark (instant fake LLM)\n");
        println!(
            "mode: {mode}; {} message(s) per session; median of {} run(s) per workload\n",
            settings.messages, settings.runs
        );
        self.print_table(settings);
        self.print_summary();
        self.print_realistic(settings);
        self.compression.print();
        self.print_targets(settings);
        self.print_problems();
    }

    fn print_table(&self, settings: &Settings) {
        println!(
            "| workload | turns | wall s | turns/s | p50 ms | p99 ms | model ms/turn | CPU ms/turn | CPU ms/model call | bench CPU ms/turn | peak RSS MB | LLM calls/turn | errors |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for Row { workload, metrics: m } in &self.rows {
            println!(
                "| {} | {:.2} | {:.3} | {:.3} | {:.3} | {:.1} | {:.2} | {:.0} |",
                lead(*workload, m, settings),
                m.model_ms_per_turn,
                m.cpu_ms_per_turn,
                m.cpu_ms_per_call,
                m.bench_cpu_ms_per_turn,
                m.peak_rss_mb,
                m.llm_calls_per_turn,
                m.errors
            );
        }
        println!();
    }

    fn print_realistic(&self, settings: &Settings) {
        print_realistic(&self.realistic, settings);
    }

    fn print_summary(&self) {
        let ready: Vec<String> = self.ready_ms.iter().map(|t| format!("{t:.1}")).collect();
        println!(
            "- start-to-ready, median of {}: {:.1} ms (target < 200 ms); all: [{}] ms",
            self.ready_ms.len(),
            median(self.ready_ms.clone()),
            ready.join(", ")
        );
        println!("- idle RSS (ready + 500 ms): {:.1} MB (target < 30 MB)", self.idle_rss_mb);
        if let Some(m) = self.row(Workload::Closed(50)) {
            println!(
                "- store growth (state.db + state.db-wal) over the 50-session workload: {:.0} bytes/turn",
                m.store_bytes_per_turn
            );
        }
        if let Some(Row { metrics: m, .. }) = self.find(|w| matches!(w, Workload::Tool(_))) {
            println!(
                "- tool turn: store growth {:.0} bytes/turn; a turn is user message → model call (todo tool call) → \
                 todo runs (`{{}}` shows the list: it looks up the session's todo JSON file under the daemon home, empty here) → model call (text) → reply",
                m.store_bytes_per_turn
            );
        }
        let busiest: Vec<String> = self.threads.iter().take(6).map(|(name, ms)| format!("{name} {ms:.0} ms")).collect();
        println!(
            "- main daemon CPU by thread over its whole life (all rows but the tool turn), busiest first: {}",
            busiest.join(", ")
        );
        println!(
            "- latency is client-side wall time per request (keep-alive, one shared client); the fake LLM \
             answers a constant body (parsing the request only in tool mode, to find the last role), so it is \
             gateway overhead plus two loopback HTTP hops per model call. Closed-loop rows saturate the gateway \
             (latency ≈ sessions ÷ throughput); the paced row sends each session's messages on a fixed \
             schedule, the sessions spread evenly over the interval, so its latency is per-turn overhead without \
             queueing. The tool-turn row runs on a daemon of its own. CPU ms/turn is the daemon's utime + stime; \
             CPU ms/model call divides it by the calls the fake LLM answered; bench CPU ms/turn is this process \
             (load client and fake LLM) on the same cores. Peak RSS is VmHWM, the daemon's lifetime high-water \
             mark. CPU comes in 1/CLK_TCK ticks (10 ms at 100 Hz), so the 1-session CPU figure is coarse; p99 \
             over fewer than 100 samples is their maximum."
        );
        println!();
    }

    fn print_targets(&self, settings: &Settings) {
        let messages = settings.messages;
        println!("### targets (#16: the figures before it, this run, the target)\n");
        println!("| figure | before | now | target | |");
        println!("|---|---:|---:|---:|---|");
        if let Some(row) = self.find(|w| w == Workload::Closed(50)) {
            let m = &row.metrics;
            let rate = m.turns_per_s;
            println!("| turns/s, 50 sessions | 475–530 | {rate:.0} | ≥ 1000 | {} |", verdict(rate >= 1000.0));
            let cpu = m.cpu_ms_per_turn;
            println!("| CPU ms per turn, 50 sessions | 1.8–2.3 | {cpu:.3} | < 0.6 | {} |", verdict(cpu < 0.6));
        }
        if let Some(row) = self.find(|w| w == Workload::Closed(1)) {
            let m = &row.metrics;
            println!("| p50 ms, 1 session | 2–3.5 | {:.2} | < 1 | {} |", m.p50_ms, verdict(m.p50_ms < 1.0));
            println!("| p99 ms, 1 session | 13 | {:.2} | < 3 | {} |", m.p99_ms, verdict(m.p99_ms < 3.0));
        }
        println!();
        if let Some(row) = self.find(|w| matches!(w, Workload::Paced(10, _))) {
            let (m, label) = (&row.metrics, row.workload.label(messages));
            // DESIGN §12: gateway overhead excludes model time. The daemon measures each model call
            // (the loopback request to the fake model); its mean per turn is taken off.
            let (p50, p99) = (m.overhead_p50_ms, m.overhead_p99_ms);
            println!(
                "- {}: overhead p50 (latency − model time) on \"{label}\": {p50:.2} ms (target < 2 ms; raw latency \
                 p50 {:.2} ms, model {:.2} ms/turn)",
                verdict(p50 < 2.0),
                m.p50_ms,
                m.model_ms_per_turn
            );
            println!(
                "- {}: overhead p99 (latency − model time) on \"{label}\": {p99:.2} ms (target < 20 ms; raw latency \
                 p99 {:.2} ms)",
                verdict(p99 < 20.0),
                m.p99_ms
            );
        }
        if let Some(row) = self.find(|w| w == Workload::Closed(10)) {
            let (m, label) = (&row.metrics, row.workload.label(messages));
            println!(
                "- not judged, saturated: \"{label}\" p50 {:.2} ms, p99 {:.2} ms ({:.0} turns/s; latency ≈ 10 ÷ \
                 throughput = {:.2} ms)",
                m.p50_ms,
                m.p99_ms,
                m.turns_per_s,
                10_000.0 / m.turns_per_s
            );
        }
        for row in self.rows.iter().filter(|r| !matches!(r.workload, Workload::Closed(_))) {
            let m = &row.metrics;
            println!(
                "- not judged: \"{}\" CPU {:.3} ms/turn, {:.3} ms/model call",
                row.workload.label(messages),
                m.cpu_ms_per_turn,
                m.cpu_ms_per_call
            );
        }
        println!("- {}: idle RSS {:.1} MB (target < 30 MB)", verdict(self.idle_rss_mb < 30.0), self.idle_rss_mb);
        let ready = median(self.ready_ms.clone());
        println!("- {}: start-to-ready {ready:.1} ms (target < 200 ms)", verdict(ready < 200.0));
        println!();
    }

    fn print_problems(&self) {
        print_problems(&self.errors, &self.exits);
    }
}

/// Request errors, and how each daemon ended.
pub(crate) fn print_problems(errors: &[String], exits: &[Exit]) {
    for error in errors {
        println!("warning: request error: {error}");
    }
    for Exit { name, status, log } in exits {
        if status.code() == Some(0) {
            println!("{name} daemon exited 0 after SIGTERM");
        } else {
            println!("warning: {name} daemon exited with {status} after SIGTERM; its log:\n{log}");
        }
    }
}

/// The realistic rows' table and their target.
pub(crate) fn print_realistic(realistic: &[Row], settings: &Settings) {
    println!("### realistic workload (what users run)\n");
    println!(
        "| workload | turns | wall s | turns/s | p50 ms | p99 ms | CPU ms/turn | bench CPU ms/turn | peak RSS MB | prompt KB mean | prompt KB max | errors |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for Row { workload, metrics: m } in realistic {
        println!(
            "| {} | {:.3} | {:.3} | {:.1} | {:.1} | {:.1} | {:.0} |",
            lead(*workload, m, settings),
            m.cpu_ms_per_turn,
            m.bench_cpu_ms_per_turn,
            m.peak_rss_mb,
            m.prompt_kb_mean,
            m.prompt_kb_max,
            m.errors
        );
    }
    println!();
    println!(
        "- every request carries a bearer key (`API_SERVER_KEY`); the default toolsets are on, so each prompt \
         carries their schemas; user messages are 150–450 bytes and differ turn to turn; the fake model \
         answers a ~700-byte paragraph with usage (prompt tokens = request bytes ÷ 4), so each session's \
         history — and the prompt built from it — grows for all its turns (fresh sessions each run). Prompt \
         KB is the request body the fake model received."
    );
    if let Some(row) = realistic.iter().find(|r| r.workload == Workload::Realistic(50)) {
        let cpu = row.metrics.cpu_ms_per_turn;
        println!("- {}: CPU per realistic turn, 50 sessions: {cpu:.3} ms (target ≤ 0.6 ms)", verdict(cpu <= 0.6));
    }
    println!();
}

/// The cells both tables open with: workload, turns, wall s, turns/s, p50 ms, p99 ms.
fn lead(workload: Workload, m: &Metrics, settings: &Settings) -> String {
    format!(
        "{} | {:.0} | {:.2} | {:.0} | {:.2} | {:.2}",
        workload.label(settings.messages),
        m.turns,
        m.wall_s,
        m.turns_per_s,
        m.p50_ms,
        m.p99_ms
    )
}
