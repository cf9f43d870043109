//! `MEDIA:<path>` lines in a final answer: taken out of the text, each file staged like
//! `send_file` stages it (confined to the workdir, copied into the data dir) and appended to the
//! reply as a file message after the text, in the same stored batch. A path that cannot be sent
//! becomes a short note to the user instead; it never fails the turn.

use std::path::Path;

use hermesd_platform::{ChatRef, OutboundKind, OutboundMessage};

use super::stage::stage_workdir_file;
use crate::outbox::Outbox;

/// The placeholder `Outbox::compose` gives an empty text.
const EMPTY: &str = "(empty reply)";

/// Append a file message to `messages` (the reply to `chat`, already composed from the text
/// without its `MEDIA:` lines) for each of `media`, then renumber the chunks so the last one is
/// last. Refused paths are listed in a notice after the files.
pub async fn attach_media(
    outbox: &Outbox,
    workdir: &Path,
    data_dir: &Path,
    chat: &ChatRef,
    messages: &mut Vec<OutboundMessage>,
    media: Vec<String>,
) {
    if media.is_empty() {
        return;
    }
    let kind = messages.first().map_or(OutboundKind::Reply, |m| m.kind);
    let reply_to = messages.first().and_then(|m| m.reply_to.clone());
    // An answer that was only MEDIA lines has no text worth sending.
    if messages.len() == 1 && messages[0].text == EMPTY {
        messages.clear();
    }
    let limits = outbox.platforms().get(&chat.platform).and_then(|p| p.file_limits());
    let mut notes = Vec::new();
    for raw in media {
        let Some(limits) = limits else {
            notes.push(format!("MEDIA:{raw} was not sent: {} cannot receive files", chat.platform));
            continue;
        };
        let (workdir, data_dir, path) = (workdir.to_owned(), data_dir.to_owned(), raw.clone());
        let staged = tokio::task::spawn_blocking(move || stage_workdir_file(&workdir, &data_dir, &path, limits)).await;
        match staged {
            Ok(Ok(file)) => messages.push(OutboundMessage {
                chat: chat.clone(),
                text: String::new(),
                reply_to: reply_to.clone(),
                kind,
                buttons: Vec::new(),
                chunk: (0, 1),
                file: Some(file),
            }),
            Ok(Err(e)) => notes.push(format!("MEDIA:{raw} was not sent: {e}")),
            Err(_) => notes.push(format!("MEDIA:{raw} was not sent: the copy crashed")),
        }
    }
    if !notes.is_empty() {
        tracing::debug!(refused = notes.len(), "MEDIA lines refused");
        messages.extend(outbox.compose(chat, &notes.join("\n"), kind, reply_to.as_deref()));
    }
    let count = u32::try_from(messages.len()).unwrap_or(u32::MAX);
    for (i, message) in messages.iter_mut().enumerate() {
        message.chunk = (u32::try_from(i).unwrap_or(u32::MAX), count);
    }
}
