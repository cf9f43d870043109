//! `hermesd doctor`: the real binary's live checks against fakes that speak each platform's wire
//! protocol — a model that answers and one whose key is refused, two Telegram bots (one with a
//! refused token, one whose webhook Telegram cannot reach), Slack, WhatsApp and signal-cli that
//! answer, an MCP server that cannot start, and a store with a row set aside today; then Discord,
//! Home Assistant (a refused token) and a real Dovecot (a refused password).
#![cfg(all(
    feature = "telegram",
    feature = "slack",
    feature = "whatsapp",
    feature = "signal",
    feature = "discord",
    feature = "homeassistant",
    feature = "email"
))]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;
use support::fake_signal::FakeSignal;
use support::fake_slack::FakeSlack;
use support::fake_telegram::FakeTelegram;
use support::fake_whatsapp::{FakeWhatsApp, PHONE_NUMBER_ID};
use support::{FakeLlm, config_for};

/// `hermesd doctor --json` in `home` with `env`, from a blocking thread (the fakes keep serving).
async fn doctor(home: &Path, env: &[(&str, &str)], json: bool) -> (Option<i32>, String) {
    let (home, env): (std::path::PathBuf, Vec<(String, String)>) =
        (home.to_owned(), env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect());
    tokio::task::spawn_blocking(move || {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"));
        command.args(["--home", home.to_str().unwrap(), "doctor"]).env_clear().env("PATH", "/usr/bin:/bin");
        if json {
            command.arg("--json");
        }
        for (key, value) in &env {
            command.env(key, value);
        }
        let output = command.output().unwrap();
        (output.status.code(), String::from_utf8_lossy(&output.stdout).into_owned())
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn doctor_names_each_broken_part_with_its_fix_and_exits_non_zero() {
    let (good_llm, refusing_llm) =
        (FakeLlm::echo().await, FakeLlm::builder().fail(401, "invalid api key").start().await);
    let (home_bot, webhook_bot) = (
        FakeTelegram::builder().token("111:HOME").bot("home_bot", 11).start().await,
        FakeTelegram::builder().token("222:HOOK").bot("hook_bot", 22).start().await,
    );
    let slack = FakeSlack::start("xoxb-doctor", "xapp-doctor").await;
    let whatsapp = FakeWhatsApp::start("EAAdoctor").await;
    let signal = FakeSignal::start().await;
    // Telegram cannot reach the webhook bot's URL: its last delivery failed.
    let set = support::client()
        .post(format!("{}/bot222:HOOK/setWebhook", webhook_bot.base_url()))
        .json(&serde_json::json!({"url": "https://bot.example.org/telegram/hook/webhook"}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    webhook_bot.webhook_failed("Connection timed out");

    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "[[model.fallback]]\nprovider = \"chat_completions\"\nbase_url = \"{refusing}\"\nname = \"refusing-model\"\n\
         api_key_env = \"REFUSED_KEY\"\n\n\
         [platforms.telegram]\nenabled = true\napi_url = \"{telegram}\"\n\n\
         [platforms.telegram.accounts.bad]\ntoken_env = \"TELEGRAM_BAD_TOKEN\"\n\n\
         [platforms.telegram.accounts.hook]\ntoken_env = \"TELEGRAM_HOOK_TOKEN\"\napi_url = \"{hook}\"\nmode = \"webhook\"\n\
         webhook_url = \"https://bot.example.org/telegram/hook/webhook\"\n\n\
         [platforms.slack]\nenabled = true\napi_url = \"{slack}\"\n\n\
         [platforms.whatsapp]\nenabled = true\napi_url = \"{whatsapp}\"\nphone_number_id = \"{PHONE_NUMBER_ID}\"\n\n\
         [platforms.signal]\nenabled = true\nhttp_url = \"{signal}\"\naccount = \"+15550001111\"\n\n\
         [mcp.servers.broken]\ncommand = \"/nonexistent/mcp-server\"\nconnect_timeout = \"2s\"\n",
        refusing = refusing_llm.base_url(),
        telegram = home_bot.base_url(),
        hook = webhook_bot.base_url(),
        slack = slack.api_url(),
        whatsapp = whatsapp.api_url(),
        signal = signal.url(),
    );
    std::fs::write(home.path().join("config.toml"), config_for(&good_llm, &extra)).unwrap();
    // A row set aside today, as the start-up recovery leaves an undecodable event.
    let store =
        hermesd::store::SqliteStore::open(&home.path().join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    store.close().await;
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", home.path().join("state.db").display())).await.unwrap();
    let now = chrono::Utc::now().timestamp_millis();
    sqlx::query("INSERT INTO inbound_events (platform, event_id, payload, state, received_at, finished_at) VALUES ('telegram', 'x', '{', 'quarantined', ?1, ?1)")
        .bind(now)
        .execute(&db)
        .await
        .unwrap();
    db.close().await;

    let env = [
        ("TELEGRAM_BOT_TOKEN", "111:HOME"),
        ("TELEGRAM_BAD_TOKEN", "999:WRONG"),
        ("TELEGRAM_HOOK_TOKEN", "222:HOOK"),
        ("TELEGRAM_WEBHOOK_SECRET", "hook-secret"),
        ("REFUSED_KEY", "sk-wrong"),
        ("SLACK_BOT_TOKEN", "xoxb-doctor"),
        ("SLACK_APP_TOKEN", "xapp-doctor"),
        ("WHATSAPP_ACCESS_TOKEN", "EAAdoctor"),
        ("WHATSAPP_APP_SECRET", "s"),
        ("WHATSAPP_VERIFY_TOKEN", "v"),
    ];
    let (code, out) = doctor(home.path(), &env, true).await;
    assert_eq!(code, Some(1), "failures exit 1: {out}");
    let findings: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let status = |check: &str| -> (String, String) {
        let found = findings.iter().find(|f| f["check"] == check).unwrap_or_else(|| panic!("no {check} in {out}"));
        (found["status"].as_str().unwrap().to_owned(), found["detail"].as_str().unwrap().to_owned())
    };
    let expect = |check: &str, wanted: &str, needle: &str| {
        let (got, detail) = status(check);
        assert_eq!(got, wanted, "{check}: {detail}");
        assert!(detail.contains(needle), "{check}: {needle:?} not in {detail:?}");
    };
    expect("config", "ok", "is valid");
    expect("model default/fake-model", "ok", "answers at");
    expect("model default/refusing-model", "fail", "refused the API key");
    expect("clock", "ok", "against 127.0.0.1");
    expect("platform telegram", "ok", "@home_bot");
    expect("platform telegram@bad", "fail", "bot token was refused");
    expect("platform telegram@hook", "fail", "Connection timed out");
    expect("platform slack", "ok", "bot user");
    expect("platform whatsapp", "ok", PHONE_NUMBER_ID);
    expect("platform signal", "ok", "signal-cli answers");
    expect("mcp broken", "fail", "");
    expect("store", "ok", "quick_check ok");
    expect("last day", "fail", "1 inbound events");
    let fixes: Vec<&str> =
        findings.iter().filter(|f| f["status"] == "fail").filter_map(|f| f["fix"].as_str()).collect();
    assert_eq!(fixes.len(), findings.iter().filter(|f| f["status"] == "fail").count(), "every failure has its fix");
    assert!(!out.contains("sk-wrong") && !out.contains("999:WRONG"), "no secret in the report: {out}");

    // The text form: one line each, marked.
    let (code, text) = doctor(home.path(), &env, false).await;
    assert_eq!(code, Some(1));
    assert!(text.contains("✓ platform telegram: @home_bot") && text.contains("✗ platform telegram@bad:"), "{text}");
    assert!(text.contains(" — fix: "), "{text}");
    for line in text.lines().filter(|l| !l.starts_with(' ')) {
        assert!(line.starts_with("✓ ") || line.starts_with("✗ ") || line.ends_with("with warnings"), "{line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_config_is_a_finding_not_a_stop() {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(home.path().join("config.toml"), "[agent]\nmax_iterations = \"many\"\n").unwrap();
    let (code, out) = doctor(home.path(), &[], false).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("✗ config:") && out.contains("max_iterations"), "{out}");
    assert!(out.contains("disk:"), "the checks that need no config still run: {out}");

    // A config that loads but does not validate (an unset secret) is a failing finding too.
    std::fs::write(home.path().join("config.toml"), "[platforms.telegram]\nenabled = true\n").unwrap();
    let (code, out) = doctor(home.path(), &[], false).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("✗ config:") && out.contains("TELEGRAM_BOT_TOKEN"), "{out}");

    std::fs::write(home.path().join("config.toml"), "").unwrap();
    let (code, out) = doctor(home.path(), &[], false).await;
    assert_eq!(code, Some(0), "warnings alone exit 0: {out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_home_assistant_and_imap_accounts_are_checked_live() {
    let llm = FakeLlm::echo().await;
    let discord = support::fake_discord::FakeDiscord::builder().token("discord-doctor").start().await;
    let hass = support::fake_hass::FakeHass::start("the-real-hass-token").await;
    let imap = support::dovecot::Dovecot::start("agent@example.com", "right-password").await;
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "[platforms.discord]\nenabled = true\napi_url = \"{}\"\n\n\
         [platforms.homeassistant]\nenabled = true\nurl = \"{}\"\n\n\
         [platforms.email]\nenabled = true\nimap_url = \"{}\"\nsmtp_url = \"smtp://127.0.0.1:1\"\n\
         address = \"agent@example.com\"\nauthserv_id = \"mx.test\"\n\n\
         [platforms.email.accounts.wrong]\naddress = \"other@example.com\"\nusername = \"nobody@example.com\"\n\
         password_env = \"EMAIL_WRONG_PASSWORD\"\n",
        discord.base_url(),
        hass.url(),
        imap.url()
    );
    std::fs::write(home.path().join("config.toml"), config_for(&llm, &extra)).unwrap();
    let env = [
        ("DISCORD_BOT_TOKEN", "discord-doctor"),
        ("HASS_TOKEN", "a-wrong-hass-token"),
        ("EMAIL_PASSWORD", "right-password"),
        ("EMAIL_WRONG_PASSWORD", "wrong-password"),
    ];
    let (code, out) = doctor(home.path(), &env, true).await;
    assert_eq!(code, Some(1), "{out}");
    let findings: Vec<Value> = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    let found = |check: &str| {
        findings.iter().find(|f| f["check"] == check).cloned().unwrap_or_else(|| panic!("{check}: {out}"))
    };
    let discord_line = found("platform discord");
    assert_eq!(discord_line["status"], "ok", "{discord_line}");
    let hass_line = found("platform homeassistant");
    assert_eq!(hass_line["status"], "fail", "{hass_line}");
    assert!(hass_line["detail"].as_str().unwrap().contains("refused the token"), "{hass_line}");
    let mail = found("platform email");
    assert_eq!(mail["status"], "ok", "{mail}");
    assert!(mail["detail"].as_str().unwrap().contains("INBOX has 0 messages"), "{mail}");
    let wrong = found("platform email@wrong");
    assert_eq!(wrong["status"], "fail", "{wrong}");
    assert!(wrong["detail"].as_str().unwrap().contains("login"), "{wrong}");
    assert!(!out.contains("wrong-password") && !out.contains("a-wrong-hass-token"), "{out}");
}
