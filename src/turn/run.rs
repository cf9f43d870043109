//! One turn in named stages: `try_run` resolves the session and its origin, answers without a
//! model when it can (`answered_without_model`: a suspended session, a notification route, a
//! daily cap), `prepare`s the model side (chain, tools, the user message, system prompt and
//! transcript), `compact_before` the loop when history crossed the threshold, runs the loop
//! with the chat's live outputs (`Outputs`: preview or stream, reasoning, heartbeats), and
//! `conclude`s with the reply the user sees.

use std::sync::{Arc, Mutex};

use hermesd_platform::{InboundMessage, OutboundKind, Platform};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::agents::ProfileAgent;
use super::approvals::{ApprovalMemory, ChatHuman};
use super::{Ending, Finishing, StopReason, StopSignal, TurnJob, TurnRunner, heartbeat};
use crate::agent::context::{framed_text, is_shared};
use crate::agent::provider::ToolSchema;
use crate::agent::reasoning;
use crate::agent::runtime::agent_loop::{AgentLoop, LoopLimits, LoopOutcome, LoopResult, TurnEvent};
use crate::agent::runtime::chain::ProviderChain;
use crate::agent::runtime::compress::Compressor;
use crate::agent::runtime::tokens::estimate_tokens;
use crate::agent::tools::{Registry, ToolContext, ToolPolicy};
use crate::clock::now_ms;
use crate::delivery::turns::TurnOrigin;
use crate::outbox::Preview;
use crate::store::{EventState, SessionInfo, StoreError};
use crate::usage::{ClientCalls, Payer, TurnUsage};
use crate::vocab::message::{Message, Role};

/// The model side of a turn, ready to run.
struct Prepared {
    /// The profile's agent the turn started with.
    agent: Arc<ProfileAgent>,
    chain: ProviderChain,
    tools: Registry,
    policy: ToolPolicy,
    vision: bool,
    system: String,
    transcript: Vec<Message>,
    compressor: Compressor,
    /// The profile's model calls per turn.
    max_iterations: u32,
    /// Model calls before the loop (compaction), added to the turn's usage.
    before_loop: TurnUsage,
    /// Functions the API client declared for this request.
    client_tools: Vec<ToolSchema>,
    /// The client's outputs of the calls the last turn ended with, as tool results.
    resumed: Vec<Message>,
}

/// Where a running turn shows itself in its chat: a streamed preview or the platform's own
/// stream, reasoning, and the heartbeat watcher (typing, progress, the inactivity timeout).
struct Outputs {
    platform: Option<Arc<dyn Platform>>,
    reply_to: String,
    preview: Option<Preview>,
    stream: bool,
    interactive: bool,
    watcher: mpsc::Sender<TurnEvent>,
    watcher_task: tokio::task::JoinHandle<()>,
}

impl TurnRunner {
    pub(super) async fn try_run(
        &self,
        job: &TurnJob,
        stop: &Arc<StopSignal>,
        shutdown: &CancellationToken,
    ) -> Result<(), StoreError> {
        crate::failpoint!("turn.start");
        let (session, reset) = self.resolve_with_reset(&job.key).await?;
        if let Some(reason) = reset {
            self.tell_reset(job, reason).await;
        }
        let origin = self.parts.routing.origin(&job.message).await?;
        let at = Finishing { job, session_id: &session.id, origin: &origin, stop };
        // The profile's agent is taken once: a reload during the turn leaves it as it started.
        let agent = self.agent(&job.key);
        let payer = Payer::for_turn(&job.message, &origin).in_profile(&agent.name);
        if self.answered_without_model(&at, &session, &payer, &agent).await? {
            return Ok(());
        }
        let mut turn = self.prepare(job, &session, &origin, agent).await?;
        let outputs = self.outputs(job, &origin, stop);
        self.compact_before(&mut turn, job, &session, &outputs, stop).await;
        if turn.vision {
            self.parts.media.load_images(&mut turn.transcript).await;
        }
        let ctx = self.tool_context(job, &session, &origin, &turn, &outputs, stop).await?;
        let Some(mut result) = self.run_loop(&mut turn, &ctx, outputs, stop, shutdown).await else {
            tracing::info!(seq = job.seq, "shutdown: turn persisted for the next start");
            self.parts.store.requeue_event(job.seq).await?;
            return Ok(());
        };
        crate::failpoint!("turn.answered");
        turn.before_loop.add_to(&mut result.usage, &mut result.cost);
        self.account(job, &payer, &session.id, &result).await;
        self.conclude(&at, &session, result).await
    }

    /// Tell the API that this turn refused what its client sent (answered as a 400).
    fn refused_client(&self, job: &TurnJob) {
        self.parts.accounting.board().post_refused(&job.message.chat.platform, &job.message.message_id);
    }

    /// Answer a turn that needs no model: a suspended session, a notification route (the
    /// rendered template is the message), or a payer over a daily cap. `true`: answered.
    async fn answered_without_model(
        &self,
        at: &Finishing<'_>,
        session: &SessionInfo,
        payer: &Payer,
        agent: &ProfileAgent,
    ) -> Result<bool, StoreError> {
        let job = at.job;
        if session.suspended {
            let text = format!(
                "This session is suspended: its turn stopped hermesd {} times in a row. Send /new to start a fresh session.",
                session.restart_count
            );
            let ending = Ending { state: EventState::Failed, error: Some("session suspended"), ..Ending::default() };
            self.finish(at, &text, OutboundKind::Error, ending).await?;
            self.count_turn(&job.key, "rejected");
            return Ok(true);
        }
        if let Some(client) = job.message.client.as_ref() {
            let own: Vec<String> = agent.registry.schemas().into_iter().map(|t| t.name).collect();
            if let Some(taken) = client.tools.iter().find(|t| own.contains(&t.name)) {
                let text =
                    format!("function tool {:?} has the name of one of hermesd's own tools; rename it", taken.name);
                let ending =
                    Ending { state: EventState::Failed, error: Some("client tool name taken"), ..Ending::default() };
                self.refused_client(job);
                self.finish(at, &text, OutboundKind::Error, ending).await?;
                self.count_turn(&job.key, "rejected");
                return Ok(true);
            }
        }
        if let Some(client) = job.message.client.as_ref().filter(|c| !c.outputs.is_empty()) {
            let stored = self.parts.store.load_transcript(&session.id).await?;
            let transcript: Vec<Message> = stored.into_iter().map(|m| m.message).collect();
            if let Err(text) = client_results(&transcript, &client.outputs) {
                let ending =
                    Ending { state: EventState::Failed, error: Some("unmatched function output"), ..Ending::default() };
                self.refused_client(job);
                self.finish(at, &text, OutboundKind::Error, ending).await?;
                self.count_turn(&job.key, "rejected");
                return Ok(true);
            }
        }
        if let TurnOrigin::Webhook(route) = at.origin
            && route.deliver_only
        {
            let user = Message::text(Role::User, job.message.text.clone());
            self.parts.store.begin_turn(job.seq, &session.id, &user, now_ms()).await?;
            self.finish(at, &job.message.text, OutboundKind::Reply, Ending::default()).await?;
            self.count_turn(&job.key, "delivered");
            return Ok(true);
        }
        self.refused_by_limits(at, payer).await
    }

    /// The chain (a model chosen by `/model` or a cron job first, the rest as its fallbacks),
    /// the tools the origin allows, the user message stored, the session's system prompt (built
    /// once and stored) and its transcript.
    async fn prepare(
        &self,
        job: &TurnJob,
        session: &SessionInfo,
        origin: &TurnOrigin,
        agent: Arc<ProfileAgent>,
    ) -> Result<Prepared, StoreError> {
        let store = &self.parts.store;
        let policy = self.policy(&agent, origin, &job.key, &job.message);
        let route = self.route(&job.message.chat, &job.message.sender.id).map(|(_, route)| route);
        let tools = agent.registry.allowed(&policy);
        let chosen = session.model.as_deref().or_else(|| self.parts.routing.model(origin));
        let chosen = chosen.or_else(|| route.as_ref().and_then(|r| r.model.as_deref()));
        let chain = match chosen {
            Some(name) => agent.chain.starting_with(name),
            None => agent.chain.clone(),
        };
        let vision = chain.primary().vision();
        let client = job.message.client.as_deref().cloned().unwrap_or_default();
        if client.outputs.is_empty() {
            let text = framed_text(&job.message, is_shared(&job.key));
            let user = self.parts.media.user_message(&job.message, text, vision).await;
            store.begin_turn(job.seq, &session.id, &user, now_ms()).await?;
        } else {
            // The client's outputs continue the last turn: no user message of its own.
            store.begin_resumed_turn(job.seq, &session.id, now_ms()).await?;
        }
        crate::failpoint!("turn.begun");
        let system = match session.system_prompt.clone() {
            Some(prompt) => prompt,
            None => {
                let prompts = self.session_prompts(&agent, &job.key, &job.message);
                let prompt = prompts.build(&tools.toolsets(), chrono::Utc::now().date_naive());
                store.set_system_prompt(&session.id, &prompt).await?;
                prompt
            }
        };
        let transcript = self.transcript(&job.message, &session.id).await?;
        let resumed = client_results(&transcript, &client.outputs).unwrap_or_default();
        let client_tools = client
            .tools
            .iter()
            .map(|t| ToolSchema {
                name: t.name.clone(),
                description: t.description.clone(),
                parameters: Arc::new(t.parameters.clone()),
            })
            .collect();
        let compressor = self.compressor(&agent, &session.id, &job.key, &job.message);
        let before_loop = TurnUsage::default();
        let max_iterations = agent.max_iterations;
        Ok(Prepared {
            agent,
            chain,
            tools,
            policy,
            vision,
            system,
            transcript,
            compressor,
            max_iterations,
            before_loop,
            client_tools,
            resumed,
        })
    }

    /// The chat's live outputs for this turn: a chat answer streams into a paced preview
    /// (`streaming = true`), the API streams SSE; heartbeats start watching.
    fn outputs(&self, job: &TurnJob, origin: &TurnOrigin, stop: &Arc<StopSignal>) -> Outputs {
        let outbox = &self.parts.outbox;
        let platform = outbox.platforms().get(&job.key.platform).cloned();
        let reply_to = job.message.message_id.clone();
        let preview = match origin {
            TurnOrigin::Chat => outbox.preview(&job.message.chat, Some(&reply_to), &format!("evt:{}", job.seq)),
            _ => None,
        };
        let stream = preview.is_some() || platform.as_ref().is_some_and(|p| p.wants_stream(&reply_to));
        let interactive = platform.as_ref().is_some_and(|p| p.capabilities().interactive);
        let (watcher, watcher_task) = heartbeat::watch(
            outbox.clone(),
            job.message.chat.clone(),
            reply_to.clone(),
            self.settings.heartbeat,
            stop.clone(),
        );
        Outputs { platform, reply_to, preview, stream, interactive, watcher, watcher_task }
    }

    /// Between turns: compact first when the last call (or this prompt) crossed the threshold.
    async fn compact_before(
        &self,
        turn: &mut Prepared,
        job: &TurnJob,
        session: &SessionInfo,
        outputs: &Outputs,
        stop: &StopSignal,
    ) {
        let context = turn.chain.primary().context_length();
        let mut request = vec![Message::text(Role::System, turn.system.clone())];
        request.extend(turn.transcript.iter().cloned());
        let estimate = estimate_tokens(&request, &[]).max(session.last_prompt_tokens);
        if !turn.compressor.over_threshold(estimate, context) {
            return;
        }
        let mut state = turn.chain.start_turn();
        match turn.compressor.compact(&turn.chain, &mut state, &stop.token, false).await {
            Ok(Some(done)) => {
                let _ = outputs.watcher.try_send(TurnEvent::Compressed { archived: done.archived });
                turn.system = done.system_prompt;
                turn.transcript = self.with_client_history(&job.message, done.transcript);
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "compression before the turn failed"),
        }
        turn.before_loop = state.turn_usage();
    }

    /// What the turn's tools may use: its session, chat, person, folder and policy, and the
    /// chat's person to ask (approvals and questions wait parked).
    async fn tool_context(
        &self,
        job: &TurnJob,
        session: &SessionInfo,
        origin: &TurnOrigin,
        turn: &Prepared,
        outputs: &Outputs,
        stop: &StopSignal,
    ) -> Result<ToolContext, StoreError> {
        let human = Arc::new(ChatHuman {
            approvals: self.parts.approvals.clone(),
            outbox: self.parts.outbox.clone(),
            chat: job.message.chat.clone(),
            session_key: job.key.key.clone(),
            reply_to: outputs.reply_to.clone(),
            interactive: outputs.interactive,
            worker: stop.worker.clone(),
            memory: Some(ApprovalMemory {
                session_id: session.id.clone(),
                person: (job.message.chat.platform.clone(), job.message.sender.id.clone()),
                store: self.parts.store.clone(),
                preapproved: self.parts.approvals.preapproved(),
            }),
        });
        Ok(ToolContext {
            session_id: session.id.clone(),
            session_key: job.key.key.clone(),
            chat: job.message.chat.clone(),
            user_id: job.message.sender.id.clone(),
            workdir: self.turn_workdir(&turn.agent, &session.id, job, origin).await?,
            data_dir: self.parts.data_dir.clone(),
            store: self.parts.store.clone(),
            human,
            cancel: stop.token.child_token(),
            policy: turn.policy.clone(),
            admin: job.admin,
        })
    }

    /// Run the agent loop with its events shown in the chat. `None`: the daemon shut down
    /// first (the caller requeues the event for the next start).
    async fn run_loop(
        &self,
        turn: &mut Prepared,
        ctx: &ToolContext,
        outputs: Outputs,
        stop: &StopSignal,
        shutdown: &CancellationToken,
    ) -> Option<LoopResult> {
        let Outputs { platform, reply_to, preview, stream, watcher, watcher_task, .. } = outputs;
        // Streamed text is masked on the accumulated answer, so a token split across deltas is
        // still caught; the held-back tail arrives with the (masked) final reply.
        let stream_mask = Mutex::new(self.parts.outbox.redaction().stream());
        let reasoning_stream = reasoning::ReasoningStream::new(self.parts.outbox.redaction().stream());
        let flush_reasoning = || {
            if let Some(platform) = &platform {
                reasoning_stream.flush(platform.as_ref(), &reply_to);
            }
        };
        let events = |event: TurnEvent| match event {
            TurnEvent::Reasoning(text) => {
                if let Some(platform) = &platform {
                    reasoning_stream.push(platform.as_ref(), &reply_to, &text);
                }
            }
            TurnEvent::Delta(text) => {
                flush_reasoning();
                match (&preview, &platform) {
                    (Some(preview), _) => preview.push(&text),
                    (None, Some(platform)) => {
                        let safe = stream_mask.lock().unwrap_or_else(|e| e.into_inner()).push(&text);
                        if !safe.is_empty() {
                            platform.stream_delta(&reply_to, &safe);
                        }
                    }
                    (None, None) => {}
                }
            }
            other => {
                flush_reasoning();
                if let (Some(preview), TurnEvent::Step { .. }) = (&preview, &other) {
                    preview.restart();
                }
                let _ = watcher.try_send(other);
            }
        };
        let agent = AgentLoop {
            chain: &turn.chain,
            tools: &turn.tools,
            ctx,
            compressor: &turn.compressor,
            events: &events,
            steer: &|| stop.steer.take(),
            limits: LoopLimits { max_iterations: turn.max_iterations, max_nudges: 2, stream },
            media: turn.vision.then_some(&*self.parts.media),
            client_tools: &turn.client_tools,
            resumed: &turn.resumed,
        };
        let (system, transcript) = (std::mem::take(&mut turn.system), std::mem::take(&mut turn.transcript));
        let result = tokio::select! {
            result = agent.run(system, transcript, &stop.token) => Some(result),
            _ = shutdown.cancelled() => None,
        };
        drop(watcher);
        watcher_task.abort();
        if result.is_some() {
            flush_reasoning();
            // No preview update may land after the final reply (which replaces the preview).
            if let Some(preview) = preview {
                preview.finish().await;
            }
        }
        result
    }

    /// End the turn with the reply its outcome calls for.
    async fn conclude(&self, at: &Finishing<'_>, session: &SessionInfo, result: LoopResult) -> Result<(), StoreError> {
        let (job, stop) = (at.job, at.stop);
        let steered = stop.steer.taken();
        let ending = |state, error| Ending {
            messages: &result.appended,
            state,
            error,
            prompt_tokens: result.prompt_tokens,
            steered: &steered,
            usage: result.usage,
        };
        let (kind, state, label, error) = match result.outcome {
            LoopOutcome::Answered => (OutboundKind::Reply, EventState::Done, "ok", None),
            LoopOutcome::ClientCalls => {
                // The API renders the calls; the reply only carries the turn to its request.
                let names: Vec<&str> = result.client_calls.iter().map(|c| c.name.as_str()).collect();
                let calls = ClientCalls { calls: result.client_calls.clone(), text: result.text.clone() };
                let board = self.parts.accounting.board();
                board.post_calls(&job.message.chat.platform, &job.message.message_id, calls);
                let text = if result.text.trim().is_empty() {
                    format!("(calling {})", names.join(", "))
                } else {
                    result.text.clone()
                };
                self.finish(at, &text, OutboundKind::Reply, ending(EventState::Done, None)).await?;
                self.count_turn(&job.key, "client_calls");
                return Ok(());
            }
            LoopOutcome::Summarised => (OutboundKind::Reply, EventState::Done, "summarised", None),
            LoopOutcome::NotConfigured => (OutboundKind::Reply, EventState::Done, "unconfigured", None),
            LoopOutcome::Failed => (OutboundKind::Error, EventState::Failed, "error", Some(result.text.as_str())),
            LoopOutcome::Stopped => {
                let (text, label) = stopped_text(stop);
                self.finish(at, text, OutboundKind::Reply, ending(EventState::Done, Some(label))).await?;
                self.count_turn(&job.key, label);
                return Ok(());
            }
        };
        let text = match result.outcome {
            LoopOutcome::Answered | LoopOutcome::Summarised => {
                let store: &dyn crate::store::ExtrasStore = self.parts.store.as_ref();
                reasoning::reply_text(store, &session.id, &job.key.platform, &result.appended, &result.text).await
            }
            _ => result.text.clone(),
        };
        self.finish(at, &text, kind, ending(state, error)).await?;
        if state == EventState::Done {
            self.name_later(session, job, &result.text);
        }
        self.count_turn(&job.key, label);
        self.parts.metrics.observe_turn(job.accepted_at.elapsed());
        Ok(())
    }

    /// The stored transcript, after any client-owned history (API stateless mode).
    async fn transcript(&self, message: &InboundMessage, session_id: &str) -> Result<Vec<Message>, StoreError> {
        let stored = self.parts.store.load_transcript(session_id).await?;
        Ok(self.with_client_history(message, stored.into_iter().map(|m| m.message).collect()))
    }

    fn with_client_history(&self, message: &InboundMessage, stored: Vec<Message>) -> Vec<Message> {
        let mut messages: Vec<Message> = message
            .history
            .iter()
            .filter_map(|past| Role::parse(&past.role).map(|role| Message::text(role, past.content.clone())))
            .collect();
        messages.extend(stored);
        messages
    }
}

/// What a stopped turn answers, and its outcome label.
fn stopped_text(stop: &StopSignal) -> (&'static str, &'static str) {
    match stop.reason() {
        Some(StopReason::Interrupted) => ("Interrupted by your newer message.", "interrupted"),
        Some(StopReason::Inactive) => ("Stopped: this turn made no progress for too long.", "inactive"),
        _ => ("Stopped.", "stopped"),
    }
}

/// The client's outputs as tool results of the calls the transcript's last turn ended with (a
/// pending call without an output gets a note, so the transcript stays whole); `Err` names an
/// output that answers no pending call.
fn client_results(transcript: &[Message], outputs: &[hermesd_platform::ClientOutput]) -> Result<Vec<Message>, String> {
    let last_calls = transcript.iter().rposition(|m| m.role == Role::Assistant && !m.tool_calls.is_empty());
    let pending: Vec<&crate::vocab::message::ToolCall> = match last_calls {
        Some(at) => {
            let answered: Vec<&str> = transcript[at + 1..]
                .iter()
                .filter(|m| m.role == Role::Tool)
                .filter_map(|m| m.tool_call_id.as_deref())
                .collect();
            let later_user = transcript[at + 1..].iter().any(|m| m.role == Role::User);
            if later_user {
                Vec::new()
            } else {
                transcript[at].tool_calls.iter().filter(|c| !answered.contains(&c.id.as_str())).collect()
            }
        }
        None => Vec::new(),
    };
    if let Some(stray) = outputs.iter().find(|o| !pending.iter().any(|c| c.id == o.call_id)) {
        return Err(format!(
            "function_call_output {:?} answers no call this conversation is waiting for{}",
            stray.call_id,
            if pending.is_empty() {
                String::new()
            } else {
                format!(" (waiting for: {})", pending.iter().map(|c| c.id.as_str()).collect::<Vec<_>>().join(", "))
            }
        ));
    }
    Ok(pending
        .iter()
        .map(|call| {
            let output = outputs.iter().find(|o| o.call_id == call.id);
            let mut message = Message::text(
                Role::Tool,
                output.map_or_else(|| "(the client gave no output for this call)".to_owned(), |o| o.output.clone()),
            );
            message.tool_call_id = Some(call.id.clone());
            message
        })
        .collect())
}

#[cfg(test)]
mod client_tests {
    use super::*;
    use crate::vocab::message::ToolCall;
    use hermesd_platform::ClientOutput;

    fn calls(ids: &[&str]) -> Message {
        let mut message = Message::text(Role::Assistant, String::new());
        message.tool_calls =
            ids.iter().map(|id| ToolCall { id: (*id).into(), name: "f".into(), arguments: "{}".into() }).collect();
        message
    }

    #[test]
    fn outputs_answer_the_pending_calls_and_strays_are_refused() {
        let mut done = Message::text(Role::Tool, "own result");
        done.tool_call_id = Some("own".into());
        let transcript = vec![Message::text(Role::User, "hi"), calls(&["own", "c1", "c2"]), done];
        let out = |id: &str| ClientOutput { call_id: id.into(), output: format!("out {id}") };
        let results = client_results(&transcript, &[out("c2")]).unwrap();
        let got: Vec<_> =
            results.iter().map(|m| (m.tool_call_id.clone().unwrap(), m.content.clone().unwrap())).collect();
        assert_eq!(got[0].0, "c1");
        assert!(got[0].1.contains("no output"));
        assert_eq!(got[1], ("c2".into(), "out c2".into()));
        assert!(client_results(&transcript, &[out("own")]).is_err(), "an answered call is not pending");
        assert!(client_results(&[Message::text(Role::User, "hi")], &[out("c1")]).is_err());
    }
}
