//! `hermesd send <target> <text>`: through the running daemon (`POST /admin/send` with the
//! home's local key, so the message shares that daemon's pacers), or, when no daemon answers,
//! straight from this process with the same outbox and store. Either way it exits 0 only once the platform confirmed.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{EXIT_TEMPFAIL, Loaded};
use crate::delivery::Targets;
use crate::delivery::send::{SendOutcome, send};
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::store::Store;

/// How long a direct send waits for the platform.
const WAIT: Duration = Duration::from_secs(30);

pub(super) async fn run(loaded: Loaded, target: &str, text: &str) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    match via_daemon(&loaded, target, text).await {
        Some(Ok(line)) => {
            println!("{line}");
            return ExitCode::SUCCESS;
        }
        Some(Err(e)) => {
            eprintln!("hermesd: {e}");
            return ExitCode::FAILURE;
        }
        None => {}
    }
    match direct(&loaded, target, text).await {
        Ok(line) => {
            println!("{line}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hermesd: {e}");
            ExitCode::from(EXIT_TEMPFAIL)
        }
    }
}

/// `None` when no daemon listens at `http.listen`.
async fn via_daemon(loaded: &Loaded, target: &str, text: &str) -> Option<Result<String, String>> {
    let body = json!({ "target": target, "text": text });
    let (status, body) = match super::daemon::post(loaded, "/admin/send", &body, WAIT + Duration::from_secs(5)).await? {
        Ok(answer) => answer,
        Err(e) => return Some(Err(e)),
    };
    Some(match status {
        200 => Ok(format!("delivered to {} ({})", body["chat"].as_str().unwrap_or("?"), ids(&body["message_ids"]))),
        202 => Ok(format!("queued for {}; the daemon keeps delivering it", body["chat"].as_str().unwrap_or("?"))),
        _ => Err(body["error"].as_str().map_or_else(|| format!("the daemon answered {status}"), str::to_owned)),
    })
}

fn ids(value: &Value) -> String {
    value.as_array().map(|a| a.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(", ")).unwrap_or_default()
}

async fn direct(loaded: &Loaded, target: &str, text: &str) -> Result<String, String> {
    let platforms =
        crate::daemon::build_platforms(&loaded.config, &loaded.env, &loaded.paths).map_err(|e| e.to_string())?;
    let store = super::open_store(loaded).await.map_err(|_| "the store cannot be opened".to_owned())?;
    let sqlite = store.clone();
    let store: Arc<dyn Store> = Arc::new(store);
    let (tracker, cancel) = (TaskTracker::new(), CancellationToken::new());
    let outbox =
        Outbox::new(store.clone(), platforms.clone(), Arc::new(Metrics::default()), tracker.clone(), cancel.clone());
    let targets = Targets::new(store.clone(), platforms, &loaded.env);
    let result = send(store.as_ref(), &outbox, &targets, target, None, text, WAIT).await;
    cancel.cancel();
    tracker.close();
    tracker.wait().await;
    sqlite.close().await;
    match result? {
        (chat, SendOutcome::Delivered(ids)) => Ok(format!("delivered to {} ({})", chat.key(), ids.join(", "))),
        (chat, SendOutcome::Queued) => Err(format!(
            "not confirmed by the platform within {}s; it stays queued for {} until the daemon runs",
            WAIT.as_secs(),
            chat.key()
        )),
    }
}
