//! Tests for media understanding: what the model reads for each kind of attachment.

use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{ChatRef, ChatType, Sender};

use super::*;
use crate::agent::provider::{ChatRequest, ChatResponse, DeltaSink, Provider, ProviderError};
use std::sync::Arc;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\nfake pixels";

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Self {
        Self { dir: tempfile::tempdir().unwrap() }
    }

    /// Save `bytes` as a chat file and describe it as an adapter would.
    fn attach(&self, kind: AttachmentKind, file: &str, mime: Option<&str>, bytes: &[u8]) -> Attachment {
        let path = format!("media/telegram/42/{file}");
        let full = self.dir.path().join(&path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(&full, bytes).unwrap();
        Attachment { kind, path, mime: mime.map(Into::into), name: Some(file.into()), size: bytes.len() as u64 }
    }

    fn media(&self) -> Media {
        Media::new(self.dir.path().to_path_buf())
    }
}

fn message(text: &str, attachments: Vec<Attachment>) -> InboundMessage {
    InboundMessage {
        profile: None,
        message_id: "m1".into(),
        chat: ChatRef::new("telegram", "42", ChatType::Dm),
        sender: Sender { id: "7".into(), name: Some("Ann".into()), is_bot: false, roles: Vec::new() },
        text: text.into(),
        attachments,
        reply_to: None,
        addressed: true,
        timestamp_ms: 0,
        history: Vec::new(),
        chat_title: None,
        client: None,
    }
}

async fn said(media: &Media, message: &InboundMessage, vision: bool) -> Message {
    media.user_message(message, message.text.clone(), vision).await
}

#[tokio::test]
async fn an_image_is_a_reference_for_a_vision_model_and_a_note_otherwise() {
    let home = Home::new();
    let photo = home.attach(AttachmentKind::Image, "p1_photo.jpg", Some("image/jpeg"), PNG);
    let inbound = message("look", vec![photo]);
    let user = said(&home.media(), &inbound, true).await;
    assert_eq!(user.images, vec![ImageRef::new("media/telegram/42/p1_photo.jpg", "image/png")]);
    assert!(user.images[0].data.is_none(), "the stored message holds no bytes");
    let text = user.content.unwrap();
    assert!(text.starts_with("look\n[image media/p1_photo.jpg (image/jpeg, 19 B), attached below]"), "{text}");

    let user = said(&home.media(), &inbound, false).await;
    assert!(user.images.is_empty());
    let text = user.content.unwrap();
    assert!(text.contains("media/p1_photo.jpg") && text.contains("no image describer is configured"), "{text}");
}

#[tokio::test]
async fn images_are_loaded_for_the_call_newest_first_within_the_budget() {
    let home = Home::new();
    home.attach(AttachmentKind::Image, "a.png", None, PNG);
    let mut messages: Vec<Message> = (0..MAX_IMAGES_PER_CALL + 2)
        .map(|_| Message {
            images: vec![ImageRef::new("media/telegram/42/a.png", "image/png")],
            ..Message::text(Role::User, "x")
        })
        .collect();
    messages.push(Message {
        images: vec![ImageRef::new("media/../../etc/passwd", "image/png"), ImageRef::new("/etc/passwd", "image/png")],
        ..Message::text(Role::User, "x")
    });
    home.media().load_images(&mut messages).await;
    let loaded: Vec<bool> = messages.iter().flat_map(|m| m.images.iter().map(|i| i.data.is_some())).collect();
    assert_eq!(loaded.iter().filter(|l| **l).count(), MAX_IMAGES_PER_CALL - 2, "{loaded:?}");
    assert!(!loaded[0] && !loaded[1], "the oldest stay references: {loaded:?}");
    assert!(messages.last().unwrap().images.iter().all(|i| i.data.is_none()), "paths outside media/ are never read");
    assert_eq!(messages[5].images[0].data.as_deref(), Some("data:image/png;base64,iVBORw0KGgpmYWtlIHBpeGVscw=="));
}

#[tokio::test]
async fn documents_are_inlined_pdfs_extracted_and_other_files_named() {
    let home = Home::new();
    let notes = home.attach(AttachmentKind::Document, "d1_notes.txt", Some("text/plain"), b"remember the milk");
    let pdf = home.attach(AttachmentKind::Document, "d2_report.pdf", Some("application/pdf"), &document_tests_pdf());
    let broken = home.attach(AttachmentKind::Document, "d3_bad.pdf", Some("application/pdf"), b"%PDF-1.4 junk");
    let blob = home.attach(AttachmentKind::Document, "d4_data.bin", Some("application/octet-stream"), b"\0\x01");
    let clip = home.attach(AttachmentKind::Video, "v1_clip.mp4", Some("video/mp4"), b"....");
    let voice = home.attach(AttachmentKind::Audio, "voice.ogg", Some("audio/ogg"), b"OggS");
    let user = said(&home.media(), &message("", vec![notes, pdf, broken, blob, clip, voice]), true).await;
    let text = user.content.unwrap();
    let expected = [
        "[file media/d1_notes.txt (text/plain, 17 B), its text follows]\nremember the milk\n[end of media/d1_notes.txt]",
        "Quarterly numbers",
        "[file media/d3_bad.pdf (application/pdf, 13 B): its text could not be read: ",
        "[file media/d4_data.bin (application/octet-stream, 2 B)]",
        "[video media/v1_clip.mp4 (video/mp4, 4 B)]",
        "[voice note media/voice.ogg (audio/ogg, 4 B): no transcription service is configured]",
    ];
    for needle in expected {
        assert!(text.contains(needle), "{needle:?} in {text}");
    }
    assert!(user.images.is_empty());
}

fn document_tests_pdf() -> Vec<u8> {
    super::document::tests::tiny_pdf("Quarterly numbers")
}

/// An auxiliary vision model that records what it was sent.
struct FakeVision {
    seen: Mutex<Vec<ChatRequest>>,
    answer: Result<&'static str, ()>,
    delay: Duration,
}

#[async_trait]
impl Provider for FakeVision {
    fn model(&self) -> &str {
        "fake-vision"
    }

    fn context_length(&self) -> u64 {
        8192
    }

    async fn complete(&self, request: &ChatRequest, _: Option<DeltaSink<'_>>) -> Result<ChatResponse, ProviderError> {
        self.seen.lock().unwrap().push(request.clone());
        tokio::time::sleep(self.delay).await;
        let text = self.answer.map_err(|()| ProviderError::Transient("down".into()))?;
        Ok(ChatResponse {
            message: Message::text(Role::Assistant, text),
            usage: None,
            finish_reason: None,
            reasoning: None,
        })
    }
}

#[tokio::test(start_paused = true)]
async fn without_vision_the_auxiliary_model_describes_the_image_and_failures_become_notes() {
    let home = Home::new();
    let photo = home.attach(AttachmentKind::Image, "p1_photo.jpg", Some("image/jpeg"), PNG);
    let inbound = message("what is it?", vec![photo]);
    let cases = [
        (
            Ok("A red bicycle against a wall."),
            Duration::ZERO,
            "as an image model describes it]\nA red bicycle against a wall.",
        ),
        (Err(()), Duration::ZERO, "the image could not be described: the model provider is unavailable: down"),
        (Ok("late"), Duration::from_secs(120), "the image could not be described: no description within 30 s"),
    ];
    for (answer, delay, expected) in cases {
        let fake = Arc::new(FakeVision { seen: Mutex::new(Vec::new()), answer, delay });
        let media = home.media().with_describer(Describer::new(fake.clone(), Duration::from_secs(30)));
        let user = said(&media, &inbound, false).await;
        let text = user.content.unwrap();
        assert!(text.starts_with("what is it?\n[image media/p1_photo.jpg"), "{text}");
        assert!(text.contains(expected), "{expected:?} in {text}");
        assert!(user.images.is_empty());
        let seen = fake.seen.lock().unwrap();
        let sent = &seen[0].messages[0].images[0];
        assert_eq!(sent.data.as_deref(), Some("data:image/png;base64,iVBORw0KGgpmYWtlIHBpeGVscw=="));
    }
}

#[tokio::test]
async fn an_unreachable_transcription_service_becomes_a_note() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let home = Home::new();
    let voice = home.attach(AttachmentKind::Audio, "voice.ogg", Some("audio/ogg"), b"OggS");
    // A port that was free a moment ago: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let config = crate::config::TranscriptionConfig {
        base_url: format!("http://127.0.0.1:{port}/v1"),
        name: "whisper-1".into(),
        api_key_env: None,
        timeout: crate::config::HumanDuration::secs(5),
        max_bytes: 3,
    };
    let media = home.media().with_transcriber(Transcriber::new(reqwest::Client::new(), &config, None));
    let text = said(&media, &message("", vec![voice.clone()]), false).await.content.unwrap();
    assert!(text.contains("could not be transcribed: the audio is 4 bytes, over the transcription limit"), "{text}");
    let config = crate::config::TranscriptionConfig { max_bytes: 1024, ..config };
    let media = home.media().with_transcriber(Transcriber::new(reqwest::Client::new(), &config, None));
    let text = said(&media, &message("", vec![voice]), false).await.content.unwrap();
    assert!(text.contains("could not be transcribed: the transcription service is unreachable"), "{text}");
}
