//! Files to the fake Discord: `send_file` and `MEDIA:` lines arrive as `files[0]` attachments
//! of one message each, named in `payload_json`, with the users-only mention rule.

use std::time::Duration;

use serde_json::json;

use crate::support::fake_discord::{Channel, FakeDiscord, User};
use crate::support::{FakeLlm, config_for, eventually, start_daemon};

const TOKEN: &str = "discord-test-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discord_gets_files_as_attachments_with_their_bytes() {
    let home = tempfile::tempdir().unwrap();
    let work = home.path().join("workspace/users/discord/1001");
    std::fs::create_dir_all(&work).unwrap();
    let pdf = super::binary(40_000, 1);
    let png = super::binary(2_000, 2);
    std::fs::write(work.join("report.pdf"), &pdf).unwrap();
    std::fs::write(work.join("chart.png"), &png).unwrap();
    let call = json!({"path": "report.pdf", "caption": "the report"}).to_string();
    let llm = FakeLlm::builder().tool_calls(&[("send_file", &call)]).reply("Done.\nMEDIA:chart.png").start().await;
    let dc = FakeDiscord::builder().token(TOKEN).start().await;
    let table = format!("[platforms.discord]\nenabled = true\napi_url = \"{}\"\n", dc.base_url());
    let env = [("DISCORD_BOT_TOKEN", TOKEN), ("DISCORD_ALLOWED_USERS", "1001")];
    let d = start_daemon(home.path(), &config_for(&llm, &table), &env).await;
    let dm = Channel::dm(7001);
    let asked = dc.post(&dm, &User::new(1001, "ann"), "files please");
    assert!(eventually(Duration::from_secs(15), || dc.uploads().len() == 2).await, "{:?}", dc.calls());
    let uploads = dc.uploads();
    assert_eq!((uploads[0].filename.as_str(), &uploads[0].bytes), ("report.pdf", &pdf));
    assert_eq!(uploads[0].content.as_deref(), Some("the report"));
    assert_eq!((uploads[1].filename.as_str(), &uploads[1].bytes), ("chart.png", &png));
    assert_eq!(uploads[1].content, None, "a MEDIA file has no caption");
    assert_eq!(uploads[1].reference, Some(asked), "the answer's file replies like its text");
    assert!(uploads.iter().all(|u| u.channel == dm.id && u.allowed_mentions["parse"] == json!(["users"])));
    // A tool progress line ("⚙ send_file") may have been sent too, depending on timing.
    let answers: Vec<_> = dc.sent_to(dm.id).into_iter().filter(|s| !s.content.starts_with('⚙')).collect();
    let texts: Vec<&str> = answers.iter().map(|s| s.content.as_str()).collect();
    assert_eq!(texts, ["Done."]);
    assert!(answers[0].at <= uploads[1].at, "the answer's text comes before its file");
    d.daemon.stop().await;
}
