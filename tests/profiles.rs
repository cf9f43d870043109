//! Profiles end to end: several agents in one daemon, each with its own model, persona and
//! memory, chosen by the API's `model` field (and, for chat platforms, by the account a message
//! came in on).

mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake_llm::Step;
use support::fake_telegram::{Chat, FakeTelegram, User, serve_bots};
use support::{FakeLlm, client, config_for, eventually, start_daemon};

const HOME_PERSONA: &str = "You are the HOME-PERSONA.";
const WORK_PERSONA: &str = "You are the WORK-PERSONA.";
const WORK_FACT: &str = "WORK-FACT-4711";
const HOME_TOKEN: &str = "111:HOME";
const WORK_TOKEN: &str = "222:WORK";
const WAIT: Duration = Duration::from_secs(20);

/// The system prompt of a recorded request.
fn system(request: &Value) -> String {
    request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .find(|m| m["role"] == "system")
        .map_or_else(String::new, |m| m["content"].as_str().unwrap_or_default().to_owned())
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
    work_llm.push(
        Duration::ZERO,
        Step::ToolCalls(vec![(
            "memory".into(),
            json!({"action": "add", "target": "user", "content": WORK_FACT}).to_string(),
        )]),
    );
    work_llm.push(Duration::ZERO, Step::Reply("noted at work".into()));
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
    work_llm.push(
        Duration::ZERO,
        Step::ToolCalls(vec![(
            "memory".into(),
            json!({"action": "add", "target": "user", "content": WORK_FACT}).to_string(),
        )]),
    );
    work_llm.push(Duration::ZERO, Step::Reply("noted at work".into()));
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
    d.daemon.stop().await;
}

async fn readyz(base: &str) -> (u16, String) {
    let response = client().get(format!("{base}/readyz")).send().await.unwrap();
    (response.status().as_u16(), response.text().await.unwrap())
}
