//! The `local` delivery target as a platform: messages are appended to a markdown file under
//! `$HERMESD_HOME/deliveries/`, one file per chat id. It receives nothing, and it never writes
//! outside its folder whatever the chat id holds.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Mutex;

use async_trait::async_trait;
use hermesd_platform::{
    Capabilities, ChatRef, ChatType, LengthUnit, MarkdownDialect, MessageRef, OutboundMessage, Platform,
    PlatformContext, PlatformError,
};
use tokio_util::sync::CancellationToken;

/// The platform name.
pub const NAME: &str = crate::vocab::origin::Origin::LOCAL;
/// The chat `local` resolves to.
const INBOX: &str = "inbox";

/// The chat the `local` target means.
pub fn inbox() -> ChatRef {
    ChatRef::new(NAME, INBOX, ChatType::Dm)
}

/// Appends deliveries to files.
pub struct LocalPlatform {
    dir: PathBuf,
    /// Appends are serialised so concurrent deliveries never interleave inside a file.
    lock: Mutex<()>,
}

impl LocalPlatform {
    /// Files go to `dir`.
    pub fn new(dir: PathBuf) -> Self {
        Self { dir, lock: Mutex::new(()) }
    }

    /// The file of `chat`.
    pub fn file_for(&self, chat: &ChatRef) -> PathBuf {
        let safe: String = chat
            .chat_id
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' })
            .take(64)
            .collect();
        let name = if safe.is_empty() { INBOX.to_owned() } else { safe };
        self.dir.join(format!("{name}.md"))
    }

    fn append(&self, chat: &ChatRef, text: &str) -> std::io::Result<String> {
        let _guard = self.lock.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        std::fs::create_dir_all(&self.dir)?;
        let path = self.file_for(chat);
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(&path)?;
        let offset = file.metadata()?.len();
        let stamp = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        write!(file, "<!-- {stamp} -->\n{text}\n\n")?;
        file.sync_data()?;
        Ok(format!("{}@{offset}", chat.chat_id))
    }
}

#[async_trait]
impl Platform for LocalPlatform {
    fn name(&self) -> &str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            max_message_len: 1_000_000,
            length_unit: LengthUnit::Chars,
            edits: false,
            threads: false,
            buttons: false,
            typing: false,
            interactive: false,
            request_response: false,
            markdown: MarkdownDialect::Markdown,
            per_chat_rate: 1000.0,
            per_chat_burst: 1000,
            group_rate: 1000.0,
            global_rate: 1000.0,
        }
    }

    async fn run(&self, _ctx: PlatformContext, cancel: CancellationToken) -> Result<(), PlatformError> {
        cancel.cancelled().await;
        Ok(())
    }

    async fn send(&self, message: &OutboundMessage) -> Result<MessageRef, PlatformError> {
        let id = self
            .append(&message.chat, &message.text)
            .map_err(|e| PlatformError::Transient(format!("write local delivery: {e}")))?;
        Ok(MessageRef { chat: message.chat.clone(), message_id: id })
    }

    async fn edit(&self, _message: &MessageRef, _text: &str) -> Result<(), PlatformError> {
        Err(PlatformError::Permanent("local deliveries cannot be edited".into()))
    }

    async fn typing(&self, _chat: &ChatRef) -> Result<(), PlatformError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::OutboundKind;

    use super::*;

    #[tokio::test]
    async fn appends_in_order_and_stays_in_its_folder() {
        let dir = tempfile::tempdir().unwrap();
        let local = LocalPlatform::new(dir.path().join("deliveries"));
        let mut chat = inbox();
        for text in ["first", "second"] {
            let message = OutboundMessage {
                chat: chat.clone(),
                text: text.into(),
                reply_to: None,
                kind: OutboundKind::Reply,
                buttons: Vec::new(),
                chunk: (0, 1),
                file: None,
            };
            local.send(&message).await.unwrap();
        }
        let text = std::fs::read_to_string(local.file_for(&chat)).unwrap();
        assert!(text.find("first").unwrap() < text.find("second").unwrap(), "{text}");
        chat.chat_id = "../../etc/passwd".into();
        assert!(local.file_for(&chat).starts_with(dir.path().join("deliveries")));
    }
}
