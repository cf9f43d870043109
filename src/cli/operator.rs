//! `hermesd deliveries list [--failed] | retry ID | drop ID` and `hermesd events list
//! [--quarantined] | replay SEQ`: the work that did not go through, and what to do about it.
//!
//! Lists read the store. Retrying, dropping and replaying go through the running daemon (so a
//! retried delivery goes out at once through its pacers, a replayed event runs at once in its
//! session); with no daemon running they change the store, and the next start sends or runs
//! the row.

use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use serde_json::json;

use super::Loaded;
use crate::store::{Again, OperatorStore};

/// `hermesd deliveries …`.
#[derive(Debug, Subcommand)]
pub enum DeliveriesCommand {
    /// Outbound messages, newest first.
    List {
        /// Only failed and set-aside (undecodable) ones.
        #[arg(long)]
        failed: bool,
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Send a failed or set-aside delivery again.
    Retry {
        /// Its id (as `list` prints it).
        id: i64,
    },
    /// Remove a failed or set-aside delivery.
    Drop {
        /// Its id.
        id: i64,
    },
}

/// `hermesd events …`.
#[derive(Debug, Subcommand)]
pub enum EventsCommand {
    /// Inbound events, newest first.
    List {
        /// Only set-aside (undecodable) and failed ones.
        #[arg(long)]
        quarantined: bool,
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Run a set-aside event (after an upgrade that reads it).
    Replay {
        /// Its sequence number (as `list` prints it).
        seq: i64,
    },
}

/// How long a daemon's answer may take.
const WAIT: Duration = Duration::from_secs(15);

fn time(ms: i64) -> String {
    super::format_time(ms, true)
}

/// The row's `Again` as a line, and whether it went through.
fn said<T>(again: &Again<T>, what: &str, id: i64, done: &str) -> Result<String, String> {
    match again {
        Again::Ready(_) => Ok(done.to_owned()),
        Again::NotFound => Err(format!("no {what} {id}")),
        Again::Not(state) => Err(format!("{what} {id} is {state}: only failed or set-aside rows are taken again")),
        Again::Unreadable(why) => Err(format!("{what} {id} still does not decode ({why}); it stays set aside")),
    }
}

/// What the daemon answered to an action, as a line.
fn answered(status: u16, body: &serde_json::Value, done: String) -> Result<String, String> {
    match status {
        200 => Ok(done),
        _ => Err(body["error"].as_str().map_or_else(|| format!("the daemon answered {status}"), str::to_owned)),
    }
}

pub(super) async fn deliveries(loaded: Loaded, command: DeliveriesCommand) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let result = match command {
        DeliveriesCommand::List { failed, limit } => list_deliveries(&loaded, failed, limit).await,
        DeliveriesCommand::Retry { id } => act(&loaded, &format!("/admin/deliveries/{id}/retry"), || async {
            let store = super::open_store(&loaded).await.map_err(|_| "the store cannot be opened".to_owned())?;
            let again = store.requeue_delivery(id).await.map_err(|e| e.to_string());
            store.close().await;
            said(&again?, "delivery", id, &format!("delivery {id} queued; the daemon sends it when it starts"))
        })
        .await
        .map(|line| line.unwrap_or_else(|| format!("delivery {id} sent again through the running daemon"))),
        DeliveriesCommand::Drop { id } => act(&loaded, &format!("/admin/deliveries/{id}/drop"), || async {
            let store = super::open_store(&loaded).await.map_err(|_| "the store cannot be opened".to_owned())?;
            let again = store.drop_delivery(id).await.map_err(|e| e.to_string());
            store.close().await;
            said(&again?, "delivery", id, &format!("delivery {id} dropped"))
        })
        .await
        .map(|line| line.unwrap_or_else(|| format!("delivery {id} dropped"))),
    };
    super::report_outcome(result)
}

pub(super) async fn events(loaded: Loaded, command: EventsCommand) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let result = match command {
        EventsCommand::List { quarantined, limit } => list_events(&loaded, quarantined, limit).await,
        EventsCommand::Replay { seq } => act(&loaded, &format!("/admin/events/{seq}/replay"), || async {
            let store = super::open_store(&loaded).await.map_err(|_| "the store cannot be opened".to_owned())?;
            let again = store.reopen_event(seq).await.map_err(|e| e.to_string());
            store.close().await;
            said(&again?, "event", seq, &format!("event {seq} accepted again; the daemon runs it when it starts"))
        })
        .await
        .map(|line| line.unwrap_or_else(|| format!("event {seq} replayed by the running daemon"))),
    };
    super::report_outcome(result)
}

/// POSTs `path` on the running daemon (`Ok(None)`: it did it); with no daemon, `direct`.
async fn act<F, Fut>(loaded: &Loaded, path: &str, direct: F) -> Result<Option<String>, String>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<String, String>>,
{
    match super::daemon::post(loaded, path, &json!({}), WAIT).await {
        Some(Ok((status, body))) => answered(status, &body, String::new()).map(|_| None),
        Some(Err(e)) => Err(e),
        None => direct().await.map(Some),
    }
}

async fn list_deliveries(loaded: &Loaded, failed: bool, limit: u32) -> Result<String, String> {
    let store = super::open_store(loaded).await.map_err(|_| "the store cannot be opened".to_owned())?;
    let rows = store.list_deliveries(failed, limit).await.map_err(|e| e.to_string());
    store.close().await;
    let rows = rows?;
    if rows.is_empty() {
        return Ok(if failed { "no failed deliveries".into() } else { "no deliveries".into() });
    }
    Ok(rows
        .iter()
        .map(|r| {
            let error = r.error.as_deref().map(|e| format!("  {e}")).unwrap_or_default();
            format!(
                "{:>6}  {}  {:<11} {:<16} {:>2} tries  {}{error}",
                r.id,
                time(r.created_at),
                r.state,
                r.platform,
                r.attempts,
                r.turn_id
            )
        })
        .collect::<Vec<_>>()
        .join("\n"))
}

async fn list_events(loaded: &Loaded, quarantined: bool, limit: u32) -> Result<String, String> {
    let store = super::open_store(loaded).await.map_err(|_| "the store cannot be opened".to_owned())?;
    let rows = store.list_events(quarantined, limit).await.map_err(|e| e.to_string());
    store.close().await;
    let rows = rows?;
    if rows.is_empty() {
        return Ok(if quarantined { "no set-aside or failed events".into() } else { "no events".into() });
    }
    Ok(rows
        .iter()
        .map(|r| {
            let error = r.error.as_deref().map(|e| format!("  {e}")).unwrap_or_default();
            format!("{:>6}  {}  {:<11} {:<16} {}{error}", r.seq, time(r.received_at), r.state, r.platform, r.event_id)
        })
        .collect::<Vec<_>>()
        .join("\n"))
}
