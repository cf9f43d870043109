//! Voice notes and audio to text through an OpenAI-compatible `POST /audio/transcriptions`
//! (multipart `file` + `model`, JSON `{"text": ...}` back). One attempt under a timeout: a
//! failure becomes a note in the turn, never a failed turn. The key is sent, never logged.
//!
//! The file is capped in size before it is sent.

use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use crate::config::{Secret, TranscriptionConfig};

/// Why a transcription failed (shown to the model as a note; never holds the key).
#[derive(Debug, thiserror::Error)]
pub enum TranscribeError {
    /// Over the configured size cap.
    #[error("the audio is {0} bytes, over the transcription limit")]
    TooLarge(u64),
    /// The file cannot be read.
    #[error("cannot read the audio: {0}")]
    Read(#[from] std::io::Error),
    /// Timeout or network failure.
    #[error("the transcription service is unreachable or too slow: {0}")]
    Unavailable(String),
    /// A non-success status.
    #[error("the transcription service answered {status}: {message}")]
    Refused {
        /// The HTTP status.
        status: u16,
        /// Its error text, shortened.
        message: String,
    },
    /// The answer is not `{"text": ...}`.
    #[error("the transcription service sent an unreadable answer")]
    Invalid,
}

/// A client for one transcription endpoint.
pub struct Transcriber {
    http: reqwest::Client,
    url: String,
    model: String,
    key: Option<Secret>,
    timeout: Duration,
    max_bytes: u64,
}

#[derive(Deserialize)]
struct Reply {
    text: String,
}

impl Transcriber {
    /// A client for `config`, with the key read from its `api_key_env`.
    pub fn new(http: reqwest::Client, config: &TranscriptionConfig, key: Option<Secret>) -> Self {
        Self {
            http,
            url: format!("{}/audio/transcriptions", config.base_url.trim_end_matches('/')),
            model: config.name.clone(),
            key,
            timeout: config.timeout.get(),
            max_bytes: config.max_bytes,
        }
    }

    /// The transcript of the audio at `file` (`name` and `mime` as the platform gave them).
    pub async fn transcribe(&self, file: &Path, name: &str, mime: Option<&str>) -> Result<String, TranscribeError> {
        let size = tokio::fs::metadata(file).await?.len();
        if size > self.max_bytes {
            return Err(TranscribeError::TooLarge(size));
        }
        let bytes = tokio::fs::read(file).await?;
        let mut part = reqwest::multipart::Part::bytes(bytes).file_name(name.to_owned());
        if let Some(mime) = mime {
            part = part.mime_str(mime).map_err(|_| TranscribeError::Invalid)?;
        }
        let form = reqwest::multipart::Form::new()
            .text("model", self.model.clone())
            .text("response_format", "json")
            .part("file", part);
        let mut call = self.http.post(&self.url).multipart(form).timeout(self.timeout);
        if let Some(key) = &self.key {
            call = call.bearer_auth(key.expose());
        }
        let response = call.send().await.map_err(|e| TranscribeError::Unavailable(e.without_url().to_string()))?;
        let status = response.status().as_u16();
        let body = response.text().await.map_err(|e| TranscribeError::Unavailable(e.without_url().to_string()))?;
        if !(200..300).contains(&status) {
            let message: String = body.chars().take(200).collect();
            return Err(TranscribeError::Refused { status, message });
        }
        let reply: Reply = serde_json::from_str(&body).map_err(|_| TranscribeError::Invalid)?;
        Ok(reply.text.trim().to_owned())
    }
}
