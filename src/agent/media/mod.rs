//! Media understanding: what a model is given for the files a user sent. Images go as image
//! parts to a model with vision (by reference; bytes loaded per call), or are described by the
//! auxiliary vision model; voice and audio are transcribed; documents are inlined as text (PDFs
//! extracted under caps); anything else is named with its size and type. Every attachment is
//! named by the path the file tools open (`media/<file>`, the session's chat folder).
//!
//! Never fails a turn: a helper that is missing, slow or broken becomes a note in the text.
//!
//! `Media::user_message` is the one call the turn makes; `load_images` loads the newest
//! `MAX_IMAGES_PER_CALL` (8) images for each model call. The helpers: `image.rs` (5 MB cap, type
//! sniffed), `describe.rs` (`[auxiliary.vision]`), `transcribe.rs` and `document.rs`. Images are
//! stored as references (path, MIME type) and encoded only for the call that sends them, so
//! attachments never bloat the store. Helper keys come only from their `api_key_env`.

mod describe;
pub mod document;
pub mod image;
mod transcribe;

use std::path::{Component, Path, PathBuf};

use hermesd_platform::{Attachment, AttachmentKind, InboundMessage};

use crate::config::{AuxiliaryConfig, Env};
use crate::vocab::message::{ImageRef, Message, Role, model_path};

pub use describe::Describer;
pub use document::DocText;
pub use transcribe::{TranscribeError, Transcriber};

/// Images loaded for one model call, newest first; older ones are named by path only, so a long
/// conversation with many photos does not resend (and re-encode) them all on every call.
pub const MAX_IMAGES_PER_CALL: usize = 8;

/// Turns attachments into what the model reads; shared by every turn.
pub struct Media {
    data_dir: PathBuf,
    describer: Option<Describer>,
    transcriber: Option<Transcriber>,
}

impl Media {
    /// Attachments under `data_dir`, without helper models.
    pub fn new(data_dir: PathBuf) -> Self {
        Self { data_dir, describer: None, transcriber: None }
    }

    /// Describe images with this auxiliary model when the main model has no vision.
    pub fn with_describer(mut self, describer: Describer) -> Self {
        self.describer = Some(describer);
        self
    }

    /// Transcribe audio with this endpoint.
    pub fn with_transcriber(mut self, transcriber: Transcriber) -> Self {
        self.transcriber = Some(transcriber);
        self
    }

    /// The helpers `[auxiliary]` configures; keys only from their `api_key_env`.
    pub fn from_config(
        data_dir: PathBuf,
        config: &AuxiliaryConfig,
        env: &Env,
        http: &reqwest::Client,
    ) -> Result<Self, String> {
        let mut media = Self::new(data_dir);
        if let Some(model) = &config.vision {
            let provider = crate::agent::auxiliary::provider(model, env, http, true)?;
            media = media.with_describer(Describer::new(provider, model.timeout.get()));
        }
        if let Some(transcription) = &config.transcription {
            let key = secret(env, transcription.api_key_env.as_deref())?;
            media = media.with_transcriber(Transcriber::new(http.clone(), transcription, key));
        }
        Ok(media)
    }

    /// The user message for `message`: `text` (what the turn makes of its text), then a section
    /// per attachment; images become references when the model has `vision`.
    pub async fn user_message(&self, message: &InboundMessage, text: String, vision: bool) -> Message {
        let mut text = text;
        let mut images = Vec::new();
        for attachment in &message.attachments {
            let section = self.understand(attachment, vision, &mut images).await;
            if !text.is_empty() {
                text.push('\n');
            }
            text.push_str(&section);
        }
        Message { images, ..Message::text(Role::User, text) }
    }

    /// Load the bytes of the newest `MAX_IMAGES_PER_CALL` images in `messages` for a model call
    /// (the stored transcript keeps references only). An image that cannot be loaded stays a
    /// reference, which providers send as a note naming its path.
    pub async fn load_images(&self, messages: &mut [Message]) {
        let mut budget = MAX_IMAGES_PER_CALL;
        for message in messages.iter_mut().rev() {
            for image in message.images.iter_mut().rev() {
                if budget == 0 {
                    return;
                }
                budget -= 1;
                if image.data.is_some() {
                    continue;
                }
                let Some(file) = self.file(&image.path) else { continue };
                match image::data_url(&file).await {
                    Ok(url) => image.data = Some(url),
                    Err(e) => tracing::debug!(path = %image.path, error = %e, "image not loaded for the model"),
                }
            }
        }
    }

    /// The file behind a data-dir-relative media path; `None` for anything outside `media/`.
    fn file(&self, path: &str) -> Option<PathBuf> {
        let path = Path::new(path);
        let mut components = path.components();
        let inside = components.next() == Some(Component::Normal("media".as_ref()))
            && components.all(|c| matches!(c, Component::Normal(_)));
        inside.then(|| self.data_dir.join(path))
    }

    async fn understand(&self, attachment: &Attachment, vision: bool, images: &mut Vec<ImageRef>) -> String {
        let shown = model_path(&attachment.path);
        let label = label(attachment);
        let about =
            format!("{shown} ({}, {})", attachment.mime.as_deref().unwrap_or("unknown type"), size(attachment.size));
        let Some(file) = self.file(&attachment.path) else {
            return format!("[{label} {about}: not readable]");
        };
        match attachment.kind {
            AttachmentKind::Image => self.image(&file, &attachment.path, &label, &about, vision, images).await,
            AttachmentKind::Document if image::probe(&file).await.is_ok() => {
                self.image(&file, &attachment.path, "image", &about, vision, images).await
            }
            AttachmentKind::Audio => self.audio(&file, attachment, &label, &about).await,
            AttachmentKind::Video => format!("[{label} {about}]"),
            AttachmentKind::Document => {
                let name = attachment.name.as_deref().unwrap_or(&shown);
                match document::read(&file, attachment.mime.as_deref(), name).await {
                    DocText::Text { text, .. } if text.trim().is_empty() => {
                        format!("[{label} {about}: no text could be read from it]")
                    }
                    DocText::Text { text, cut } => {
                        let end = if cut { ", cut here: the rest was not read" } else { "" };
                        format!("[{label} {about}, its text follows]\n{text}\n[end of {shown}{end}]")
                    }
                    DocText::Binary => format!("[{label} {about}]"),
                    DocText::Failed(reason) => format!("[{label} {about}: its text could not be read: {reason}]"),
                }
            }
        }
    }

    async fn image(
        &self,
        file: &Path,
        path: &str,
        label: &str,
        about: &str,
        vision: bool,
        images: &mut Vec<ImageRef>,
    ) -> String {
        let mime = match image::probe(file).await {
            Ok((mime, _)) => mime,
            Err(e) => return format!("[{label} {about}: not shown to the model: {e}]"),
        };
        if vision {
            images.push(ImageRef::new(path, mime));
            return format!("[{label} {about}, attached below]");
        }
        let Some(describer) = &self.describer else {
            return format!("[{label} {about}: this model cannot see images and no image describer is configured]");
        };
        let mut image = ImageRef::new(path, mime);
        match image::data_url(file).await {
            Ok(url) => image.data = Some(url),
            Err(e) => return format!("[{label} {about}: not described: {e}]"),
        }
        match describer.describe(image).await {
            Ok(description) => format!("[{label} {about}, as an image model describes it]\n{description}"),
            Err(reason) => {
                tracing::warn!(error = %reason, "image description failed");
                format!("[{label} {about}: the image could not be described: {reason}]")
            }
        }
    }

    async fn audio(&self, file: &Path, attachment: &Attachment, label: &str, about: &str) -> String {
        let Some(transcriber) = &self.transcriber else {
            return format!("[{label} {about}: no transcription service is configured]");
        };
        let name = attachment.name.as_deref().unwrap_or("audio");
        match transcriber.transcribe(file, name, attachment.mime.as_deref()).await {
            Ok(transcript) if transcript.is_empty() => format!("[{label} {about}: the transcript is empty]"),
            Ok(transcript) => format!("[{label} {about}, transcript follows]\n{transcript}"),
            Err(e) => {
                tracing::warn!(error = %e, "transcription failed");
                format!("[{label} {about}: could not be transcribed: {e}]")
            }
        }
    }
}

fn secret(env: &Env, var: Option<&str>) -> Result<Option<crate::config::Secret>, String> {
    match var {
        Some(var) => env.secret(var).map_err(|e| e.to_string()),
        None => Ok(None),
    }
}

/// How an attachment is called in the text.
fn label(attachment: &Attachment) -> String {
    let voice = attachment.name.as_deref().is_some_and(|n| n.starts_with("voice"));
    match attachment.kind {
        AttachmentKind::Image => "image",
        AttachmentKind::Audio if voice => "voice note",
        AttachmentKind::Audio => "audio",
        AttachmentKind::Video => "video",
        AttachmentKind::Document => "file",
    }
    .to_owned()
}

/// A size for people: `17 B`, `4.2 KB`, `1.5 MB`.
fn size(bytes: u64) -> String {
    // Display only: precision loss above 2^53 bytes does not matter.
    #[allow(clippy::cast_precision_loss)]
    let b = bytes as f64;
    match bytes {
        0..1024 => format!("{bytes} B"),
        1024..1_048_576 => format!("{:.1} KB", b / 1024.0),
        _ => format!("{:.1} MB", b / 1_048_576.0),
    }
}

#[cfg(test)]
mod tests;
