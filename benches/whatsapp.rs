//! WhatsApp throughput benchmark of the real `hermesd` binary against the fake Graph API.
//!
//! U users × M messages (default 100 × 10; `HERMESD_BENCH_QUICK=1`: 20 × 3) are posted to the
//! daemon's `/whatsapp/webhook` as Meta posts them (signed with the app secret, 16 in flight,
//! message index outermost); the release `hermesd` answers through an instant fake LLM ("echo:
//! <message>") with sends to the fake Graph API (`tests/support/fake_whatsapp/`). Batching is
//! off (`agent.batch_window = "0s"`), so every message is its own turn. Two variants, each on a
//! fresh daemon home and a fresh fake:
//! - once: every notification posted once;
//! - redelivered: every notification posted twice (Meta's redelivery after a lost 200).
//!
//! Measured per variant: seconds from the first post until every message has its reply,
//! replies/s, lost (a message without its echo), duplicated (a message answered more than once,
//! counted after a 2 s grace), webhook answer time p50/p99 (store + dedup before the 200), the
//! daemon's peak RSS (`VmHWM`) and CPU ms per reply. Lost and duplicated must be 0 (FAIL exits
//! non-zero).
//!
//! ```text
//! CARGO_TARGET_DIR=$HOME/.cache/hermesd-target cargo bench --bench whatsapp
//! ```
//!
//! Linux only (it reads `/proc`); all traffic stays on 127.0.0.1.

#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_llm.rs"]
mod fake_llm;
#[allow(dead_code, unreachable_pub)]
#[path = "../tests/support/fake_whatsapp/mod.rs"]
mod fake_whatsapp;
#[allow(dead_code)]
#[path = "support/procfs.rs"]
mod procfs;

use std::collections::HashMap;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_llm::FakeLlm;
use fake_whatsapp::{FakeWhatsApp, PHONE_NUMBER_ID, webhook};
use procfs::{cpu_ticks, status_mb};
use tempfile::TempDir;

const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
const TOKEN: &str = "EAAbench-access-token";
const SECRET: &str = "bench-app-secret";
const IN_FLIGHT: usize = 16;
const REPLY_TIMEOUT: Duration = Duration::from_secs(300);
const DUPLICATE_GRACE: Duration = Duration::from_secs(2);
const START_TIMEOUT: Duration = Duration::from_secs(30);
const FIRST_USER: u64 = 15_550_000_000;

struct Daemon {
    child: Child,
    home: TempDir,
    base: String,
}

impl Daemon {
    fn spawn(llm: &FakeLlm, fake: &FakeWhatsApp) -> Self {
        let home = tempfile::tempdir().expect("create a daemon home");
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("probe").local_addr().expect("probe").port();
        let config = format!(
            "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\nbatch_window = \"0s\"\n\n\
             [model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"bench\"\n\n\
             [platforms.whatsapp]\nenabled = true\napi_url = \"{}\"\nphone_number_id = \"{PHONE_NUMBER_ID}\"\n",
            llm.base_url(),
            fake.api_url()
        );
        std::fs::write(home.path().join("config.toml"), config).expect("write the daemon config");
        let log = std::fs::File::create(home.path().join("hermesd.log")).expect("create the daemon log");
        let child = Command::new(BIN)
            .arg("--home")
            .arg(home.path())
            .arg("run")
            .env("HERMESD_LOG", "warn")
            .env("NO_PROXY", "127.0.0.1")
            .env("WHATSAPP_ACCESS_TOKEN", TOKEN)
            .env("WHATSAPP_APP_SECRET", SECRET)
            .env("WHATSAPP_VERIFY_TOKEN", "bench-verify")
            .env("WHATSAPP_ALLOW_ALL_USERS", "true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn hermesd");
        Self { child, home, base: format!("http://127.0.0.1:{port}") }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.home.path().join("hermesd.log")).unwrap_or_default()
    }

    async fn wait_ready(&mut self) {
        let deadline = Instant::now() + START_TIMEOUT;
        let client = reqwest::Client::new();
        loop {
            let ready = client.get(format!("{}/readyz", self.base)).send().await;
            if ready.is_ok_and(|r| r.status().as_u16() == 200) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("hermesd exited ({status}); its log:\n{}", self.log());
            }
            assert!(Instant::now() < deadline, "hermesd not ready in {START_TIMEOUT:?}; log:\n{}", self.log());
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn stop(mut self) {
        let _ = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status();
        let deadline = Instant::now() + Duration::from_secs(40);
        while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Outcome {
    label: &'static str,
    total: usize,
    seconds: Option<f64>,
    lost: usize,
    duplicated: usize,
    p50_ms: f64,
    p99_ms: f64,
    non_200: usize,
    peak_rss_mb: Option<f64>,
    cpu_ms_per_reply: Option<f64>,
}

async fn run(label: &'static str, posts_each: usize, users: usize, messages: usize, llm: &FakeLlm) -> Outcome {
    let fake = FakeWhatsApp::start(TOKEN).await;
    let mut daemon = Daemon::spawn(llm, &fake);
    daemon.wait_ready().await;
    let pid = daemon.child.id();
    let cpu0 = cpu_ticks(pid).unwrap_or_default();
    let mut expected: HashMap<(String, String), usize> = HashMap::new();
    let mut bodies = Vec::new();
    for m in 0..messages {
        for u in 0..users {
            let user = (FIRST_USER + u as u64).to_string();
            let text = format!("u{u} m{m}");
            expected.insert((user.clone(), format!("echo: {text}")), expected.len());
            bodies.push(webhook::text(&user, &text).1);
        }
    }
    let total = expected.len();
    eprintln!("{label}: {users} users × {messages} messages, each posted {posts_each}×");
    let t0 = Instant::now();
    let gate = Arc::new(tokio::sync::Semaphore::new(IN_FLIGHT));
    let mut tasks = Vec::new();
    for body in bodies {
        let (gate, base) = (gate.clone(), daemon.base.clone());
        tasks.push(tokio::spawn(async move {
            let _permit = gate.acquire_owned().await.expect("open semaphore");
            let mut answers = Vec::new();
            for _ in 0..posts_each {
                let start = Instant::now();
                let (status, _) = webhook::post(&base, SECRET, &body).await;
                answers.push((status, start.elapsed()));
            }
            answers
        }));
    }
    let mut latencies = Vec::new();
    let mut non_200 = 0;
    for task in tasks {
        for (status, took) in task.await.expect("a post task") {
            non_200 += usize::from(status != 200);
            latencies.push(took.as_secs_f64() * 1000.0);
        }
    }
    let count = |sent: &[serde_json::Value]| {
        let mut replies = vec![0usize; total];
        for payload in sent {
            let key = (
                payload["to"].as_str().unwrap_or_default().to_owned(),
                payload["text"]["body"].as_str().unwrap_or_default().to_owned(),
            );
            if let Some(&i) = expected.get(&key) {
                replies[i] += 1;
            }
        }
        replies
    };
    let deadline = t0 + REPLY_TIMEOUT;
    let mut seconds = None;
    while Instant::now() < deadline {
        if count(&fake.sent()).iter().all(|&n| n > 0) {
            seconds = Some(t0.elapsed().as_secs_f64());
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let cpu_end = cpu_ticks(pid);
    tokio::time::sleep(DUPLICATE_GRACE).await;
    let replies = count(&fake.sent());
    let peak_rss_mb = status_mb(pid, "VmHWM");
    if seconds.is_none() {
        eprintln!("{label}: timed out; daemon log:\n{}", daemon.log());
    }
    daemon.stop();
    latencies.sort_by(f64::total_cmp);
    let pick = |q: f64| latencies.get(((latencies.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(0.0);
    let answered = replies.iter().filter(|&&n| n > 0).count();
    Outcome {
        label,
        total,
        seconds,
        lost: replies.iter().filter(|&&n| n == 0).count(),
        duplicated: replies.iter().filter(|&&n| n > 1).count(),
        p50_ms: pick(0.5),
        p99_ms: pick(0.99),
        non_200,
        peak_rss_mb,
        cpu_ms_per_reply: cpu_end
            .filter(|_| answered > 0)
            .map(|end| end.saturating_sub(cpu0) as f64 * 10.0 / answered as f64),
    }
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let quick = std::env::var("HERMESD_BENCH_QUICK").is_ok_and(|v| v == "1");
    let (users, messages) = if quick { (20, 3) } else { (100, 10) };
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let outcomes = runtime.block_on(async {
        let llm = FakeLlm::echo().await;
        vec![
            run("once", 1, users, messages, &llm).await,
            run("redelivered (each posted twice)", 2, users, messages, &llm).await,
        ]
    });
    let mode = if quick { "quick" } else { "full" };
    println!();
    println!(
        "## hermesd WhatsApp bench ({mode}; fake Graph API, signed webhooks {IN_FLIGHT} in flight, instant echo LLM)"
    );
    println!();
    println!(
        "| variant | total | seconds | replies/s | lost | duplicated | webhook p50 ms | webhook p99 ms | non-200 | peak RSS MB | CPU ms/reply |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let mut pass = true;
    for o in &outcomes {
        let (seconds, rate) = match o.seconds {
            Some(s) => (format!("{s:.2}"), format!("{:.1}", o.total as f64 / s)),
            None => (format!("> {}", REPLY_TIMEOUT.as_secs()), "n/a".to_owned()),
        };
        let fmt = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.1}"));
        println!(
            "| {} | {} | {seconds} | {rate} | {} | {} | {:.1} | {:.1} | {} | {} | {} |",
            o.label,
            o.total,
            o.lost,
            o.duplicated,
            o.p50_ms,
            o.p99_ms,
            o.non_200,
            fmt(o.peak_rss_mb),
            fmt(o.cpu_ms_per_reply)
        );
        pass &= o.lost == 0 && o.duplicated == 0 && o.seconds.is_some();
    }
    println!();
    println!("CPU ms/reply assumes 100 clock ticks per second (Linux default).");
    println!("{}: lost and duplicated replies are 0 in every variant", if pass { "PASS" } else { "FAIL" });
    if pass { ExitCode::SUCCESS } else { ExitCode::FAILURE }
}
