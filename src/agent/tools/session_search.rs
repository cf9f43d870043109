//! `session_search`: full-text search (FTS5, words then substrings) over the caller's own earlier
//! conversations, archived (compacted) messages included, scoped inside the store's query.
//!
//! "The caller's own sessions": every session of this conversation's session key (the current
//! one and those before each `/new` or reset), and, in a private chat, the person's own per-user
//! sessions in groups of the same platform. Never another key's or person's sessions, and never
//! a private chat's content from inside a group. With `[auxiliary.summary]` the hits are
//! summarised per session by that model; without it, or when it fails or is slow, the matching
//! snippets are returned as they are.
//!
//! Hits come from `SearchStore::search_scoped`, grouped per conversation with date and title
//! (`render.rs`). With the summary model, the first `SUMMARISED_SESSIONS` (5) conversations are
//! summarised concurrently from their hits and the messages around them, capped, within
//! `SUMMARY_WAIT` (20 s).

mod render;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::ChatType;
use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::agent::auxiliary::Summarizer;
use crate::store::{ScopedHit, SearchScope};

/// Sessions summarised per call; further sessions are shown as snippets.
const SUMMARISED_SESSIONS: usize = 5;
/// How long the summaries may take together before the snippets are returned instead.
const SUMMARY_WAIT: Duration = Duration::from_secs(20);

/// The tool.
pub struct SessionSearchTool {
    summary: Option<Arc<Summarizer>>,
    /// How long the summaries may take together (`SUMMARY_WAIT`; shorter in tests).
    wait: Duration,
}

impl SessionSearchTool {
    /// The tool; with `summary`, hits are summarised per session by that model.
    pub fn new(summary: Option<Arc<Summarizer>>) -> Self {
        Self { summary, wait: SUMMARY_WAIT }
    }
}

impl Default for SessionSearchTool {
    fn default() -> Self {
        Self::new(None)
    }
}

/// The sessions of the hits, in the order of their best hit.
pub(crate) struct SessionHits {
    /// The session.
    pub(crate) session_id: String,
    /// Its hits, best first.
    pub(crate) hits: Vec<ScopedHit>,
    /// What the summary model said about them, when it was asked and answered.
    pub(crate) summary: Option<String>,
}

fn group(hits: Vec<ScopedHit>) -> Vec<SessionHits> {
    let mut groups: Vec<SessionHits> = Vec::new();
    for hit in hits {
        match groups.iter_mut().find(|g| g.session_id == hit.session_id) {
            Some(group) => group.hits.push(hit),
            None => groups.push(SessionHits { session_id: hit.session_id.clone(), hits: vec![hit], summary: None }),
        }
    }
    groups
}

/// The scope of a call: this conversation's key; in a private chat also the person's own
/// per-user sessions on the platform (what they said in groups can be recalled in private, never
/// the reverse).
fn scope(ctx: &ToolContext) -> SearchScope<'_> {
    let private = ctx.chat.chat_type == ChatType::Dm && !ctx.user_id.is_empty();
    SearchScope {
        session_key: &ctx.session_key,
        person: private.then_some((ctx.chat.platform.as_str(), ctx.user_id.as_str())),
    }
}

#[async_trait]
impl Tool for SessionSearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "session_search".into(),
            description: "Search earlier conversations with this user (including summarised history) for words or a \
                          fragment. Use it to recall facts, decisions or files mentioned before. Results are grouped \
                          by conversation, with its date and title."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": { "type": "string", "description": "Words or a fragment to find." },
                    "limit": { "type": "integer", "minimum": 1, "maximum": 50,
                               "description": "Most matching messages to consider (default 10)." }
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            toolset: "session_search".into(),
            parallel_safe: true,
            max_result_chars: 12_000,
            timeout: SUMMARY_WAIT + Duration::from_secs(10),
        }
    }

    async fn call(&self, ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let query = args["query"].as_str().map(str::trim).filter(|q| !q.is_empty());
        let query = query.ok_or_else(|| ToolError::InvalidArguments("`query` must be a non-empty string".into()))?;
        let limit = args["limit"].as_u64().unwrap_or(10).clamp(1, 50) as u32;
        let hits = ctx
            .store
            .search_scoped(query, &scope(ctx), limit)
            .await
            .map_err(|e| ToolError::Failed(format!("search: {e}")))?;
        if hits.is_empty() {
            return Ok(format!("No earlier messages match {query:?}."));
        }
        let mut groups = group(hits);
        let mut note = None;
        if let Some(summarizer) = &self.summary {
            note = summarise(summarizer, self.wait, ctx, query, &mut groups).await;
        }
        Ok(render::result(query, &ctx.session_id, &groups, note.as_deref()))
    }
}

/// Ask the summary model about the first sessions, concurrently and within `wait`;
/// sessions it does not answer for keep their snippets. Returns a note for the reader when any
/// summary is missing.
async fn summarise(
    summarizer: &Summarizer,
    wait: Duration,
    ctx: &ToolContext,
    query: &str,
    groups: &mut [SessionHits],
) -> Option<String> {
    let asked = groups.len().min(SUMMARISED_SESSIONS);
    let calls = groups[..asked].iter().map(|group| async move {
        let excerpts = render::excerpts(ctx, group).await?;
        let text = format!("Query: {query}\n\nExcerpts from one earlier conversation:\n{excerpts}");
        summarizer.complete(render::INSTRUCTION, &text, render::SUMMARY_TOKENS).await
    });
    let all = futures_util::future::join_all(calls);
    let answers = tokio::select! {
        answers = tokio::time::timeout(wait, all) => answers.ok(),
        () = ctx.cancel.cancelled() => None,
    };
    let Some(answers) = answers else {
        tracing::warn!("session search summaries took too long; returning snippets");
        return Some("(the summary model did not answer in time; matching snippets instead)".into());
    };
    let mut failed = false;
    for (group, answer) in groups.iter_mut().zip(answers) {
        match answer {
            Ok(summary) => group.summary = Some(summary),
            Err(e) => {
                tracing::warn!(error = %e, "session search summary failed; returning snippets");
                failed = true;
            }
        }
    }
    failed.then(|| "(some summaries failed; matching snippets shown for those conversations)".into())
}

#[cfg(test)]
mod tests;
