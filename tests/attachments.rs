//! Attachments understood, end to end through the daemon and the fake Telegram Bot API: a photo
//! reaches a vision model as an image part (and again on the next turn, from its stored
//! reference), is described by the auxiliary vision model for a model without vision, a voice
//! note reaches the model as a transcript, and a failing transcription service leaves a note.

mod support;

use std::time::Duration;

use base64::Engine;
use serde_json::Value;
use support::fake_telegram::{Chat, FakeTelegram, Incoming, User};
use support::{FakeLlm, eventually, start_daemon};

const TOKEN: &str = "123456:attachments-test-token";
const WAIT: Duration = Duration::from_secs(15);
/// A PNG header and some bytes: sniffed as PNG, whatever the platform says.
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR pretend pixels";

fn config(llm: &FakeLlm, tg: &FakeTelegram, model_extra: &str, extra: &str) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\n\
         name = \"fake-model\"\ntimeout = \"30s\"\n{model_extra}\n\n{extra}\n\n\
         [platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
        llm.base_url(),
        tg.base_url()
    )
}

async fn start(home: &std::path::Path, config: &str, env: &[(&str, &str)]) -> support::TestDaemon {
    let mut all = vec![("TELEGRAM_BOT_TOKEN", TOKEN), ("TELEGRAM_ALLOWED_USERS", "1001")];
    all.extend_from_slice(env);
    start_daemon(home, config, &all).await
}

/// The text of the last user message of a request (a string, or the text parts).
fn last_user(request: &Value) -> String {
    let messages = request["messages"].as_array().expect("messages");
    let user = messages.iter().rev().find(|m| m["role"] == "user").expect("a user message");
    match &user["content"] {
        Value::String(text) => text.clone(),
        Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

fn data_url(bytes: &[u8], mime: &str) -> String {
    format!("data:{mime};base64,{}", base64::engine::general_purpose::STANDARD.encode(bytes))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_photo_reaches_a_vision_model_as_an_image_part_and_again_from_its_reference() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlm::builder().reply("a diagram").reply("still the diagram").start().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let d = start(home.path(), &config(&llm, &tg, "vision = true", ""), &[]).await;
    let ann = User::new(1001, "Ann");
    let dm = Chat::private(&ann);
    tg.add_file("ph1", "photo.jpg", PNG);
    tg.push(Incoming::text(&dm, &ann, "what is this?").photo("ph1"));
    assert!(eventually(WAIT, || tg.texts(dm.id).iter().any(|t| t == "a diagram")).await, "{:?}", tg.texts(dm.id));
    let expected = data_url(PNG, "image/png");
    assert_eq!(llm.image_urls(), vec![expected.clone()], "one image part, a base64 data URL");
    let first = &llm.requests()[0];
    let text = last_user(first);
    assert!(text.starts_with("what is this?\n[image media/"), "{text}");
    assert!(text.contains("attached below"), "{text}");

    // The next turn sends it again, loaded from the stored reference (the store holds no bytes).
    tg.push(Incoming::text(&dm, &ann, "and the colours?"));
    assert!(eventually(WAIT, || tg.texts(dm.id).iter().any(|t| t == "still the diagram")).await);
    assert_eq!(llm.image_urls(), vec![expected.clone(), expected.clone()]);
    d.daemon.stop().await;
    let encoded = base64::engine::general_purpose::STANDARD.encode(PNG);
    assert!(home.path().join("state.db").is_file(), "the store is where this test looks");
    for file in ["state.db", "state.db-wal"] {
        let store = std::fs::read(home.path().join(file)).unwrap_or_default();
        assert!(!store.windows(encoded.len()).any(|w| w == encoded.as_bytes()), "no image bytes in {file}");
        assert!(!store.windows(PNG.len()).any(|w| w == PNG), "no raw image bytes in {file}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_vision_the_auxiliary_model_describes_the_photo() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlm::echo().await;
    let eyes = FakeLlm::builder().reply("A red bicycle leaning on a blue wall.").start().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let aux = format!(
        "[auxiliary.vision]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"eyes\"\napi_key_env = \"EYES_KEY\"",
        eyes.base_url()
    );
    let d = start(home.path(), &config(&llm, &tg, "", &aux), &[("EYES_KEY", "sk-eyes-0123456789")]).await;
    let ann = User::new(1001, "Ann");
    let dm = Chat::private(&ann);
    tg.add_file("ph2", "photo.jpg", PNG);
    tg.push(Incoming::text(&dm, &ann, "describe").photo("ph2"));
    assert!(eventually(WAIT, || tg.texts(dm.id).iter().any(|t| t.starts_with("echo: describe"))).await);
    assert_eq!(eyes.image_urls(), vec![data_url(PNG, "image/png")], "the auxiliary model saw the image");
    assert!(llm.image_urls().is_empty(), "the main model gets no image part");
    let text = last_user(&llm.requests()[0]);
    assert!(text.contains("as an image model describes it]\nA red bicycle leaning on a blue wall."), "{text}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_voice_note_reaches_the_model_as_a_transcript() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlm::builder().transcript("please book a table for two at eight").start().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let aux = format!(
        "[auxiliary.transcription]\nbase_url = \"{}\"\nname = \"whisper-1\"\napi_key_env = \"WHISPER_KEY\"",
        llm.base_url()
    );
    let d = start(home.path(), &config(&llm, &tg, "", &aux), &[("WHISPER_KEY", "sk-whisper-0123456789")]).await;
    let ann = User::new(1001, "Ann");
    let dm = Chat::private(&ann);
    let ogg = b"OggS\0\x02 pretend opus frames";
    tg.add_file("vo1", "voice.ogg", ogg);
    tg.push(Incoming::text(&dm, &ann, "").voice("vo1"));
    assert!(eventually(WAIT, || !tg.texts(dm.id).is_empty()).await);
    let uploads = llm.audio_uploads();
    assert_eq!(uploads.len(), 1);
    assert!(uploads[0].contains(ogg) && uploads[0].contains(b"whisper-1"), "the audio and the model are sent");
    assert_eq!(uploads[0].authorization.as_deref(), Some("Bearer sk-whisper-0123456789"));
    let text = last_user(&llm.requests()[0]);
    assert!(text.contains("[voice note media/"), "{text}");
    assert!(text.ends_with("transcript follows]\nplease book a table for two at eight"), "{text}");
    assert!(tg.texts(dm.id)[0].contains("please book a table"), "{:?}", tg.texts(dm.id));
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_transcription_leaves_a_note_and_the_turn_goes_on() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlm::echo().await;
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    // The endpoint answers 404 for this path: a service that refuses.
    let aux = format!("[auxiliary.transcription]\nbase_url = \"{}/nothing\"\nname = \"whisper-1\"", llm.base_url());
    let d = start(home.path(), &config(&llm, &tg, "", &aux), &[]).await;
    let ann = User::new(1001, "Ann");
    let dm = Chat::private(&ann);
    tg.add_file("vo2", "voice.ogg", b"OggS");
    tg.push(Incoming::text(&dm, &ann, "listen").voice("vo2"));
    assert!(eventually(WAIT, || tg.texts(dm.id).iter().any(|t| t.starts_with("echo: listen"))).await);
    let text = last_user(&llm.requests()[0]);
    assert!(text.contains("could not be transcribed: the transcription service answered 404"), "{text}");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_takes_image_parts_instead_of_dropping_them() {
    let home = tempfile::tempdir().unwrap();
    let llm = FakeLlm::builder().reply("a tiny image").start().await;
    let config = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\n\
         name = \"fake-model\"\nvision = true\n\n[platforms.api]\nenabled = true\n",
        llm.base_url()
    );
    let d = start_daemon(home.path(), &config, &[]).await;
    let url = format!("{}/v1/chat/completions", d.base);
    let image = data_url(PNG, "image/png");
    let body = serde_json::json!({"messages": [{"role": "user", "content": [
        {"type": "text", "text": "what is in it?"},
        {"type": "image_url", "image_url": {"url": image}},
    ]}]});
    let response = support::client().post(&url).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let reply: Value = response.json().await.unwrap();
    assert_eq!(reply["choices"][0]["message"]["content"], "a tiny image");
    assert_eq!(llm.image_urls(), vec![image.clone()], "the image part reached the model");
    assert!(last_user(&llm.requests()[0]).starts_with("what is in it?\n[image media/"));

    // An image alone is a message too; a remote URL is refused, not dropped.
    let remote = serde_json::json!({"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
    ]}]});
    let response = support::client().post(&url).json(&remote).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    assert_eq!(error["error"]["code"], "invalid_image", "{error}");
    assert_eq!(llm.count(), 1, "nothing ran for the refused request");
    d.daemon.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_path_the_model_is_given_opens_with_read_file() {
    let home = tempfile::tempdir().unwrap();
    let tg = FakeTelegram::builder().token(TOKEN).start().await;
    let llm = FakeLlm::builder()
        .tool_calls(&[("read_file", r#"{"path": "media/udoc1_list.csv"}"#)])
        .reply("read it")
        .start()
        .await;
    let d = start(home.path(), &config(&llm, &tg, "", ""), &[]).await;
    let ann = User::new(1001, "Ann");
    let dm = Chat::private(&ann);
    tg.add_file("doc1", "list.csv", b"milk,2\neggs,12\n");
    tg.push(Incoming::text(&dm, &ann, "what is on it?").document("doc1", "list.csv", "text/csv"));
    assert!(eventually(WAIT, || tg.texts(dm.id).iter().any(|t| t == "read it")).await, "{:?}", tg.texts(dm.id));
    let requests = llm.requests();
    assert!(last_user(&requests[0]).contains("[file media/udoc1_list.csv (text/csv, 15 B), its text follows]"));
    let tool = requests[1]["messages"].as_array().unwrap().iter().find(|m| m["role"] == "tool").cloned().unwrap();
    assert_eq!(tool["content"], "    1|milk,2\n    2|eggs,12", "{tool}");
    d.daemon.stop().await;
}
