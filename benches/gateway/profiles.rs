//! Profiles and accounts: what one more agent and one more bot cost an idle daemon, and whether
//! many of them slow turns down.
//!
//! Three daemons, each on a fresh home: the API alone (`base`); with 10 profiles, each with its
//! own model chain and persona (`profiles`); and with those 10 profiles and 2 Telegram bots each,
//! 20 accounts long-polling one fake Bot API (`accounts`). For each, the idle RSS (`VmRSS`
//! 2 s after ready) and, after a warm-up, a closed loop of 10 API sessions × 20 ×
//! `settings.messages` turns (4,000 in all), spread over
//! the profiles (`model: "profile:pN"`) on the last two, for turns/s. Idle RSS per extra profile
//! is (profiles − base) / 10, per extra account (accounts − profiles) / 20 (target: under 1 MB
//! each); turns/s with profiles and accounts ÷ base (target: within 5 %). Each figure is the
//! median of `settings.runs` runs.

use std::time::{Duration, Instant};

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::Settings;
use crate::daemon::{Daemon, status_mb};
use crate::fake_llm::FakeLlm;
use crate::fake_telegram::FakeTelegram;
use crate::fake_telegram::shared::serve_bots;
use crate::load::median;

const PROFILES: usize = 10;
const ACCOUNTS_PER_PROFILE: usize = 2;
const SESSIONS: usize = 10;
/// Turns each session sends per measured run (20 times the light workloads': a run of a few
/// hundred milliseconds would measure the machine's noise), after `WARMUP` unmeasured ones.
const MESSAGES_FACTOR: usize = 20;
const WARMUP: usize = 10;
const SETTLE: Duration = Duration::from_secs(2);
const RSS_TARGET_MB: f64 = 1.0;
const TURNS_TOLERANCE: f64 = 0.05;

/// One configuration's medians.
struct Row {
    name: &'static str,
    idle_mb: f64,
    turns_per_s: f64,
}

/// The three rows.
pub(crate) struct ProfilesReport {
    rows: Vec<Row>,
    errors: Vec<String>,
}

/// The extra config of `profiles` profiles (each on the same fake model, with a persona) and,
/// with `bot_api`, two Telegram accounts each on it; and the tokens those accounts read.
fn extra(llm: &FakeLlm, profiles: usize, bot_api: Option<&str>) -> (String, Vec<(String, String)>) {
    let mut text = String::new();
    let mut env = Vec::new();
    if let Some(api_url) = bot_api {
        text.push_str(&format!(
            "\n[platforms.telegram]\nenabled = true\napi_url = \"{api_url}\"\npoll_timeout = \"10s\"\n"
        ));
    }
    for p in 0..profiles {
        text.push_str(&format!(
            "\n[profiles.p{p}]\nsoul = \"You are agent number {p}.\"\n\n[profiles.p{p}.model]\n\
             provider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"bench-{p}\"\n",
            llm.base_url()
        ));
        if bot_api.is_some() {
            for a in 0..ACCOUNTS_PER_PROFILE {
                let var = format!("TG_P{p}_{a}");
                text.push_str(&format!(
                    "\n[platforms.telegram.accounts.p{p}-{a}]\ntoken_env = \"{var}\"\nprofile = \"p{p}\"\n"
                ));
                env.push((var, token(p, a)));
            }
        }
    }
    (text, env)
}

fn token(p: usize, a: usize) -> String {
    format!("{}:BOT{p}X{a}", 1000 + p * 10 + a)
}

/// `SESSIONS` sessions × `messages` turns, closed loop; session `s` talks to `profile:p{s % n}`
/// when there are `n` profiles. Turns per second.
async fn closed_loop(client: &reqwest::Client, base: &str, profiles: usize, messages: usize) -> Result<f64, String> {
    let url = format!("{base}/v1/chat/completions");
    let started = Instant::now();
    let sessions = (0..SESSIONS).map(|s| {
        let (client, url) = (client.clone(), url.clone());
        async move {
            let model = if profiles == 0 { "hermes-agent".to_owned() } else { format!("profile:p{}", s % profiles) };
            for m in 0..messages {
                let body = json!({ "model": model, "messages": [{ "role": "user", "content": format!("s{s} m{m}") }] });
                let response = client
                    .post(&url)
                    .header("X-Hermes-Session-Id", format!("prof-{s}"))
                    .json(&body)
                    .send()
                    .await
                    .map_err(|e| format!("send: {e}"))?;
                let status = response.status();
                let reply: Value = response.json().await.map_err(|e| format!("read: {e}"))?;
                if status != 200 || reply["choices"][0]["message"]["content"].as_str().is_none() {
                    return Err(format!("{status}: {reply}"));
                }
            }
            Ok::<(), String>(())
        }
    });
    for result in join_all(sessions).await {
        result?;
    }
    Ok((SESSIONS * messages) as f64 / started.elapsed().as_secs_f64())
}

/// One run of one configuration: (idle MB, turns/s).
async fn measure(
    client: &reqwest::Client,
    llm: &FakeLlm,
    settings: &Settings,
    profiles: usize,
    bot_api: Option<&str>,
) -> Result<(f64, f64), String> {
    let (extra, env) = extra(llm, profiles, bot_api);
    let (daemon, _) = Daemon::start_with_env(client, llm, &extra, &env).await;
    tokio::time::sleep(SETTLE).await;
    let idle = status_mb(daemon.pid(), "VmRSS");
    let turns = match closed_loop(client, &daemon.base, profiles, WARMUP).await {
        Ok(_) => closed_loop(client, &daemon.base, profiles, settings.messages * MESSAGES_FACTOR).await,
        Err(e) => Err(e),
    };
    let (status, log) = daemon.stop().await;
    if !status.success() {
        return Err(format!("daemon exited with {status}: {log}"));
    }
    Ok((idle, turns?))
}

pub(crate) async fn run(settings: &Settings, client: &reqwest::Client, llm: &FakeLlm) -> ProfilesReport {
    let bots: Vec<FakeTelegram> = {
        let mut bots = Vec::new();
        for p in 0..PROFILES {
            for a in 0..ACCOUNTS_PER_PROFILE {
                let id = i64::try_from(1000 + p * 10 + a).unwrap_or_default();
                bots.push(FakeTelegram::builder().token(&token(p, a)).bot(&format!("bot{p}x{a}"), id).start().await);
            }
        }
        bots
    };
    let bot_api = serve_bots(&bots.iter().collect::<Vec<_>>()).await;
    let configs: [(&'static str, usize, Option<&str>); 3] =
        [("base", 0, None), ("profiles", PROFILES, None), ("accounts", PROFILES, Some(&bot_api))];
    let mut report = ProfilesReport { rows: Vec::new(), errors: Vec::new() };
    let mut runs: Vec<(Vec<f64>, Vec<f64>)> = vec![(Vec::new(), Vec::new()); configs.len()];
    // Interleaved, so a noisy minute of the machine does not fall on one configuration alone.
    for _ in 0..settings.runs {
        for (i, (name, profiles, api)) in configs.iter().enumerate() {
            match measure(client, llm, settings, *profiles, *api).await {
                Ok((idle, turns)) => {
                    runs[i].0.push(idle);
                    runs[i].1.push(turns);
                }
                Err(e) => report.errors.push(format!("{name}: {e}")),
            }
        }
    }
    for ((name, ..), (idle, turns)) in configs.iter().zip(runs) {
        if idle.is_empty() {
            continue;
        }
        report.rows.push(Row { name, idle_mb: median(idle), turns_per_s: median(turns) });
    }
    report
}

impl ProfilesReport {
    pub(crate) fn print(&self) {
        println!("\nprofiles and accounts (10 profiles; 2 Telegram bots each on one fake Bot API), medians");
        println!("{:<10} {:>12} {:>10}", "daemon", "idle RSS MB", "turns/s");
        for row in &self.rows {
            println!("{:<10} {:>12.1} {:>10.0}", row.name, row.idle_mb, row.turns_per_s);
        }
        for error in &self.errors {
            println!("error: {error}");
        }
        let [base, profiles, accounts] = self.rows.as_slice() else {
            println!("FAIL: not every configuration ran");
            return;
        };
        let per_profile = (profiles.idle_mb - base.idle_mb) / PROFILES as f64;
        let per_account = (accounts.idle_mb - profiles.idle_mb) / (PROFILES * ACCOUNTS_PER_PROFILE) as f64;
        let ratio = accounts.turns_per_s / base.turns_per_s;
        let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
        println!(
            "idle RSS per extra profile {per_profile:.2} MB, per extra account {per_account:.2} MB (target < {RSS_TARGET_MB} MB): {}",
            verdict(per_profile < RSS_TARGET_MB && per_account < RSS_TARGET_MB)
        );
        println!(
            "turns/s with 10 profiles and 20 accounts ÷ base: {ratio:.3} (target ≥ {:.2}): {}",
            1.0 - TURNS_TOLERANCE,
            verdict(ratio >= 1.0 - TURNS_TOLERANCE)
        );
    }
}
