//! `hermesd deliveries` and `hermesd events`: a reply the platform refused is listed, sent again
//! through the running daemon or dropped; a set-aside event is listed and replayed after the
//! fact, one that still does not decode stays set aside; `/metrics` counts what waits.
#![cfg(feature = "telegram")]

mod support;

use std::path::Path;
use std::time::Duration;

use serde_json::json;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{FakeLlm, config_for, eventually, start_daemon};

const TOKEN: &str = "123:ABC";
const WAIT: Duration = Duration::from_secs(15);

/// `hermesd <args>` on `home`, from a blocking thread (the fakes and the daemon keep running).
async fn hermesd(home: &Path, args: &[&str]) -> (Option<i32>, String) {
    let (home, args): (std::path::PathBuf, Vec<String>) =
        (home.to_owned(), args.iter().map(|a| (*a).to_owned()).collect());
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = support::hermesd_cli(&home, &args);
        (out.status.code(), format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)))
    })
    .await
    .unwrap()
}

async fn metric(base: &str, line: &str) -> bool {
    let text = support::client().get(format!("{base}/metrics")).send().await.unwrap().text().await.unwrap();
    text.lines().any(|l| l == line)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_reply_is_retried_or_dropped_and_a_set_aside_event_replayed() {
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let home = tempfile::tempdir().unwrap();
    let table = format!(
        "[agent]\nbatch_window = \"0s\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        tg.base_url()
    );
    let config = config_for(&llm, &table);
    let env = [("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001")];
    let d = start_daemon(home.path(), &config, &env).await;
    // The commands find the running daemon on the address it bound, as the config names it.
    let bound = d.base.trim_start_matches("http://");
    std::fs::write(home.path().join("config.toml"), config.replace("127.0.0.1:0", bound)).unwrap();
    let ann = User::new(1001, "Ann");
    let chat = Chat::private(&ann);

    // Telegram refuses two replies for good: both are recorded as failed.
    let blocked = json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was blocked by the user"});
    for text in ["first", "second"] {
        tg.fail_next("sendMessage", blocked.clone());
        tg.push_message(&chat, &ann, text);
        assert!(eventually(WAIT, || tg.calls("sendMessage").len() == if text == "first" { 1 } else { 2 }).await);
    }
    let failed_line = "hermesd_outbox_troubled{state=\"failed\"} 2";
    assert!(support::eventually_async(WAIT, || metric(&d.base, failed_line)).await, "both counted as failed");
    let (code, listed) = hermesd(home.path(), &["deliveries", "list", "--failed"]).await;
    assert_eq!(code, Some(0), "{listed}");
    let ids: Vec<String> = listed.lines().map(|l| l.split_whitespace().next().unwrap().to_owned()).collect();
    assert_eq!(ids.len(), 2, "{listed}");
    assert!(listed.contains("failed") && listed.contains("blocked by the user"), "{listed}");

    // The newest (the second reply) goes out again through the running daemon; the other is
    // dropped. Neither can be taken twice.
    let (code, out) = hermesd(home.path(), &["deliveries", "retry", &ids[0]]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("running daemon"), "{out}");
    assert!(eventually(WAIT, || tg.texts(chat.id) == ["echo: second"]).await, "{:?}", tg.texts(chat.id));
    let (code, out) = hermesd(home.path(), &["deliveries", "retry", &ids[0]]).await;
    assert_eq!(code, Some(1), "a sent delivery is not sent again: {out}");
    assert!(out.contains("is sent") || out.contains("is pending"), "{out}");
    let (code, out) = hermesd(home.path(), &["deliveries", "drop", &ids[1]]).await;
    assert_eq!(code, Some(0), "{out}");
    let (_, listed) = hermesd(home.path(), &["deliveries", "list", "--failed"]).await;
    assert_eq!(listed.trim(), "no failed deliveries");
    assert!(support::eventually_async(WAIT, || metric(&d.base, "hermesd_outbox_troubled{state=\"failed\"} 0")).await);
    let (code, out) = hermesd(home.path(), &["deliveries", "retry", "999999"]).await;
    assert_eq!(code, Some(1));
    assert!(out.contains("no delivery 999999"), "{out}");

    // Two events set aside (as start-up recovery leaves undecodable ones): one this build reads
    // again, one it still cannot.
    let db = sqlx::SqlitePool::connect(&format!("sqlite://{}", home.path().join("state.db").display())).await.unwrap();
    let (payload,): (String,) =
        sqlx::query_as("SELECT payload FROM inbound_events ORDER BY seq LIMIT 1").fetch_one(&db).await.unwrap();
    let payload = payload.replace("\"first\"", "\"third\"");
    assert!(payload.contains("third"), "{payload}");
    let now = chrono::Utc::now().timestamp_millis();
    for (event_id, body) in [("replayable", payload.as_str()), ("garbled", "{not json")] {
        sqlx::query(
            "INSERT INTO inbound_events (platform, event_id, payload, state, received_at, finished_at, error) \
             VALUES ('telegram', ?1, ?2, 'quarantined', ?3, ?3, 'undecodable')",
        )
        .bind(event_id)
        .bind(body)
        .bind(now)
        .execute(&db)
        .await
        .unwrap();
    }
    let seqs: Vec<(i64, String)> =
        sqlx::query_as("SELECT seq, event_id FROM inbound_events WHERE state = 'quarantined' ORDER BY seq")
            .fetch_all(&db)
            .await
            .unwrap();
    db.close().await;
    assert!(support::eventually_async(WAIT, || metric(&d.base, "hermesd_inbound_quarantined 2")).await);
    let (_, listed) = hermesd(home.path(), &["events", "list", "--quarantined"]).await;
    assert!(listed.contains("replayable") && listed.contains("garbled"), "{listed}");

    let replayable = seqs[0].0.to_string();
    let (code, out) = hermesd(home.path(), &["events", "replay", &replayable]).await;
    assert_eq!(code, Some(0), "{out}");
    assert!(eventually(WAIT, || tg.texts(chat.id).len() == 2).await, "{:?}", tg.texts(chat.id));
    assert_eq!(tg.texts(chat.id)[1], "echo: third", "the replayed event ran in its chat");
    let garbled = seqs[1].0.to_string();
    let (code, out) = hermesd(home.path(), &["events", "replay", &garbled]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("still does not decode"), "{out}");
    let (code, out) = hermesd(home.path(), &["events", "replay", &replayable]).await;
    assert_eq!(code, Some(1), "a replayed event is not run twice: {out}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tg.texts(chat.id).len(), 2, "{:?}", tg.texts(chat.id));
    d.daemon.stop().await;

    // The lists read the store with no daemon running.
    let (_, listed) = hermesd(home.path(), &["deliveries", "list"]).await;
    assert!(listed.lines().count() >= 2, "{listed}");
    let (code, out) = hermesd(home.path(), &["events", "replay", &garbled]).await;
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("still does not decode"), "decoded before anything changes: {out}");
}
