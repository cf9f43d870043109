//! Turns that do not answer the chat they came from: cron runs and webhook deliveries. Their
//! events arrive on the `cron` and `webhook` pseudo-platforms (one session per run or delivery);
//! their replies go to the job's or route's delivery target, with a header naming the source.
//!
//! A target that cannot be resolved never loses the output: it goes to `local` with the reason,
//! and the run is recorded as failed with that reason.
//!
//! `Routing` does it. A watched Home Assistant change (`TurnOrigin::HassWatch`) goes the same way,
//! to `platforms.homeassistant.watch_target` (else `local`) with a header, its tools cut like a
//! cron run's. A cron run's answer of just `[SILENT]` (`SILENT`) sends nothing; its output is saved
//! under `cron/output/` and the run recorded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use hermesd_platform::{ChatRef, InboundMessage, OutboundKind, OutboundMessage};

use super::{Target, Targets, local};
use crate::clock::now_ms;
use crate::config::WebhookConfig;
use crate::outbox::Outbox;
use crate::store::{CronRun, RunStatus, Store, StoreError};
use crate::vocab::origin::Origin;

/// A cron reply of exactly this suppresses delivery.
pub const SILENT: &str = "[SILENT]";
/// Toolsets a cron run never gets: nobody can answer a question, and a job must not spawn jobs.
pub const NOT_FOR_CRON: [&str; 2] = ["clarify", "cron"];

/// Where a turn came from, as far as its reply is concerned.
#[derive(Debug, Clone)]
pub enum TurnOrigin {
    /// A chat message: the reply goes back to its chat.
    Chat,
    /// A cron run.
    Cron(Box<CronRun>),
    /// A run whose job was removed before it ran.
    RemovedJob,
    /// A webhook delivery on this route.
    Webhook(Arc<WebhookConfig>),
    /// A watched Home Assistant state change of this entity; the reply goes to the watch target
    /// (`None`: not configured, so `local`).
    HassWatch {
        /// The entity that changed.
        entity: String,
        /// `platforms.homeassistant.watch_target`.
        target: Option<String>,
    },
}

/// A reply addressed: the chat it goes to and its chunks.
pub struct Routed {
    /// Destination.
    pub chat: ChatRef,
    /// Chunks (empty: nothing to deliver).
    pub messages: Vec<OutboundMessage>,
    /// What to record about a cron run once the turn is stored.
    pub run: Option<RunRecord>,
}

/// How a cron run ended, recorded once its turn is stored.
pub struct RunRecord {
    run_id: i64,
    status: RunStatus,
    output: Option<String>,
    error: Option<String>,
}

/// Resolves origins and routes replies.
#[derive(Clone)]
pub struct Routing {
    store: Arc<dyn Store>,
    targets: Targets,
    webhooks: Arc<HashMap<String, Arc<WebhookConfig>>>,
    output_dir: PathBuf,
    hass_watch: Option<String>,
}

impl Routing {
    /// Routing with cron output files under `home/cron/output`; `webhooks` are the configured
    /// routes, whose deliveries go to each route's target.
    pub fn new(store: Arc<dyn Store>, targets: Targets, webhooks: &[WebhookConfig], home: &std::path::Path) -> Self {
        let webhooks = Arc::new(webhooks.iter().map(|w| (w.route.clone(), Arc::new(w.clone()))).collect());
        Self { store, targets, webhooks, output_dir: home.join(CRON_OUTPUT_DIR), hass_watch: None }
    }

    /// Where Home Assistant's watched changes deliver (`platforms.homeassistant.watch_target`).
    pub fn with_hass_watch(mut self, target: Option<String>) -> Self {
        self.hass_watch = target;
        self
    }

    /// The targets, for tools and commands.
    pub fn targets(&self) -> &Targets {
        &self.targets
    }

    /// Where `message` came from.
    pub async fn origin(&self, message: &InboundMessage) -> Result<TurnOrigin, StoreError> {
        match Origin::of(&message.chat.platform) {
            Origin::Cron => {
                let run_id = message.chat.thread_id.as_deref().and_then(|t| t.parse().ok());
                let Some(run_id) = run_id else { return Ok(TurnOrigin::RemovedJob) };
                Ok(self.store.run(run_id).await?.map_or(TurnOrigin::RemovedJob, |r| TurnOrigin::Cron(Box::new(r))))
            }
            Origin::Webhook => {
                Ok(self.webhooks.get(&message.chat.chat_id).cloned().map_or(TurnOrigin::Chat, TurnOrigin::Webhook))
            }
            Origin::HassWatch => {
                Ok(TurnOrigin::HassWatch { entity: message.chat.chat_id.clone(), target: self.hass_watch.clone() })
            }
            _ => Ok(TurnOrigin::Chat),
        }
    }

    /// A model the turn starts on, when its origin chose one.
    pub fn model<'a>(&self, origin: &'a TurnOrigin) -> Option<&'a str> {
        match origin {
            TurnOrigin::Cron(run) => run.job.model.as_deref(),
            _ => None,
        }
    }

    /// Address the reply `text` of a turn from `message`.
    pub async fn route(
        &self,
        outbox: &Outbox,
        message: &InboundMessage,
        origin: &TurnOrigin,
        text: &str,
        kind: OutboundKind,
    ) -> Routed {
        match origin {
            TurnOrigin::Chat => Routed {
                chat: message.chat.clone(),
                messages: outbox.compose(&message.chat, text, kind, Some(&message.message_id)),
                run: None,
            },
            TurnOrigin::RemovedJob => Routed { chat: local::inbox(), messages: Vec::new(), run: None },
            TurnOrigin::Webhook(route) => {
                let header = format!("🔔 Webhook {}", route.route);
                let (chat, body, _) = self.resolve(&route.deliver, None, &header, text).await;
                Routed { messages: outbox.compose(&chat, &body, kind, None), chat, run: None }
            }
            TurnOrigin::HassWatch { entity, target } => {
                let header = format!("🏠 Home Assistant: {entity}");
                let (chat, body, _) = self.resolve(target.as_deref().unwrap_or("local"), None, &header, text).await;
                Routed { messages: outbox.compose(&chat, &body, kind, None), chat, run: None }
            }
            TurnOrigin::Cron(run) => {
                let job = &run.job;
                let output = self.save_output(run, text);
                if kind == OutboundKind::Reply && text.trim() == SILENT {
                    return Routed {
                        chat: local::inbox(),
                        messages: Vec::new(),
                        run: Some(RunRecord { run_id: run.run_id, status: RunStatus::Silent, output, error: None }),
                    };
                }
                let header = format!("⏰ Cron job \"{}\" ({})", job.name, job.id);
                let (chat, body, error) = self.resolve(&job.deliver, job.origin.as_ref(), &header, text).await;
                let (status, error) = match (kind, error) {
                    (OutboundKind::Error, _) => (RunStatus::Failed, Some(text.to_owned())),
                    (_, Some(error)) => (RunStatus::Failed, Some(error)),
                    (_, None) => (RunStatus::Ok, None),
                };
                Routed {
                    messages: outbox.compose(&chat, &body, kind, None),
                    chat,
                    run: Some(RunRecord { run_id: run.run_id, status, output, error }),
                }
            }
        }
    }

    /// Record a cron run's end, once its turn is stored.
    pub async fn record(&self, routed: &Routed) {
        if let Some(RunRecord { run_id, status, output, error }) = &routed.run
            && let Err(e) = self.store.finish_run(*run_id, *status, output.as_deref(), error.as_deref(), now_ms()).await
        {
            tracing::error!(error = %e, run_id, "record cron run");
        }
    }

    /// The chat for `target`, and the text to send there; a failure falls back to `local`
    /// with the reason in the text and returned.
    async fn resolve(
        &self,
        target: &str,
        origin: Option<&ChatRef>,
        header: &str,
        text: &str,
    ) -> (ChatRef, String, Option<String>) {
        let resolved = match Target::parse(target) {
            Ok(target) => self.targets.resolve(&target, origin).await,
            Err(e) => Err(e),
        };
        match resolved {
            Ok(chat) => (chat, format!("{header}\n\n{text}"), None),
            Err(e) => {
                tracing::warn!(error = %e, "delivery target unusable; delivered to local instead");
                let error = e.to_string();
                (local::inbox(), format!("{header}\n(could not deliver: {error})\n\n{text}"), Some(error))
            }
        }
    }

    /// Keep a run's full output as a file; returns its path.
    fn save_output(&self, run: &CronRun, text: &str) -> Option<String> {
        let dir = job_output_dir(&self.output_dir, &run.job.id);
        let path = dir.join(format!("{}.md", run.run_id));
        let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text));
        match written {
            Ok(()) => Some(path.display().to_string()),
            Err(e) => {
                tracing::warn!(error = %e, path = %path.display(), "cron output not saved");
                None
            }
        }
    }
}

/// Where cron runs' output files live, under the home.
pub const CRON_OUTPUT_DIR: &str = "cron/output";

/// The folder of job `job_id`'s output files under `output_dir` (`<home>/cron/output`).
pub fn job_output_dir(output_dir: &std::path::Path, job_id: &str) -> PathBuf {
    output_dir.join(safe(job_id))
}

fn safe(id: &str) -> String {
    id.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}
