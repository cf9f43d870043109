//! Profiles end to end: several agents in one daemon, each with its own model, persona and
//! memory, chosen by the API's `model` field (and, for chat platforms, by the account a message
//! came in on).

mod support;

use std::time::Duration;

use hermesd::agent::tools::cronjob::jobs::{JobRules, JobSpec, prepare};
use hermesd::store::{CronStore, SqliteStore};
use hermesd::webhooks::signature::sign_generic;
use serde_json::{Value, json};
use support::fake_llm::Step;
use support::fake_telegram::shared::serve_bots;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{FakeLlm, client, config_for, eventually, local_key, start_daemon};

const HOME_PERSONA: &str = "You are the HOME-PERSONA.";
const WORK_PERSONA: &str = "You are the WORK-PERSONA.";
const WORK_FACT: &str = "WORK-FACT-4711";
const HOME_TOKEN: &str = "111:HOME";
const WORK_TOKEN: &str = "222:WORK";
const WAIT: Duration = Duration::from_secs(20);

/// The system prompt of a recorded request.
fn system(request: &Value) -> String {
    support::prompt(request).into_iter().find(|(role, _)| role == "system").map(|(_, text)| text).unwrap_or_default()
}

/// The work model's next turn saves `WORK_FACT` about the user, then answers "noted at work".
fn save_work_fact(work_llm: &FakeLlm) {
    let save = json!({"action": "add", "target": "user", "content": WORK_FACT}).to_string();
    work_llm.push(Duration::ZERO, Step::ToolCalls(vec![("memory".into(), save)]));
    work_llm.push(Duration::ZERO, Step::Reply("noted at work".into()));
}

/// A default model on `home_llm` and a profile `work` on `work_llm` with its persona inline.
fn two_profiles(home_llm: &FakeLlm, work_llm: &FakeLlm) -> String {
    let work = format!(
        "[profiles.work]\nsoul = \"{WORK_PERSONA}\"\naliases = [\"work-bot\"]\n\n[profiles.work.model]\n\
         provider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"work-model\"\ntimeout = \"30s\"\n",
        work_llm.base_url()
    );
    config_for(home_llm, &work)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_model_field_chooses_the_profile_with_its_own_model_persona_and_memory() {
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("SOUL.md"), HOME_PERSONA).unwrap();
    let d = start_daemon(home.path(), &two_profiles(&home_llm, &work_llm), &[]).await;
    let http = client();
    let ask = |model: &str, user: &str, text: &str| {
        let (http, url) = (http.clone(), format!("{}/v1/chat/completions", d.base));
        let body = json!({"model": model, "user": user, "messages": [{"role": "user", "content": text}]});
        async move {
            let response = http.post(url).json(&body).send().await.unwrap();
            let status = response.status().as_u16();
            (status, response.json::<Value>().await.unwrap())
        }
    };

    // The work profile, by `profile:work`: its own model and persona; it saves a fact.
    save_work_fact(&work_llm);
    let (status, body) = ask("profile:work", "ann", "remember my badge").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["choices"][0]["message"]["content"], "noted at work");
    assert_eq!(body["model"], "profile:work");
    assert_eq!(home_llm.count(), 0, "the default's model is not called");
    let work_system = system(&work_llm.requests()[0]);
    assert!(work_system.starts_with(WORK_PERSONA), "{work_system}");
    assert!(!work_system.contains(HOME_PERSONA), "{work_system}");
    let saved = home.path().join("profiles/work/memory/users/api/ann/USER.md");
    assert!(std::fs::read_to_string(&saved).unwrap().contains(WORK_FACT));
    assert!(!home.path().join("memory/users/api/ann").exists(), "nothing in the default's memory");

    // The same person on the default profile: the default's model and persona, and nothing of
    // what was saved at work.
    let (status, body) = ask("hermes-agent", "ann", "what is my badge?").await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(home_llm.count(), 1);
    let home_request = home_llm.requests()[0].clone();
    assert!(system(&home_request).starts_with(HOME_PERSONA), "{}", system(&home_request));
    assert!(!home_request.to_string().contains(WORK_FACT), "{home_request}");
    assert!(!home_request.to_string().contains("remember my badge"), "two sessions: {home_request}");

    // An alias and the profile's name reach the work profile too, in the same session; its
    // later turns carry the fact saved there.
    let before = work_llm.count();
    for model in ["work-bot", "work"] {
        let (status, body) = ask(model, "ann", "and now?").await;
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(work_llm.count(), before + 2);
    assert_eq!(home_llm.count(), 1);
    let last = work_llm.requests().last().unwrap().to_string();
    assert!(last.contains("remember my badge"), "the work session continues: {last}");

    // A profile that does not exist is a clear 404; the ids are listed.
    let (status, body) = ask("profile:nope", "ann", "hi").await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(body["error"]["code"], "model_not_found", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("known: default, work"), "{body}");
    let models: Value = http.get(format!("{}/v1/models", d.base)).send().await.unwrap().json().await.unwrap();
    let ids: Vec<&str> = models["data"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["hermes-agent", "profile:work"]);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_telegram_bots_on_one_bot_api_are_two_profiles_with_their_own_sessions_and_memory() {
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home_bot = FakeTelegram::builder().token(HOME_TOKEN).bot("home_bot", 42).start().await;
    let work_bot = FakeTelegram::builder().token(WORK_TOKEN).bot("work_bot", 43).start().await;
    let api_url = serve_bots(&[&home_bot, &work_bot]).await;
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("SOUL.md"), HOME_PERSONA).unwrap();
    // The table's own bot (its token is set) runs beside the account, which takes the table's
    // `api_url` and `poll_timeout` and names its own token variable and profile.
    let table = format!(
        "[agent]\nprogress = false\n\n[platforms.telegram]\nenabled = true\napi_url = \"{api_url}\"\n\
         poll_timeout = \"1s\"\n\n[platforms.telegram.accounts.work]\ntoken_env = \"TELEGRAM_WORK_TOKEN\"\n\
         profile = \"work\"\n\n{}",
        two_profiles(&home_llm, &work_llm)
            .split_once("[profiles.work]")
            .map(|(_, p)| format!("[profiles.work]{p}"))
            .unwrap()
    );
    let env =
        [("TELEGRAM_BOT_TOKEN", HOME_TOKEN), ("TELEGRAM_WORK_TOKEN", WORK_TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001")];
    let d = start_daemon(home.path(), &config_for(&home_llm, &table), &env).await;
    let ann = User::new(1001, "Ann");
    let dm = Chat::private(&ann);

    // Ann writes to the work bot: the work profile's model and persona answer there; it saves a
    // fact in the work profile's memory.
    save_work_fact(&work_llm);
    work_bot.push_message(&dm, &ann, "remember my badge");
    assert!(eventually(WAIT, || work_bot.texts(dm.id).iter().any(|t| t == "noted at work")).await);
    assert!(system(&work_llm.requests()[0]).starts_with(WORK_PERSONA));
    assert_eq!(home_llm.count(), 0);
    assert!(home_bot.texts(dm.id).is_empty(), "the home bot says nothing: {:?}", home_bot.texts(dm.id));
    let work_memory = std::fs::read_dir(home.path().join("profiles/work/memory/users")).unwrap().count();
    assert_eq!(work_memory, 1, "the fact is in the work profile's memory");

    // The same person (the same chat id) on the home bot: another session, the default's model
    // and persona, and nothing of the work bot's conversation or memory.
    home_llm.push(Duration::ZERO, Step::Reply("hello from home".into()));
    home_bot.push_message(&dm, &ann, "what is my badge?");
    assert!(eventually(WAIT, || home_bot.texts(dm.id).iter().any(|t| t == "hello from home")).await);
    let request = home_llm.requests()[0].to_string();
    assert!(system(&home_llm.requests()[0]).starts_with(HOME_PERSONA));
    assert!(!request.contains(WORK_FACT) && !request.contains("remember my badge"), "{request}");
    assert!(!home.path().join("memory/users").exists(), "nothing saved in the default's memory");
    assert_eq!(work_bot.texts(dm.id).len(), 1, "each message answered once, by its own bot");
    assert_eq!(home_bot.texts(dm.id).len(), 1);

    // Each bot polls with its own cursor, and /readyz has a line for each.
    let (status, ready) = readyz(&d.base).await;
    assert_eq!(status, 200, "{ready}");
    let ready: Value = serde_json::from_str(&ready).unwrap();
    assert_eq!(ready["platforms"], json!({"telegram": "ok", "telegram@work": "ok"}), "{ready}");
    assert_eq!(ready["profiles"], json!({"default": "model fake-model", "work": "model work-model"}), "{ready}");

    // The operator sends from the work bot (`hermesd send telegram:1001 … --account work`).
    let sent = client()
        .post(format!("{}/admin/send", d.base))
        .bearer_auth(local_key(home.path()))
        .json(&json!({"target": format!("telegram:{}", dm.id), "account": "work", "text": "from the operator"}))
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 200, "{:?}", sent.text().await);
    assert_eq!(work_bot.texts(dm.id).last().map(String::as_str), Some("from the operator"));
    assert_eq!(home_bot.texts(dm.id).len(), 1, "not from the home bot");
    let metrics = client().get(format!("{}/metrics", d.base)).send().await.unwrap().text().await.unwrap();
    for line in ["hermesd_turns_total{outcome=\"ok\",profile=\"work\"} 1", "profile=\"default\"} 1"] {
        assert!(metrics.contains(line), "{line} missing in\n{metrics}");
    }
    d.daemon.stop().await;

    // The operator's views narrow to one profile.
    let out = |args: &[&str]| String::from_utf8_lossy(&support::hermesd_cli(home.path(), args).stdout).into_owned();
    let work = out(&["sessions", "list", "--profile", "work"]);
    assert!(work.contains("agent:work:telegram@work:") && !work.contains("agent:main:"), "{work}");
    let default = out(&["sessions", "list", "--profile", "default"]);
    assert!(default.contains("agent:main:telegram:") && !default.contains("agent:work:"), "{default}");
    assert_eq!(out(&["sessions", "search", "badge", "--profile", "work"]).lines().count(), 1, "remember my badge");
    assert!(out(&["sessions", "export", "--all", "--profile", "default"]).contains("what is my badge?"));
    assert!(!out(&["sessions", "export", "--all", "--profile", "default"]).contains("remember my badge"));
    let bad = support::hermesd_cli(home.path(), &["sessions", "list", "--profile", "Not A Name"]);
    assert_eq!(bad.status.code(), Some(2), "{}", String::from_utf8_lossy(&bad.stderr));
}

async fn readyz(base: &str) -> (u16, String) {
    let response = client().get(format!("{base}/readyz")).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_and_a_webhook_route_of_a_profile_run_on_its_model_and_persona() {
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home = tempfile::tempdir().unwrap();
    let extra = "[cron]\ntick = \"1s\"\n\n[[webhooks]]\nroute = \"deploys\"\nsecret_env = \"HOOK_SECRET\"\n\
                 prompt = \"DEPLOY {service}\"\ndeliver = \"local\"\nprofile = \"work\"\n\n";
    let config = two_profiles(&home_llm, &work_llm).replace("[profiles.work]", &format!("{extra}[profiles.work]"));
    let d = start_daemon(home.path(), &config, &[("HOOK_SECRET", "a-long-enough-secret")]).await;

    // A job of the work profile, as `hermesd cron add --profile work` stores it.
    let spec = JobSpec {
        schedule: "every 1s".into(),
        prompt: "CRON-REPORT".into(),
        deliver: Some("local".into()),
        profile: Some("work".into()),
        ..JobSpec::default()
    };
    let rules = JobRules { tz: chrono_tz::Tz::UTC, default_deliver: "local", models: &[], check_target: &|_| Ok(()) };
    let job = prepare(spec, &rules, chrono::Utc::now()).unwrap();
    let store = SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    store.create_job(&job, chrono::Utc::now().timestamp_millis()).await.unwrap();
    store.close().await;
    let asked = |llm: &FakeLlm, needle: &str| llm.requests().iter().any(|r| r.to_string().contains(needle));
    assert!(eventually(WAIT, || asked(&work_llm, "CRON-REPORT")).await, "the job never ran on the work model");
    let run = work_llm.requests().into_iter().find(|r| r.to_string().contains("CRON-REPORT")).unwrap();
    assert!(system(&run).starts_with(WORK_PERSONA), "{}", system(&run));

    // A signed webhook delivery of the route naming the work profile.
    let body = json!({"service": "billing"}).to_string().into_bytes();
    let ts = chrono::Utc::now().timestamp();
    let response = client()
        .post(format!("{}/webhooks/deploys", d.base))
        .header("x-webhook-timestamp", ts.to_string())
        .header("x-webhook-signature", sign_generic(b"a-long-enough-secret", ts, &body))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 202);
    assert!(eventually(WAIT, || asked(&work_llm, "DEPLOY billing")).await, "the webhook never ran on the work model");
    assert!(!asked(&home_llm, "CRON-REPORT") && !asked(&home_llm, "DEPLOY billing"), "the default's model was asked");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_mid_turn_on_two_bots_answers_every_message_of_both_exactly_once() {
    let slow = Duration::from_millis(1500);
    let home_llm = FakeLlm::builder().latency(slow).start().await;
    let work_llm = FakeLlm::builder().latency(slow).start().await;
    let home_bot = FakeTelegram::builder().token(HOME_TOKEN).bot("home_bot", 42).start().await;
    let work_bot = FakeTelegram::builder().token(WORK_TOKEN).bot("work_bot", 43).start().await;
    let api_url = serve_bots(&[&home_bot, &work_bot]).await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let profiles = two_profiles(&home_llm, &work_llm);
    let config = format!(
        "{}\n[agent]\ndrain_timeout = \"2s\"\n# Each message its own turn: a recovered one and a new one never merge.\nbatch_window = \"0s\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{api_url}\"\n\
         poll_timeout = \"1s\"\n\n[platforms.telegram.accounts.work]\ntoken_env = \"TELEGRAM_WORK_TOKEN\"\n\
         profile = \"work\"\n",
        profiles.replace("listen = \"127.0.0.1:0\"", &format!("listen = \"127.0.0.1:{port}\""))
    );
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let env = [
        ("TELEGRAM_BOT_TOKEN", HOME_TOKEN),
        ("TELEGRAM_WORK_TOKEN", WORK_TOKEN),
        ("TELEGRAM_ALLOWED_USERS", "3001,3002"),
    ];
    let log = || support::daemon_log(home.path());
    let mut child = support::spawn_gateway_with_env(home.path(), &env);
    support::wait_ready(port, home.path()).await;
    let users: Vec<User> = (3001..=3002).map(|id| User::new(id, &format!("user{id}"))).collect();
    for user in &users {
        home_bot.push_message(&Chat::private(user), user, &format!("home crash {}", user.id));
        work_bot.push_message(&Chat::private(user), user, &format!("work crash {}", user.id));
    }
    let started = || home_llm.count() == 2 && work_llm.count() == 2;
    assert!(eventually(WAIT, started).await, "turns started; log:\n{}", log());
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(home_bot.sent().is_empty() && work_bot.sent().is_empty(), "nothing answered before the kill");

    let mut child = support::spawn_gateway_with_env(home.path(), &env);
    support::wait_ready(port, home.path()).await;
    // After the restart each bot polls on from its own stored offset: a new message to each is
    // answered too, and nothing old comes again.
    for user in &users {
        home_bot.push_message(&Chat::private(user), user, &format!("home after {}", user.id));
        work_bot.push_message(&Chat::private(user), user, &format!("work after {}", user.id));
    }
    let answers = |bot: &FakeTelegram, id: i64| bot.texts(id).iter().filter(|t| t.starts_with("echo: ")).count();
    let done = || users.iter().all(|u| answers(&home_bot, u.id) >= 2 && answers(&work_bot, u.id) >= 2);
    assert!(eventually(Duration::from_secs(30), done).await, "{:?} {:?}\n{}", home_bot.sent(), work_bot.sent(), log());
    tokio::time::sleep(Duration::from_secs(2)).await;
    for user in &users {
        let id = user.id;
        // Answers only: a message that found its session busy also hears "queued".
        let sorted = |texts: Vec<String>| {
            let mut answers: Vec<String> = texts.into_iter().filter(|t| t.starts_with("echo: ")).collect();
            answers.sort();
            answers
        };
        assert_eq!(sorted(home_bot.texts(id)), [format!("echo: home after {id}"), format!("echo: home crash {id}")]);
        assert_eq!(sorted(work_bot.texts(id)), [format!("echo: work after {id}"), format!("echo: work crash {id}")]);
    }
    // Each interrupted turn ran once more on its own profile's model, and only once.
    assert_eq!((home_llm.count(), work_llm.count()), (6, 6));
    let home_asked = home_llm.requests().iter().any(|r| r.to_string().contains("work crash"));
    assert!(!home_asked, "a work bot's message reached the default's model");
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profiles_own_limits_bind_its_turns_only() {
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let home = tempfile::tempdir().unwrap();
    // The default allows two turns a day, the work profile one; each counts ann's turns apart.
    let config = two_profiles(&home_llm, &work_llm)
        .replace("[profiles.work.model]", "[profiles.work.limits]\nuser_daily_turns = 1\n\n[profiles.work.model]");
    let config = format!("[limits]\nuser_daily_turns = 2\n\n{config}");
    let d = start_daemon(home.path(), &config, &[]).await;
    let ask = |model: &'static str, text: &'static str| {
        let url = format!("{}/v1/chat/completions", d.base);
        async move {
            let body = json!({"model": model, "user": "ann", "messages": [{"role": "user", "content": text}]});
            let answer: Value = client().post(url).json(&body).send().await.unwrap().json().await.unwrap();
            answer["choices"][0]["message"]["content"].as_str().unwrap_or_default().to_owned()
        }
    };
    assert_eq!(ask("profile:work", "first").await, "echo: first");
    let refused = ask("profile:work", "second").await;
    assert!(refused.starts_with("Daily limit reached: You have used 1 turns"), "{refused}");
    assert_eq!(work_llm.count(), 1, "the refused turn made no model call");
    for text in ["home one", "home two"] {
        assert_eq!(ask("hermes-agent", text).await, format!("echo: {text}"), "the work turn is not the default's");
    }
    let refused = ask("hermes-agent", "home three").await;
    assert!(refused.starts_with("Daily limit reached: You have used 2 turns"), "{refused}");
    d.daemon.stop().await;
}
