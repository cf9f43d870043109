//! Files to the fake Slack through the external upload flow: announced with their length,
//! uploaded to the returned URL, then shared into the chat's thread with the caption.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_slack::FakeSlack;
use crate::support::{FakeLlm, config_for, eventually, start_daemon};

const BOT_TOKEN: &str = "xoxb-test-bot-token";
const APP_TOKEN: &str = "xapp-test-app-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slack_gets_files_through_the_external_upload_flow() {
    let home = tempfile::tempdir().unwrap();
    let call = json!({"path": "report.pdf", "caption": "the *report*"}).to_string();
    let llm = FakeLlm::builder().tool_calls(&[("send_file", &call)]).reply("Done.\nMEDIA:photo.jpg").start().await;
    let slack = FakeSlack::start(BOT_TOKEN, APP_TOKEN).await;
    let table = format!("[platforms.slack]\nenabled = true\napi_url = \"{}\"\n", slack.api_url());
    let env = [("SLACK_BOT_TOKEN", BOT_TOKEN), ("SLACK_APP_TOKEN", APP_TOKEN), ("SLACK_ALLOWED_USERS", "U1")];
    let d = start_daemon(home.path(), &config_for(&llm, &table), &env).await;
    let event = slack.user_message("C1", "U1", "<@UBOT> files please", None);
    let asked = event["ts"].as_str().unwrap().to_owned();
    // A channel message opens a thread: its turns work in that thread's folder.
    let work = home.path().join("workspace/chats/slack/C1").join(hermesd::agent::tools::place::fs_name(&asked));
    std::fs::create_dir_all(&work).unwrap();
    let pdf = super::binary(60_000, 5);
    let jpg = super::binary(4_000, 6);
    std::fs::write(work.join("report.pdf"), &pdf).unwrap();
    std::fs::write(work.join("photo.jpg"), &jpg).unwrap();
    slack.push_event(event);
    assert!(eventually(Duration::from_secs(15), || slack.shared_files().len() == 2).await, "{:?}", slack.posted());
    let files = slack.shared_files();
    assert_eq!((files[0].filename.as_str(), &files[0].bytes), ("report.pdf", &pdf));
    assert_eq!(files[0].initial_comment.as_deref(), Some("the _report_"), "captions go as mrkdwn");
    assert_eq!((files[1].filename.as_str(), &files[1].bytes), ("photo.jpg", &jpg));
    assert_eq!(files[1].initial_comment, None);
    for file in &files {
        assert_eq!((file.channel.as_str(), file.thread_ts.as_deref()), ("C1", Some(asked.as_str())), "{file:?}");
    }
    let texts: Vec<String> = slack.posted_to("C1").into_iter().map(|p| p.text).collect();
    assert!(texts.contains(&"Done.".to_owned()), "{texts:?}");
    d.daemon.stop().await;
}
