//! `hermesd import openclaw` on homes made by the real OpenClaw (2026.9.6, with conversations in
//! its SQLite databases, one tool result zstd-compressed; and 2026.7.1, with them in JSON and
//! JSONL files; see tests/fixtures/openclaw/make_home.sh and FORMAT.md): the dry run writes
//! nothing; `--apply` maps the config and keys, and brings the conversations, memory, persona,
//! skills, cron jobs and approved pairings, after which the real daemon answers the next
//! Telegram message of the imported chat with its history (each message once, in order) and the
//! imported memory in the system prompt, and answers the person OpenClaw approved by pairing; a
//! second import changes nothing, and OpenClaw's home is never modified.
#![cfg(feature = "telegram")]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::fake_telegram::{Chat, FakeTelegram, User};
use support::import::{conversation, copy_tree, run, snapshot};
use support::{FakeLlm, eventually, hermesd_cli, spawn_gateway_with_env, wait_ready};

const TOKEN: &str = "123456:TEST-TOKEN";
const WAIT: Duration = Duration::from_secs(20);

/// A fixture home copied, with its model and Telegram URLs pointed at the fakes.
fn openclaw_home(dir: &Path, fixture: &str, model_url: &str, telegram_url: &str) -> PathBuf {
    let home = dir.join(fixture);
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openclaw").join(fixture), &home);
    let config = home.join("openclaw.json");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("http://127.0.0.1:18555/v1") && text.contains("http://127.0.0.1:18556"));
    let text = text.replace("http://127.0.0.1:18555/v1", model_url).replace("http://127.0.0.1:18556", telegram_url);
    std::fs::write(&config, text).unwrap();
    home
}

/// The imported Telegram conversation, as the model is given it before the next message.
const HISTORY: &[(&str, &str)] = &[
    ("user", "Hello there!"),
    ("assistant", "Hello! I am the fixture assistant. How can I help?"),
    ("user", "What is in my memory?"),
    ("assistant", "[calls read]"),
    ("tool", "Durable facts and decisions"),
    ("assistant", "Your MEMORY.md says"),
    ("user", "Please remember that I prefer green tea in the morning."),
    ("assistant", "Noted: you prefer green tea in the morning."),
    ("user", "What do I drink in the morning?"),
    ("assistant", "You told me you prefer green tea in the morning."),
];

async fn comes_over_and_continues(fixture: &str) {
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let openclaw = openclaw_home(dir.path(), fixture, &llm.base_url(), &tg.base_url());
    let openclaw_before = snapshot(&openclaw);
    let home = dir.path().join("hermesd");
    std::fs::create_dir_all(&home).unwrap();
    let from = openclaw.to_str().unwrap();

    // The dry run lists everything and writes nothing.
    let dry = run(&home, &["import", "openclaw", from]);
    assert!(dry.contains("dry run") && dry.contains("would write"), "{dry}");
    for expected in [
        "config.toml",
        "TELEGRAM_BOT_TOKEN",
        "OPENROUTER_API_KEY",
        "continues in agent:main:telegram:dm:111111111",
        "Morning weather brief",
        "telegram:333333333",
        "memory/MEMORY.md",
        "weather-brief",
        "unit-convert",
        "channels.whatsapp",
    ] {
        assert!(dry.contains(expected), "{fixture}: the dry run names {expected}:\n{dry}");
    }
    for secret in ["TEST-TOKEN", "sk-test-openclaw", "sk-or-test-openclaw", "TESTfixtureSLACK"] {
        assert!(!dry.contains(secret), "no secret printed:\n{dry}");
    }
    assert!(snapshot(&home).is_empty(), "the dry run wrote nothing");

    // --apply writes it, after a backup.
    let applied = run(&home, &["import", "openclaw", from, "--apply"]);
    assert!(applied.contains("+ wrote"), "{applied}");
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(config.contains(&format!("api_url = \"{}\"", tg.base_url())), "{config}");
    assert!(config.contains("anthropic/claude-sonnet-4.5"), "the fallback model:\n{config}");
    assert!(!config.contains("sk-test-openclaw"), "the key written in openclaw.json moves to .env:\n{config}");
    let env = std::fs::read_to_string(home.join(".env")).unwrap();
    for line in [
        format!("TELEGRAM_BOT_TOKEN={TOKEN}"),
        "TELEGRAM_ALLOWED_USERS=111111111".into(),
        "OPENROUTER_API_KEY=sk-or-test-openclaw".into(),
    ] {
        assert!(env.contains(&line), "{line} in .env:\n{env}");
    }
    let check = run(&home, &["check"]);
    assert!(check.contains("configuration OK"), "{check}");
    let cron = run(&home, &["cron", "list"]);
    assert!(cron.contains("Morning weather brief") && cron.contains("Inbox check"), "{cron}");
    assert!(!cron.contains("heartbeat") && !cron.contains("dreaming"), "OpenClaw's own jobs stay out:\n{cron}");

    // A second import changes nothing.
    let home_after = snapshot(&home);
    let again = run(&home, &["import", "openclaw", from, "--apply"]);
    assert!(again.contains("nothing to do") && !again.contains("+ wrote"), "{again}");
    let changed: Vec<_> = snapshot(&home)
        .into_iter()
        .filter(|(path, bytes)| {
            !path.to_string_lossy().contains("state.db") && home_after.iter().all(|(p, b)| p != path || b != bytes)
        })
        .map(|(path, _)| path)
        .collect();
    assert!(changed.is_empty(), "a second import wrote {changed:?}");
    assert_eq!(snapshot(&openclaw), openclaw_before, "OpenClaw's home is never modified");

    // The daemon on the imported home (Discord and Slack off: this machine has neither).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut table: toml::Table = toml::from_str(&config).unwrap();
    let set = |table: &mut toml::Table, path: &[&str], value: toml::Value| {
        let (last, parents) = path.split_last().unwrap();
        let mut at = table;
        for part in parents {
            at = at.entry(part.to_string()).or_insert(toml::Value::Table(Default::default())).as_table_mut().unwrap();
        }
        at.insert(last.to_string(), value);
    };
    set(&mut table, &["http", "listen"], format!("127.0.0.1:{port}").into());
    set(&mut table, &["agent", "batch_window"], "0s".into());
    set(&mut table, &["platforms", "telegram", "poll_timeout"], "1s".into());
    set(&mut table, &["platforms", "discord", "enabled"], false.into());
    set(&mut table, &["platforms", "slack", "enabled"], false.into());
    std::fs::write(home.join("config.toml"), toml::to_string(&table).unwrap()).unwrap();
    let mut child = spawn_gateway_with_env(&home, &[]);
    wait_ready(port, &home).await;

    // Ada's chat continues where it was in OpenClaw.
    let ada = User::new(111111111, "Ada");
    tg.push_message(&Chat::private(&ada), &ada, "And in the evening?");
    assert!(
        eventually(WAIT, || tg.texts(111111111).iter().any(|t| t.contains("And in the evening?"))).await,
        "{:?}\n{}",
        tg.texts(111111111),
        support::daemon_log(&home)
    );
    let request = llm.requests().into_iter().find(|r| r.to_string().contains("And in the evening?")).unwrap();
    let said = conversation(&request);
    assert_eq!(said[0].0, "system");
    assert!(
        said[0].1.contains("Ada Lovelace (Telegram 111111111, @ada_fixture) is the owner"),
        "the imported notes are in the prompt:\n{}",
        said[0].1
    );
    let rest = &said[1..];
    assert_eq!(rest.len(), HISTORY.len() + 1, "{fixture}: {rest:#?}");
    for (i, (role, text)) in HISTORY.iter().enumerate() {
        assert_eq!(rest[i].0, *role, "message {i} of {rest:#?}");
        assert!(rest[i].1.contains(text), "message {i} of {rest:#?}");
    }
    assert!(rest.last().unwrap().1.contains("And in the evening?"));

    // Bob was let in by pairing in OpenClaw: he is answered. A stranger gets a pairing code.
    let bob = User::new(333333333, "Bob");
    tg.push_message(&Chat::private(&bob), &bob, "hi from bob");
    assert!(eventually(WAIT, || tg.texts(333333333).iter().any(|t| t.contains("hi from bob"))).await);
    let eve = User::new(999999999, "Eve");
    tg.push_message(&Chat::private(&eve), &eve, "let me in");
    assert!(eventually(WAIT, || tg.texts(999999999).iter().any(|t| t.contains("pairing code"))).await);
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openclaw_home_with_its_conversations_in_sqlite_comes_over() {
    comes_over_and_continues("home").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_openclaw_home_with_jsonl_transcripts_comes_over() {
    comes_over_and_continues("home-legacy").await;
}

#[test]
fn a_folder_that_is_not_an_openclaw_home_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = hermesd_cli(&dir.path().join("hermesd"), &["import", "openclaw", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an OpenClaw home"));
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("openclaw.json"), "{ channels: { telegram: ").unwrap();
    let out = hermesd_cli(&dir.path().join("hermesd"), &["import", "openclaw", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("openclaw.json"), "{}", String::from_utf8_lossy(&out.stderr));
}
