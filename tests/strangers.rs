//! Strangers cost nothing, on every chat platform: the real daemon against the fake Telegram,
//! Slack and Discord. An unknown sender's message with a file gets one pairing reply per window
//! (in a DM) or nothing (in a group); no file is downloaded, no thread opened, no inbound event
//! stored, and the platform is still acknowledged.

mod support;

use std::path::Path;
use std::time::Duration;

use hermesd::store::SqliteStore;
use support::{FakeLlm, config_for, eventually, start_daemon};

const WAIT: Duration = Duration::from_secs(10);

/// Inbound events of `platform` in the store under `home`.
async fn stored(home: &Path, platform: &str) -> i64 {
    let store = SqliteStore::open(&home.join("state.db"), Duration::from_secs(5), 1).await.unwrap();
    let count = store.inbound_count(platform).await.unwrap();
    store.close().await;
    count
}

/// Lets a late reply or download show up before asserting there was none.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(600)).await;
}

fn media_is_empty(home: &Path) -> bool {
    std::fs::read_dir(home.join("media")).map_or(true, |mut dir| dir.next().is_none())
}

#[cfg(feature = "telegram")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_telegram_stranger_gets_one_pairing_reply_and_nothing_is_stored_or_downloaded() {
    use support::fake_telegram::{Chat, FakeTelegram, Incoming, User};
    const TOKEN: &str = "123:ABC";
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await;
    let home = tempfile::tempdir().unwrap();
    let table =
        format!("[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n", tg.base_url());
    // No allowlist: default deny.
    let d = start_daemon(home.path(), &config_for(&llm, &table), &[("TELEGRAM_BOT_TOKEN", TOKEN)]).await;
    let zed = User::new(2001, "Zed");
    let dm = Chat::private(&zed);
    tg.add_file("doc1", "payload.bin", b"not for strangers");
    let file = |text: &str| Incoming::text(&dm, &zed, text).document("doc1", "payload.bin", "application/octet-stream");
    tg.push(file("take this"));
    let second = tg.push(file("and this"));
    let press = tg.push_callback(&zed, dm.id, 1, "approve");
    let group = Chat::group(-555, "Lobby");
    let mallory = User::new(2002, "Mallory");
    let intrusion = tg.push(Incoming::text(&group, &mallory, "@hermes_bot take this").document(
        "doc1",
        "payload.bin",
        "text/plain",
    ));
    let last = [second, press, intrusion].into_iter().map(|u| u.update_id).max().unwrap();
    assert!(eventually(WAIT, || tg.confirmed_offset() > last).await, "the updates were acknowledged");
    assert!(eventually(WAIT, || !tg.sent_to(dm.id).is_empty()).await, "{:?}", tg.sent());
    settle().await;
    let texts = tg.texts(dm.id);
    assert_eq!(texts.len(), 1, "one reply per window: {texts:?}");
    assert!(texts[0].contains("pairing code is"), "{texts:?}");
    assert!(tg.sent_to(group.id).is_empty(), "a stranger in a group gets nothing");
    assert!(tg.downloads().is_empty(), "downloaded for a stranger: {:?}", tg.downloads());
    assert!(media_is_empty(home.path()));
    assert_eq!(stored(home.path(), "telegram").await, 0, "a stranger's event was stored");
    assert_eq!(llm.count(), 0);
    d.daemon.stop().await;
}

#[cfg(feature = "slack")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slack_stranger_gets_one_pairing_reply_and_nothing_is_stored_or_downloaded() {
    use serde_json::json;
    use support::fake_slack::{BOT_USER, FakeSlack};
    const BOT: &str = "xoxb-test-bot-token";
    const APP: &str = "xapp-test-app-token";
    let llm = FakeLlm::echo().await;
    let slack = FakeSlack::start(BOT, APP).await;
    let home = tempfile::tempdir().unwrap();
    let table = format!("[platforms.slack]\nenabled = true\napi_url = \"{}\"\n", slack.api_url());
    let env = [("SLACK_BOT_TOKEN", BOT), ("SLACK_APP_TOKEN", APP)];
    let d = start_daemon(home.path(), &config_for(&llm, &table), &env).await;
    let url = slack.add_file("F1/payload.bin", b"not for strangers");
    let with_file = |channel: &str, text: &str| {
        let mut event = slack.user_message(channel, "U9", text, None);
        event["subtype"] = json!("file_share");
        event["files"] = json!([{"id": "F1", "name": "payload.bin", "mimetype": "text/plain", "size": 17,
            "url_private_download": url}]);
        event
    };
    let envelopes = [
        slack.push_event(with_file("D9", "take this")),
        slack.push_event(with_file("D9", "and this")),
        slack.push_event(with_file("C1", &format!("<@{BOT_USER}> take this"))),
    ];
    let acked = || envelopes.iter().all(|e| slack.sockets().acked(e));
    assert!(eventually(WAIT, acked).await, "the envelopes were acknowledged");
    assert!(eventually(WAIT, || !slack.texts("D9").is_empty()).await, "{:?}", slack.posted());
    settle().await;
    let texts = slack.texts("D9");
    assert_eq!(texts.len(), 1, "one reply per window: {texts:?}");
    assert!(texts[0].contains("pairing code is"), "{texts:?}");
    assert!(slack.posted_to("C1").is_empty(), "a stranger in a channel gets nothing");
    assert!(slack.downloads().is_empty(), "downloaded for a stranger: {:?}", slack.downloads());
    assert!(media_is_empty(home.path()));
    assert_eq!(stored(home.path(), "slack").await, 0, "a stranger's event was stored");
    assert_eq!(llm.count(), 0);
    d.daemon.stop().await;
}

#[cfg(feature = "discord")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_discord_stranger_gets_one_pairing_reply_and_nothing_is_stored_or_downloaded() {
    use support::fake_discord::{Channel, FakeDiscord, File, User};
    const TOKEN: &str = "discord-test-token";
    let llm = FakeLlm::echo().await;
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let home = tempfile::tempdir().unwrap();
    // Auto threads on: a stranger's mention must not open one either.
    let table = format!("[platforms.discord]\nenabled = true\napi_url = \"{}\"\nauto_thread = true\n", dc.base_url());
    let d = start_daemon(home.path(), &config_for(&llm, &table), &[("DISCORD_BOT_TOKEN", TOKEN)]).await;
    let file = || File { name: "payload.bin".into(), mime: "text/plain".into(), bytes: b"not for strangers".to_vec() };
    let stranger = User::new(3003, "stranger");
    let dm = Channel::dm(7002);
    dc.post_files(&dm, &stranger, "take this", &[file()]);
    dc.post_files(&dm, &stranger, "and this", &[file()]);
    let general = Channel::text(5000, 8002);
    dc.post_files(&general, &stranger, &format!("<@{}> take this", dc.bot().id), &[file()]);
    assert!(eventually(WAIT, || !dc.sent_to(dm.id).is_empty()).await, "{:?}", dc.calls());
    settle().await;
    let texts = dc.texts(dm.id);
    assert_eq!(texts.len(), 1, "one reply per window: {texts:?}");
    assert!(texts[0].contains("pairing code is"), "{texts:?}");
    assert!(dc.sent_to(general.id).is_empty() && dc.threads().is_empty(), "a stranger in a guild gets nothing");
    let downloads: Vec<String> = dc.calls().into_iter().filter(|c| c.contains("/attachments/")).collect();
    assert!(downloads.is_empty(), "downloaded for a stranger: {downloads:?}");
    assert!(media_is_empty(home.path()));
    assert_eq!(stored(home.path(), "discord").await, 0, "a stranger's event was stored");
    assert_eq!(llm.count(), 0);
    d.daemon.stop().await;
}
