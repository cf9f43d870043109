//! `SearchStore` on SQLite: the FTS5 tables (unicode61 words, trigram substrings) joined to the
//! caller's sessions in one statement, so the scope is applied before ranking and the limit.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::sessions::fts_query;
use crate::store::{ContextMessage, ScopedHit, SearchScope, SearchStore, StoreResult};

// Ranking is bounded: a search ranks (bm25) the newest 200 matches in its scope, not all of
// them. FTS5 hands matches out newest first and stops at the limit, so a common word in a store
// of millions of messages costs 200 rankings instead of one per match (ranking all of them made
// a search over 1,000,000 messages take 100 ms and more); only the best `limit` get a snippet.
// The scope is turned into the set of its message ids first, so a match outside it is dropped
// by a lookup in that set rather than a read of its row.

/// The scope's sessions (`?2` the session key, `?3`/`?4` the person or NULLs, whose sessions
/// count only under `?6`, the key's profile prefix) and the ids of
/// their user and assistant messages, as the first CTEs of a scoped search.
macro_rules! scope_ids {
    () => {
        "WITH scope(id) AS MATERIALIZED ( \
           SELECT id FROM sessions WHERE session_key = ?2 \
           UNION SELECT id FROM sessions WHERE ?3 IS NOT NULL AND platform = ?3 AND user_id = ?4 \
             AND substr(session_key, 1, length(?6)) = ?6), \
         ids(id) AS MATERIALIZED ( \
           SELECT m.id FROM messages m WHERE m.session_id IN scope AND m.role IN ('user', 'assistant')), "
    };
}

/// Word search: `?1` the FTS query, `?2` the session key, `?3`/`?4` the person (or NULLs), `?5`
/// the limit.
const WORDS: &str = concat!(
    scope_ids!(),
    "best(id, score) AS MATERIALIZED (SELECT id, score FROM ( \
       SELECT messages_fts.rowid AS id, rank AS score FROM messages_fts \
       WHERE messages_fts MATCH ?1 AND +messages_fts.rowid IN ids ORDER BY messages_fts.rowid DESC LIMIT 200) \
       ORDER BY score LIMIT ?5) \
     SELECT m.session_id, m.id, m.role, snippet(messages_fts, 0, '[', ']', '…', 12) AS snip, m.created_at, \
       s.title, s.created_at AS session_started \
     FROM best CROSS JOIN messages_fts CROSS JOIN messages m JOIN sessions s ON s.id = m.session_id \
     WHERE messages_fts MATCH ?1 AND messages_fts.rowid = best.id AND m.id = best.id \
     ORDER BY best.score"
);

/// Substring search over the trigram table; same parameters as `WORDS`.
const SUBSTRINGS: &str = concat!(
    scope_ids!(),
    "best(id, score) AS MATERIALIZED (SELECT id, score FROM ( \
       SELECT messages_fts_trigram.rowid AS id, rank AS score FROM messages_fts_trigram \
       WHERE messages_fts_trigram MATCH ?1 AND +messages_fts_trigram.rowid IN ids \
       ORDER BY messages_fts_trigram.rowid DESC LIMIT 200) \
       ORDER BY score LIMIT ?5) \
     SELECT m.session_id, m.id, m.role, m.content AS snip, m.created_at, \
       s.title, s.created_at AS session_started \
     FROM best CROSS JOIN messages m JOIN sessions s ON s.id = m.session_id WHERE m.id = best.id \
     ORDER BY best.score"
);

/// Store-wide word search (`hermesd sessions search`): `?1` the FTS query, `?2` a session id or
/// NULL, `?3` the limit, `?4` a session key prefix or NULL; bounded like `WORDS`.
pub(super) const STORE_WORDS: &str = "WITH best(id, score) AS MATERIALIZED (SELECT id, score FROM ( \
       SELECT messages_fts.rowid AS id, rank AS score FROM messages_fts CROSS JOIN messages m \
       WHERE messages_fts MATCH ?1 AND m.id = messages_fts.rowid AND (?2 IS NULL OR m.session_id = ?2) \
       AND (?4 IS NULL OR m.session_id IN (SELECT id FROM sessions WHERE substr(session_key, 1, length(?4)) = ?4)) \
       ORDER BY messages_fts.rowid DESC LIMIT 200) \
       ORDER BY score LIMIT ?3) \
     SELECT m.session_id, m.id, m.role, snippet(messages_fts, 0, '[', ']', '…', 12) AS snip, m.created_at \
     FROM best CROSS JOIN messages_fts CROSS JOIN messages m \
     WHERE messages_fts MATCH ?1 AND messages_fts.rowid = best.id AND m.id = best.id \
     ORDER BY best.score";

/// Store-wide substring search over the trigram table; same parameters as `STORE_WORDS`.
pub(super) const STORE_SUBSTRINGS: &str = "WITH best(id, score) AS MATERIALIZED (SELECT id, score FROM ( \
       SELECT messages_fts_trigram.rowid AS id, rank AS score FROM messages_fts_trigram CROSS JOIN messages m \
       WHERE messages_fts_trigram MATCH ?1 AND m.id = messages_fts_trigram.rowid \
       AND (?2 IS NULL OR m.session_id = ?2) \
       AND (?4 IS NULL OR m.session_id IN (SELECT id FROM sessions WHERE substr(session_key, 1, length(?4)) = ?4)) \
       ORDER BY messages_fts_trigram.rowid DESC LIMIT 200) \
       ORDER BY score LIMIT ?3) \
     SELECT m.session_id, m.id, m.role, m.content AS snip, m.created_at \
     FROM best CROSS JOIN messages m WHERE m.id = best.id \
     ORDER BY best.score";

/// A query too short for the trigram table (one or two characters, e.g. a two-character Chinese
/// word): a plain substring test, affordable because only the caller's own messages are read.
/// `?1` the raw query; the other parameters as in `WORDS`. Newest first.
const SHORT: &str = "WITH scope(id) AS MATERIALIZED ( \
       SELECT id FROM sessions WHERE session_key = ?2 \
       UNION SELECT id FROM sessions WHERE ?3 IS NOT NULL AND platform = ?3 AND user_id = ?4 \
         AND substr(session_key, 1, length(?6)) = ?6) \
     SELECT m.session_id, m.id, m.role, m.content AS snip, m.created_at, s.title, s.created_at AS session_started \
     FROM messages m JOIN sessions s ON s.id = m.session_id \
     WHERE m.session_id IN scope AND m.role IN ('user', 'assistant') AND instr(lower(m.content), lower(?1)) > 0 \
     ORDER BY m.id DESC LIMIT ?5";

/// Characters of context on each side of a match in a substring hit's snippet (`mark`).
const SNIPPET_CONTEXT: usize = 40;

/// `?1` the message, `?2` the radius: the message and its neighbours in its session.
const AROUND: &str = "WITH hit AS (SELECT id, session_id FROM messages WHERE id = ?1), \
     near AS ( \
       SELECT * FROM (SELECT m.id FROM messages m, hit WHERE m.session_id = hit.session_id AND m.id < hit.id \
         AND m.role IN ('user', 'assistant') AND m.content <> '' ORDER BY m.id DESC LIMIT ?2) \
       UNION ALL SELECT id FROM hit \
       UNION ALL SELECT * FROM (SELECT m.id FROM messages m, hit WHERE m.session_id = hit.session_id AND m.id > hit.id \
         AND m.role IN ('user', 'assistant') AND m.content <> '' ORDER BY m.id LIMIT ?2)) \
     SELECT m.id, m.role, COALESCE(m.content, '') AS content, m.created_at FROM messages m JOIN near ON near.id = m.id \
     ORDER BY m.id";

/// The profile part of a session key, `agent:<profile>:`, which a person's other sessions must
/// share to be in scope (another profile is another agent with its own memory); empty for a key
/// of another shape (every session of the person then).
fn profile_prefix(session_key: &str) -> String {
    let profile = session_key.strip_prefix("agent:").and_then(|rest| rest.split_once(':')).map(|(part, _)| part);
    profile.map_or_else(String::new, |part| format!("agent:{part}:"))
}

fn hit_from_row(row: &SqliteRow) -> ScopedHit {
    ScopedHit {
        session_id: row.get("session_id"),
        session_title: row.get("title"),
        session_started: row.get("session_started"),
        message_id: row.get("id"),
        role: row.get("role"),
        snippet: row.get("snip"),
        created_at: row.get("created_at"),
    }
}

/// A snippet of `content` around the first (ASCII case-insensitive) occurrence of `query` —
/// or, when the words of a query were matched apart, of its first word found — marked with `[`
/// `]` like FTS5's `snippet()`. Substring hits are marked here, not by FTS5: its `snippet()` of
/// the trigram index can end its window inside the match and show only part of it.
pub(super) fn mark(content: &str, query: &str) -> String {
    // ASCII lowercasing keeps byte offsets, so the position found is valid in `content`.
    let lower = content.to_ascii_lowercase();
    let found = std::iter::once(query)
        .chain(query.split_whitespace())
        .find_map(|needle| lower.find(&needle.to_ascii_lowercase()).map(|start| (start, start + needle.len())));
    let Some((start, end)) = found else {
        return content.chars().take(2 * SNIPPET_CONTEXT).collect();
    };
    let before: String = {
        let mut chars: Vec<char> = content[..start].chars().rev().take(SNIPPET_CONTEXT + 1).collect();
        let cut = chars.len() > SNIPPET_CONTEXT;
        chars.truncate(SNIPPET_CONTEXT);
        let text: String = chars.into_iter().rev().collect();
        if cut { format!("…{text}") } else { text }
    };
    let after: String = {
        let mut chars = content[end..].chars();
        let text: String = chars.by_ref().take(SNIPPET_CONTEXT).collect();
        if chars.next().is_some() { format!("{text}…") } else { text }
    };
    format!("{before}[{}]{after}", &content[start..end])
}

#[async_trait]
impl SearchStore for SqliteStore {
    async fn search_scoped(&self, query: &str, scope: &SearchScope<'_>, limit: u32) -> StoreResult<Vec<ScopedHit>> {
        let query = query.trim();
        if query.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        self.drain_index().await;
        let matched = fts_query(query);
        let (platform, user) = scope.person.unzip();
        let hits = |sql: &'static str, text: String| async move {
            sqlx::query(sql)
                .bind(text)
                .bind(scope.session_key)
                .bind(platform)
                .bind(user)
                .bind(i64::from(limit))
                .bind(profile_prefix(scope.session_key))
                .fetch_all(&mut *self.readers.get().await?)
                .await
        };
        let rows = hits(WORDS, matched.clone()).await?;
        if !rows.is_empty() {
            return Ok(rows.iter().map(hit_from_row).collect());
        }
        // Trigram needs at least three characters; it also finds parts of words and text in
        // scripts written without spaces. Shorter queries are tested as plain substrings.
        let rows = if query.chars().count() >= 3 {
            hits(SUBSTRINGS, matched).await?
        } else {
            hits(SHORT, query.to_owned()).await?
        };
        Ok(rows
            .iter()
            .map(|row| {
                let mut hit = hit_from_row(row);
                hit.snippet = mark(&hit.snippet, query);
                hit
            })
            .collect())
    }

    async fn index_pending(&self, max: u32) -> StoreResult<u64> {
        self.index_batch(max).await
    }

    async fn messages_around(&self, message_id: i64, radius: u32) -> StoreResult<Vec<ContextMessage>> {
        let rows = sqlx::query(AROUND)
            .bind(message_id)
            .bind(i64::from(radius))
            .fetch_all(&mut *self.readers.get().await?)
            .await?;
        Ok(rows
            .iter()
            .map(|row| ContextMessage {
                id: row.get("id"),
                role: row.get("role"),
                content: row.get("content"),
                created_at: row.get("created_at"),
            })
            .collect())
    }
}

#[cfg(test)]
mod tests;
