//! The daemon against a fake Home Assistant websocket API: auth (good and bad token), the
//! subscriptions, a `hermesd_request` round trip answered with its request id, strangers
//! ignored, redeliveries answered once, watched state changes delivered to a notify target
//! (with cooldown), tools calling services only after approval, and reconnects.
#![cfg(feature = "homeassistant")]

#[path = "homeassistant/crash.rs"]
mod crash;
mod support;

use std::time::Duration;

use serde_json::{Value, json};
use support::fake_hass::FakeHass;
use support::{FakeLlm, TestDaemon, config_for, start_daemon};

const TOKEN: &str = "hass-test-token-0123456789";
const ANN: &str = "a1b2c3d4e5f6";
const WAIT: Duration = Duration::from_secs(20);

fn hass_config(llm: &FakeLlm, hass: &FakeHass, extra: &str) -> String {
    config_for(
        llm,
        &format!(
            "[agent]\nbatch_window = \"0s\"\n\n[platforms.homeassistant]\nenabled = true\nurl = \"{}\"\nping_interval = \"2s\"\nrequest_timeout = \"5s\"\n{extra}\n",
            hass.url()
        ),
    )
}

async fn start(home: &std::path::Path, llm: &FakeLlm, hass: &FakeHass, extra: &str) -> TestDaemon {
    let env = [("HASS_TOKEN", TOKEN), ("HASS_ALLOWED_USERS", ANN)];
    start_daemon(home, &hass_config(llm, hass, extra), &env).await
}

async fn subscribed(hass: &FakeHass, wanted: &[&str]) -> bool {
    hass.wait_until(WAIT, |h| {
        let subs = h.subscriptions();
        wanted.iter().all(|w| subs.iter().any(|s| s == w))
    })
    .await
}

async fn responses(hass: &FakeHass, n: usize) -> Vec<Value> {
    hass.wait_until(WAIT, |h| h.responses().len() >= n).await;
    hass.responses()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authenticates_subscribes_and_answers_a_request_with_its_request_id() {
    let llm = FakeLlm::echo().await;
    let hass = FakeHass::start(TOKEN).await;
    let home = tempfile::tempdir().expect("tempdir");
    let d = start(home.path(), &llm, &hass, "").await;
    assert!(subscribed(&hass, &["hermesd_request"]).await, "subscribed: {:?}", hass.subscriptions());
    let auth = hass.of_type("auth");
    assert_eq!(auth, vec![json!({"type": "auth", "access_token": TOKEN})]);
    assert!(!hass.subscriptions().contains(&"state_changed".to_owned()), "nothing watched, no state_changed");
    let ids: Vec<u64> = hass.received().iter().filter_map(|(_, m)| m["id"].as_u64()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase per connection: {ids:?}");

    let request_id = hass.request("Is the front door locked?", Some("kitchen-panel"), Some(ANN));
    let got = responses(&hass, 1).await;
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["text"], "echo: Is the front door locked?");
    assert_eq!(got[0]["conversation_id"], "kitchen-panel");
    assert_eq!(got[0]["request_id"], request_id.as_str());
    assert_eq!(got[0]["user_id"], ANN);
    assert_eq!(got[0]["final"], true);

    let ready = support::client().get(format!("{}/readyz", d.base)).send().await.expect("readyz");
    assert_eq!(ready.status().as_u16(), 200, "{:?}", ready.text().await);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_token_is_refused_and_readyz_says_so() {
    let llm = FakeLlm::echo().await;
    let hass = FakeHass::start("another-token-entirely").await;
    let home = tempfile::tempdir().expect("tempdir");
    let d = start(home.path(), &llm, &hass, "").await;
    assert!(hass.wait_until(WAIT, |h| h.auth_failures() == 1).await);
    let mut body = Value::Null;
    for _ in 0..100 {
        let ready = support::client().get(format!("{}/readyz", d.base)).send().await.expect("readyz");
        body = ready.json().await.unwrap_or(Value::Null);
        if body.to_string().contains("HASS_TOKEN") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let problems = body["problems"].to_string();
    assert!(problems.contains("refused HASS_TOKEN"), "{body}");
    assert!(!problems.contains(TOKEN) && !problems.contains("another-token"), "no token in {body}");
    assert!(hass.subscriptions().is_empty());
    assert_eq!(hass.connections(), 1, "a refused token is not retried in a loop");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_user_is_ignored_and_a_redelivered_request_is_answered_once() {
    let llm = FakeLlm::echo().await;
    let hass = FakeHass::start(TOKEN).await;
    let home = tempfile::tempdir().expect("tempdir");
    let d = start(home.path(), &llm, &hass, "").await;
    assert!(subscribed(&hass, &["hermesd_request"]).await);
    hass.request("unlock everything", None, Some("stranger000"));
    hass.request("from an automation", None, None);
    let id = hass.request("first", None, Some(ANN));
    hass.refire("hermesd_request", json!({"text": "first"}), Some(ANN), &id);
    let got = responses(&hass, 1).await;
    // The stranger's and the user-less request would have come first; only Ann's is answered.
    hass.request("second", None, Some(ANN));
    let got2 = responses(&hass, 2).await;
    assert_eq!(got[0]["text"], "echo: first", "{got:?}");
    assert_eq!(got2.len(), 2, "the redelivery ran nothing: {got2:?}");
    assert_eq!(got2[1]["text"], "echo: second");
    assert_eq!(got2[0]["conversation_id"], Value::Null);
    assert_eq!(llm.count(), 2, "the stranger reached no model");
    let all: String = hass.responses().iter().map(|r| r["text"].to_string()).collect();
    assert!(!all.contains("pairing"), "no pairing code goes to HA: {all}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_arriving_while_its_conversation_is_busy_is_answered_by_its_answer() {
    // The model takes a while, so the second request of the conversation arrives mid-turn, under
    // every busy policy: its response event must be its own turn's answer, never a busy notice
    // ("queued (1)", "Noted") an automation waiting for that request id would take as the answer;
    // under `interrupt` the interrupted request is answered that it was.
    for policy in ["queue", "steer", "interrupt"] {
        let llm = FakeLlm::builder().latency(Duration::from_millis(1500)).start().await;
        let hass = FakeHass::start(TOKEN).await;
        let home = tempfile::tempdir().expect("tempdir");
        let config =
            hass_config(&llm, &hass, "").replace("[agent]\n", &format!("[agent]\nbusy_policy = \"{policy}\"\n"));
        let env = [("HASS_TOKEN", TOKEN), ("HASS_ALLOWED_USERS", ANN)];
        let d = start_daemon(home.path(), &config, &env).await;
        assert!(subscribed(&hass, &["hermesd_request"]).await);
        let first = hass.request("first", Some("kitchen"), Some(ANN));
        assert!(hass.wait_until(WAIT, |_| llm.count() >= 1).await, "{policy}: the first turn started");
        let second = hass.request("second", Some("kitchen"), Some(ANN));
        let got = responses(&hass, 2).await;
        // Anything else still coming would show up now.
        tokio::time::sleep(Duration::from_millis(500)).await;
        let got_all = hass.responses();
        assert_eq!(got_all.len(), 2, "{policy}: one response per request: {got_all:?}");
        assert!(got_all.iter().all(|r| r["kind"] != "notice"), "{policy}: {got_all:?}");
        let answer = |id: &str| got.iter().find(|r| r["request_id"] == id).map(|r| r["text"].clone());
        if policy == "interrupt" {
            // The first turn is stopped at its next safe point, or had already answered.
            let first = answer(&first).and_then(|t| t.as_str().map(str::to_owned)).unwrap_or_default();
            assert!(["Interrupted by your newer message.", "echo: first"].contains(&first.as_str()), "{got:?}");
            assert!(answer(&second).is_some_and(|t| t.as_str().is_some_and(|t| t.contains("second"))), "{got:?}");
        } else {
            assert_eq!(answer(&first), Some(Value::from("echo: first")), "{policy}: {got:?}");
            assert_eq!(answer(&second), Some(Value::from("echo: second")), "{policy}: {got:?}");
        }
        d.daemon.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watched_change_is_delivered_to_the_notify_target_once_per_cooldown() {
    let llm = FakeLlm::echo().await;
    let hass = FakeHass::start(TOKEN).await;
    hass.entity("binary_sensor.garage_door", "off", None, None).entity("binary_sensor.noisy", "off", None, None);
    let home = tempfile::tempdir().expect("tempdir");
    let extra = "watch_domains = [\"binary_sensor\"]\nignore_entities = [\"binary_sensor.noisy\"]\ncooldown_seconds = 600\nwatch_target = \"homeassistant:notify.mobile_app_phone\"\nwatch_prompt = \"{friendly_name} is now {new_state} (was {old_state})\"\n";
    let d = start(home.path(), &llm, &hass, extra).await;
    assert!(subscribed(&hass, &["hermesd_request", "state_changed"]).await, "{:?}", hass.subscriptions());
    hass.set_state("binary_sensor.noisy", "on");
    hass.set_state("binary_sensor.garage_door", "on");
    hass.set_state("binary_sensor.garage_door", "off");
    assert!(hass.wait_until(WAIT, |h| !h.service_calls().is_empty()).await, "a notify call");
    let calls = hass.service_calls();
    assert_eq!(calls[0]["domain"], "notify");
    assert_eq!(calls[0]["service"], "mobile_app_phone");
    assert_eq!(calls[0]["service_data"]["title"], "Hermes");
    let message = calls[0]["service_data"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("Home Assistant: binary_sensor.garage_door"), "{message}");
    assert!(message.contains("echo: garage door is now on (was off)"), "{message}");
    // The second change came within the cooldown; the ignored entity never counts.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(hass.service_calls().len(), 1, "{:?}", hass.service_calls());
    assert_eq!(llm.count(), 1);
    assert!(hass.responses().is_empty(), "watched changes never answer on the event bus");
    // A watched change runs like a cron job: no interactive tools.
    let tools = llm.requests()[0]["tools"].to_string();
    assert!(!tools.contains("\"clarify\""), "{tools}");
    assert!(tools.contains("ha_get_state"), "the homeassistant toolset is there: {tools}");
    d.daemon.stop().await;
}

fn home_with_lock(hass: &FakeHass) {
    hass.area("hall", "Hallway")
        .device("dev-lock", Some("hall"))
        .entity("lock.front_door", "locked", None, Some("dev-lock"))
        .entity("light.hall", "on", Some("hall"), None)
        .entity("light.kitchen", "off", Some("kitchen"), None)
        .entity("script.bedtime", "off", None, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_reached_through_its_area_asks_first_and_nothing_is_called_before_approval() {
    let args = r#"{"domain": "homeassistant", "service": "turn_off", "data": {"area_id": "Hallway"}}"#;
    let llm =
        FakeLlm::builder().tool_calls(&[("ha_call_service", args)]).reply("All off in the hallway.").start().await;
    let hass = FakeHass::start(TOKEN).await;
    home_with_lock(&hass);
    let home = tempfile::tempdir().expect("tempdir");
    let d = start(home.path(), &llm, &hass, "").await;
    assert!(subscribed(&hass, &["hermesd_request"]).await);
    hass.request("Turn off the hallway", Some("c1"), Some(ANN));
    let asked = responses(&hass, 1).await;
    let question = asked[0]["text"].as_str().unwrap_or_default();
    assert!(question.contains("Approval needed") && question.contains("lock.front_door"), "{question}");
    assert!(hass.service_calls().is_empty(), "nothing called before approval");
    hass.request("/approve", Some("c1"), Some(ANN));
    assert!(hass.wait_until(WAIT, |h| h.service_calls().len() == 1).await);
    let call = &hass.service_calls()[0];
    assert_eq!((call["domain"].as_str(), call["service"].as_str()), (Some("homeassistant"), Some("turn_off")));
    assert_eq!(call["target"], json!({"area_id": "Hallway"}), "what was resolved is what was sent");
    let done = |h: &FakeHass| h.responses().iter().any(|r| r["text"] == "All off in the hallway.");
    assert!(hass.wait_until(WAIT, done).await, "{:?}", hass.responses());
    assert!(hass.responses().iter().any(|r| r["text"] == "Approved."));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_asks_first_and_a_denial_calls_nothing_while_a_plain_light_needs_no_approval() {
    let script = r#"{"domain": "script", "service": "bedtime"}"#;
    let light =
        r#"{"domain": "light", "service": "turn_on", "entity_id": "light.kitchen", "data": {"brightness_pct": 40}}"#;
    let llm = FakeLlm::builder()
        .tool_calls(&[("ha_call_service", script)])
        .reply("Not run.")
        .tool_calls(&[("ha_call_service", light)])
        .reply("Kitchen light on.")
        .start()
        .await;
    let hass = FakeHass::start(TOKEN).await;
    home_with_lock(&hass);
    let home = tempfile::tempdir().expect("tempdir");
    let d = start(home.path(), &llm, &hass, "").await;
    assert!(subscribed(&hass, &["hermesd_request"]).await);
    hass.request("Run bedtime", None, Some(ANN));
    let asked = responses(&hass, 1).await;
    assert!(asked[0]["text"].as_str().is_some_and(|t| t.contains("script calls can act on anything")), "{asked:?}");
    hass.request("/deny", None, Some(ANN));
    let done = |h: &FakeHass| h.responses().iter().any(|r| r["text"] == "Not run.");
    assert!(hass.wait_until(WAIT, done).await, "{:?}", hass.responses());
    assert!(hass.service_calls().is_empty(), "a denied script is never called");
    hass.request("Kitchen light to 40%", None, Some(ANN));
    assert!(hass.wait_until(WAIT, |h| h.service_calls().len() == 1).await);
    let call = &hass.service_calls()[0];
    assert_eq!(call["target"], json!({"entity_id": ["light.kitchen"]}));
    assert_eq!(call["service_data"], json!({"brightness_pct": 40}));
    assert!(hass.wait_until(WAIT, |h| h.responses().iter().any(|r| r["text"] == "Kitchen light on.")).await);
    let questions = hass.responses().iter().filter(|r| r["text"].to_string().contains("Approval needed")).count();
    assert_eq!(questions, 1, "the light needed no approval: {:?}", hass.responses());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_and_state_tools_read_through_the_connection() {
    let llm = FakeLlm::builder()
        .tool_calls(&[
            ("ha_list_entities", r#"{"area": "hallway"}"#),
            ("ha_get_state", r#"{"entity_id": "lock.front_door"}"#),
        ])
        .reply("read")
        .start()
        .await;
    let hass = FakeHass::start(TOKEN).await;
    home_with_lock(&hass);
    let home = tempfile::tempdir().expect("tempdir");
    let d = start(home.path(), &llm, &hass, "").await;
    assert!(subscribed(&hass, &["hermesd_request"]).await);
    hass.request("What is in the hallway?", None, Some(ANN));
    assert!(hass.wait_until(WAIT, |h| h.responses().iter().any(|r| r["text"] == "read")).await);
    let second = llm.requests()[1].to_string();
    assert!(
        second.contains("light.hall (hall): on") && second.contains("lock.front_door (front door): locked"),
        "{second}"
    );
    assert!(!second.contains("light.kitchen"), "another area's entity is not listed");
    assert!(second.contains("\\\"state\\\": \\\"locked\\\""), "ha_get_state's JSON: {second}");
    assert!(!second.contains(TOKEN), "the token never reaches the model");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_socket_drops_it_reconnects_resubscribes_and_answers_the_next_request() {
    let llm = FakeLlm::echo().await;
    let hass = FakeHass::start(TOKEN).await;
    let home = tempfile::tempdir().expect("tempdir");
    let d = start(home.path(), &llm, &hass, "watch_entities = [\"lock.front_door\"]\nwatch_target = \"local\"\n").await;
    assert!(subscribed(&hass, &["hermesd_request", "state_changed"]).await);
    hass.drop_connections();
    assert!(hass.wait_until(WAIT, |h| h.connections() == 2).await, "reconnected");
    assert!(subscribed(&hass, &["hermesd_request", "state_changed"]).await, "resubscribed: {:?}", hass.subscriptions());
    let subscribes = hass.received().iter().filter(|(c, m)| *c == 2 && m["type"] == "subscribe_events").count();
    assert_eq!(subscribes, 2);
    let request_id = hass.request("still there?", None, Some(ANN));
    let got = responses(&hass, 1).await;
    assert_eq!(got[0]["request_id"], request_id.as_str());
    // A connection that stops answering pings is replaced too.
    hass.mute_pongs(true);
    assert!(hass.wait_until(WAIT, |h| h.connections() == 3).await, "no pong, new connection");
    hass.mute_pongs(false);
    d.daemon.stop().await;
}

#[test]
fn check_lists_every_home_assistant_problem_and_exits_78() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.toml");
    let text = "[platforms.homeassistant]\nenabled = true\nurl = \"homeassistant.local\"\nwatch_entities = [\"front_door\"]\n\
                watch_domains = [\"binary_sensor\"]\nsensitive_domains = [\"Lock\"]\nping_interval = \"0s\"\n";
    std::fs::write(&config, text).expect("config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", dir.path().join("home").to_str().expect("utf-8"), "--config", config.to_str().expect("utf-8")])
        .arg("check")
        .env_remove("HASS_TOKEN")
        .env_remove("HASS_URL")
        .output()
        .expect("run hermesd check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    for needle in [
        "platforms.homeassistant: HASS_TOKEN is not set",
        "platforms.homeassistant.url: \"homeassistant.local\" is not an http(s) or ws(s) URL",
        "platforms.homeassistant.watch_entities: \"front_door\" is not an entity id",
        "platforms.homeassistant.sensitive_domains: \"Lock\" is not a domain",
        "platforms.homeassistant.watch_target: watching state changes needs a delivery target",
        "platforms.homeassistant.ping_interval: must be at least 1s",
    ] {
        assert!(stderr.contains(needle), "{needle:?} missing from:\n{stderr}");
    }

    let fixed = "[platforms.homeassistant]\nenabled = true\nwatch_domains = [\"binary_sensor\"]\n\
                 watch_target = \"telegram:123\"\n";
    std::fs::write(&config, fixed).expect("config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_hermesd"))
        .args(["--home", dir.path().join("home").to_str().expect("utf-8"), "--config", config.to_str().expect("utf-8")])
        .arg("check")
        .env("HASS_TOKEN", TOKEN)
        .output()
        .expect("run hermesd check");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(
        stderr.contains("platforms.homeassistant.watch_target: telegram:123: platform \"telegram\" is not enabled"),
        "{stderr}"
    );
}
