//! Idempotency-Key records in SQLite. A claim and the request's inbound event are written in one
//! transaction (one write on the lane), so a crash can never leave a key claimed without its event
//! (which would answer 409 until the record expired) or an event without its key.

use async_trait::async_trait;
use hermesd_platform::InboundEvent;
use rusqlite::OptionalExtension;

use super::{SqliteStore, retry_busy, to_json};
use crate::store::{
    IdempotencyClaim, IdempotencyStore, IdempotentAccept, Outlive, StoreResult, StoredResponse, WEBHOOK_SCOPE,
};

#[async_trait]
impl IdempotencyStore for SqliteStore {
    async fn accept_idempotent(
        &self,
        event: &InboundEvent,
        claim: &IdempotencyClaim<'_>,
        now: i64,
        outlive: Outlive,
    ) -> StoreResult<IdempotentAccept> {
        let payload = to_json(event);
        let (platform, event_id) = (event.platform().to_owned(), event.event_id().to_owned());
        let (scope, key) = (claim.scope.to_owned(), claim.key.to_owned());
        let (fingerprint, request_id) = (claim.fingerprint.to_owned(), claim.request_id.to_owned());
        let expires_before = claim.expires_before;
        // One write on the lane: its batch is one transaction, so the claim and the event go
        // together or not at all.
        self.write_lane_durable(outlive, move |conn| {
            let found = conn
                .prepare_cached(
                    "SELECT fingerprint, state, status, body, created_at FROM idempotency_keys \
                     WHERE scope = ?1 AND idem_key = ?2",
                )?
                .query_row(rusqlite::params![scope, key], |row| {
                    Ok((
                        row.get::<_, String>(0)?,
                        row.get::<_, String>(1)?,
                        row.get::<_, Option<i64>>(2)?,
                        row.get::<_, Option<String>>(3)?,
                        row.get::<_, i64>(4)?,
                    ))
                })
                .optional()?;
            if let Some((stored, state, status, body, created_at)) = found {
                if created_at >= expires_before {
                    // Read-only outcome: nothing written.
                    return Ok(match (stored == fingerprint, state.as_str(), status, body) {
                        (false, _, _, _) => IdempotentAccept::Mismatch,
                        (true, "done", Some(status), Some(body)) => IdempotentAccept::Replay(StoredResponse {
                            status: u16::try_from(status).unwrap_or(500),
                            body,
                        }),
                        _ => IdempotentAccept::InProgress,
                    });
                }
                conn.prepare_cached("DELETE FROM idempotency_keys WHERE scope = ?1 AND idem_key = ?2")?
                    .execute(rusqlite::params![scope, key])?;
            }
            let inserted = conn
                .prepare_cached(
                    "INSERT INTO inbound_events (platform, event_id, payload, received_at) VALUES (?1, ?2, ?3, ?4) \
                     ON CONFLICT (platform, event_id) DO NOTHING",
                )?
                .execute(rusqlite::params![platform, event_id, payload, now])?;
            if inserted == 0 {
                // The event id is the request id, fresh per request: a clash means this very
                // request was stored already.
                return Ok(IdempotentAccept::InProgress);
            }
            let seq = conn.last_insert_rowid();
            conn.prepare_cached(
                "INSERT INTO idempotency_keys (scope, idem_key, fingerprint, request_id, state, created_at) \
                 VALUES (?1, ?2, ?3, ?4, 'running', ?5)",
            )?
            .execute(rusqlite::params![scope, key, fingerprint, request_id, now])?;
            Ok(IdempotentAccept::New { seq })
        })
        .await
    }

    async fn complete_idempotent(&self, request_id: &str, response: &StoredResponse, now: i64) -> StoreResult<bool> {
        retry_busy(|| async move {
            let done = sqlx::query(
                "UPDATE idempotency_keys SET state = 'done', status = ?, body = ?, completed_at = ? \
                 WHERE request_id = ? AND state = 'running'",
            )
            .bind(i64::from(response.status))
            .bind(&response.body)
            .bind(now)
            .bind(request_id)
            .execute(&mut *self.writer.get().await?)
            .await?;
            Ok(done.rows_affected() > 0)
        })
        .await
    }

    async fn prune_idempotency(&self, before: i64, limit: u32) -> StoreResult<u64> {
        retry_busy(|| async move {
            let done = sqlx::query(
                "DELETE FROM idempotency_keys WHERE rowid IN \
                 (SELECT rowid FROM idempotency_keys WHERE created_at < ? AND scope NOT LIKE ? || '%' \
                 ORDER BY created_at LIMIT ?)",
            )
            .bind(before)
            // Webhook replay records go with their deliveries' events (`prune_inbound`).
            .bind(WEBHOOK_SCOPE)
            .bind(i64::from(limit))
            .execute(&mut *self.writer.get().await?)
            .await?;
            Ok(done.rows_affected())
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::{ChatRef, ChatType, InboundMessage, Sender};

    use super::*;
    use crate::store::InboundStore;

    fn event(id: &str) -> InboundEvent {
        InboundEvent::Message {
            event_id: id.to_owned(),
            message: InboundMessage {
                profile: None,
                message_id: id.to_owned(),
                chat: ChatRef::new("api", "c", ChatType::Dm),
                sender: Sender { id: "u".into(), name: None, is_bot: false, roles: Vec::new() },
                text: "hi".into(),
                attachments: Vec::new(),
                reply_to: None,
                addressed: true,
                timestamp_ms: 0,
                history: Vec::new(),
                chat_title: None,
                client: None,
            },
        }
    }

    fn claim<'a>(fingerprint: &'a str, request_id: &'a str, expires_before: i64) -> IdempotencyClaim<'a> {
        IdempotencyClaim { scope: "s", key: "k", fingerprint, request_id, expires_before }
    }

    #[tokio::test]
    async fn claim_replay_mismatch_and_expiry() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db"), std::time::Duration::from_secs(1), 1).await.unwrap();
        let first = store.accept_idempotent(&event("r1"), &claim("f", "r1", 0), 100, Outlive::PowerCut).await.unwrap();
        assert!(matches!(first, IdempotentAccept::New { .. }), "{first:?}");
        assert_eq!(store.unfinished_events().await.unwrap().events.len(), 1, "the event was accepted with the claim");
        let again = store.accept_idempotent(&event("r2"), &claim("f", "r2", 0), 110, Outlive::PowerCut).await.unwrap();
        assert_eq!(again, IdempotentAccept::InProgress);
        let other = store.accept_idempotent(&event("r3"), &claim("g", "r3", 0), 110, Outlive::PowerCut).await.unwrap();
        assert_eq!(other, IdempotentAccept::Mismatch);
        assert_eq!(store.unfinished_events().await.unwrap().events.len(), 1, "retries store no event");

        let response = StoredResponse { status: 200, body: "{\"a\":1}".into() };
        assert!(store.complete_idempotent("r1", &response, 120).await.unwrap());
        assert!(!store.complete_idempotent("r1", &response, 121).await.unwrap(), "completed once");
        assert!(!store.complete_idempotent("no-key", &response, 121).await.unwrap());
        let replay = store.accept_idempotent(&event("r4"), &claim("f", "r4", 0), 130, Outlive::PowerCut).await.unwrap();
        assert_eq!(replay, IdempotentAccept::Replay(response));

        // Expired: the key is free again and a new event runs.
        let fresh =
            store.accept_idempotent(&event("r5"), &claim("g", "r5", 101), 200, Outlive::PowerCut).await.unwrap();
        assert!(matches!(fresh, IdempotentAccept::New { .. }), "{fresh:?}");
        assert_eq!(store.prune_idempotency(200, 10).await.unwrap(), 0, "the new record is younger");
        assert_eq!(store.prune_idempotency(201, 10).await.unwrap(), 1);
    }

    #[tokio::test]
    async fn webhook_replay_records_live_as_long_as_the_deliveries_events() {
        use crate::store::RetentionStore;
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("t.db"), std::time::Duration::from_secs(1), 1).await.unwrap();
        let webhook = IdempotencyClaim {
            scope: "webhook:github",
            key: "sha256:ab",
            fingerprint: "sha256:ab",
            request_id: "github:d-1",
            expires_before: 0,
        };
        let first = store.accept_idempotent(&event("github:d-1"), &webhook, 100, Outlive::PowerCut).await.unwrap();
        assert!(matches!(first, IdempotentAccept::New { .. }), "{first:?}");
        assert_eq!(store.prune_idempotency(1_000, 10).await.unwrap(), 0, "not an API response's age");
        let replayed = IdempotencyClaim { request_id: "github:d-2", ..webhook };
        let again = store.accept_idempotent(&event("github:d-2"), &replayed, 900, Outlive::PowerCut).await.unwrap();
        assert_eq!(again, IdempotentAccept::InProgress, "the same signed content under another id");
        // The event is unfinished: neither it nor its replay record goes yet.
        assert_eq!(store.prune_inbound(1_000, 10).await.unwrap(), 0);
        sqlx::query("UPDATE inbound_events SET state = 'done'")
            .execute(&mut *store.writer.get().await.unwrap())
            .await
            .unwrap();
        assert_eq!(store.prune_inbound(1_000, 10).await.unwrap(), 2, "the event and its replay record");
    }
}
