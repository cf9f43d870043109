//! `hermesd import hermes` on a home made by the real Hermes (hermes-agent 0.19.0; see
//! tests/fixtures/hermes/make_home.py): the dry run writes nothing; `--apply` maps the config,
//! copies the keys, and brings the conversations, memory, cron jobs and approvals, after which
//! the real daemon answers the next Telegram message of an imported chat with its history (each
//! message once, in order) and the imported memory in the system prompt, and answers a person
//! Hermes approved by pairing; a second import changes nothing.
#![cfg(feature = "telegram")]

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use support::fake_telegram::{Chat, FakeTelegram, User};
use support::import::{conversation, copy_tree, run, snapshot};
use support::{FakeLlm, eventually, hermesd_cli, spawn_gateway_with_env, wait_ready};

const TOKEN: &str = "123456:ABC-fixture";
const WAIT: Duration = Duration::from_secs(20);

/// The fixture home copied, with its model and Telegram URLs pointed at the fakes.
fn hermes_home(dir: &Path, model_url: &str, telegram_url: &str) -> PathBuf {
    let home = dir.join("hermes");
    copy_tree(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/hermes/home"), &home);
    let config = home.join("config.yaml");
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("https://openrouter.ai/api/v1") && text.contains("https://telegram-api.example/bot"));
    let text =
        text.replace("https://openrouter.ai/api/v1", model_url).replace("https://telegram-api.example", telegram_url);
    std::fs::write(&config, text).unwrap();
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hermes_home_comes_over_and_its_chats_continue() {
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let dir = tempfile::tempdir().unwrap();
    let hermes = hermes_home(dir.path(), &llm.base_url(), &tg.base_url());
    let hermes_before = snapshot(&hermes);
    let home = dir.path().join("hermesd");
    std::fs::create_dir_all(&home).unwrap();
    let hermes_arg = hermes.to_str().unwrap();

    // The dry run lists everything and writes nothing.
    let dry = run(&home, &["import", "hermes", hermes_arg]);
    assert!(dry.contains("dry run") && dry.contains("would write"), "{dry}");
    for expected in [
        "config.toml",
        "TELEGRAM_BOT_TOKEN",
        "continues in agent:main:telegram:dm:12345",
        "Morning news",
        "telegram:34567 (dave)",
        "brand_new_feature",
        "memory/users/telegram/12345/USER.md",
    ] {
        assert!(dry.contains(expected), "the dry run names {expected}:\n{dry}");
    }
    assert!(!dry.contains("sk-or-v1-fixture") && !dry.contains("ABC-fixture"), "no secret printed:\n{dry}");
    assert!(snapshot(&home).is_empty(), "the dry run wrote nothing");

    // --apply writes it, after a backup.
    let applied = run(&home, &["import", "hermes", hermes_arg, "--apply"]);
    assert!(applied.contains("backup of this home") && applied.contains("+ wrote"), "{applied}");
    let config = std::fs::read_to_string(home.join("config.toml")).unwrap();
    assert!(config.contains(&format!("api_url = \"{}\"", tg.base_url())), "/bot is dropped from base_url:\n{config}");
    assert!(config.contains("[profiles.coder]"), "{config}");
    assert!(!config.contains("sk-coder-fixture"), "the key written in Hermes' config.yaml moves to .env:\n{config}");
    let env = std::fs::read_to_string(home.join(".env")).unwrap();
    assert!(env.contains("sk-coder-fixture") && env.contains(&format!("TELEGRAM_BOT_TOKEN={TOKEN}")), "{env}");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(home.join(".env")).unwrap().permissions().mode() & 0o777, 0o600);
    let check = run(&home, &["check"]);
    assert!(check.contains("configuration OK"), "{check}");
    let paired = run(&home, &["pairing", "list"]);
    assert!(paired.contains("dave") && paired.contains("bob"), "{paired}");
    let cron = run(&home, &["cron", "list"]);
    assert!(cron.contains("Morning news") && cron.contains("Run cargo audit") && cron.contains("paused"), "{cron}");

    // A second import changes nothing.
    let home_after = snapshot(&home);
    let again = run(&home, &["import", "hermes", hermes_arg, "--apply"]);
    assert!(again.contains("nothing to do") && !again.contains("+ wrote"), "{again}");
    let changed: Vec<_> = snapshot(&home)
        .into_iter()
        .filter(|(path, bytes)| {
            !path.to_string_lossy().contains("state.db") && home_after.iter().all(|(p, b)| p != path || b != bytes)
        })
        .map(|(path, _)| path)
        .collect();
    assert!(changed.is_empty(), "a second import wrote {changed:?}");
    assert_eq!(std::fs::read_dir(home.join("backups")).unwrap().count(), 1, "no second backup");
    assert_eq!(snapshot(&hermes), hermes_before, "Hermes' home is never modified");

    // The daemon on the imported home (the other platforms, their routes and the MCP server
    // switched off here: this machine has no Discord, Slack or npx).
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
    set(&mut table, &["mcp", "servers", "filesystem", "enabled"], false.into());
    table.remove("routes");
    std::fs::write(home.join("config.toml"), toml::to_string(&table).unwrap()).unwrap();
    let mut child = spawn_gateway_with_env(&home, &[]);
    wait_ready(port, &home).await;

    // Alice's chat continues where it was in Hermes.
    let alice = User::new(12345, "Alice");
    tg.push_message(&Chat::private(&alice), &alice, "And tomorrow?");
    assert!(
        eventually(WAIT, || tg.texts(12345).iter().any(|t| t.contains("And tomorrow?"))).await,
        "{:?}\n{:#?}\n{}",
        tg.texts(12345),
        llm.requests(),
        support::daemon_log(&home)
    );
    let request = llm.requests().into_iter().find(|r| r.to_string().contains("And tomorrow?")).unwrap();
    let said = conversation(&request);
    let system = &said[0];
    assert_eq!(system.0, "system");
    assert!(system.1.contains("~/src/widget"), "the agent's imported notes are in the prompt:\n{}", system.1);
    assert!(system.1.contains("Alice prefers short answers"), "Alice's own memory is in her prompt:\n{}", system.1);
    assert!(system.1.contains("Alice's home assistant"), "the persona came over:\n{}", system.1);
    let rest: Vec<(String, String)> = said[1..].to_vec();
    let expected = [
        ("user", "What's the weather in Berlin?"),
        ("assistant", "[calls web_search]"),
        ("tool", "{\"results\": [{\"title\": \"Berlin: 18C, cloudy\"}]}"),
        ("assistant", "It's 18°C and cloudy in Berlin."),
    ];
    assert!(rest.len() > expected.len(), "{rest:?}");
    for (i, (role, text)) in expected.iter().enumerate() {
        assert_eq!(rest[i].0, *role, "message {i} of {rest:?}");
        assert!(rest[i].1.contains(text), "message {i} of {rest:?}");
    }
    assert!(rest.last().unwrap().1.contains("And tomorrow?"));
    let once = rest.iter().filter(|(_, t)| t.contains("What's the weather in Berlin?")).count();
    assert_eq!(once, 1, "each imported message once: {rest:?}");

    // Dave was let in by pairing in Hermes: he is answered.
    let dave = User::new(34567, "Dave");
    tg.push_message(&Chat::private(&dave), &dave, "hi from dave");
    assert!(
        eventually(WAIT, || tg.texts(34567).iter().any(|t| t.contains("hi from dave"))).await,
        "{:?}",
        tg.texts(34567)
    );
    // A stranger is not.
    let eve = User::new(99999, "Eve");
    tg.push_message(&Chat::private(&eve), &eve, "let me in");
    assert!(
        eventually(WAIT, || tg.texts(99999).iter().any(|t| t.contains("pairing code"))).await,
        "{:?}",
        tg.texts(99999)
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn a_folder_that_is_not_a_hermes_home_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = hermesd_cli(&dir.path().join("hermesd"), &["import", "hermes", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a Hermes home"));
    let broken = dir.path().join("broken");
    std::fs::create_dir_all(&broken).unwrap();
    std::fs::write(broken.join("config.yaml"), "model: [unclosed\n").unwrap();
    let out = hermesd_cli(&dir.path().join("hermesd"), &["import", "hermes", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("config.yaml"), "{}", String::from_utf8_lossy(&out.stderr));
}
