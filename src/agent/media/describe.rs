//! Images described in words by the auxiliary vision model (`[auxiliary.vision]`), for a main
//! model without vision. One call under its timeout; a failure becomes a note in the turn.

use std::sync::Arc;
use std::time::Duration;

use crate::agent::provider::{ChatRequest, Provider};
use crate::vocab::message::{ImageRef, Message, Role};

/// What the auxiliary model is asked.
const PROMPT: &str = "Describe this image for someone who cannot see it: what it shows, any text in it (verbatim), \
                      and details that matter for answering questions about it. Be factual and concise.";

/// Longest description kept (characters).
const MAX_DESCRIPTION_CHARS: usize = 4_000;

/// The auxiliary vision model.
pub struct Describer {
    provider: Arc<dyn Provider>,
    timeout: Duration,
}

impl Describer {
    /// Describe with `provider` (which must have vision), each call bounded by `timeout`.
    pub fn new(provider: Arc<dyn Provider>, timeout: Duration) -> Self {
        Self { provider, timeout }
    }

    /// A description of `image` (its data loaded), or why there is none.
    pub async fn describe(&self, image: ImageRef) -> Result<String, String> {
        let request = ChatRequest {
            messages: vec![Message { images: vec![image], ..Message::text(Role::User, PROMPT) }],
            max_tokens: Some(1024),
            ..ChatRequest::default()
        };
        let call = self.provider.complete(&request, None);
        let response = match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(response)) => response,
            Ok(Err(e)) => return Err(e.to_string()),
            Err(_) => return Err(format!("no description within {} s", self.timeout.as_secs())),
        };
        let text = response.message.content.unwrap_or_default();
        let text = text.trim();
        if text.is_empty() {
            return Err("the vision model gave an empty description".into());
        }
        Ok(text.chars().take(MAX_DESCRIPTION_CHARS).collect())
    }
}
