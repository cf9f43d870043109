//! What the model is told about where a message comes from: the session's fixed facts (platform,
//! chat type and title, thread) for the system prompt, and the framing of each user message
//! (the speaker's name in shared sessions, the quoted message it replies to).
//!
//! Nothing here may let outside text pass as something else: names are cleaned to one short
//! line, quotes are capped and every quoted line is marked, and the session facts never carry
//! anything that changes from one message to the next (the system prompt must stay
//! byte-identical across a session's turns).
//!
//! `SessionFacts` are the session's facts (and whether several people write there). `framed_text`
//! is a user message's text: `[Speaker] ` first in shared sessions (not DMs, not groups isolated
//! per user; the name cleaned to one short line, the id when there is none), then the message it
//! replies to as a capped quote with every line marked `> `, then the message itself. So neither a
//! name nor a quote can pass as the sender's own words or as another speaker.

use hermesd_platform::{ChatType, InboundMessage, ReplyContext, Sender};

use crate::store::SessionKey;

/// Longest speaker name shown to the model, in chars.
const NAME_CAP: usize = 48;
/// Longest chat title in the session facts, in chars.
const TITLE_CAP: usize = 120;
/// Longest quote of a replied-to message, in chars.
pub const QUOTE_CAP: usize = 600;

/// The facts that hold for a whole session, fixed at its first turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionFacts {
    /// The platform's short name.
    pub platform: String,
    /// The chat type.
    pub chat_type: ChatType,
    /// The chat's title, cleaned and capped.
    pub title: Option<String>,
    /// The thread, when the session is one.
    pub thread: Option<String>,
    /// Whether several people write in this session (each message then names its speaker).
    pub shared: bool,
}

impl SessionFacts {
    /// The facts of the session `key` serves, from a message of it.
    pub fn of(key: &SessionKey, message: &InboundMessage) -> Self {
        Self {
            platform: key.platform.clone(),
            chat_type: key.chat_type,
            title: message.chat_title.as_deref().map(|t| one_line(t, TITLE_CAP)).filter(|t| !t.is_empty()),
            thread: key.thread_id.clone(),
            shared: is_shared(key),
        }
    }

    /// The facts as a system prompt section.
    pub fn section(&self) -> String {
        let place = match self.chat_type {
            ChatType::Dm => "a direct conversation with one person",
            ChatType::Group => "a group chat",
            ChatType::Channel => "a channel",
            ChatType::Thread => "a thread inside a group or channel",
        };
        let mut out = format!("# This conversation\nPlatform: {}. This is {place}", self.platform);
        if let Some(title) = &self.title {
            out.push_str(&format!(", titled \"{title}\""));
        }
        out.push('.');
        if self.thread.is_some() && self.chat_type != ChatType::Thread {
            out.push_str(" Messages here belong to one thread.");
        }
        if self.shared {
            out.push_str(
                " Several people write here: each of their messages starts with the speaker's name in \
                 square brackets, like \"[Name] message\". Address people by name when it helps.",
            );
        }
        out.push_str(
            " A message that replies to an earlier one carries it as a quote: lines starting with \"> \" \
             are the earlier message's words, not the sender's.",
        );
        out
    }
}

/// Whether several people share the session of `key`: any chat but a DM, unless the session is
/// one person's own (groups isolated per user).
pub fn is_shared(key: &SessionKey) -> bool {
    key.chat_type != ChatType::Dm && key.user_id.is_none()
}

/// The text of a user message as the model sees it: in a `shared` session the speaker's name
/// first, then the quoted message it replies to (if any), then its own text.
pub fn framed_text(message: &InboundMessage, shared: bool) -> String {
    let mut out = String::new();
    if shared {
        out.push_str(&format!("[{}] ", speaker(&message.sender)));
    }
    if let Some(reply) = &message.reply_to {
        out.push_str(&quote(reply));
        out.push('\n');
    }
    out.push_str(&message.text);
    out
}

/// The sender's name as one short line: the display name, else the id.
pub fn speaker(sender: &Sender) -> String {
    let name = sender.name.as_deref().map(|n| one_line(n, NAME_CAP)).filter(|n| !n.is_empty());
    name.unwrap_or_else(|| one_line(&sender.id, NAME_CAP))
}

/// The replied-to message as a marked, capped quote block.
fn quote(reply: &ReplyContext) -> String {
    let whose = match (&reply.author, reply.from_bot) {
        (_, true) => "your earlier message".to_owned(),
        (Some(author), false) if !one_line(author, NAME_CAP).is_empty() => {
            format!("a message from {}", one_line(author, NAME_CAP))
        }
        _ => "an earlier message".to_owned(),
    };
    let text = reply.text.as_deref().map(str::trim).unwrap_or_default();
    if text.is_empty() {
        return format!("(replying to {whose}; its text is not available)");
    }
    let total = text.chars().count();
    let mut shown: String = text.chars().take(QUOTE_CAP).collect();
    if total > QUOTE_CAP {
        shown.push_str(" […]");
    }
    let mut out = format!("(replying to {whose}:)");
    for line in shown.lines() {
        out.push_str("\n> ");
        out.extend(line.chars().filter(|c| !c.is_control()));
    }
    out
}

/// `text` on one line: control characters (newlines included) and brackets become spaces, runs
/// of spaces one, cut to `cap` chars.
fn one_line(text: &str, cap: usize) -> String {
    let cleaned: String = text
        .chars()
        .map(|c| if c.is_control() || matches!(c, '[' | ']') || is_invisible(c) { ' ' } else { c })
        .collect();
    cleaned.split_whitespace().collect::<Vec<_>>().join(" ").chars().take(cap).collect::<String>().trim_end().to_owned()
}

/// Zero-width and bidirectional controls, which could make a name read as something else.
fn is_invisible(c: char) -> bool {
    matches!(c as u32, 0x061C | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x2064 | 0x2066..=0x2069 | 0xFEFF)
}

#[cfg(test)]
mod tests;
