//! Signal end to end: the real daemon against a fake signal-cli HTTP daemon (event stream +
//! JSON-RPC) and the fake LLM — DM round trips with quotes and typing, pairing for strangers,
//! allowlists by number or UUID, group mention gating, approvals by reply, attachments under the
//! cap, rate limits waited out, redelivered messages answered once, a wedged stream replaced
//! within its deadline, and kill -9 of the real binary mid-turn; `signal/adapter.rs` runs the
//! conformance kit and measures the hand-over window.
#![cfg(feature = "signal")]

mod support;

#[path = "signal/adapter.rs"]
mod adapter;
#[path = "signal/crash.rs"]
mod crash;

use std::path::Path;
use std::time::{Duration, Instant};

use support::fake_signal::FakeSignal;
use support::fake_signal::envelopes::{self, ACCOUNT, ACCOUNT_UUID, ALICE, BOB, MALLORY};
use support::{FakeLlm, TestDaemon, config_for, eventually, start_daemon};

const WAIT: Duration = Duration::from_secs(15);
const NO_BATCHING: &str = "[agent]\nbatch_window = \"0s\"\n";
const GROUP: &str = "R3JvdXBJZEJhc2U2NA==";

/// `[platforms.signal]` pointing at `fake`, with `settings` lines added, then `extra` tables.
fn signal_config(llm: &FakeLlm, fake: &FakeSignal, settings: &str, extra: &str) -> String {
    let table = format!(
        "{extra}\n[platforms.signal]\nenabled = true\nhttp_url = \"{}\"\naccount = \"{ACCOUNT}\"\naccount_uuid = \"{ACCOUNT_UUID}\"\n{settings}\n",
        fake.url()
    );
    config_for(llm, &table)
}

/// A daemon with the Signal adapter: Alice allowed by UUID, Bob by number, unless `env` says
/// otherwise.
async fn start(home: &Path, config: &str, env: &[(&str, &str)]) -> TestDaemon {
    let allowed = format!("{},{}", ALICE.uuid, BOB.number);
    let mut all = vec![("SIGNAL_ALLOWED_USERS", allowed.as_str())];
    all.extend_from_slice(env);
    start_daemon(home, config, &all).await
}

fn llm_saw(llm: &FakeLlm, needle: &str) -> bool {
    llm.requests().iter().any(|r| r.to_string().contains(needle))
}

/// `send` calls to a DM recipient.
fn sent_to(fake: &FakeSignal, uuid: &str) -> Vec<String> {
    let to = |p: &serde_json::Value| p["recipient"].as_array().is_some_and(|r| r.iter().any(|v| v == uuid));
    fake.calls("send").into_iter().filter(to).filter_map(|p| p["message"].as_str().map(str::to_owned)).collect()
}

/// `send` calls to the test group.
fn sent_to_group(fake: &FakeSignal) -> Vec<String> {
    let fake_calls = fake.calls("send");
    fake_calls
        .into_iter()
        .filter(|p| p["groupId"] == GROUP)
        .filter_map(|p| p["message"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dm_is_answered_with_a_quote_of_the_question_and_typing_shown() {
    let llm = FakeLlm::builder().latency(Duration::from_millis(300)).start().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &signal_config(&llm, &fake, "", NO_BATCHING), &[]).await;
    fake.push(envelopes::dm(ALICE, 1_700_000_000_001, "hello from signal"));
    assert!(eventually(WAIT, || !sent_to(&fake, ALICE.uuid).is_empty()).await, "{:?}", fake.calls("send"));
    let reply = fake.calls("send").remove(0);
    assert_eq!(reply["message"], "echo: hello from signal");
    assert_eq!(reply["recipient"], serde_json::json!([ALICE.uuid]), "a user is their ACI UUID");
    assert_eq!(reply["quoteTimestamp"], 1_700_000_000_001_i64);
    assert_eq!(reply["quoteAuthor"], ALICE.uuid);
    let typing = fake.calls("sendTyping");
    assert!(typing.iter().any(|p| p["recipient"] == serde_json::json!([ALICE.uuid])), "{typing:?}");
    assert!(llm_saw(&llm, "hello from signal"));
    let readyz = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap();
    assert_eq!(readyz.status().as_u16(), 200, "a live stream is ready");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stranger_gets_a_pairing_code_and_a_number_in_the_allowlist_is_enough() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &signal_config(&llm, &fake, "", NO_BATCHING), &[]).await;
    fake.push(envelopes::dm(MALLORY, 1_700_000_000_010, "let me in"));
    assert!(eventually(WAIT, || !sent_to(&fake, MALLORY.uuid).is_empty()).await, "{:?}", fake.calls("send"));
    let greeting = sent_to(&fake, MALLORY.uuid).remove(0);
    assert!(greeting.contains("pairing code is") && greeting.contains("hermesd pairing approve signal"), "{greeting}");
    // Bob is allowed by his number although hermesd knows him by UUID.
    fake.push(envelopes::dm(BOB, 1_700_000_000_011, "bob here"));
    assert!(eventually(WAIT, || sent_to(&fake, BOB.uuid).contains(&"echo: bob here".to_owned())).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!llm_saw(&llm, "let me in"), "a stranger's message never reaches the model");
    assert_eq!(sent_to(&fake, MALLORY.uuid).len(), 1, "one pairing reply");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_group_only_mentions_start_turns_and_nothing_else_does() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &signal_config(&llm, &fake, "mention_patterns = [\"hermes\"]", NO_BATCHING), &[]).await;
    fake.push(envelopes::group(ALICE, 1_700_000_000_020, GROUP, "lunch anyone?", false));
    fake.push(envelopes::typing(ALICE, 1_700_000_000_021));
    fake.push(envelopes::receipt(ALICE, 1_700_000_000_022));
    fake.push(envelopes::reaction(ALICE, 1_700_000_000_023));
    fake.push(envelopes::group(MALLORY, 1_700_000_000_024, GROUP, "hi", true));
    fake.push(envelopes::group(ALICE, 1_700_000_000_025, GROUP, "what is the status?", true));
    fake.push(envelopes::group(BOB, 1_700_000_000_026, GROUP, "hermes, and the weather?", false));
    let group = || sent_to_group(&fake).into_iter().filter(|t| t.starts_with("echo:")).collect::<Vec<_>>();
    assert!(eventually(WAIT, || group().len() >= 2).await, "{:?}", fake.calls("send"));
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut texts = group();
    texts.sort();
    assert_eq!(texts, ["echo: @+15550001111 what is the status?", "echo: hermes, and the weather?"]);
    assert!(!llm_saw(&llm, "lunch anyone?"), "unaddressed chatter is not a turn");
    assert_eq!(llm.count(), 2, "typing, receipts, reactions and a stranger start nothing");
    assert!(sent_to(&fake, MALLORY.uuid).is_empty(), "a group stranger gets no pairing reply");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_is_given_by_replying_approve() {
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", r#"{"command":"git push --force origin x"}"#)])
        .reply("pushed (or tried)")
        .start()
        .await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let config = signal_config(&llm, &fake, "", &format!("{NO_BATCHING}\n[tools]\napproval_timeout = \"20s\"\n"));
    let d = start(home.path(), &config, &[]).await;
    fake.push(envelopes::dm(ALICE, 1_700_000_000_030, "force push please"));
    let asked = || sent_to(&fake, ALICE.uuid).into_iter().find(|t| t.contains("Approval needed"));
    assert!(eventually(WAIT, || asked().is_some()).await, "{:?}", fake.calls("send"));
    assert!(asked().unwrap().contains("/approve"), "Signal has no buttons: the question says what to reply");
    fake.push(envelopes::dm(ALICE, 1_700_000_000_031, "/approve"));
    let done = || sent_to(&fake, ALICE.uuid).iter().any(|t| t.contains("pushed (or tried)"));
    assert!(eventually(WAIT, done).await, "{:?}", sent_to(&fake, ALICE.uuid));
    let last = llm.requests().last().cloned().unwrap_or_default();
    let tool = last["messages"].as_array().into_iter().flatten().rfind(|m| m["role"] == "tool").cloned();
    let tool_result = tool.map(|m| m["content"].to_string()).unwrap_or_default();
    assert!(!tool_result.is_empty() && !tool_result.to_lowercase().contains("denied"), "approved: {tool_result}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attachments_are_fetched_under_the_cap_and_only_for_known_senders() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &signal_config(&llm, &fake, "max_file_mb = 1", NO_BATCHING), &[]).await;
    fake.add_attachment("notes.txt", b"the secret word is pineapple".to_vec());
    fake.add_attachment("huge.bin", vec![0; 2 * 1024 * 1024]);
    fake.add_attachment("liar.txt", vec![b'x'; 2 * 1024 * 1024]);
    fake.add_attachment("stranger.txt", b"nope".to_vec());
    fake.push(envelopes::dm_with_file(MALLORY, 1_700_000_000_040, "take this", "stranger.txt", "text/plain", 4));
    fake.push(envelopes::dm_with_file(ALICE, 1_700_000_000_041, "read this", "notes.txt", "text/plain", 28));
    fake.push(envelopes::dm_with_file(
        ALICE,
        1_700_000_000_042,
        "and this",
        "huge.bin",
        "application/octet-stream",
        2 * 1024 * 1024,
    ));
    // A size the envelope under-reports is caught on the answer.
    fake.push(envelopes::dm_with_file(ALICE, 1_700_000_000_043, "and that", "liar.txt", "text/plain", 10));
    let answered = || {
        ["echo: read this", "echo: and this", "echo: and that"]
            .iter()
            .all(|t| sent_to(&fake, ALICE.uuid).iter().any(|s| s.starts_with(t)))
    };
    assert!(eventually(WAIT, answered).await, "{:?}", fake.calls("send"));
    assert!(llm_saw(&llm, "pineapple"), "the text file reached the model");
    assert!(llm_saw(&llm, "[file too large: huge.bin, 2.0 MB]"));
    assert!(llm_saw(&llm, "[file too large: liar.txt"));
    let fetched: Vec<String> =
        fake.calls("getAttachment").iter().map(|p| p["id"].as_str().unwrap_or("").to_owned()).collect();
    assert!(fetched.contains(&"notes.txt".to_owned()), "{fetched:?}");
    assert!(!fetched.contains(&"huge.bin".to_owned()), "an announced oversize file is never fetched: {fetched:?}");
    assert!(!fetched.contains(&"stranger.txt".to_owned()), "nothing is fetched for a stranger: {fetched:?}");
    let notes = fake.calls("getAttachment").into_iter().find(|p| p["id"] == "notes.txt").unwrap();
    assert_eq!(notes["recipient"], ALICE.uuid, "fetched from the sender's conversation");
    assert!(home.path().join("media/signal").exists());
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_send_is_not_retried_before_the_wait_ends() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &signal_config(&llm, &fake, "", NO_BATCHING), &[]).await;
    fake.rate_limit_next_send(2);
    fake.push(envelopes::dm(ALICE, 1_700_000_000_050, "are you there?"));
    let answered = || sent_to(&fake, ALICE.uuid).len() >= 2;
    assert!(eventually(WAIT, answered).await, "{:?}", fake.calls("send"));
    let times = fake.call_times("send");
    let waited = times[1].duration_since(times[0]);
    assert!(waited >= Duration::from_millis(1950), "the retry came {waited:?} after the rate limit");
    assert_eq!(sent_to(&fake, ALICE.uuid)[1], "echo: are you there?");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redelivered_message_is_answered_once() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &signal_config(&llm, &fake, "", NO_BATCHING), &[]).await;
    let message = envelopes::dm(ALICE, 1_700_000_000_060, "only once please");
    fake.push(message.clone());
    assert!(eventually(WAIT, || !sent_to(&fake, ALICE.uuid).is_empty()).await);
    // signal-cli hands the same message over again (e.g. from its cache after a restart).
    fake.drop_streams();
    assert!(eventually(WAIT, || fake.connections() >= 2).await);
    fake.push(message);
    fake.push(envelopes::dm(ALICE, 1_700_000_000_061, "and a new one"));
    assert!(eventually(WAIT, || sent_to(&fake, ALICE.uuid).len() >= 2).await);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(sent_to(&fake, ALICE.uuid), ["echo: only once please", "echo: and a new one"]);
    assert_eq!(llm.count(), 2);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wedged_stream_is_detected_and_replaced_within_the_deadline() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    fake.set_keepalive(Duration::from_millis(300));
    let home = tempfile::tempdir().unwrap();
    let d = start(home.path(), &signal_config(&llm, &fake, "stream_deadline = \"2s\"", NO_BATCHING), &[]).await;
    assert!(eventually(WAIT, || fake.connections() == 1).await);
    // Quiet but alive: keepalives keep the stream, however long nobody writes.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(fake.connections(), 1, "a quiet stream with keepalives is never replaced");
    let wedged_at = Instant::now();
    fake.wedge();
    assert!(eventually(WAIT, || fake.connections() == 2).await, "the wedged stream was never replaced");
    let replaced_after = wedged_at.elapsed();
    // The deadline counts from the last keepalive (at most 300 ms before the wedge); a stream
    // that worked is replaced at once, without a backoff step.
    assert!(replaced_after < Duration::from_millis(3000), "replaced after {replaced_after:?}, deadline 2s");
    assert!(replaced_after >= Duration::from_millis(1600), "replaced too early: {replaced_after:?}");
    let metrics = support::client().get(format!("{}/metrics", d.base)).send().await.unwrap().text().await.unwrap();
    assert!(metrics.contains("hermesd_platform_seconds_since_progress{platform=\"signal\"}"), "{metrics}");
    fake.push(envelopes::dm(ALICE, 1_700_000_000_070, "still there?"));
    assert!(eventually(WAIT, || sent_to(&fake, ALICE.uuid) == ["echo: still there?"]).await);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_names_an_unreachable_signal_cli() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = signal_config(&llm, &fake, "", NO_BATCHING).replace(fake.url(), &format!("http://127.0.0.1:{closed}"));
    let d = start(home.path(), &config, &[]).await;
    let not_ready = || async {
        let response = support::client().get(format!("{}/readyz", d.base)).send().await.unwrap();
        (response.status().as_u16(), response.text().await.unwrap())
    };
    let mut last = (0, String::new());
    for _ in 0..100 {
        last = not_ready().await;
        if last.1.contains("cannot reach signal-cli") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(last.0, 503, "{}", last.1);
    assert!(last.1.contains("signal: cannot reach signal-cli"), "{}", last.1);
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deliveries_to_signal_go_to_the_home_channel() {
    let llm = FakeLlm::echo().await;
    let fake = FakeSignal::start().await;
    let home = tempfile::tempdir().unwrap();
    let home_channel = format!("group:{GROUP}");
    let env = [("SIGNAL_HOME_CHANNEL", home_channel.as_str())];
    let d = start(home.path(), &signal_config(&llm, &fake, "", NO_BATCHING), &env).await;
    let send = |target: &str| {
        let body = serde_json::json!({"target": target, "text": "nightly report"});
        support::client()
            .post(format!("{}/admin/send", d.base))
            .bearer_auth(support::local_key(home.path()))
            .json(&body)
            .send()
    };
    let response = send("signal").await.unwrap();
    assert_eq!(response.status().as_u16(), 200, "{:?}", response.text().await);
    assert_eq!(sent_to_group(&fake), ["nightly report"], "SIGNAL_HOME_CHANNEL names a group: {:?}", fake.calls("send"));
    let response = send(&format!("signal:{}", BOB.uuid)).await.unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(sent_to(&fake, BOB.uuid), ["nightly report"], "an explicit target is a person's UUID");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_numbers_are_two_accounts_each_answering_its_own_chats_on_its_own_profile() {
    const WORK: &str = "+15550002222";
    let (home_llm, work_llm) = (FakeLlm::echo().await, FakeLlm::echo().await);
    let (home_cli, work_cli) = (FakeSignal::start().await, FakeSignal::start().await);
    let home = tempfile::tempdir().unwrap();
    // The work number is served by a signal-cli of its own and answers on the work profile.
    let work = format!(
        "[platforms.signal.accounts.work]\naccount = \"{WORK}\"\nhttp_url = \"{}\"\nprofile = \"work\"\n\n\
         [profiles.work.model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"work-model\"\n",
        work_cli.url(),
        work_llm.base_url()
    );
    let config = format!("{}\n{work}", signal_config(&home_llm, &home_cli, "", NO_BATCHING));
    let d = start(home.path(), &config, &[]).await;
    home_cli.push(envelopes::dm(ALICE, 1_700_000_000_101, "hello home"));
    let mut to_work = envelopes::dm(ALICE, 1_700_000_000_102, "hello work");
    to_work["account"] = serde_json::json!(WORK);
    work_cli.push(to_work);
    let answered = || sent_to(&home_cli, ALICE.uuid).len() == 1 && sent_to(&work_cli, ALICE.uuid).len() == 1;
    assert!(eventually(WAIT, answered).await, "{:?} {:?}", home_cli.calls("send"), work_cli.calls("send"));
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(sent_to(&home_cli, ALICE.uuid), ["echo: hello home"], "answered once, from its own number");
    assert_eq!(sent_to(&work_cli, ALICE.uuid), ["echo: hello work"]);
    assert!(work_cli.calls("send").iter().all(|p| p["account"] == WORK), "{:?}", work_cli.calls("send"));
    assert!(llm_saw(&home_llm, "hello home") && !llm_saw(&home_llm, "hello work"));
    assert!(llm_saw(&work_llm, "hello work") && !llm_saw(&work_llm, "hello home"), "the work profile's model");
    let ready: serde_json::Value =
        support::client().get(format!("{}/readyz", d.base)).send().await.unwrap().json().await.unwrap();
    assert_eq!(ready["platforms"], serde_json::json!({"signal": "ok", "signal@work": "ok"}), "{ready}");
    d.daemon.stop().await;
}
