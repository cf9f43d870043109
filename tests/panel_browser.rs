//! The control panel in a real browser: headless Chromium (Debian's `chromium`, driven through
//! Debian's `chromium-driver` over WebDriver by fantoccini) logs in with the API key, finds a
//! conversation made through the API and opens its transcript, approves a waiting Telegram
//! pairing (the stranger's next message is answered), pauses a cron job (it stops firing),
//! talks to the agent in the chat (the answer streamed by the page's script) and sees the status
//! page update itself. Each page's
//! screenshot is saved under the test's target folder (`panel-screens/`); scripts/panel-screens.sh
//! copies them to docs/panel/ for the README. Chromium runs with `--no-sandbox` only as root; a
//! second test runs chromedriver and Chromium as `nobody` with Chromium's own sandbox on (as a
//! user's browser runs), checks that Chromium says it is sandboxed, and logs in and chats.
#![cfg(feature = "telegram")]

mod support;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;
use support::fake_telegram::{Chat, FakeTelegram, User};
use support::{FakeLlm, config_for, eventually, hermesd_cli, start_daemon};

const KEY: &str = "browser-test-key";
const TOKEN: &str = "123:BROWSER";
const WAIT: Duration = Duration::from_secs(20);

/// chromedriver on a free port, stopped when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Who runs chromedriver and Chromium.
#[derive(Clone, Copy, PartialEq, Eq)]
enum As {
    /// This test's own user: root in CI, where Chromium's sandbox needs `--no-sandbox`.
    Me,
    /// `nobody` (when this test is root), with Chromium's own sandbox on.
    Nobody,
}

const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

fn driver(who: As, home: &std::path::Path) -> Driver {
    let path = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .expect("chromedriver is missing: scripts/test-deps.sh installs Debian's chromium-driver");
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut command = if who == As::Nobody && is_root() {
        let mut setpriv = Command::new("setpriv");
        setpriv.args([format!("--reuid={NOBODY}"), format!("--regid={NOBODY}"), "--clear-groups".into(), "--".into()]);
        setpriv.arg(path);
        setpriv
    } else {
        Command::new(path)
    };
    let child = command
        .arg(format!("--port={port}"))
        .env("HOME", home)
        .env_remove("XDG_CONFIG_HOME")
        .env_remove("XDG_CACHE_HOME")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    Driver { child, url: format!("http://127.0.0.1:{port}") }
}

/// A folder for the browser's profile and home that `who` may write.
fn profile_dir(who: As) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if who == As::Nobody && is_root() {
        std::os::unix::fs::chown(dir.path(), Some(NOBODY), Some(NOBODY)).unwrap();
    }
    dir
}

async fn browser(driver: &Driver, profile: &std::path::Path, who: As) -> Client {
    let mut args = vec![
        "--headless=new".to_owned(),
        "--disable-gpu".into(),
        "--disable-dev-shm-usage".into(),
        "--disable-background-networking".into(),
        "--disable-component-update".into(),
        "--disable-sync".into(),
        "--no-first-run".into(),
        "--window-size=1200,900".into(),
        format!("--user-data-dir={}", profile.join("chromium").display()),
    ];
    if who == As::Me && is_root() {
        // Chromium's own sandbox needs namespaces a root process may not use.
        args.push("--no-sandbox".into());
    }
    let mut caps = serde_json::Map::new();
    caps.insert("goog:chromeOptions".into(), json!({ "binary": "/usr/bin/chromium", "args": args }));
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    for _ in 0..100 {
        match ClientBuilder::new(connector.clone()).capabilities(caps.clone()).connect(&driver.url).await {
            Ok(client) => return client,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    panic!("chromedriver at {} did not start a Chromium session", driver.url);
}

/// Save the page as `name.png` under the test's target folder.
async fn screenshot(client: &Client, name: &str) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("panel-screens");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

async fn text(client: &Client) -> String {
    client.find(Locator::Css("main")).await.unwrap().text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_works_in_a_real_browser() {
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "[agent]\nbatch_window = \"0s\"\n\n[cron]\ntick = \"1s\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        tg.base_url()
    );
    let env = [("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001"), ("API_SERVER_KEY", KEY)];
    let d = start_daemon(home.path(), &config_for(&llm, &extra), &env).await;
    let base = d.base.clone();
    let profile = profile_dir(As::Me);
    let driver = driver(As::Me, profile.path());
    let client = browser(&driver, profile.path(), As::Me).await;

    // Ready first (Telegram's first poll done), so the status page can say so.
    let ready =
        || async { support::client().get(format!("{base}/readyz")).send().await.is_ok_and(|r| r.status() == 200) };
    assert!(support::eventually_async(WAIT, ready).await, "the daemon became ready");

    // Log in with the key.
    client.goto(&format!("{base}/ui")).await.unwrap();
    screenshot(&client, "login").await;
    client.find(Locator::Id("key")).await.unwrap().send_keys(KEY).await.unwrap();
    client.find(Locator::Css("form button[type=submit]")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("nav")).await.unwrap();
    assert!(text(&client).await.contains("The daemon is ready"), "{}", text(&client).await);
    screenshot(&client, "status").await;

    // A conversation made through the API, found and opened.
    let asked = json!({ "messages": [{ "role": "user", "content": "tell me about herons" }] });
    let answer = support::client()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(&asked)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    client.goto(&format!("{base}/ui/sessions")).await.unwrap();
    screenshot(&client, "conversations").await;
    client.find(Locator::Css("td a[href^='/ui/sessions/']")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css(".msg.user")).await.unwrap();
    let shown = text(&client).await;
    assert!(shown.contains("tell me about herons") && shown.contains("echo: tell me about herons"), "{shown}");
    screenshot(&client, "transcript").await;

    // A stranger's pairing approved with the button: their next message is answered.
    let bob = User::new(2002, "Bob");
    tg.push_message(&Chat::private(&bob), &bob, "hello?");
    assert!(eventually(WAIT, || tg.texts(2002).iter().any(|t| t.contains("pairing code"))).await);
    client.goto(&format!("{base}/ui/people")).await.unwrap();
    screenshot(&client, "people").await;
    client.find(Locator::Css("form[action='/ui/people/approve'] button")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("form[action='/ui/people/revoke']")).await.unwrap();
    tg.push_message(&Chat::private(&bob), &bob, "and now?");
    assert!(eventually(WAIT, || tg.texts(2002).iter().any(|t| t == "echo: and now?")).await, "{:?}", tg.texts(2002));

    // A cron job due every 3 s, paused with the button: it stops firing; resumed, it fires again.
    let made = hermesd_cli(home.path(), &["cron", "add", "every 3s", "say hi from cron", "--name", "Hello"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let runs = || llm.requests().iter().filter(|r| r.to_string().contains("say hi from cron")).count();
    client.goto(&format!("{base}/ui/cron")).await.unwrap();
    client.find(Locator::Css("form[action$='/pause'] button")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("form[action$='/resume']")).await.unwrap();
    screenshot(&client, "cron").await;
    let listed = String::from_utf8_lossy(&hermesd_cli(home.path(), &["cron", "list"]).stdout).into_owned();
    assert!(listed.contains("paused"), "{listed}");
    // A run already under way when the pause came may still finish.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let paused_at = runs();
    tokio::time::sleep(Duration::from_secs(8)).await;
    assert_eq!(runs(), paused_at, "a paused job does not fire");
    client.find(Locator::Css("form[action$='/resume'] button")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("form[action$='/pause']")).await.unwrap();
    assert!(eventually(WAIT, || runs() > paused_at).await, "resumed, it fires again");
    client.find(Locator::Css("form[action$='/delete'] button")).await.unwrap().click().await.unwrap();

    // The chat: the script sends the message and shows the answer streamed back.
    client.goto(&format!("{base}/ui/chat")).await.unwrap();
    client.find(Locator::Id("text")).await.unwrap().send_keys("hello from the browser").await.unwrap();
    client.find(Locator::Css("#chat button[type=submit]")).await.unwrap().click().await.unwrap();
    let answered = || async {
        let shown = client.find(Locator::Id("log")).await.unwrap().text().await.unwrap();
        shown.contains("echo: hello from the browser")
    };
    assert!(support::eventually_async(WAIT, answered).await, "{}", text(&client).await);
    assert_eq!(client.current_url().await.unwrap().path(), "/ui/chat", "no page load: the script sent it");
    screenshot(&client, "chat").await;
    client.goto(&format!("{base}/ui/chat")).await.unwrap();
    assert!(text(&client).await.contains("echo: hello from the browser"), "kept with the conversation");

    // The status page updates itself from its event stream.
    client.goto(&format!("{base}/ui")).await.unwrap();
    let fresh = || async { text(&client).await.contains("reload(s) since the start") };
    assert!(support::eventually_async(WAIT, fresh).await);
    client.execute("document.getElementById('live').textContent = 'stale';", vec![]).await.unwrap();
    let refreshed = || async { !text(&client).await.contains("stale") };
    assert!(!refreshed().await);
    hermesd_cli(home.path(), &["reload"]);
    assert!(support::eventually_async(WAIT, refreshed).await, "the live status replaced the stale text");

    client.goto(&format!("{base}/ui/deliveries")).await.unwrap();
    screenshot(&client, "deliveries").await;
    client.goto(&format!("{base}/ui/usage")).await.unwrap();
    assert!(text(&client).await.contains("Per platform"), "{}", text(&client).await);
    screenshot(&client, "usage").await;
    client.goto(&format!("{base}/ui/logs")).await.unwrap();
    screenshot(&client, "logs").await;
    client.close().await.unwrap();
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_works_in_a_sandboxed_browser_as_an_unprivileged_user() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let base = d.base.clone();
    let profile = profile_dir(As::Nobody);
    let driver = driver(As::Nobody, profile.path());
    let client = browser(&driver, profile.path(), As::Nobody).await;

    // Chromium's own sandbox is on (no `--no-sandbox`), as its sandbox page says.
    client.goto("chrome://sandbox").await.unwrap();
    let said = client.find(Locator::Css("body")).await.unwrap().text().await.unwrap();
    assert!(said.contains("adequately sandboxed") && !said.contains("not adequately"), "{said}");

    client.goto(&format!("{base}/ui")).await.unwrap();
    client.find(Locator::Id("key")).await.unwrap().send_keys(KEY).await.unwrap();
    client.find(Locator::Css("form button[type=submit]")).await.unwrap().click().await.unwrap();
    client.wait().for_element(Locator::Css("nav")).await.unwrap();
    client.goto(&format!("{base}/ui/chat")).await.unwrap();
    client.find(Locator::Id("text")).await.unwrap().send_keys("hello from a sandboxed browser").await.unwrap();
    client.find(Locator::Css("#chat button[type=submit]")).await.unwrap().click().await.unwrap();
    let answered = || async {
        let shown = client.find(Locator::Id("log")).await.unwrap().text().await.unwrap();
        shown.contains("echo: hello from a sandboxed browser")
    };
    assert!(support::eventually_async(WAIT, answered).await, "{}", text(&client).await);
    client.close().await.unwrap();
    d.daemon.stop().await;
}
