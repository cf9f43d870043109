//! Crash at every durable boundary: for each failpoint from accept to receipt, the real binary
//! (built with failpoints, as every test build is) runs a multi-chat Telegram load with that
//! failpoint armed to abort at its N-th hit, dies there, is restarted without it, and must then
//! answer every message exactly once and in order per chat. The one window allowed to double a
//! reply — the platform took the send, the receipt was not committed — is reported apart.
//!
//! The same boundaries once more with quick messages batched (as by default): two messages per
//! chat batched into one turn, the crash, then a follow-up from every chat that arrives right
//! after the restart and batches into the recovered turn. Every message must then have its words
//! in the transcript exactly once and its answer once, and no event may be closed otherwise.

#[path = "support/checker.rs"]
mod checker;
#[path = "support/gateway_run.rs"]
mod gateway_run;
mod support;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::time::Duration;

use checker::Report;
use gateway_run::{BIN, Gateway, stop};
use support::{eventually, wait_ready};

const CHATS: i64 = 3;
const PER_CHAT: usize = 3;

/// Start `run`'s binary with `failpoint` armed and wait until it died there (by abort).
async fn died_at(run: &Gateway, failpoint: &str) {
    let mut child = run.spawn(failpoint);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(std::time::Instant::now() < deadline, "{failpoint} never fired; log:\n{}", run.log());
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(status.signal(), Some(6), "{failpoint}: died by abort; log:\n{}", run.log());
    assert!(run.log().contains("abort"), "the failpoint itself aborted");
}

/// Run the load with `failpoint` armed (`name=abort@N`), let it die there, restart without it,
/// and return the checker's report once every message is answered.
async fn crash_at(failpoint: &str) -> Report {
    crash_with(failpoint, PER_CHAT).await
}

/// `crash_at` with `per_chat` messages queued for each chat.
async fn crash_with(failpoint: &str, per_chat: usize) -> Report {
    let mut run = Gateway::new(CHATS).await;
    // Queued before the start: the first polls take them in order, several per chat.
    for round in 0..per_chat {
        run.push_round(round, 0);
    }
    died_at(&run, failpoint).await;

    let child = run.spawn("");
    wait_ready(run.port, run.path()).await;
    let answered = eventually(Duration::from_secs(30), || run.all_answered()).await;
    // A would-be duplicate or late resend has time to show up before the verdict.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop(child).await;
    let report = run.check().await;
    assert!(
        answered && report.is_exactly_once(),
        "{failpoint}: {report:#?}\nsent out: {:#?}\nlog:\n{}",
        run.delivered(),
        run.log()
    );
    report
}

/// The batched load (`crash_with` with `agent.batch_window` on): the first two rounds queued
/// before the start, the crash at `failpoint`, a third round queued while the daemon is down.
async fn crash_batched(failpoint: &str) -> checker::Report {
    let mut run = Gateway::with(CHATS, Duration::from_millis(150), "batch_window = \"1s\"\n").await;
    for round in 0..2 {
        for user in 0..CHATS as usize {
            run.push_one(user, round);
        }
    }
    died_at(&run, failpoint).await;
    // Follow-ups the restarted daemon reads first, while it reruns the interrupted turns.
    for user in 0..CHATS as usize {
        run.push_one(user, 2);
    }
    let child = run.spawn("");
    wait_ready(run.port, run.path()).await;
    let all_answered = || {
        let got: std::collections::HashSet<String> =
            run.delivered_tokens().into_values().flatten().map(|d| d.token).collect();
        run.sent.values().flatten().all(|t| got.contains(t))
    };
    let answered = eventually(Duration::from_secs(30), all_answered).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    stop(child).await;
    let report = checker::check(&run.sent, &run.delivered_tokens(), &run.receipts().await);
    let transcripts = checker::check_transcripts(&run.sent, &run.transcript_words().await);
    let unanswered = run.unanswered_events().await;
    assert!(
        answered && report.is_exactly_once() && transcripts.is_empty() && unanswered.is_empty(),
        "{failpoint}: {report:#?}\ntranscripts: {transcripts:#?}\nnot closed as answered: {unanswered:?}\n\
         sent out: {:#?}\nlog:\n{}",
        run.delivered_tokens(),
        run.log()
    );
    report
}

/// The batched runs' chats send at the same time, so an abort anywhere may catch another chat
/// between its send and its receipt: that chat's reply goes out again (the known window). No
/// more than the other chats' sends can be caught so.
fn in_flight_elsewhere(report: &checker::Report) {
    assert!(report.window_sends() < CHATS as usize, "{report:#?}");
}

#[test]
fn the_test_build_of_the_binary_has_failpoints_compiled_in() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    let version = String::from_utf8_lossy(&out.stdout);
    assert!(version.contains("(failpoints)"), "{version}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_accept_before_the_platform_ack() {
    let report = crash_at("ingress.accepted=abort@4").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_dispatch_before_the_turn_starts() {
    let report = crash_at("turn.start=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_turn_began() {
    let report = crash_at("turn.begun=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_model_replied_before_it_is_stored() {
    let report = crash_at("turn.answered=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_reply_and_its_outbox_rows_are_stored() {
    let report = crash_at("turn.stored=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_outbox_row_is_taken_before_the_send() {
    let report = crash_at("outbox.send=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_send_before_the_receipt_is_the_one_reported_window() {
    // One message per chat: no "queued" notices, so the second send is an answer.
    let report = crash_with("outbox.sent=abort@2", 1).await;
    // The aborted send, and any other chat's send whose receipt was not committed yet.
    let window = report.window_duplicates().len();
    assert!((1..=CHATS as usize).contains(&window), "a send whose receipt was missed went out again: {report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_after_the_receipt() {
    let report = crash_at("outbox.receipt=abort@3").await;
    assert!(report.window_duplicates().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_after_accept() {
    let report = crash_batched("ingress.accepted=abort@3").await;
    in_flight_elsewhere(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_after_the_batch_is_gathered() {
    let report = crash_batched("router.batched=abort@1").await;
    in_flight_elsewhere(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_at_the_turn_start() {
    let report = crash_batched("turn.start=abort@1").await;
    in_flight_elsewhere(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_after_the_user_message_is_written() {
    // The case a follow-up was once lost in: the rerun took it in, but the first attempt's
    // user message stayed, so the follow-up was closed without its words reaching the model.
    let report = crash_batched("turn.begun=abort@1").await;
    in_flight_elsewhere(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_after_the_reply_is_stored() {
    let report = crash_batched("turn.stored=abort@1").await;
    in_flight_elsewhere(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_before_the_send() {
    let report = crash_batched("outbox.send=abort@1").await;
    in_flight_elsewhere(&report);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_between_the_send_and_its_receipt() {
    let report = crash_batched("outbox.sent=abort@1").await;
    // The aborted send, and any other chat's send whose receipt was not committed yet.
    assert!((1..=CHATS as usize).contains(&report.window_sends()), "{report:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batched_crash_after_the_receipt() {
    let report = crash_batched("outbox.receipt=abort@1").await;
    in_flight_elsewhere(&report);
}
