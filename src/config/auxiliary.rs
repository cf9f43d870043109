//! `[auxiliary]`: helper models that turn media into text for the main model — a vision model
//! that describes images when `[model]` has no vision, and an OpenAI-compatible
//! `/audio/transcriptions` endpoint for voice notes and audio, and a summary model for titles and
//! search summaries. Only key variable names live here.

use serde::{Deserialize, Serialize};

use super::{HumanDuration, ModelConfig};

/// `[auxiliary]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuxiliaryConfig {
    /// Describes images for a main model without vision; same keys as `[model]` (its
    /// `timeout` bounds one description; `fallback` is not used).
    pub vision: Option<ModelConfig>,
    /// Transcribes voice notes and audio files.
    pub transcription: Option<TranscriptionConfig>,
    /// A small, cheap model for session titles and `session_search` summaries; same keys as
    /// `[model]` (its `timeout` bounds one call; `fallback` is not used). Unset: titles come from
    /// the first message and search results are not summarised.
    pub summary: Option<ModelConfig>,
}

/// `[auxiliary.transcription]`: an OpenAI-compatible `POST {base_url}/audio/transcriptions`
/// (OpenAI, Groq, a local whisper server).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TranscriptionConfig {
    /// The endpoint's base URL (the part before `/audio/transcriptions`, e.g. `.../v1`).
    pub base_url: String,
    /// The model name sent as `model` (e.g. `whisper-1`).
    pub name: String,
    /// Name of the environment variable that holds the API key (unset: no key is sent).
    #[serde(default)]
    pub api_key_env: Option<String>,
    /// How long one transcription may take before the turn goes on without it.
    #[serde(default = "default_transcription_timeout")]
    pub timeout: HumanDuration,
    /// Largest audio file sent, in bytes (OpenAI's limit is 25 MB); larger files are named only.
    #[serde(default = "default_max_audio_bytes")]
    pub max_bytes: u64,
}

fn default_transcription_timeout() -> HumanDuration {
    HumanDuration::secs(60)
}

fn default_max_audio_bytes() -> u64 {
    25 * 1024 * 1024
}

/// The problems of `[auxiliary]`, for `Config::validate`.
pub(super) fn check_auxiliary(
    aux: &AuxiliaryConfig,
    env: &super::Env,
    check_model: impl Fn(&str, &ModelConfig, &mut Vec<String>),
    problems: &mut Vec<String>,
) {
    for (name, model) in [("vision", &aux.vision), ("summary", &aux.summary)] {
        let Some(model) = model else { continue };
        check_model(&format!("auxiliary.{name}"), model, problems);
        if !model.fallback.is_empty() {
            problems.push(format!("auxiliary.{name}.fallback: an auxiliary model has no fallbacks"));
        }
    }
    if let Some(t) = &aux.transcription {
        if !(t.base_url.starts_with("http://") || t.base_url.starts_with("https://")) {
            problems.push(format!("auxiliary.transcription.base_url: {:?} is not an http(s) URL", t.base_url));
        }
        if t.name.trim().is_empty() {
            problems.push("auxiliary.transcription.name: must not be empty".into());
        }
        if t.max_bytes == 0 {
            problems.push("auxiliary.transcription.max_bytes: must be at least 1".into());
        }
        if let Some(var) = &t.api_key_env {
            match env.secret(var) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    problems.push(format!("auxiliary.transcription.api_key_env: the variable {var} is not set"))
                }
                Err(e) => problems.push(format!("auxiliary.transcription.api_key_env: {e}")),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::super::{Config, Env};

    #[test]
    fn auxiliary_sections_parse_and_their_problems_are_listed() {
        let config = Config::parse(
            "[auxiliary.vision]\nprovider = \"chat_completions\"\nbase_url = \"ftp://x\"\nname = \"eyes\"\n\
             api_key_env = \"EYES_KEY\"\n\n[auxiliary.transcription]\nbase_url = \"http://127.0.0.1:8000/v1\"\n\
             name = \"\"\nmax_bytes = 0\napi_key_env = \"WHISPER_KEY\"\n",
        )
        .unwrap();
        let transcription = config.auxiliary.transcription.as_ref().unwrap();
        assert_eq!(transcription.timeout.get().as_secs(), 60);
        let env = Env::from_map(HashMap::from([("EYES_KEY".to_owned(), "k".to_owned())]));
        let problems = config.validate(&env);
        for needle in [
            "auxiliary.vision.base_url",
            "auxiliary.transcription.name",
            "auxiliary.transcription.max_bytes",
            "auxiliary.transcription.api_key_env: the variable WHISPER_KEY is not set",
        ] {
            assert!(problems.iter().any(|p| p.contains(needle)), "{needle} in {problems:?}");
        }
        assert!(!problems.iter().any(|p| p.contains("EYES_KEY")), "{problems:?}");
        assert!(
            Config::parse("[auxiliary.transcription]\nbase_url = \"http://x\"\nname = \"w\"\nlanguage = \"en\"\n")
                .is_err()
        );
    }
}
