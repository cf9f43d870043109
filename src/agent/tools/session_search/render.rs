//! What `session_search` gives the model: per session its date, title and either the summary
//! model's answer or the matching snippets; and the capped excerpts the summary model is given.

use std::fmt::Write as _;

use super::SessionHits;
use crate::agent::tools::ToolContext;

/// The summary model's instruction.
pub(super) const INSTRUCTION: &str = "You read excerpts of one earlier conversation between a user and their AI \
    assistant. In at most four sentences, say what was said there about the query: facts, names, numbers, \
    decisions and open questions. Use only the excerpts; if they say nothing useful about the query, say so in one \
    sentence. Do not address the user.";
/// Longest summary, in tokens.
pub(super) const SUMMARY_TOKENS: u32 = 300;
/// Hits of one session given to the summary model, each with its neighbours.
const EXCERPT_HITS: usize = 4;
/// Messages on each side of a hit given as context.
const EXCERPT_RADIUS: u32 = 1;
/// Longest message in the excerpts, in chars.
const EXCERPT_MESSAGE_CHARS: usize = 600;
/// Longest excerpts text per session, in chars.
const EXCERPT_CHARS: usize = 6_000;

fn date(ms: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn cut(text: &str, max: usize) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(max).collect();
    if chars.next().is_some() { format!("{head}…") } else { head }
}

/// The matched messages of `group` with a little context, oldest first, capped; `Err` when the
/// store fails (the session then keeps its snippets).
pub(super) async fn excerpts(ctx: &ToolContext, group: &SessionHits) -> Result<String, String> {
    let mut messages = Vec::new();
    for hit in group.hits.iter().take(EXCERPT_HITS) {
        let around = ctx.store.messages_around(hit.message_id, EXCERPT_RADIUS).await.map_err(|e| e.to_string())?;
        messages.extend(around);
    }
    messages.sort_by_key(|m| m.id);
    messages.dedup_by_key(|m| m.id);
    let mut text = String::new();
    let mut last = None;
    for message in messages {
        // A gap between excerpts is shown, so the model does not read them as one exchange.
        if last.is_some_and(|id| id + 1 < message.id) && !text.is_empty() {
            text.push_str("…\n");
        }
        last = Some(message.id);
        let line = format!(
            "[{}] {}: {}\n",
            date(message.created_at),
            message.role,
            cut(&message.content.replace('\n', " "), EXCERPT_MESSAGE_CHARS)
        );
        if text.chars().count() + line.chars().count() > EXCERPT_CHARS {
            text.push_str("[further excerpts left out]\n");
            break;
        }
        text.push_str(&line);
    }
    Ok(text)
}

/// The tool's answer.
pub(super) fn result(query: &str, current_session: &str, groups: &[SessionHits], note: Option<&str>) -> String {
    let matches: usize = groups.iter().map(|g| g.hits.len()).sum();
    let mut out = format!(
        "{matches} matching message{} in {} conversation{} for {query:?}, best first:\n",
        if matches == 1 { "" } else { "s" },
        groups.len(),
        if groups.len() == 1 { "" } else { "s" },
    );
    if let Some(note) = note {
        let _ = writeln!(out, "{note}");
    }
    for group in groups {
        let first = &group.hits[0];
        let title = first.session_title.as_deref().map_or_else(|| "untitled".to_owned(), |t| format!("{t:?}"));
        let (from, to) =
            group.hits.iter().fold((i64::MAX, i64::MIN), |(lo, hi), h| (lo.min(h.created_at), hi.max(h.created_at)));
        let span = if date(from) == date(to) { date(from) } else { format!("{} to {}", date(from), date(to)) };
        let current = if group.session_id == current_session { ", this conversation" } else { "" };
        let _ = writeln!(
            out,
            "\nConversation {title} (started {}{current}); matches on {span}:",
            date(first.session_started)
        );
        match &group.summary {
            Some(summary) => {
                let _ = writeln!(out, "Summary: {}", summary.trim());
            }
            None => {
                for hit in &group.hits {
                    let _ =
                        writeln!(out, "[{}] {}: {}", date(hit.created_at), hit.role, hit.snippet.replace('\n', " "));
                }
            }
        }
    }
    out
}
