//! The control panel at `/ui` over real HTTP (a real daemon in-process, real SQLite, fake LLM):
//! the login takes the API key (or, on a keyless daemon, the local key `hermesd ui` prints) and
//! answers with an HttpOnly, SameSite=Strict cookie that holds no key; pages carry a strict CSP;
//! a conversation made through the API is listed, found by search and shown with its text
//! escaped; `/api/sessions` answers a key or the cookie, `/v1/*` never the cookie; a change
//! without the session's CSRF token or from another origin is refused.

mod support;

use serde_json::{Value, json};
use support::{FakeLlm, config_for, hermesd_cli, start_daemon};

const KEY: &str = "panel-test-key";

fn browser() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap()
}

/// An HTML form's body.
fn form(pairs: &[(&str, &str)]) -> String {
    let encode = |text: &str| -> String {
        text.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                b' ' => "+".into(),
                other => format!("%{other:02X}"),
            })
            .collect()
    };
    pairs.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect::<Vec<_>>().join("&")
}

/// Log in with `key`; the response.
async fn login(base: &str, key: &str, origin: Option<&str>) -> reqwest::Response {
    let mut request = browser()
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("key", key)]));
    if let Some(origin) = origin {
        request = request.header("origin", origin);
    }
    request.send().await.unwrap()
}

/// The panel cookie (`name=value`) a login set.
fn cookie_of(response: &reqwest::Response) -> String {
    let set = response.headers().get("set-cookie").expect("a cookie").to_str().unwrap().to_owned();
    assert!(set.contains("HttpOnly") && set.contains("SameSite=Strict"), "{set}");
    set.split(';').next().unwrap().to_owned()
}

async fn get(base: &str, path: &str, cookie: Option<&str>) -> (u16, String, reqwest::header::HeaderMap) {
    let mut request = browser().get(format!("{base}{path}"));
    if let Some(cookie) = cookie {
        request = request.header("cookie", cookie);
    }
    let response = request.send().await.unwrap();
    let (status, headers) = (response.status().as_u16(), response.headers().clone());
    (status, response.text().await.unwrap(), headers)
}

/// The CSRF token a page's forms carry.
fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a form with a token") + "name=\"csrf\" value=\"".len();
    page[at..].split('"').next().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_logs_in_with_the_key_shows_conversations_escaped_and_refuses_forged_changes() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let base = d.base.as_str();

    // Not logged in: the login form, under a strict CSP, and nothing else.
    let (status, page, headers) = get(base, "/ui", None).await;
    assert_eq!(status, 200);
    assert!(page.contains("type=\"password\"") && !page.contains("Conversations</a>"), "{page}");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("default-src 'none'") && !csp.contains("unsafe-inline") && csp.contains("frame-ancestors 'none'")
    );
    assert!(!page.contains("<script"), "no script on the login page");
    assert!(get(base, "/ui/sessions", None).await.1.contains("type=\"password\""), "pages ask for a login");

    // A wrong key, and a right key from another origin, are refused.
    assert_eq!(login(base, "nope", Some(base)).await.status(), 401);
    assert_eq!(login(base, KEY, Some("http://evil.example")).await.status(), 403);
    assert_eq!(login(base, KEY, None).await.status(), 403, "no Origin: not from the panel's own page");
    let logged = login(base, KEY, Some(base)).await;
    assert_eq!(logged.status(), 303);
    let cookie = cookie_of(&logged);
    assert!(!cookie.contains(KEY), "the cookie holds a session id, not the key");

    // A conversation made through the API is listed, searchable and shown escaped.
    let asked = json!({ "messages": [{ "role": "user", "content": "<script>alert(1)</script> look at the heron" }] });
    let answer = support::client()
        .post(format!("{base}/v1/chat/completions"))
        .bearer_auth(KEY)
        .json(&asked)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 200);
    let (status, page, _) = get(base, "/ui", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(page.contains("Status") && page.contains("ready"), "{page}");
    let (_, list, _) = get(base, "/ui/sessions", Some(&cookie)).await;
    let at = list.find("href=\"/ui/sessions/").expect("the conversation is listed") + "href=\"/ui/sessions/".len();
    let id = list[at..].split('"').next().unwrap().to_owned();
    let (_, found, _) = get(base, "/ui/sessions?q=heron", Some(&cookie)).await;
    assert!(found.contains(&id), "search finds it:\n{found}");
    let (status, shown, _) = get(base, &format!("/ui/sessions/{id}"), Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(shown.contains("&lt;script&gt;alert(1)&lt;/script&gt; look at the heron"), "{shown}");
    assert!(!shown.contains("<script>alert"), "text is escaped, never markup");
    assert!(shown.contains("echo: "), "the reply is shown");
    assert!(!shown.contains(KEY), "no secret is rendered");

    // The JSON API: a key or the cookie; /v1 never takes the cookie.
    let (status, _, _) = get(base, "/api/sessions", None).await;
    assert_eq!(status, 401);
    let by_key: Value =
        browser().get(format!("{base}/api/sessions")).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
    assert!(by_key["sessions"].as_array().unwrap().iter().any(|s| s["id"] == id.as_str()), "{by_key}");
    let (status, one, _) = get(base, &format!("/api/sessions/{id}"), Some(&cookie)).await;
    assert_eq!(status, 200);
    let one: Value = serde_json::from_str(&one).unwrap();
    assert_eq!(one["transcript"][0]["role"], "user", "{one}");
    let (status, _, _) = get(base, "/v1/models", Some(&cookie)).await;
    assert_eq!(status, 401, "the panel's cookie is no API key");

    // Usage: the API turn is counted, drawn and listed per platform.
    let usage: Value =
        browser().get(format!("{base}/api/usage")).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
    let day = &usage["days"][0];
    assert_eq!((day["platform"].as_str(), day["turns"].as_u64()), (Some("api"), Some(1)), "{usage}");
    let model = &usage["models"][0];
    assert_eq!((model["model"].as_str(), model["calls"].as_u64()), (Some("fake-model"), Some(1)), "{usage}");
    let (status, drawn, _) = get(base, "/ui/usage", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(drawn.contains("<svg") && drawn.contains("1 turns") && drawn.contains("Per platform"), "{drawn}");
    assert!(drawn.contains("Per model") && drawn.contains("fake-model"), "{drawn}");

    // The other JSON: jobs, pairing, deliveries, by key.
    for (path, field) in [("/api/jobs", "jobs"), ("/api/pairing", "entries"), ("/api/deliveries", "deliveries")] {
        assert_eq!(get(base, path, None).await.0, 401, "{path} needs a key");
        let body: Value =
            browser().get(format!("{base}{path}")).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
        assert!(body[field].is_array(), "{path}: {body}");
    }

    // The config in force, and a reload from the panel.
    let (status, config, _) = get(base, "/ui/config", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(config.contains("fake-model") && !config.contains(KEY), "{config}");
    let token = csrf_of(&page);
    assert_eq!(act(base, &cookie, "/ui/config/reload", &[("csrf", "forged")]).await, 403);
    let reloaded = browser()
        .post(format!("{base}/ui/config/reload"))
        .header("cookie", &cookie)
        .header("origin", base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("csrf", &token)]))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(reloaded.contains("Reloaded"), "{reloaded}");

    // Logging out: refused without the token or from another origin, done with both.
    let csrf = csrf_of(&page);
    let logout = |token: &str, origin: &str| {
        browser()
            .post(format!("{base}/ui/logout"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&[("csrf", token)]))
            .send()
    };
    assert_eq!(logout("forged", base).await.unwrap().status(), 403);
    assert_eq!(logout(&csrf, "http://evil.example").await.unwrap().status(), 403);
    assert!(get(base, "/ui", Some(&cookie)).await.1.contains("Log out"), "still logged in");
    assert_eq!(logout(&csrf, base).await.unwrap().status(), 303);
    assert!(get(base, "/ui", Some(&cookie)).await.1.contains("type=\"password\""), "logged out");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_keyless_daemon_takes_the_local_key_that_hermesd_ui_prints() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[]).await;
    let out = hermesd_cli(home.path(), &["ui"]);
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success() && said.contains("/ui"), "{said}");
    let key = said.lines().find_map(|l| l.strip_prefix("Log in with this home's local key: ")).expect("the key").trim();
    assert_eq!(login(&d.base, "anything", Some(&d.base)).await.status(), 401, "keyless is not open");
    let logged = login(&d.base, key, Some(&d.base)).await;
    assert_eq!(logged.status(), 303);
    let cookie = cookie_of(&logged);
    assert!(get(&d.base, "/ui", Some(&cookie)).await.1.contains("Log out"));
    // Keyless, the API's Host rule guards the panel too (DNS rebinding needs a name).
    let rebound = browser().get(format!("{}/ui", d.base)).header("host", "evil.example:8642").send().await.unwrap();
    assert_eq!(rebound.status(), 421);
    d.daemon.stop().await;
}

/// POST a panel form with the session's cookie and token, from the panel's origin.
async fn act(base: &str, cookie: &str, path: &str, fields: &[(&str, &str)]) -> u16 {
    browser()
        .post(format!("{base}{path}"))
        .header("cookie", cookie)
        .header("origin", base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(fields))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[cfg(feature = "telegram")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pairing_approved_in_the_panel_lets_the_stranger_in_and_a_paused_job_stays_paused() {
    use std::time::Duration;
    use support::eventually;
    use support::fake_telegram::{Chat, FakeTelegram, User};
    const TOKEN: &str = "123:PANEL";
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let home = tempfile::tempdir().unwrap();
    let extra = format!(
        "[agent]\nbatch_window = \"0s\"\n\n[platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        tg.base_url()
    );
    let env = [("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001"), ("API_SERVER_KEY", KEY)];
    let d = start_daemon(home.path(), &config_for(&llm, &extra), &env).await;
    let base = d.base.as_str();
    let wait = Duration::from_secs(15);

    // A stranger gets a pairing code; the panel lists them as waiting.
    let bob = User::new(2002, "Bob");
    tg.push_message(&Chat::private(&bob), &bob, "hello?");
    assert!(eventually(wait, || tg.texts(2002).iter().any(|t| t.contains("pairing code"))).await);
    let cookie = cookie_of(&login(base, KEY, Some(base)).await);
    let (_, people, _) = get(base, "/ui/people", Some(&cookie)).await;
    assert!(people.contains("2002") && people.contains("Approve"), "{people}");
    let configured = &people[people.find("Let in by the config").expect("the config's lists")..];
    assert!(configured.contains("<td>telegram</td><td>1001</td><td>pairing code</td>"), "{configured}");
    let csrf = csrf_of(&people);

    // A forged approval (no token, or no cookie) changes nothing; the panel's own lets Bob in.
    let fields = [("csrf", "forged"), ("platform", "telegram"), ("user", "2002")];
    assert_eq!(act(base, &cookie, "/ui/people/approve", &fields).await, 403);
    assert_eq!(act(base, "hermesd_panel=none", "/ui/people/approve", &fields).await, 403);
    tg.push_message(&Chat::private(&bob), &bob, "still out?");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!tg.texts(2002).iter().any(|t| t.contains("still out?")), "not approved by a forged form");
    let fields = [("csrf", csrf.as_str()), ("platform", "telegram"), ("user", "2002")];
    assert_eq!(act(base, &cookie, "/ui/people/approve", &fields).await, 303);
    tg.push_message(&Chat::private(&bob), &bob, "and now?");
    assert!(eventually(wait, || tg.texts(2002).iter().any(|t| t == "echo: and now?")).await, "{:?}", tg.texts(2002));
    let (_, people, _) = get(base, "/ui/people", Some(&cookie)).await;
    assert!(people.contains("Revoke") && people.contains("No code is waiting"), "{people}");
    // Bob's export carries his conversation and his approval.
    let export: Value = browser()
        .get(format!("{base}/api/people/export?platform=telegram&user=2002"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        (export["access"][0]["user_id"].as_str(), export["access"][0]["approved"].as_bool()),
        (Some("2002"), Some(true)),
        "{export}"
    );
    assert!(export["sessions"].to_string().contains("and now?") && export["cron_jobs"].is_array(), "{export}");

    // A cron job made with the CLI is paused from the panel and stays paused.
    let made = hermesd_cli(home.path(), &["cron", "add", "every 1h", "say hi", "--name", "Hourly hello"]);
    assert!(made.status.success(), "{}", String::from_utf8_lossy(&made.stderr));
    let (_, jobs, _) = get(base, "/ui/cron", Some(&cookie)).await;
    assert!(jobs.contains("Hourly hello"), "{jobs}");
    let at = jobs.find("action=\"/ui/cron/").unwrap() + "action=\"".len();
    let pause = jobs[at..].split('"').next().unwrap().to_owned();
    assert!(pause.ends_with("/pause"), "{pause}");
    assert_eq!(act(base, &cookie, &pause, &[("csrf", "forged")]).await, 403);
    assert_eq!(act(base, &cookie, &pause, &[("csrf", csrf.as_str())]).await, 303);
    let listed = String::from_utf8_lossy(&hermesd_cli(home.path(), &["cron", "list"]).stdout).into_owned();
    assert!(listed.contains("paused"), "{listed}");
    let (_, jobs, _) = get(base, "/ui/cron", Some(&cookie)).await;
    assert!(jobs.contains("Resume"), "{jobs}");
    let (status, deliveries, _) = get(base, "/ui/deliveries", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(deliveries.contains("No failed delivery"), "{deliveries}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_logs_page_shows_the_daemons_recent_lines_filtered_and_masked() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = config_for(&llm, "").replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    let mut child = support::spawn_gateway_with_env(home.path(), &[("API_SERVER_KEY", KEY)]);
    support::wait_ready(port, home.path()).await;
    let base = format!("http://127.0.0.1:{port}");
    assert_eq!(login(&base, "a-wrong-guess", Some(&base)).await.status(), 401);
    let cookie = cookie_of(&login(&base, KEY, Some(&base)).await);
    let (status, all, _) = get(&base, "/ui/logs", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(all.contains("hermesd ready") && all.contains("panel: logged in"), "{all}");
    assert!(!all.contains(KEY) && !all.contains("a-wrong-guess"), "no key in the log");
    let (_, warnings, _) = get(&base, "/ui/logs?level=warn", Some(&cookie)).await;
    assert!(warnings.contains("a login with a wrong key") && !warnings.contains("hermesd ready"), "{warnings}");
    let (_, panel, headers) = get(&base, "/ui/logs?component=panel&follow=1", Some(&cookie)).await;
    assert!(panel.contains("panel: logged in") && !panel.contains("hermesd ready"), "{panel}");
    assert!(panel.contains("http-equiv=\"refresh\""), "following reloads the page");
    assert!(headers["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
    let _ = child.kill();
    let _ = child.wait();
}

/// The `event:` and `data:` of each server-sent event in `text`.
fn sse_events(text: &str) -> Vec<(String, String)> {
    text.replace('\r', "")
        .split("\n\n")
        .filter_map(|block| {
            let mut event = "message".to_owned();
            let mut data = Vec::new();
            for line in block.lines() {
                if let Some(name) = line.strip_prefix("event:") {
                    event = name.trim().to_owned();
                } else if let Some(value) = line.strip_prefix("data:") {
                    data.push(value.strip_prefix(' ').unwrap_or(value).to_owned());
                }
            }
            (!data.is_empty()).then(|| (event, data.join("\n")))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_chat_talks_through_the_ingress_streams_the_answer_and_the_status_follows_live() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let base = d.base.as_str();
    let cookie = cookie_of(&login(base, KEY, Some(base)).await);
    let (status, page, headers) = get(base, "/ui/chat", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(page.contains("id=\"chat\"") && page.contains("No message yet"), "{page}");
    assert!(page.contains("<script src=\"/ui/assets/panel.js\""), "the page's script is its own file");
    let csp = headers["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"), "{csp}");
    let (status, js, _) = get(base, "/ui/assets/panel.js", None).await;
    assert!(status == 200 && js.contains("text/event-stream"), "{status}");
    let csrf = csrf_of(&page);
    let post = |fields: Vec<(&'static str, String)>, origin: &str, accept: &str| {
        let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        browser()
            .post(format!("{base}/ui/chat"))
            .header("cookie", &cookie)
            .header("origin", origin)
            .header("accept", accept)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(form(&pairs))
            .send()
    };

    // Forged: no token, another origin, no cookie. Nothing reaches the agent.
    let forged = post(vec![("csrf", "forged".into()), ("text", "forged hello".into())], base, "text/html");
    assert_eq!(forged.await.unwrap().status(), 403);
    let foreign = post(vec![("csrf", csrf.clone()), ("text", "foreign hello".into())], "http://evil.example", "*/*");
    assert_eq!(foreign.await.unwrap().status(), 403);
    let anonymous = browser()
        .post(format!("{base}/ui/chat"))
        .header("origin", base)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(form(&[("csrf", &csrf), ("text", "who am i")]))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 403);

    // The script gets why a message was not sent, as text it can show.
    let empty = post(vec![("csrf", csrf.clone()), ("text", "  ".into())], base, "text/event-stream").await.unwrap();
    assert_eq!(empty.status(), 400);
    assert_eq!(empty.text().await.unwrap(), "Not sent: the message is empty.");

    // Without a script: the form waits for the answer and shows the page again.
    let plain = post(vec![("csrf", csrf.clone()), ("text", "first <b>words</b>".into())], base, "text/html");
    let plain = plain.await.unwrap();
    assert_eq!(plain.status(), 303);
    assert_eq!(plain.headers()["location"], "/ui/chat#chat");
    let (_, page, _) = get(base, "/ui/chat", Some(&cookie)).await;
    assert!(page.contains("first &lt;b&gt;words&lt;/b&gt;") && page.contains("echo: first"), "{page}");

    // With a script: the answer streams back as server-sent events.
    let streamed = post(vec![("csrf", csrf.clone()), ("text", "second words".into())], base, "text/event-stream");
    let streamed = streamed.await.unwrap();
    assert_eq!(streamed.status(), 200);
    assert!(streamed.headers()["content-type"].to_str().unwrap().starts_with("text/event-stream"));
    let events = sse_events(&streamed.text().await.unwrap());
    let (name, done) = events.last().expect("a done event").clone();
    assert_eq!(name, "done", "{events:?}");
    let done: Value = serde_json::from_str(&done).unwrap();
    assert_eq!((done["text"].as_str(), done["error"].as_bool()), (Some("echo: second words"), Some(false)));

    // It is one conversation of the API platform, stored like any other; the model saw it
    // whole, and no forged message reached it.
    let listed: Value =
        browser().get(format!("{base}/api/sessions")).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
    let session = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["key"].as_str().is_some_and(|k| k.ends_with(":api:dm:panel")))
        .unwrap_or_else(|| panic!("{listed}"))
        .clone();
    assert_eq!(session["messages"], 4, "{session}");
    let said: Vec<String> = llm.requests().iter().map(|r| r.to_string()).collect();
    assert!(
        said.iter().all(|r| !r.contains("forged hello") && !r.contains("foreign hello") && !r.contains("who am i"))
    );
    assert!(said.iter().any(|r| r.contains("first <b>words</b>") && r.contains("second words")));

    // The status page follows itself: its stream sends the status; it needs the login.
    let (status, _, _) = get(base, "/ui/status/events", None).await;
    assert_eq!(status, 401);
    let mut stream = browser().get(format!("{base}/ui/status/events")).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(stream.status(), 200);
    let first = tokio::time::timeout(std::time::Duration::from_secs(10), stream.chunk()).await.unwrap().unwrap();
    let first = String::from_utf8_lossy(&first.unwrap()).into_owned();
    assert!(first.starts_with("event: status") && first.contains("ready") && first.contains("up "), "{first}");
    assert!(first.contains("Store on disk") && first.contains("Model calls (mean time)"), "{first}");
    assert!(first.contains("<th>Waiting to send</th>"), "{first}");
    assert!(first.contains("<h2>Models</h2>") && first.contains("fake-model") && first.contains("0 / 2"), "{first}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_is_listed_with_their_usage_exported_whole_and_deleted_only_once_confirmed() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let base = d.base.as_str();
    for (user, text) in [("alice", "alice asks about otters"), ("alice", "alice again"), ("bob", "bob asks about bees")]
    {
        let asked = json!({ "user": user, "messages": [{ "role": "user", "content": text }] });
        let answer =
            support::client().post(format!("{base}/v1/chat/completions")).bearer_auth(KEY).json(&asked).send().await;
        assert_eq!(answer.unwrap().status(), 200);
    }
    // A session several people speak in (one X-Hermes-Session-Id) is nobody's own.
    for (user, text) in [("alice", "alice in the team room"), ("bob", "bob in the team room")] {
        let asked = json!({ "user": user, "messages": [{ "role": "user", "content": text }] });
        let answer = support::client()
            .post(format!("{base}/v1/chat/completions"))
            .bearer_auth(KEY)
            .header("x-hermes-session-id", "team-room")
            .json(&asked)
            .send()
            .await;
        assert_eq!(answer.unwrap().status(), 200);
    }
    let memory = hermesd::agent::tools::place::person_dir(&home.path().join("memory"), "api", "alice");
    std::fs::create_dir_all(&memory).unwrap();
    std::fs::write(memory.join("USER.md"), "Alice likes otters.").unwrap();

    // Listed by use, each with a link to their page.
    let cookie = cookie_of(&login(base, KEY, Some(base)).await);
    let (_, people, _) = get(base, "/ui/people", Some(&cookie)).await;
    assert!(people.contains("Usage by person"), "{people}");
    let alice_at = people.find(">alice</a>").expect("alice is listed");
    assert!(people.find(">bob</a>").is_some_and(|bob| alice_at < bob), "the one who used more comes first");
    let by_key: Value =
        browser().get(format!("{base}/api/people")).bearer_auth(KEY).send().await.unwrap().json().await.unwrap();
    assert_eq!(by_key["people"][0]["user"], "alice", "{by_key}");
    assert_eq!(by_key["people"][0]["turns"], 3, "{by_key}");

    // Their page, and their export: every message of theirs, their memory, nobody else's.
    let (status, page, _) = get(base, "/ui/people/person?platform=api&user=alice", Some(&cookie)).await;
    assert_eq!(status, 200);
    assert!(page.contains("3 turns") && page.contains("Delete this person"), "{page}");
    assert_eq!(get(base, "/api/people/export?platform=api&user=alice", None).await.0, 401);
    let exported = browser()
        .get(format!("{base}/api/people/export?platform=api&user=alice"))
        .header("cookie", &cookie)
        .send()
        .await
        .unwrap();
    assert!(exported.headers()["content-disposition"].to_str().unwrap().contains("hermesd-api-alice.json"));
    let exported: Value = exported.json().await.unwrap();
    let text = exported.to_string();
    assert!(text.contains("alice asks about otters") && text.contains("echo: alice again"), "{text}");
    assert!(!text.contains("bees"), "nobody else's conversation");
    assert!(!text.contains("bob in the team room"), "nor a shared one: {text}");
    assert_eq!(exported["memory"]["USER.md"], "Alice likes otters.");

    // Deleting: refused without the token, from elsewhere, or unconfirmed; done once confirmed.
    let csrf = csrf_of(&page);
    let fields = |token: &str, confirm: &str| {
        vec![
            ("csrf", token.to_owned()),
            ("platform", "api".into()),
            ("user", "alice".into()),
            ("confirm", confirm.into()),
        ]
    };
    let cookie_ref = cookie.as_str();
    let erase = |fields: Vec<(&'static str, String)>| async move {
        let pairs: Vec<(&str, &str)> = fields.iter().map(|(k, v)| (*k, v.as_str())).collect();
        act(base, cookie_ref, "/ui/people/erase", &pairs).await
    };
    assert_eq!(erase(fields("forged", "yes")).await, 403);
    assert_eq!(erase(fields(&csrf, "")).await, 400);
    assert!(memory.join("USER.md").exists(), "unconfirmed: nothing deleted");
    assert_eq!(erase(fields(&csrf, "yes")).await, 200);
    assert!(!memory.exists(), "their memory is gone");
    let after: Value = browser()
        .get(format!("{base}/api/people/export?platform=api&user=alice"))
        .bearer_auth(KEY)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(after["sessions"].as_array().map(Vec::len), Some(0), "{after}");
    let (_, people, _) = get(base, "/ui/people", Some(&cookie)).await;
    assert!(!people.contains(">alice</a>") && people.contains(">bob</a>"), "{people}");
    let (_, found, _) = get(base, "/ui/sessions?q=room", Some(&cookie)).await;
    assert!(found.contains("agent:main:api:dm:team-room"), "the shared conversation stays:\n{found}");
    // The list by profile and platform.
    let (_, api, _) = get(base, "/ui/sessions?profile=default&platform=api", Some(&cookie)).await;
    assert!(api.contains("agent:main:api:dm:user:bob"), "{api}");
    let (_, local, _) = get(base, "/ui/sessions?platform=local", Some(&cookie)).await;
    assert!(local.contains("No conversation") && local.contains("<option value=\"api\">"), "{local}");
    let (_, found, _) = get(base, "/ui/sessions?q=bees&platform=api", Some(&cookie)).await;
    assert!(found.contains("bees"), "{found}");
    let (_, found, _) = get(base, "/ui/sessions?q=bees", Some(&cookie)).await;
    assert!(found.contains("bees"), "bob's conversation stays:\n{found}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cron_job_added_in_the_panel_follows_the_clis_rules() {
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let d = start_daemon(home.path(), &config_for(&llm, ""), &[("API_SERVER_KEY", KEY)]).await;
    let base = d.base.as_str();
    let cookie = cookie_of(&login(base, KEY, Some(base)).await);
    let (_, page, _) = get(base, "/ui/cron", Some(&cookie)).await;
    assert!(page.contains("No cron job") && page.contains("Add a job"), "{page}");
    let csrf = csrf_of(&page);
    let add = |fields: Vec<(&'static str, String)>| {
        let body = form(&fields.iter().map(|(k, v)| (*k, v.as_str())).collect::<Vec<_>>());
        browser()
            .post(format!("{base}/ui/cron"))
            .header("cookie", &cookie)
            .header("origin", base)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let job = |token: &str, schedule: &str, deliver: &str| {
        vec![
            ("csrf", token.to_owned()),
            ("schedule", schedule.to_owned()),
            ("prompt", "summarise the <news>".to_owned()),
            ("name", "Morning news".to_owned()),
            ("deliver", deliver.to_owned()),
            ("repeat", String::new()),
        ]
    };
    assert_eq!(add(job("forged", "every 1h", "")).await.unwrap().status(), 403);
    let refused = add(job(&csrf, "every so often", "")).await.unwrap();
    assert_eq!(refused.status(), 400);
    let refused = refused.text().await.unwrap();
    assert!(refused.contains("Not added") && refused.contains("summarise the &lt;news&gt;"), "{refused}");
    let nowhere = add(job(&csrf, "every 1h", "nowhere:42")).await.unwrap();
    assert_eq!(nowhere.status(), 400, "a target the config cannot deliver to is refused");
    let listed = String::from_utf8_lossy(&hermesd_cli(home.path(), &["cron", "list"]).stdout).into_owned();
    assert!(!listed.contains("Morning news"), "nothing refused was added: {listed}");
    assert_eq!(add(job(&csrf, "0 7 * * *", "local")).await.unwrap().status(), 303);
    let listed = String::from_utf8_lossy(&hermesd_cli(home.path(), &["cron", "list"]).stdout).into_owned();
    assert!(listed.contains("Morning news") && listed.contains("0 7 * * *"), "{listed}");
    let (_, page, _) = get(base, "/ui/cron", Some(&cookie)).await;
    assert!(page.contains("Morning news") && page.contains("Pause"), "{page}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transcript_shows_its_images_inline_to_the_panel_only() {
    use base64::Engine;
    const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR pretend pixels";
    let llm = FakeLlm::echo().await;
    let home = tempfile::tempdir().unwrap();
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\n\
         name = \"fake-model\"\nvision = true\n\n[platforms.api]\nenabled = true\n",
        llm.base_url()
    );
    let d = start_daemon(home.path(), &config, &[("API_SERVER_KEY", KEY)]).await;
    let base = d.base.as_str();
    let image = format!("data:image/png;base64,{}", base64::engine::general_purpose::STANDARD.encode(PNG));
    let asked = json!({ "messages": [{ "role": "user", "content": [
        { "type": "text", "text": "what is in the picture?" },
        { "type": "image_url", "image_url": { "url": image } },
    ]}]});
    let answer =
        support::client().post(format!("{base}/v1/chat/completions")).bearer_auth(KEY).json(&asked).send().await;
    assert_eq!(answer.unwrap().status(), 200);
    let cookie = cookie_of(&login(base, KEY, Some(base)).await);
    let (_, list, _) = get(base, "/ui/sessions", Some(&cookie)).await;
    let at = list.find("href=\"/ui/sessions/").unwrap() + "href=\"/ui/sessions/".len();
    let id = list[at..].split('"').next().unwrap().to_owned();
    let (_, shown, _) = get(base, &format!("/ui/sessions/{id}"), Some(&cookie)).await;
    let at = shown.find("<img src=\"").unwrap_or_else(|| panic!("an inline image:\n{shown}")) + "<img src=\"".len();
    let src = shown[at..].split('"').next().unwrap().to_owned();
    assert!(src.starts_with(&format!("/ui/sessions/{id}/images/")) && !shown.contains("media/api"), "{src}");
    let served = browser().get(format!("{base}{src}")).header("cookie", &cookie).send().await.unwrap();
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "image/png");
    assert_eq!(served.headers()["x-content-type-options"], "nosniff");
    assert_eq!(served.bytes().await.unwrap().as_ref(), PNG);
    assert_eq!(get(base, &src, None).await.0, 401, "only the panel sees it");
    let (status, _, _) = get(base, &format!("{}9", src.trim_end_matches(char::is_numeric)), Some(&cookie)).await;
    assert_eq!(status, 404, "no such image");
    let (status, _, _) = get(base, "/ui/sessions/elsewhere/images/1/0", Some(&cookie)).await;
    assert_eq!(status, 404, "a message is found only in its own conversation");
    d.daemon.stop().await;
}
