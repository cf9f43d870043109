//! One consumer per home: a second `hermesd run` on the same home stands by (no adapter, no
//! turn; `/readyz` names the holder) while the first runs, and takes over when the first is
//! killed with SIGKILL or stops; `hermesd chat` runs only the terminal channel, never the
//! configured adapters.

#[path = "support/checker.rs"]
mod checker;
#[path = "support/gateway_run.rs"]
mod gateway_run;
mod support;

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gateway_run::{BIN, Gateway, TOKEN, stop};
use support::{client, eventually, eventually_async, wait_ready};

/// Start the second daemon on `run`'s home with a config of its own on another port (so its
/// standby `/readyz` can be asked); returns it and its port.
fn spawn_second(run: &Gateway) -> (Child, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = std::fs::read_to_string(run.path().join("config.toml"))
        .unwrap()
        .replace(&format!("127.0.0.1:{}", run.port), &format!("127.0.0.1:{port}"));
    let path = run.path().join("second.toml");
    std::fs::write(&path, config).unwrap();
    let log = std::fs::OpenOptions::new().create(true).append(true).open(run.path().join("second.log")).unwrap();
    let allowed: Vec<String> = run.users.iter().map(|u| u.id.to_string()).collect();
    let child = Command::new(BIN)
        .args(["--home", run.path().to_str().unwrap(), "--config", path.to_str().unwrap(), "run"])
        .env("HERMESD_LOG", "info")
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_ALLOWED_USERS", allowed.join(","))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    (child, port)
}

/// Whether the daemon on `port` answers `/readyz` as a standby.
async fn standing_by(port: u16) -> bool {
    let (status, body) = readyz(port).await;
    status == 503 && body.contains("standby: held by")
}

async fn readyz(port: u16) -> (u16, String) {
    match client().get(format!("http://127.0.0.1:{port}/readyz")).send().await {
        Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
        Err(e) => (0, e.to_string()),
    }
}

fn second_log(run: &Gateway) -> String {
    std::fs::read_to_string(run.path().join("second.log")).unwrap_or_default()
}

fn answered(run: &Gateway) -> bool {
    run.all_answered()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_daemon_stands_by_and_takes_over_after_kill_nine() {
    let mut run = Gateway::new(2).await;
    let mut first = run.spawn("");
    wait_ready(run.port, run.path()).await;
    let (second, port) = spawn_second(&run);
    let standby = eventually_async(Duration::from_secs(20), || standing_by(port)).await;
    let (status, body) = readyz(port).await;
    assert!(standby, "the second daemon stands by: {status} {body}\n{}", second_log(&run));
    assert!(body.contains(&format!("standby: held by PID {}", first.id())), "{body}");
    let health = client().get(format!("http://127.0.0.1:{port}/healthz")).send().await.unwrap();
    assert_eq!(health.status(), 200);
    let api = client().get(format!("http://127.0.0.1:{port}/v1/models")).send().await.unwrap();
    assert_eq!(api.status(), 503, "a standby serves nothing else");

    // While both run, only the holder works the chats: each message is answered once.
    run.push_round(0, 0);
    assert!(eventually(Duration::from_secs(20), || answered(&run)).await, "answered: {:?}", run.delivered());
    assert!(!second_log(&run).contains("platform"), "the standby ran no adapter:\n{}", second_log(&run));

    // The holder dies without a word; the standby's lease check finds it lapsed.
    first.kill().unwrap();
    first.wait().unwrap();
    let killed = Instant::now();
    let took_over = eventually_async(Duration::from_secs(25), || async { readyz(port).await.0 == 200 }).await;
    assert!(took_over, "the standby took over: {:?}\n{}", readyz(port).await, second_log(&run));
    let after = killed.elapsed();
    eprintln!("took over {:.1} s after the holder was killed", after.as_secs_f64());
    run.push_round(1, 0);
    assert!(eventually(Duration::from_secs(20), || answered(&run)).await, "answered: {:?}", run.delivered());
    stop(second).await;
    let report = run.check().await;
    assert!(report.is_exactly_once(), "{report:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_stop_hands_over_at_once_and_a_signal_stops_a_standby() {
    let run = Gateway::new(1).await;
    let first = run.spawn("");
    wait_ready(run.port, run.path()).await;
    let (second, port) = spawn_second(&run);
    assert!(eventually_async(Duration::from_secs(20), || standing_by(port)).await);
    let stopped = Instant::now();
    stop(first).await;
    // The holder released the lease on its way out: no waiting for it to lapse.
    assert!(eventually_async(Duration::from_secs(8), || async { readyz(port).await.0 == 200 }).await);
    eprintln!("took over {:.1} s after SIGTERM to the holder", stopped.elapsed().as_secs_f64());

    // A third one stands by behind the second, and SIGTERM ends it with exit 0.
    let (mut third, third_port) = spawn_second(&run);
    assert!(eventually_async(Duration::from_secs(20), || standing_by(third_port)).await);
    let term = Command::new("kill").args(["-TERM", &third.id().to_string()]).status().unwrap();
    assert!(term.success());
    let status = tokio::task::spawn_blocking(move || third.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status:?}");
    stop(second).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_runs_only_the_terminal_channel() {
    let mut run = Gateway::new(1).await;
    // A Telegram message waits at the platform; chat must neither poll for it nor answer it.
    run.push_round(0, 0);
    let allowed = run.users[0].id.to_string();
    let mut chat = Command::new(BIN)
        .args(["--home", run.path().to_str().unwrap(), "chat"])
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_ALLOWED_USERS", allowed)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = chat.stdin.take().unwrap();
    stdin.write_all(b"hello from the shell\n").unwrap();
    let answered_in_chat = eventually(Duration::from_secs(20), || run.llm.count() >= 1).await;
    // Time for an answer to print before the end of input.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    drop(stdin);
    let out = tokio::task::spawn_blocking(move || chat.wait_with_output()).await.unwrap().unwrap();
    let printed = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(answered_in_chat && printed.contains("echo: hello from the shell"), "{printed}");
    assert!(run.tg.polls().is_empty(), "chat polled Telegram: {:?}", run.tg.polls());
    assert!(run.tg.sent().is_empty(), "chat sent to Telegram");
}

/// A holder whose lease changed hands behind its back (a shared store's lapse, here forced by
/// writing the lease) cannot move a platform's cursor any more: the message it already took is
/// answered, but the update offset stays where the new holder will find it, and the log says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_holder_fenced_off_its_lease_cannot_move_the_cursor() {
    use sqlx::sqlite::SqliteConnectOptions;
    let mut run = Gateway::new(1).await;
    let first = run.spawn("");
    wait_ready(run.port, run.path()).await;
    run.push_round(0, 0);
    assert!(eventually(Duration::from_secs(20), || answered(&run)).await, "answered: {:?}", run.delivered());
    let pool = sqlx::SqlitePool::connect_with(SqliteConnectOptions::new().filename(run.db())).await.unwrap();
    let cursor = || async {
        sqlx::query_scalar::<_, String>("SELECT cursor FROM platform_cursors WHERE platform = 'telegram'")
            .fetch_optional(&pool)
            .await
            .unwrap()
    };
    let saved = eventually_async(Duration::from_secs(10), || async { cursor().await.is_some() }).await;
    assert!(saved, "the holder saved its offset");
    let before = cursor().await;
    sqlx::query("UPDATE leases SET token = token + 1, holder = 'another', label = 'PID 0' WHERE name = 'home'")
        .execute(&pool)
        .await
        .unwrap();

    run.push_round(1, 0);
    assert!(eventually(Duration::from_secs(20), || answered(&run)).await, "answered: {:?}", run.delivered());
    let refused = eventually(Duration::from_secs(10), || run.log().contains("lease changed hands")).await;
    assert!(refused, "the refused cursor write is logged:\n{}", run.log());
    assert_eq!(cursor().await, before, "the fenced-off holder moved the cursor");
    pool.close().await;
    stop(first).await;
}
