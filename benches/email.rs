//! E-mail throughput benchmark of the real `hermesd` binary against a real Dovecot (IMAP) and the
//! fake SMTP submission server.
//!
//! U senders × M mails each (default 20 × 5; `HERMESD_BENCH_QUICK=1`: 5 × 2), every mail a new
//! thread with a unique body ("u{u} m{m}"), all senders allowed and authenticated (our server's
//! `Authentication-Results` with `dmarc=pass`); an instant fake LLM answers "echo: <text>", so
//! each reply names the mail it answers. Two variants, each on a fresh daemon home, Dovecot and
//! SMTP fake:
//! - live: the daemon is up (IDLE on the folder); all mail is APPENDed at t0;
//! - backlog: the daemon ran once (so its cursor exists) and stopped; the mail is APPENDed while
//!   it is down; t0 is the restart.
//!
//! Measured per variant: seconds from t0 until every mail has its reply (polled every 50 ms,
//! bounded by 600 s), replies/s, lost (a mail without a reply), duplicated (answered more than
//! once, counted after a 3 s grace), the daemon's peak RSS (`VmHWM`) and CPU ms per reply. The
//! adapter paces mail as a submission server expects (0.5/s per thread, 2/s in all), so
//! replies/s is bounded near 2/s by design; the report prints that floor. Lost and duplicated
//! must be 0 (FAIL exits non-zero).
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target scripts/test-deps.sh && cargo bench --bench email
//! ```
//!
//! All traffic stays on 127.0.0.1; arguments cargo passes are ignored.

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/dovecot.rs"]
mod dovecot;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_smtp/mod.rs"]
mod fake_smtp;
#[allow(dead_code)]
#[path = "support/procfs.rs"]
mod procfs;

use std::path::Path;
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use dovecot::Dovecot;
use fake_llm::FakeLlm;
use fake_smtp::FakeSmtp;
use procfs::{cpu_ticks, status_mb, ticks_per_second};

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
const ADDRESS: &str = "agent@example.com";
const PASSWORD: &str = "bench-secret";
/// The adapter's bound on sends across all threads (`platforms/email/src/lib.rs`).
const GLOBAL_RATE: f64 = 2.0;
const REPLY_TIMEOUT: Duration = Duration::from_secs(600);
const DUPLICATE_GRACE: Duration = Duration::from_secs(3);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    Live,
    Backlog,
}

struct Outcome {
    variant: Variant,
    mails: usize,
    seconds: f64,
    lost: usize,
    duplicated: usize,
    peak_rss_mb: Option<f64>,
    cpu_ms_per_reply: Option<f64>,
}

fn sender(u: usize) -> String {
    format!("user{u}@example.org")
}

fn mail(u: usize, m: usize) -> String {
    let from = sender(u);
    format!(
        "Return-Path: <{from}>\r\nAuthentication-Results: mx.bench; dmarc=pass header.from=example.org\r\n\
         From: <{from}>\r\nTo: {ADDRESS}\r\nSubject: bench {u} {m}\r\nDate: {}\r\nMessage-ID: <b{u}-{m}@example.org>\r\n\
         Content-Type: text/plain\r\n\r\nu{u} m{m}\r\n",
        chrono::Utc::now().to_rfc2822()
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn spawn(home: &Path, allowed: &str) -> Child {
    let log = std::fs::OpenOptions::new().create(true).append(true).open(home.join("hermesd.log")).unwrap();
    Command::new(BIN)
        .args(["--home", home.to_str().unwrap(), "run"])
        .env("HERMESD_LOG", "warn")
        .env("EMAIL_PASSWORD", PASSWORD)
        .env("EMAIL_ALLOWED_USERS", allowed)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn hermesd")
}

async fn wait_ready(port: u16) {
    let client = reqwest::Client::new();
    let url = format!("http://127.0.0.1:{port}/readyz");
    for _ in 0..600 {
        if client.get(&url).send().await.is_ok_and(|r| r.status() == 200) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("hermesd did not become ready");
}

async fn stop(child: &mut Child) {
    let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Replies per mail, by the "u{u} m{m}" text they echo.
fn tally(smtp: &FakeSmtp, users: usize, messages: usize) -> Vec<usize> {
    let accepted = smtp.accepted();
    let mut counts = vec![0; users * messages];
    for (u, m) in (0..users).flat_map(|u| (0..messages).map(move |m| (u, m))) {
        let needle = format!("echo: Subject: bench {u} {m}");
        counts[u * messages + m] = accepted.iter().filter(|s| s.data.contains(&needle)).count();
    }
    counts
}

async fn run(variant: Variant, llm: &FakeLlm, users: usize, messages: usize, ticks_per_s: f64) -> Outcome {
    let imap = Dovecot::start(ADDRESS, PASSWORD).await;
    let smtp = FakeSmtp::start(ADDRESS, PASSWORD).await;
    let home = tempfile::tempdir().expect("home");
    let port = free_port();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\nbatch_window = \"0s\"\n\n[model]\nprovider = \"chat_completions\"\n\
         base_url = \"{}\"\nname = \"fake\"\n\n[platforms.email]\nenabled = true\nimap_url = \"{}\"\nsmtp_url = \"{}\"\n\
         address = \"{ADDRESS}\"\nauthserv_id = \"mx.bench\"\npoll_interval = \"1s\"\n",
        llm.base_url(),
        imap.url(),
        smtp.url()
    );
    std::fs::write(home.path().join("config.toml"), config).expect("config");
    let allowed: Vec<String> = (0..users).map(sender).collect();
    let allowed = allowed.join(",");
    let mut child = spawn(home.path(), &allowed);
    wait_ready(port).await;
    if variant == Variant::Backlog {
        stop(&mut child).await;
    }
    let mut client = imap.client().await;
    let append_all = async {
        for m in 0..messages {
            for u in 0..users {
                client.append("INBOX", &mail(u, m)).await;
            }
        }
    };
    let (t0, cpu0);
    if variant == Variant::Live {
        t0 = Instant::now();
        cpu0 = cpu_ticks(child.id()).unwrap_or(0);
        append_all.await;
    } else {
        append_all.await;
        t0 = Instant::now();
        child = spawn(home.path(), &allowed);
        cpu0 = 0;
    }
    let total = users * messages;
    while Instant::now() - t0 < REPLY_TIMEOUT && tally(&smtp, users, messages).contains(&0) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let seconds = t0.elapsed().as_secs_f64();
    let cpu_end = cpu_ticks(child.id());
    tokio::time::sleep(DUPLICATE_GRACE).await;
    let counts = tally(&smtp, users, messages);
    let peak_rss_mb = status_mb(child.id(), "VmHWM");
    stop(&mut child).await;
    let answered = counts.iter().filter(|&&n| n > 0).count();
    Outcome {
        variant,
        mails: total,
        seconds,
        lost: counts.iter().filter(|&&n| n == 0).count(),
        duplicated: counts.iter().filter(|&&n| n > 1).count(),
        peak_rss_mb,
        cpu_ms_per_reply: cpu_end
            .filter(|_| answered > 0)
            .map(|end| end.saturating_sub(cpu0) as f64 * 1000.0 / ticks_per_s / answered as f64),
    }
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::var("HERMESD_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (users, messages) = if quick { (5, 2) } else { (20, 5) };
    let ticks_per_s = ticks_per_second();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("bench runtime");
    let outcomes = runtime.block_on(async {
        let llm = FakeLlm::echo().await;
        let mut outcomes = Vec::new();
        for variant in [Variant::Live, Variant::Backlog] {
            outcomes.push(run(variant, &llm, users, messages, ticks_per_s).await);
        }
        outcomes
    });
    println!("email: {users} senders x {messages} mails, Dovecot IMAP + fake SMTP, instant fake model");
    println!("variant  mails  seconds  replies/s  floor/s  lost  duplicated  peak RSS MB  CPU ms/reply");
    let mut pass = true;
    for o in &outcomes {
        let rate = o.mails as f64 / o.seconds.max(f64::EPSILON);
        let rss = o.peak_rss_mb.map_or("-".into(), |v| format!("{v:.1}"));
        let cpu = o.cpu_ms_per_reply.map_or("-".into(), |v| format!("{v:.1}"));
        let name = if o.variant == Variant::Live { "live" } else { "backlog" };
        println!(
            "{name:<8} {:>5}  {:>7.1}  {rate:>9.2}  {GLOBAL_RATE:>7.1}  {:>4}  {:>10}  {rss:>11}  {cpu:>12}",
            o.mails, o.seconds, o.lost, o.duplicated
        );
        pass &= o.lost == 0 && o.duplicated == 0;
    }
    println!("{}", if pass { "PASS: nothing lost, nothing duplicated" } else { "FAIL" });
    if pass { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
