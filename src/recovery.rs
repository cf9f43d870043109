//! Restart recovery: replies stored but not delivered are sent; events accepted but not
//! finished run once more, unless they are too old, ran too often, or their session keeps
//! crashing the daemon — then the user is told instead. Nothing is answered twice. A row that no
//! longer decodes is quarantined by the store, logged and counted here, and start-up goes on.
//! A stream preview a crash left half-written is edited to a short note; the answer still
//! comes once, from the rerun.
//!
//! The limits: an event older than the freshness window, one that ran `max_attempts` times, or one
//! whose session's turns stopped the daemon `max_session_restarts` times in a row (the session is
//! then suspended until `/new`). Quarantined rows are logged once and counted in
//! `hermesd_quarantined_rows_total{table}`. A turn persisted by a graceful shutdown is rerun the
//! same way.

use std::sync::Arc;

use hermesd_platform::{InboundEvent, OutboundKind};

use crate::clock::now_ms;
use crate::config::RecoveryConfig;
use crate::metrics::{Metrics, QUARANTINED_TOTAL};
use crate::outbox::Outbox;
use crate::router::Router;
use crate::store::{EventState, Store, StoreError};

/// What recovery did, for the start-up log line and tests.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Undelivered chunks resumed.
    pub resumed_chunks: usize,
    /// Events dispatched again.
    pub rerun: usize,
    /// Events answered with an apology instead.
    pub given_up: usize,
    /// Events whose stored payload no longer decodes, set aside and never run.
    pub quarantined: usize,
    /// Stream previews of interrupted turns edited to a short note.
    pub noted_previews: usize,
}

/// Run recovery once, before platforms start receiving.
pub async fn recover(
    store: &Arc<dyn Store>,
    outbox: &Outbox,
    router: &Router,
    limits: &RecoveryConfig,
    metrics: &Metrics,
) -> Result<RecoveryReport, StoreError> {
    // Previews first: a rerun below may record a new preview under the same turn.
    let noted_previews = outbox.note_interrupted_previews().await;
    let mut report =
        RecoveryReport { resumed_chunks: outbox.resume_pending().await, noted_previews, ..Default::default() };
    let now = now_ms();
    let found = store.unfinished_events().await?;
    for row in &found.quarantined {
        report.quarantined += 1;
        metrics.inc(QUARANTINED_TOTAL, &[("table", "inbound_events")]);
        tracing::warn!(
            seq = row.id,
            platform = %row.platform,
            error = %row.reason,
            "quarantined an undecodable inbound event; it will not run"
        );
    }
    for unfinished in found.events {
        let crashed = unfinished.state == EventState::Running;
        let mut refusal = None;
        if now - unfinished.received_at > i64::try_from(limits.freshness.get().as_millis()).unwrap_or(i64::MAX) {
            refusal = Some((EventState::Expired, "This message arrived while hermesd was down and is now too old to answer. Please send it again if it still matters.".to_owned()));
        } else if crashed {
            if let Some(session) = &unfinished.session_id {
                let count = store.record_crash(session, limits.max_session_restarts).await?;
                if count >= limits.max_session_restarts {
                    refusal = Some((
                        EventState::Failed,
                        format!(
                            "This session is suspended: its turn stopped hermesd {count} times in a row. Send /new to start a fresh session."
                        ),
                    ));
                }
            }
            if refusal.is_none() && unfinished.attempts >= limits.max_attempts {
                refusal = Some((
                    EventState::Failed,
                    format!("Giving up on this message after {} attempts that did not finish.", unfinished.attempts),
                ));
            }
        }
        match refusal {
            Some((state, text)) => {
                report.given_up += 1;
                let (chat, reply_to) = match &unfinished.event {
                    InboundEvent::Message { message, .. } => (&message.chat, message.message_id.as_str()),
                    InboundEvent::Action { action, .. } => (&action.chat, action.message_id.as_str()),
                };
                let reply = outbox.compose(chat, &text, OutboundKind::Error, Some(reply_to));
                let turn_id = format!("evt:{}", unfinished.seq);
                store.close_event(unfinished.seq, state, Some(&text), &reply, &turn_id, now).await?;
                outbox.deliver(chat, &turn_id);
            }
            None => {
                report.rerun += 1;
                router.dispatch(unfinished.seq, unfinished.event).await;
            }
        }
    }
    if report != RecoveryReport::default() {
        tracing::info!(
            resumed_chunks = report.resumed_chunks,
            rerun = report.rerun,
            given_up = report.given_up,
            quarantined = report.quarantined,
            noted_previews = report.noted_previews,
            "recovered unfinished work"
        );
    }
    Ok(report)
}
