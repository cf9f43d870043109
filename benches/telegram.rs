//! Telegram throughput benchmark of the real `hermesd` binary against a fake Bot API.
//!
//! The fake Bot API (`tests/support/fake_telegram/`: real getUpdates offset and long-poll
//! semantics) feeds U users × M messages as private DMs (default 100 × 10), texts unique
//! ("u{u} m{m}"); the release `hermesd` polls it (`mode = "polling"`, `poll_timeout = "1s"`) and
//! talks to an instant fake LLM (`tests/support/fake_llm.rs`) that answers "echo: <last user
//! message>", so every reply names the message it answers. Two variants, each on a fresh daemon
//! home and a fresh fake:
//! - live: the daemon is up and polling; all updates are injected at once at t0;
//! - backlog: all updates are queued before the daemon starts (downtime); t0 is the spawn.
//!
//! Measured per variant: seconds from t0 until every message has its reply (the fake's `sent()`
//! is polled every 20 ms, bounded by 300 s), replies/s, lost replies (a message with no
//! "echo: …" reply in its user's chat), duplicated replies (a message answered more than once,
//! counted after a 2 s grace), other sends (notices such as "queued (n)"), the daemon's peak RSS
//! (`VmHWM`) and CPU ms per reply (utime + stime from `/proc/<pid>/stat`; from t0 for live, from
//! spawn for backlog), and whether the confirmed getUpdates offset ends at last update_id + 1.
//!
//! The daemon paces Telegram sends as Telegram requires: 1 msg/s per chat (burst 3) and 30 msg/s
//! bot-wide (burst 30), so replies/s is bounded near 30/s by design; the report prints the pacing
//! floor for the sends made next to the result. Lost and duplicated must both be 0 (PASS/FAIL;
//! FAIL exits non-zero).
//!
//! Run it (release profile; Linux only, it reads `/proc`):
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target cargo bench --bench telegram
//! ```
//!
//! `HERMESD_BENCH_QUICK=1` runs 20 users × 3 messages (a smoke test). All traffic stays on
//! 127.0.0.1; arguments cargo passes (`--bench`, filters) are ignored.

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_telegram/mod.rs"]
mod fake_telegram;
#[allow(dead_code)]
#[path = "support/procfs.rs"]
mod procfs;
#[path = "support/profile.rs"]
mod profile;

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use fake_llm::FakeLlm;
use fake_telegram::{Chat, FakeTelegram, Sent, User};
use procfs::{cpu_ticks, status_mb, ticks_per_second};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
/// The fake's token; the daemon gets it as `TELEGRAM_BOT_TOKEN`.
const TOKEN: &str = "123:ABC";
/// Telegram pacing in the adapter's capabilities (`platforms/telegram/src/lib.rs`).
const BOT_WIDE_RATE: f64 = 30.0;
const BOT_WIDE_BURST: f64 = 30.0;
const PER_CHAT_RATE: f64 = 1.0;
const PER_CHAT_BURST: f64 = 3.0;
/// User (and private chat) ids are `FIRST_USER + u`.
const FIRST_USER: i64 = 10_001;
const POLL_EVERY: Duration = Duration::from_millis(20);
const REPLY_TIMEOUT: Duration = Duration::from_secs(300);
/// Time after the last reply for a duplicate to show up.
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const OFFSET_TIMEOUT: Duration = Duration::from_secs(10);
const START_TIMEOUT: Duration = Duration::from_secs(30);
/// Live variant: idle time after the first getUpdates before t0 (start-up work out of the way).
const SETTLE: Duration = Duration::from_millis(250);
const EXIT_TIMEOUT: Duration = Duration::from_secs(40);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    /// Injected at t0 into a running, polling daemon.
    Live,
    /// Injected before the daemon starts; t0 is the spawn.
    Backlog,
}

impl Variant {
    fn label(self) -> &'static str {
        match self {
            Variant::Live => "live (all injected at t0)",
            Variant::Backlog => "backlog (injected before start)",
        }
    }
}

/// What one variant measured.
struct Outcome {
    variant: Variant,
    users: usize,
    messages: usize,
    /// t0 to the last first reply; `None` when some message had no reply by the timeout.
    seconds: Option<f64>,
    answered: usize,
    lost: usize,
    duplicated: usize,
    /// Echo replies sent, duplicates included.
    reply_sends: usize,
    /// Sends that answer no injected message (notices), with a few samples.
    other: usize,
    other_samples: Vec<String>,
    /// Most sends to any one chat.
    max_chat_sends: usize,
    peak_rss_mb: Option<f64>,
    cpu_ms_per_reply: Option<f64>,
    confirmed_offset: i64,
    expected_offset: i64,
    model_calls: usize,
    exit: Option<ExitStatus>,
    log: String,
}

impl Outcome {
    fn total(&self) -> usize {
        self.users * self.messages
    }

    fn sends(&self) -> usize {
        self.reply_sends + self.other
    }

    /// The least time the daemon's pacing allows for these sends.
    fn pacing_floor(&self) -> f64 {
        let bot_wide = (self.sends() as f64 - BOT_WIDE_BURST).max(0.0) / BOT_WIDE_RATE;
        let per_chat = (self.max_chat_sends as f64 - PER_CHAT_BURST).max(0.0) / PER_CHAT_RATE;
        bot_wide.max(per_chat)
    }

    fn offset_ok(&self) -> bool {
        self.confirmed_offset == self.expected_offset
    }
}

/// Replies seen so far, matched to the injected messages by (chat id, echoed text).
struct Tally {
    /// (chat, "echo: u{u} m{m}") → index of the message.
    expected: HashMap<(i64, String), usize>,
    replies: Vec<usize>,
    first_at: Vec<Option<Instant>>,
    answered: usize,
    other: Vec<String>,
    per_chat: HashMap<i64, usize>,
    /// Sends already absorbed.
    seen: usize,
}

impl Tally {
    fn new(users: usize, messages: usize) -> Self {
        let mut expected = HashMap::with_capacity(users * messages);
        for u in 0..users {
            for m in 0..messages {
                let index = expected.len();
                expected.insert((user_id(u), format!("echo: {}", text(u, m))), index);
            }
        }
        let total = expected.len();
        Self {
            expected,
            replies: vec![0; total],
            first_at: vec![None; total],
            answered: 0,
            other: Vec::new(),
            per_chat: HashMap::new(),
            seen: 0,
        }
    }

    /// Count the sends not yet seen.
    fn absorb(&mut self, sent: &[Sent]) {
        for s in sent.iter().skip(self.seen) {
            *self.per_chat.entry(s.chat_id).or_default() += 1;
            let visible = s.visible();
            match self.expected.get(&(s.chat_id, visible.trim().to_owned())) {
                Some(&i) => {
                    if self.replies[i] == 0 {
                        self.answered += 1;
                        self.first_at[i] = Some(s.at);
                    }
                    self.replies[i] += 1;
                }
                None => self.other.push(format!("chat {}: {visible:?}", s.chat_id)),
            }
        }
        self.seen = self.seen.max(sent.len());
    }

    fn complete(&self) -> bool {
        self.answered == self.replies.len()
    }
}

fn user_id(u: usize) -> i64 {
    FIRST_USER + i64::try_from(u).expect("a small user index")
}

fn text(u: usize, m: usize) -> String {
    format!("u{u} m{m}")
}

/// A running `hermesd` child with its own home.
struct Daemon {
    child: Child,
    home: TempDir,
}

impl Daemon {
    /// Write the config (HTTP on a free loopback port, the fake LLM, Telegram polling the fake)
    /// to a fresh home and spawn the release binary on it.
    fn spawn(llm: &FakeLlm, tg: &FakeTelegram) -> Self {
        let home = tempfile::tempdir().expect("create a daemon home");
        let port =
            std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe").local_addr().expect("probe").port();
        let config = format!(
            "[http]\nlisten = \"127.0.0.1:{port}\"\n\n\
             [model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"bench\"\n\n\
             [platforms.telegram]\nenabled = true\napi_url = \"{}\"\nmode = \"polling\"\npoll_timeout = \"1s\"\n",
            llm.base_url(),
            tg.base_url()
        );
        std::fs::write(home.path().join("config.toml"), config).expect("write the daemon config");
        let log = std::fs::File::create(home.path().join("hermesd.log")).expect("create the daemon log");
        let child = Command::new(BIN)
            .arg("--home")
            .arg(home.path())
            .arg("run")
            .env("HERMESD_LOG", "warn")
            .env("NO_PROXY", "127.0.0.1")
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("TELEGRAM_ALLOW_ALL_USERS", "true")
            .env_remove("TELEGRAM_ALLOWED_USERS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn hermesd");
        Self { child, home }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("poll the hermesd child")
    }

    fn log(&self) -> String {
        read_log(self.home.path())
    }

    /// Wait for the daemon's first getUpdates; panic with its log if it exits or never polls.
    async fn wait_polling(&mut self, tg: &FakeTelegram) {
        let deadline = Instant::now() + START_TIMEOUT;
        while tg.polls().is_empty() {
            if let Some(status) = self.exited() {
                panic!("hermesd exited before polling ({status}); its log:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "hermesd did not poll within {START_TIMEOUT:?}; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// SIGTERM (through the `kill` command) and wait for the exit; returns the status and log.
    async fn stop(mut self) -> (ExitStatus, String) {
        if let Some(status) = self.exited() {
            return (status, self.log());
        }
        let status = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().expect("run kill -TERM");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
        let deadline = Instant::now() + EXIT_TIMEOUT;
        loop {
            if let Some(status) = self.exited() {
                return (status, self.log());
            }
            if Instant::now() >= deadline {
                let _ = self.child.kill();
                let status = self.child.wait().expect("reap the killed hermesd");
                return (status, format!("did not exit within {EXIT_TIMEOUT:?}; killed\n{}", self.log()));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

impl Drop for Daemon {
    /// A bench that panics midway must not leave its daemon running.
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn read_log(home: &Path) -> String {
    std::fs::read_to_string(home.join("hermesd.log")).unwrap_or_default()
}

/// Queue every message, message index outermost (each user's messages interleaved with the
/// others'); returns the last update_id.
fn inject(tg: &FakeTelegram, users: usize, messages: usize) -> i64 {
    let people: Vec<(User, Chat)> = (0..users)
        .map(|u| {
            let user = User::new(user_id(u), &format!("User{u}"));
            let chat = Chat::private(&user);
            (user, chat)
        })
        .collect();
    let mut last = 0;
    for m in 0..messages {
        for (u, (user, chat)) in people.iter().enumerate() {
            last = tg.push_message(chat, user, &text(u, m)).update_id;
        }
    }
    last
}

async fn run_variant(variant: Variant, users: usize, messages: usize, llm: &FakeLlm, ticks_per_s: f64) -> Outcome {
    let tg = FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await;
    let calls_before = llm.count();
    let (mut daemon, t0, cpu0, last_update) = match variant {
        Variant::Backlog => {
            let last = inject(&tg, users, messages);
            let t0 = Instant::now();
            (Daemon::spawn(llm, &tg), t0, 0, last)
        }
        Variant::Live => {
            let mut daemon = Daemon::spawn(llm, &tg);
            daemon.wait_polling(&tg).await;
            tokio::time::sleep(SETTLE).await;
            let cpu0 = cpu_ticks(daemon.pid()).unwrap_or_default();
            let t0 = Instant::now();
            let last = inject(&tg, users, messages);
            (daemon, t0, cpu0, last)
        }
    };
    eprintln!("{}: {users} users × {messages} messages injected; waiting for replies…", variant.label());

    let mut tally = Tally::new(users, messages);
    let deadline = t0 + REPLY_TIMEOUT;
    let mut exit = None;
    loop {
        tally.absorb(&tg.sent());
        if tally.complete() || Instant::now() >= deadline {
            break;
        }
        if let Some(status) = daemon.exited() {
            exit = Some(status);
            break;
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
    let cpu_end = cpu_ticks(daemon.pid());
    let seconds = tally
        .complete()
        .then(|| tally.first_at.iter().flatten().max().map_or(0.0, |last| last.duration_since(t0).as_secs_f64()));

    // Give a duplicate time to show up, then wait for the final offset to be confirmed.
    if exit.is_none() {
        tokio::time::sleep(DUPLICATE_GRACE).await;
        let offset_deadline = Instant::now() + OFFSET_TIMEOUT;
        while tg.confirmed_offset() < last_update + 1 && Instant::now() < offset_deadline && daemon.exited().is_none() {
            tokio::time::sleep(POLL_EVERY).await;
        }
    }
    tally.absorb(&tg.sent());
    let peak_rss_mb = status_mb(daemon.pid(), "VmHWM");
    let (status, log) = daemon.stop().await;
    let lost = tally.replies.iter().filter(|&&n| n == 0).count();
    let duplicated = tally.replies.iter().filter(|&&n| n > 1).count();
    let cpu_ms_per_reply = cpu_end
        .filter(|_| tally.answered > 0)
        .map(|end| end.saturating_sub(cpu0) as f64 * 1000.0 / ticks_per_s / tally.answered as f64);
    Outcome {
        variant,
        users,
        messages,
        seconds,
        answered: tally.answered,
        lost,
        duplicated,
        reply_sends: tally.replies.iter().sum(),
        other: tally.other.len(),
        other_samples: tally.other.iter().take(5).cloned().collect(),
        max_chat_sends: tally.per_chat.values().copied().max().unwrap_or(0),
        peak_rss_mb,
        cpu_ms_per_reply,
        confirmed_offset: tg.confirmed_offset(),
        expected_offset: last_update + 1,
        model_calls: llm.count() - calls_before,
        exit: Some(exit.unwrap_or(status)),
        log,
    }
}

fn fmt_opt(value: Option<f64>, decimals: usize) -> String {
    value.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.decimals$}"))
}

/// Print the table and notes; true when every variant lost and duplicated nothing.
fn print_report(outcomes: &[Outcome], quick: bool) -> bool {
    let mode = if quick { "quick" } else { "full" };
    println!();
    println!(
        "## hermesd Telegram bench ({mode}; fake Bot API, polling with poll_timeout 1s, instant echo LLM; `{}` profile)",
        profile::of(BIN)
    );
    println!();
    println!(
        "| variant | users × messages | total | seconds | replies/s (cap 30/s bot-wide) | lost | duplicated | \
         other sends | peak RSS MB | CPU ms/reply | confirmed offset |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for o in outcomes {
        let (seconds, rate) = match o.seconds {
            Some(s) => (format!("{s:.2}"), format!("{:.1} / 30", o.answered as f64 / s)),
            None => (format!("> {} (timeout)", REPLY_TIMEOUT.as_secs()), "n/a".to_owned()),
        };
        let offset = if o.offset_ok() { "= last + 1 ✓" } else { "≠ last + 1 ✗" };
        println!(
            "| {} | {} × {} | {} | {seconds} | {rate} | {} | {} | {} | {} | {} | {offset} |",
            o.variant.label(),
            o.users,
            o.messages,
            o.total(),
            o.lost,
            o.duplicated,
            o.other,
            fmt_opt(o.peak_rss_mb, 1),
            fmt_opt(o.cpu_ms_per_reply, 2),
        );
    }
    println!();
    println!(
        "Pacing (by design, as Telegram requires): {PER_CHAT_RATE} msg/s per chat (burst {PER_CHAT_BURST}) and \
         {BOT_WIDE_RATE} msg/s bot-wide (burst {BOT_WIDE_BURST}), so replies/s cannot exceed ~30."
    );
    for o in outcomes {
        let ratio = o.seconds.map(|s| format!(", measured {:.2}× the floor", s / o.pacing_floor().max(f64::EPSILON)));
        println!(
            "- {}: {} sends ({} replies + {} other), at most {} to one chat → pacing floor {:.2} s (bot-wide burst of 30, then 30/s){}; \
             model calls {} (messages {}); confirmed offset {} (expected {}); daemon exit: {}.",
            o.variant.label(),
            o.sends(),
            o.reply_sends,
            o.other,
            o.max_chat_sends,
            o.pacing_floor(),
            ratio.unwrap_or_default(),
            o.model_calls,
            o.total(),
            o.confirmed_offset,
            o.expected_offset,
            o.exit.map_or_else(|| "unknown".to_owned(), |s| s.to_string()),
        );
        if !o.other_samples.is_empty() {
            println!("  other sends, first {}: {}", o.other_samples.len(), o.other_samples.join(" | "));
        }
    }
    println!("CPU ms/reply: daemon utime + stime from t0 (live) or from spawn, start-up included (backlog).");
    println!();
    let mut pass = true;
    for o in outcomes {
        let ok = o.lost == 0 && o.duplicated == 0 && o.seconds.is_some();
        pass &= ok;
        println!(
            "{}: {} — lost {}, duplicated {}",
            if ok { "PASS" } else { "FAIL" },
            o.variant.label(),
            o.lost,
            o.duplicated
        );
        if !o.offset_ok() {
            println!("warning: {} confirmed offset {} ≠ {}", o.variant.label(), o.confirmed_offset, o.expected_offset);
        }
        if !o.exit.is_some_and(|s| s.success()) || !ok {
            println!("{} daemon log:\n{}", o.variant.label(), o.log);
        }
    }
    println!("{}: lost and duplicated replies are 0 in every variant", if pass { "PASS" } else { "FAIL" });
    pass
}

fn main() -> ExitCode {
    // `cargo bench` passes `--bench` (and maybe a filter): nothing to honour.
    let quick = std::env::var("HERMESD_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (users, messages) = if quick { (20, 3) } else { (100, 10) };
    let ticks_per_s = ticks_per_second();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("build the bench runtime");
    let outcomes = runtime.block_on(async {
        let llm = FakeLlm::echo().await;
        let mut outcomes = Vec::new();
        for variant in [Variant::Live, Variant::Backlog] {
            outcomes.push(run_variant(variant, users, messages, &llm, ticks_per_s).await);
        }
        outcomes
    });
    if print_report(&outcomes, quick) { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
