//! The receive loop: connect, select the folder, resolve the cursor, take every new message in
//! UID order, then wait (IDLE where the server has it, else a poll interval) and repeat;
//! reconnect with backoff on any failure.
//!
//! A message is taken in this order: normalise → admit → save attachments → accept → `\Seen` →
//! cursor. Nothing is marked or skipped past before the host has stored it, so a crash at any
//! point re-reads the message and the host's dedup drops the second copy.
//!
//! New mail is found with `UID SEARCH UID n:*` past the cursor. A message is marked
//! `+FLAGS.SILENT (\Seen)` once accepted; the cursor moves past it only once it was accepted or
//! skipped (a loop, an unauthenticated sender, no access).

use futures_util::TryStreamExt;
use hermesd_platform::{Backoff, IngressError, PlatformContext};
use tokio_util::sync::CancellationToken;

use async_imap::types::{Fetch, UnsolicitedResponse};

use crate::cursor::{self, Cursor, Start};
use crate::imap::{self, ImapError, ImapSession};
use crate::{EmailPlatform, NAME};

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReceiveError {
    /// The server failed.
    #[error(transparent)]
    Imap(#[from] ImapError),
    /// The host could not store a message; it is read again after a reconnect.
    #[error(transparent)]
    Ingress(#[from] IngressError),
}

/// Messages larger than this are read as headers only (their text noted as missing): whole
/// messages are held in memory while parsed.
fn max_message_bytes(max_file_bytes: u64) -> u64 {
    // Base64 makes attachments a third larger; leave room for the text and a few parts.
    max_file_bytes.saturating_mul(3).saturating_add(4 * 1024 * 1024)
}

impl EmailPlatform {
    /// Runs sessions until `cancel` fires.
    pub(crate) async fn receive(&self, ctx: &PlatformContext, cancel: &CancellationToken) {
        let mut backoff = Backoff::new();
        loop {
            let outcome = tokio::select! {
                () = cancel.cancelled() => return,
                outcome = self.session(ctx, cancel, &mut backoff) => outcome,
            };
            match outcome {
                Ok(()) => return,
                Err(error) => {
                    let error = self.redactor.redact(&error.to_string());
                    tracing::warn!(platform = NAME, %error, retry_in = ?backoff.peek(), "imap session failed; reconnecting");
                    self.health.failing(error);
                }
            }
            if !backoff.wait(cancel).await {
                return;
            }
        }
    }

    /// One connection: returns `Ok` only when cancelled.
    async fn session(
        &self,
        ctx: &PlatformContext,
        cancel: &CancellationToken,
        backoff: &mut Backoff,
    ) -> Result<(), ReceiveError> {
        let (mut session, idle) = imap::connect(&self.settings).await?;
        let mailbox = session.select(&self.settings.folder).await.map_err(|e| ImapError::command("SELECT", e))?;
        let validity = mailbox.uid_validity.ok_or_else(|| ImapError::command("SELECT", "no UIDVALIDITY"))?;
        let uid_next = mailbox.uid_next.unwrap_or(1);
        let stored = ctx.ingress.load_cursor(&self.name).await?.as_deref().and_then(Cursor::parse);
        let now = chrono::Utc::now().timestamp();
        let mut cursor = match cursor::start(stored, validity, uid_next, now) {
            Start::Resume(cursor) => cursor,
            Start::Fresh(cursor) => {
                tracing::info!(platform = NAME, uid_next, "first start: mail already in the folder is not answered");
                ctx.ingress.save_cursor(&self.name, &cursor.format()).await?;
                cursor
            }
            Start::Resync { validity, since } => {
                tracing::warn!(
                    platform = NAME,
                    validity,
                    "UIDVALIDITY changed: taking mail since the last accepted one"
                );
                let mut cursor = Cursor { validity, uid: 0, since };
                let query = format!("SINCE {}", cursor::imap_since(since));
                let uids = search(&mut session, &query).await?;
                for uid in uids {
                    self.take(ctx, &mut session, uid, &mut cursor, true).await?;
                }
                // Nothing found: start after what is there now, as on a first start.
                cursor.uid = cursor.uid.max(uid_next.saturating_sub(1));
                ctx.ingress.save_cursor(&self.name, &cursor.format()).await?;
                cursor
            }
        };
        tracing::info!(platform = NAME, idle, folder = %self.settings.folder, "imap connected");
        backoff.reset();
        loop {
            drain(&mut session);
            let query = format!("UID {}:*", cursor.uid.saturating_add(1));
            let uids = search(&mut session, &query).await?;
            let after = cursor.uid;
            for uid in uids.into_iter().filter(|&uid| uid > after) {
                self.take(ctx, &mut session, uid, &mut cursor, false).await?;
            }
            self.health.cycle();
            if drain(&mut session) {
                continue;
            }
            if idle {
                match self.idle(session, cancel).await? {
                    Some(back) => session = back,
                    None => return Ok(()),
                }
            } else {
                tokio::select! {
                    () = cancel.cancelled() => return Ok(()),
                    () = tokio::time::sleep(self.settings.poll_interval) => {}
                }
                session.noop().await.map_err(|e| ImapError::command("NOOP", e))?;
            }
        }
    }

    /// One IDLE, until the server reports a change, `idle_timeout`, or cancel (`None`).
    async fn idle(&self, session: ImapSession, cancel: &CancellationToken) -> Result<Option<ImapSession>, ImapError> {
        let mut handle = session.idle();
        handle.init().await.map_err(|e| ImapError::command("IDLE", e))?;
        let (wait, _stop) = handle.wait_with_timeout(self.settings.idle_timeout);
        tokio::select! {
            () = cancel.cancelled() => return Ok(None),
            outcome = wait => { outcome.map_err(|e| ImapError::command("IDLE", e))?; }
        }
        let session = handle.done().await.map_err(|e| ImapError::command("DONE", e))?;
        Ok(Some(session))
    }

    /// Takes message `uid`: delivers it, marks it `\Seen` once accepted, and moves the cursor.
    /// With `resync`, the cursor's date only moves forward.
    async fn take(
        &self,
        ctx: &PlatformContext,
        session: &mut ImapSession,
        uid: u32,
        cursor: &mut Cursor,
        resync: bool,
    ) -> Result<(), ReceiveError> {
        let meta = fetch_one(session, uid, "(UID RFC822.SIZE INTERNALDATE)").await?;
        let Some(meta) = meta else {
            // Expunged between the search and the fetch: nothing to take.
            cursor.uid = cursor.uid.max(uid);
            return Ok(());
        };
        let arrived = meta.internal_date().map_or(0, |d| d.timestamp());
        let size = u64::from(meta.size.unwrap_or(0));
        let limit = max_message_bytes(self.settings.max_file_bytes);
        let whole = size <= limit;
        let query = if whole { "(UID BODY.PEEK[])" } else { "(UID BODY.PEEK[HEADER])" };
        let Some(fetched) = fetch_one(session, uid, query).await? else {
            cursor.uid = cursor.uid.max(uid);
            return Ok(());
        };
        let raw = if whole { fetched.body() } else { fetched.header() }.unwrap_or_default();
        let too_large = (!whole).then_some(size);
        let accepted = self.deliver(ctx, raw, arrived.saturating_mul(1000), too_large).await?;
        if accepted {
            let mut store = session
                .uid_store(uid.to_string(), "+FLAGS.SILENT (\\Seen)")
                .await
                .map_err(|e| ImapError::command("UID STORE", e))?;
            while store.try_next().await.map_err(|e| ImapError::command("UID STORE", e))?.is_some() {}
        }
        cursor.uid = cursor.uid.max(uid);
        cursor.since = if resync { cursor.since.max(arrived) } else { arrived.max(cursor.since) };
        ctx.ingress.save_cursor(&self.name, &cursor.format()).await?;
        Ok(())
    }
}

/// UIDs matching `query`, ascending.
async fn search(session: &mut ImapSession, query: &str) -> Result<Vec<u32>, ImapError> {
    let found = session.uid_search(query).await.map_err(|e| ImapError::command("UID SEARCH", e))?;
    let mut uids: Vec<u32> = found.into_iter().collect();
    uids.sort_unstable();
    Ok(uids)
}

async fn fetch_one(session: &mut ImapSession, uid: u32, query: &str) -> Result<Option<Fetch>, ImapError> {
    let mut stream = session.uid_fetch(uid.to_string(), query).await.map_err(|e| ImapError::command("UID FETCH", e))?;
    let mut found = None;
    while let Some(fetch) = stream.try_next().await.map_err(|e| ImapError::command("UID FETCH", e))? {
        if fetch.uid == Some(uid) {
            found = Some(fetch);
        }
    }
    Ok(found)
}

/// Empties the unsolicited-response queue; `true` when it announced new mail (so the caller
/// checks again instead of starting an IDLE that would not report it).
fn drain(session: &mut ImapSession) -> bool {
    let mut news = false;
    while let Ok(response) = session.unsolicited_responses.try_recv() {
        news |= matches!(response, UnsolicitedResponse::Exists(_) | UnsolicitedResponse::Recent(_));
    }
    news
}
