//! Sessions, routes, transcripts and turns in SQLite.

use async_trait::async_trait;
use sqlx::Row;
use sqlx::sqlite::SqliteRow;

use super::damaged::Damage;
use super::lane::execute_all;
use super::outbox::insert_outbound_rows;
use super::transcripts;
use super::{SqliteStore, retry_busy, to_json};
use crate::store::{
    Compaction, SearchHit, SessionInfo, SessionKey, SessionStore, StoreError, StoreResult, StoredMessage, TurnEnd,
};
use crate::vocab::message::{ImageRef, Message, Reasoning, Role, ToolCall};

pub(super) const SESSION_COLUMNS: &str = "s.id, s.session_key, s.title, s.created_at, s.updated_at, s.restart_count, s.suspended, \
     s.system_prompt, s.last_prompt_tokens, s.model, \
     (SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id AND m.archived = 0) AS message_count";

/// The per-turn lookup skips the message count: it is only shown by `/status` and the CLI.
const ROUTE_COLUMNS: &str = "s.id, s.session_key, s.title, s.created_at, s.updated_at, s.restart_count, s.suspended, s.system_prompt, \
     s.last_prompt_tokens, s.model, -1 AS message_count";

pub(super) fn session_from_row(row: &SqliteRow) -> SessionInfo {
    SessionInfo {
        id: row.get("id"),
        key: row.get("session_key"),
        title: row.get("title"),
        created_at: row.get("created_at"),
        updated_at: row.get("updated_at"),
        restart_count: row.get::<i64, _>("restart_count").try_into().unwrap_or(u32::MAX),
        suspended: row.get::<i64, _>("suspended") != 0,
        message_count: row.get("message_count"),
        system_prompt: row.get("system_prompt"),
        last_prompt_tokens: row.get::<i64, _>("last_prompt_tokens").try_into().unwrap_or(0),
        model: row.get("model"),
    }
}

/// A message row's columns, as `TRANSCRIPT_COLUMNS` selects them, before decoding.
struct RawMessage {
    id: i64,
    position: f64,
    role: String,
    content: Option<String>,
    tool_calls: Option<String>,
    tool_call_id: Option<String>,
    reasoning: Option<String>,
    images: Option<String>,
    created_at: i64,
    archived: bool,
}

impl RawMessage {
    /// The row of a read-lane query selecting `TRANSCRIPT_COLUMNS`, by position.
    fn from_lane(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
        Ok(Self {
            id: row.get(0)?,
            position: row.get(1)?,
            role: row.get(2)?,
            content: row.get(3)?,
            tool_calls: row.get(4)?,
            tool_call_id: row.get(5)?,
            reasoning: row.get(6)?,
            images: row.get(7)?,
            created_at: row.get(8)?,
            archived: row.get::<_, i64>(9)? != 0,
        })
    }

    /// The message, keeping what decodes: a JSON column that no longer parses is left empty and
    /// named in the `Damage`; a row whose role is unknown gives no message at all.
    fn decode(self) -> (Option<StoredMessage>, Option<Damage>) {
        let mut reasons = Vec::new();
        let mut columns = Vec::new();
        let mut note = |name: &'static str, e: serde_json::Error| {
            reasons.push(format!("messages.{name}: {e}"));
            columns.push(name);
        };
        // Parsed from borrowed text: the originals are only kept (moved) when something is wrong.
        let tool_calls: Vec<ToolCall> = parse(self.tool_calls.as_deref(), "tool_calls", &mut note).unwrap_or_default();
        let reasoning: Option<Reasoning> = parse(self.reasoning.as_deref(), "reasoning", &mut note);
        let images: Vec<ImageRef> = parse(self.images.as_deref(), "images", &mut note).unwrap_or_default();
        let role = Role::parse(&self.role);
        if role.is_none() {
            reasons.push(format!("messages.role: unknown role {:?}", self.role));
        }
        let message = role.map(|role| StoredMessage {
            id: self.id,
            position: self.position,
            message: Message {
                role,
                content: self.content,
                tool_calls,
                tool_call_id: self.tool_call_id,
                reasoning,
                images,
            },
            created_at: self.created_at,
            archived: self.archived,
        });
        let damage = (!reasons.is_empty()).then(|| Damage {
            id: self.id,
            reason: reasons.join("; "),
            columns,
            drop_row: message.is_none(),
            seen: [self.role.into(), self.tool_calls, self.reasoning, self.images],
        });
        (message, damage)
    }
}

/// A JSON column of a message row; `None` (and a note of why) when it no longer decodes.
fn parse<T: serde::de::DeserializeOwned>(
    text: Option<&str>,
    name: &'static str,
    note: &mut impl FnMut(&'static str, serde_json::Error),
) -> Option<T> {
    match serde_json::from_str(text?) {
        Ok(value) => Some(value),
        Err(e) => {
            note(name, e);
            None
        }
    }
}

/// Decode a read's rows: the messages that decode (in part or whole), and what was damaged.
fn decode_all(raw: Vec<RawMessage>) -> (Vec<StoredMessage>, Vec<Damage>) {
    let mut messages = Vec::with_capacity(raw.len());
    let mut damaged = Vec::new();
    for row in raw {
        let (message, damage) = row.decode();
        messages.extend(message);
        damaged.extend(damage);
    }
    (messages, damaged)
}

/// The columns of a transcript read, in `RawMessage`'s order.
const TRANSCRIPT_COLUMNS: &str = "id, CAST(COALESCE(sort_key, id) AS REAL) AS position, role, content, tool_calls, \
     tool_call_id, reasoning, images, created_at, archived";

/// A route's session read on the read lane, selecting `ROUTE_COLUMNS` by position.
fn session_from_lane(row: &rusqlite::Row<'_>) -> rusqlite::Result<SessionInfo> {
    Ok(SessionInfo {
        id: row.get(0)?,
        key: row.get(1)?,
        title: row.get(2)?,
        created_at: row.get(3)?,
        updated_at: row.get(4)?,
        restart_count: row.get::<_, i64>(5)?.try_into().unwrap_or(u32::MAX),
        suspended: row.get::<_, i64>(6)? != 0,
        system_prompt: row.get(7)?,
        last_prompt_tokens: row.get::<_, i64>(8)?.try_into().unwrap_or(0),
        model: row.get(9)?,
        message_count: row.get(10)?,
    })
}

/// A message's JSON columns: tool calls, reasoning and images (NULL when absent).
pub(super) fn message_json(message: &Message) -> (Option<String>, Option<String>, Option<String>) {
    let tool_calls = (!message.tool_calls.is_empty()).then(|| to_json(&message.tool_calls));
    let reasoning = message.reasoning.as_ref().map(to_json);
    let images = (!message.images.is_empty()).then(|| to_json(&message.images));
    (tool_calls, reasoning, images)
}

/// Insert one transcript message on the write lane, in the lane's transaction.
fn insert_message_row(
    conn: &rusqlite::Connection,
    session_id: &str,
    message: &Message,
    event_seq: Option<i64>,
    now: i64,
) -> rusqlite::Result<()> {
    let (tool_calls, reasoning, images) = message_json(message);
    let role = message.role.as_str();
    conn.prepare_cached(INSERT_MESSAGE)?
        .execute(rusqlite::params![
            session_id,
            role,
            message.content,
            tool_calls,
            message.tool_call_id,
            reasoning,
            event_seq,
            now,
            images
        ])
        .map(drop)
}

/// One transcript message; the event's user message is written once (`messages_one_user_per_event`).
const INSERT_MESSAGE: &str = "INSERT OR IGNORE INTO messages (session_id, role, content, tool_calls, tool_call_id, \
     reasoning, event_seq, created_at, images) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)";

/// The event's end and the session's totals (`finish_turn`).
const FINISH_TURN: &str = "UPDATE inbound_events SET state = ?1, error = ?2, finished_at = ?3 WHERE seq = ?4; \
     UPDATE sessions SET restart_count = 0, updated_at = ?3, \
     last_prompt_tokens = COALESCE(?5, last_prompt_tokens), \
     model_calls_total = model_calls_total + ?6, prompt_tokens_total = prompt_tokens_total + ?7, \
     completion_tokens_total = completion_tokens_total + ?8, \
     cache_read_tokens_total = cache_read_tokens_total + ?9, \
     cache_write_tokens_total = cache_write_tokens_total + ?10 WHERE id = ?11";

/// Quote each term so user text can never be read as FTS5 query syntax.
pub(super) fn fts_query(text: &str) -> String {
    text.split_whitespace().map(|t| format!("\"{}\"", t.replace('"', "\"\""))).collect::<Vec<_>>().join(" ")
}

impl SqliteStore {
    /// A session's messages in transcript order (`filter`: more of the WHERE clause), read on the
    /// read lane and decoded here, leniently: what no longer decodes is listed apart (`damaged`).
    pub(super) fn transcript(&self, session_id: &str, filter: &str) -> StoreResult<(Vec<StoredMessage>, Vec<Damage>)> {
        let sql =
            format!("SELECT {TRANSCRIPT_COLUMNS} FROM messages WHERE session_id = ?1 {filter} ORDER BY position, id");
        let raw = self.read_lane.run(|conn| {
            conn.prepare_cached(&sql)?
                .query_map([session_id], RawMessage::from_lane)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })?;
        Ok(decode_all(raw))
    }

    /// The live transcript read whole, with its damaged rows set aside; whether they all were
    /// (only then may the result be kept).
    async fn live_transcript(&self, session_id: &str) -> StoreResult<(Vec<StoredMessage>, bool)> {
        let (messages, damaged) = self.transcript(session_id, "AND archived = 0")?;
        let settled = self.set_aside(damaged).await;
        Ok((messages, settled))
    }

    /// A kept live transcript with the rows written after it, read in one read transaction;
    /// the whole transcript read again when the kept one no longer holds (`transcripts`) or a
    /// newer row is damaged.
    async fn bring_up_to_date(
        &self,
        session_id: &str,
        mut kept: Vec<StoredMessage>,
    ) -> StoreResult<(Vec<StoredMessage>, bool)> {
        let newest = transcripts::newest_id(&kept);
        let sql = format!(
            "SELECT {TRANSCRIPT_COLUMNS} FROM messages WHERE session_id = ?1 AND archived = 0 AND id > ?2 ORDER BY position, id"
        );
        let (live, raw) = self.read_lane.run(|conn| {
            let read = conn.unchecked_transaction()?;
            let live: i64 = read
                .prepare_cached("SELECT count(*) FROM messages WHERE session_id = ?1 AND archived = 0")?
                .query_row([session_id], |row| row.get(0))?;
            let raw = read
                .prepare_cached(&sql)?
                .query_map(rusqlite::params![session_id, newest], RawMessage::from_lane)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            read.finish()?;
            Ok((live, raw))
        })?;
        let (newer, damaged) = decode_all(raw);
        if !damaged.is_empty() || !transcripts::extends(&kept, &newer, live) {
            return self.live_transcript(session_id).await;
        }
        kept.extend(newer);
        Ok((kept, true))
    }
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn route(&self, key: &str) -> StoreResult<Option<SessionInfo>> {
        use rusqlite::OptionalExtension;
        let sql = format!(
            "SELECT {ROUTE_COLUMNS} FROM session_routes r JOIN sessions s ON s.id = r.session_id WHERE r.session_key = ?1"
        );
        Ok(self.read_lane.run(|conn| conn.prepare_cached(&sql)?.query_row([key], session_from_lane).optional())?)
    }

    async fn start_session(&self, key: &SessionKey, now: i64) -> StoreResult<SessionInfo> {
        let id = uuid::Uuid::now_v7().to_string();
        let id_ref = id.as_str();
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            sqlx::query(
                "INSERT INTO sessions (id, session_key, platform, chat_id, chat_type, thread_id, user_id, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            )
            .bind(id_ref)
            .bind(&key.key)
            .bind(&key.platform)
            .bind(&key.chat_id)
            .bind(key.chat_type.as_str())
            .bind(&key.thread_id)
            .bind(&key.user_id)
            .bind(now)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO session_routes (session_key, session_id, updated_at) VALUES (?, ?, ?) \
                 ON CONFLICT (session_key) DO UPDATE SET session_id = excluded.session_id, updated_at = excluded.updated_at",
            )
            .bind(&key.key)
            .bind(id_ref)
            .bind(now)
            .execute(&mut *tx)
            .await?;
            tx.commit().await
        })
        .await?;
        Ok(SessionInfo {
            id,
            key: key.key.clone(),
            title: None,
            created_at: now,
            updated_at: now,
            restart_count: 0,
            suspended: false,
            message_count: 0,
            system_prompt: None,
            last_prompt_tokens: 0,
            model: None,
        })
    }

    async fn session(&self, id: &str) -> StoreResult<Option<SessionInfo>> {
        let sql = format!("SELECT {SESSION_COLUMNS} FROM sessions s WHERE s.id = ?");
        let row =
            sqlx::query(sqlx::AssertSqlSafe(sql)).bind(id).fetch_optional(&mut *self.readers.get().await?).await?;
        Ok(row.as_ref().map(session_from_row))
    }

    async fn list_sessions_with(&self, key_prefix: Option<&str>, limit: u32) -> StoreResult<Vec<SessionInfo>> {
        // `substr`, not LIKE: `_` in a profile's name is no wildcard.
        let sql = format!(
            "SELECT {SESSION_COLUMNS} FROM sessions s \
             WHERE ?1 IS NULL OR substr(s.session_key, 1, length(?1)) = ?1 \
             ORDER BY s.updated_at DESC, s.id DESC LIMIT ?2"
        );
        let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(key_prefix)
            .bind(i64::from(limit))
            .fetch_all(&mut *self.readers.get().await?)
            .await?;
        Ok(rows.iter().map(session_from_row).collect())
    }

    async fn load_transcript(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>> {
        let (messages, settled) = match self.transcripts.take(session_id) {
            Some(kept) => self.bring_up_to_date(session_id, kept).await?,
            None => self.live_transcript(session_id).await?,
        };
        // A read whose damage could not be set aside is not kept: the next one finds it again.
        if settled {
            self.transcripts.put(session_id, messages.clone());
        }
        Ok(messages)
    }

    async fn full_history(&self, session_id: &str) -> StoreResult<Vec<StoredMessage>> {
        // Read only (`hermesd sessions show`/`export` use it): damaged rows are left as they are,
        // and the parts that still decode are shown; a turn's read sets them aside.
        Ok(self.transcript(session_id, "")?.0)
    }

    async fn begin_turn(&self, seq: i64, session_id: &str, user: &Message, now: i64) -> StoreResult<u32> {
        // The event's start and its user message in one transaction on the write lane. A rerun
        // (after a crash or a shutdown) writes this attempt's user message over the one an
        // earlier attempt wrote: the rerun may have taken in more quick messages than the first
        // attempt (a message that arrived after the restart batched into it), and the events it
        // closes must have their words in the transcript, exactly once.
        let (tool_calls, reasoning, images) = message_json(user);
        // Owned copies: the write may run in another task's batch.
        let (session, role, content, tool_call_id) =
            (session_id.to_owned(), user.role.as_str(), user.content.clone(), user.tool_call_id.clone());
        let begun: Option<(i64, bool)> = self
            .write_lane(move |conn| {
                use rusqlite::OptionalExtension;
                let session_id = &session;
                let attempts = conn
                    .prepare_cached(
                        "UPDATE inbound_events SET state = 'running', attempts = attempts + 1, session_id = ?1 \
                         WHERE seq = ?2 RETURNING attempts",
                    )?
                    .query_row(rusqlite::params![session_id, seq], |row| row.get::<_, i64>(0))
                    .optional()?;
                let Some(attempts) = attempts else { return Ok(None) };
                // Looked up on every start, not only when `attempts > 1`: a shutdown requeue
                // gives its attempt back, so a rerun can count 1 and still find its own row.
                let earlier = conn
                    .prepare_cached(
                        "SELECT id, content IS ?2 AND images IS ?3 FROM messages \
                         WHERE event_seq = ?1 AND role = 'user'",
                    )?
                    .query_row(rusqlite::params![seq, content, images], |row| {
                        Ok((row.get::<_, i64>(0)?, row.get::<_, bool>(1)?))
                    })
                    .optional()?;
                let rewritten = match earlier {
                    None => {
                        conn.prepare_cached(INSERT_MESSAGE)?.execute(rusqlite::params![
                            session_id,
                            role,
                            content,
                            tool_calls,
                            tool_call_id,
                            reasoning,
                            seq,
                            now,
                            images
                        ])?;
                        false
                    }
                    Some((_, true)) => false,
                    Some((id, false)) => {
                        conn.prepare_cached("UPDATE messages SET content = ?1, images = ?2 WHERE id = ?3")?
                            .execute(rusqlite::params![content, images, id])?;
                        true
                    }
                };
                Ok(Some((attempts, rewritten)))
            })
            .await?;
        let (attempts, rewritten) = begun.ok_or_else(|| StoreError::NotFound(format!("inbound event {seq}")))?;
        if rewritten {
            // A kept transcript only notices rows added or removed, not a row rewritten in place.
            self.transcripts.take(session_id);
        }
        Ok(attempts.try_into().unwrap_or(u32::MAX))
    }

    async fn begin_resumed_turn(&self, seq: i64, session_id: &str, _now: i64) -> StoreResult<u32> {
        let session = session_id.to_owned();
        let attempts: Option<i64> = self
            .write_lane(move |conn| {
                use rusqlite::OptionalExtension;
                conn.prepare_cached(
                    "UPDATE inbound_events SET state = 'running', attempts = attempts + 1, session_id = ?1 \
                     WHERE seq = ?2 RETURNING attempts",
                )?
                .query_row(rusqlite::params![session, seq], |row| row.get::<_, i64>(0))
                .optional()
            })
            .await?;
        let attempts = attempts.ok_or_else(|| StoreError::NotFound(format!("inbound event {seq}")))?;
        Ok(attempts.try_into().unwrap_or(u32::MAX))
    }

    async fn finish_turn(&self, seq: i64, session_id: &str, end: &TurnEnd<'_>, now: i64) -> StoreResult<Vec<i64>> {
        let turn_id = format!("evt:{seq}");
        let TurnEnd { messages, reply, state, error, prompt_tokens, also_done, usage } = *end;
        let prompt_tokens = prompt_tokens.and_then(|t| i64::try_from(t).ok());
        let count = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let totals = [count(usage.calls), count(usage.prompt), count(usage.completion), count(usage.cache_read)];
        let cache_write = count(usage.cache_write);
        let state = state.as_str();
        // Owned copies: the write may run in another task's batch.
        let (messages, reply, also_done) = (messages.to_vec(), reply.to_vec(), also_done.to_vec());
        let (error, session_id) = (error.map(str::to_owned), session_id.to_owned());
        self.write_lane(move |conn| {
            for message in &messages {
                // The turn's own user message was written by `begin_turn` under this event; user
                // messages arriving mid-turn (steering) are other events' words and must not
                // collide with it on `messages_one_user_per_event`.
                let event = if message.role == Role::User { None } else { Some(seq) };
                insert_message_row(conn, &session_id, message, event, now)?;
            }
            let ids = insert_outbound_rows(conn, &turn_id, &reply, now)?;
            for other in &also_done {
                conn.prepare_cached("UPDATE inbound_events SET state = 'done', finished_at = ?1 WHERE seq = ?2")?
                    .execute(rusqlite::params![now, other])?;
            }
            let params: [&(dyn rusqlite::ToSql + Sync); 11] = [
                &state,
                &error,
                &now,
                &seq,
                &prompt_tokens,
                &totals[0],
                &totals[1],
                &totals[2],
                &totals[3],
                &cache_write,
                &session_id,
            ];
            execute_all(conn, FINISH_TURN, &params)?;
            Ok(ids)
        })
        .await
    }

    async fn set_system_prompt(&self, session_id: &str, prompt: &str) -> StoreResult<()> {
        retry_busy(|| async move {
            sqlx::query("UPDATE sessions SET system_prompt = ? WHERE id = ?")
                .bind(prompt)
                .bind(session_id)
                .execute(&mut *self.writer.get().await?)
                .await
                .map(drop)
        })
        .await
    }

    async fn compact(&self, session_id: &str, compaction: &Compaction<'_>, now: i64) -> StoreResult<()> {
        let Compaction { from, to, summary, system_prompt } = *compaction;
        retry_busy(|| async move {
            let mut conn = self.writer.get().await?;
            let mut tx = sqlx::Connection::begin_with(&mut *conn, "BEGIN IMMEDIATE").await?;
            sqlx::query(
                "UPDATE messages SET archived = 1 WHERE session_id = ? AND archived = 0 \
                 AND COALESCE(sort_key, id) BETWEEN ? AND ?",
            )
            .bind(session_id)
            .bind(from)
            .bind(to)
            .execute(&mut *tx)
            .await?;
            sqlx::query(
                "INSERT INTO messages (session_id, role, content, created_at, sort_key) VALUES (?, ?, ?, ?, ?)",
            )
            .bind(session_id)
            .bind(summary.role.as_str())
            .bind(&summary.content)
            .bind(now)
            .bind(from)
            .execute(&mut *tx)
            .await?;
            sqlx::query("UPDATE sessions SET system_prompt = ?, last_prompt_tokens = 0, updated_at = ? WHERE id = ?")
                .bind(system_prompt)
                .bind(now)
                .bind(session_id)
                .execute(&mut *tx)
                .await?;
            tx.commit().await
        })
        .await
        .inspect(|()| self.transcripts.clear())
    }

    async fn record_crash(&self, session_id: &str, max: u32) -> StoreResult<u32> {
        let count: Option<(i64,)> = retry_busy(|| async move {
            sqlx::query_as(
                "UPDATE sessions SET restart_count = restart_count + 1, \
                 suspended = CASE WHEN restart_count + 1 >= ? THEN 1 ELSE suspended END \
                 WHERE id = ? RETURNING restart_count",
            )
            .bind(i64::from(max))
            .bind(session_id)
            .fetch_optional(&mut *self.writer.get().await?)
            .await
        })
        .await?;
        let (count,) = count.ok_or_else(|| StoreError::NotFound(format!("session {session_id}")))?;
        Ok(count.try_into().unwrap_or(u32::MAX))
    }

    async fn search_with(
        &self,
        query: &str,
        session_id: Option<&str>,
        key_prefix: Option<&str>,
        limit: u32,
    ) -> StoreResult<Vec<SearchHit>> {
        let query = query.trim();
        if query.is_empty() {
            return Ok(Vec::new());
        }
        self.drain_index().await;
        let matched = fts_query(query);
        let hits = |sql: &'static str| {
            let matched = matched.clone();
            async move {
                sqlx::query(sql)
                    .bind(matched)
                    .bind(session_id)
                    .bind(i64::from(limit))
                    .bind(key_prefix)
                    .fetch_all(&mut *self.readers.get().await?)
                    .await
            }
        };
        // Word search first; substring (trigram) search catches partial words and scripts
        // without spaces. Trigram needs at least three characters.
        let mut rows = hits(super::search::STORE_WORDS).await?;
        let substrings = rows.is_empty() && query.chars().count() >= 3;
        if substrings {
            // Marked below, from the content (`search::mark`).
            rows = hits(super::search::STORE_SUBSTRINGS).await?;
        }
        Ok(rows
            .iter()
            .map(|row| SearchHit {
                session_id: row.get("session_id"),
                message_id: row.get("id"),
                role: row.get("role"),
                snippet: if substrings { super::search::mark(row.get("snip"), query) } else { row.get("snip") },
                created_at: row.get("created_at"),
            })
            .collect())
    }
}
