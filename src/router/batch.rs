//! Rapid messages batched: on chat platforms, messages from one sender that arrive within
//! `agent.batch_window` of each other before their turn starts run as one turn. The first
//! event is the turn's own; the others ride along (`TurnJob::batched`) and are closed with it,
//! in the same transaction as the reply.
//!
//! Never for the API, webhooks, cron or local deliveries (each request or run is its own turn),
//! never for commands (they take the control lane before the mailbox), and never for a message
//! that arrived while a turn ran (that one follows the busy policy).
//!
//! A message that finds its session idle waits up to `agent.batch_window` for the next one from the
//! same sender; those that came run as one turn, at most `MAX_BATCH` (16) within `MAX_SPAN_WINDOWS`
//! (8) windows. Without batching, a message arriving while an earlier one still waits for its turn
//! to start also follows the busy policy. After a crash the batch's events are all unfinished, so
//! recovery dispatches them again and they batch again: the batch reruns once. The mailbox's jobs
//! (`Queued`) say what they run (`Work`: a turn, `/compress`, or a session command that must wait
//! for its session).

use std::time::Duration;

use tokio::time::Instant;

use crate::turn::TurnJob;
use crate::vocab::origin::Origin;

/// Most messages one turn takes in; the rest start the next turn.
pub(super) const MAX_BATCH: usize = 16;
/// However fast messages keep coming, a batch closes this many windows after its first message.
const MAX_SPAN_WINDOWS: u32 = 8;

/// A job in a session's mailbox, with whether it may open or join a batch.
#[derive(Debug, Clone)]
pub(super) struct Queued {
    pub(super) job: TurnJob,
    /// Set when the job arrived while the session was idle, on a chat platform, with batching on.
    pub(super) batchable: bool,
    /// What the job runs.
    pub(super) work: Work,
}

/// What a mailbox job runs, in the session's order and under a worker permit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Work {
    /// An agent turn for the job's message.
    Turn,
    /// `/compress`: the session's history summarised (a model call), answered to the message.
    Compress,
    /// A command on the session (`/model`, `/title`, `/reasoning`) whose session could not be
    /// had at once: the reset policy expired it (its memory flush is a model call) or a flush of
    /// it runs. Answered to the message once the session is resolved.
    Command(super::commands::ChatCommand),
}

impl Queued {
    /// A turn for `job`.
    pub(super) fn turn(job: TurnJob, batchable: bool) -> Self {
        Self { job, batchable, work: Work::Turn }
    }
}

/// What a mailbox holds: a boxed job, so a queue of waiting jobs costs a pointer per slot.
pub(super) type Mail = Box<Queued>;

/// Whether a message on `platform` may be batched with its neighbours, given the `window`:
/// never where each event is answered alone (API requests, runs, deliveries) nor on a platform
/// that answers per request (a Home Assistant request is answered by its own response event,
/// naming its request id).
pub(super) fn batches(platform: &str, answers_per_request: bool, window: Duration) -> bool {
    !window.is_zero() && !answers_per_request && !Origin::of(platform).answered_alone()
}

/// What gathering a batch ended with: the turn to run, and a job that arrived meanwhile but
/// belongs to a later turn; `None` when the daemon is draining (nothing runs, the events stay
/// accepted for the next start).
pub(super) type Gathered = Option<(TurnJob, Option<Queued>)>;

/// Wait up to `window` after each message for the next one from the same sender and chat, and
/// merge what came. Returns at once when the window passes with nothing new, so a lone message
/// waits exactly one window. `taken` is called once per job taken from the mailbox.
pub(super) async fn gather(
    first: TurnJob,
    window: Duration,
    mailbox: &super::mailbox::Mailbox,
    draining: &tokio_util::sync::CancellationToken,
    taken: &(dyn Fn() + Send + Sync),
) -> Gathered {
    let span_end = Instant::now() + window * MAX_SPAN_WINDOWS;
    let mut jobs = vec![first];
    let mut later = None;
    while jobs.len() < MAX_BATCH {
        let until = (Instant::now() + window).min(span_end);
        let next = tokio::select! {
            biased;
            _ = draining.cancelled() => return None,
            next = mailbox.recv() => next,
            _ = tokio::time::sleep_until(until) => break,
        };
        let Some(next) = next else { break };
        let next = *next;
        taken();
        if next.batchable && same_sender(&jobs[0], &next.job) {
            jobs.push(next.job);
        } else {
            later = Some(next);
            break;
        }
    }
    Some((merge(jobs), later))
}

fn same_sender(a: &TurnJob, b: &TurnJob) -> bool {
    a.key.key == b.key.key && a.message.chat == b.message.chat && a.message.sender.id == b.message.sender.id
}

/// One job from several: the first event is the turn's, the others are closed with it. The text
/// joins every message's text in order, the attachments are all of theirs, and the reply goes
/// to the latest message.
pub(super) fn merge(mut jobs: Vec<TurnJob>) -> TurnJob {
    let mut merged = jobs.remove(0);
    if jobs.is_empty() {
        return merged;
    }
    let mut texts: Vec<String> = vec![std::mem::take(&mut merged.message.text)];
    for job in jobs {
        merged.batched.push(job.seq);
        merged.batched.extend(job.batched);
        let message = job.message;
        texts.push(message.text);
        merged.message.attachments.extend(message.attachments);
        merged.message.addressed |= message.addressed;
        if merged.message.reply_to.is_none() {
            merged.message.reply_to = message.reply_to;
        }
        merged.message.message_id = message.message_id;
        merged.message.timestamp_ms = message.timestamp_ms;
    }
    texts.retain(|t| !t.trim().is_empty());
    merged.message.text = texts.join("\n");
    merged
}

#[cfg(test)]
pub(super) mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hermesd_platform::{Attachment, AttachmentKind, ChatRef, ChatType, InboundMessage, Sender};
    use tokio_util::sync::CancellationToken;

    use super::super::mailbox::Mailbox;
    use super::*;

    /// A job from `sender` in one Telegram DM (the mailbox tests use it too).
    pub(in crate::router) fn job(seq: i64, sender: &str, text: &str) -> TurnJob {
        let chat = ChatRef::new("telegram", "c1", ChatType::Dm);
        let message = InboundMessage {
            profile: None,
            message_id: format!("m{seq}"),
            chat: chat.clone(),
            sender: Sender { id: sender.into(), name: None, is_bot: false, roles: vec![] },
            text: text.into(),
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: seq,
            history: vec![],
            chat_title: None,
            client: None,
        };
        let key = crate::turn::session_key::session_key("default", &chat, &message.sender, false);
        TurnJob { seq, message, key, accepted_at: std::time::Instant::now(), admin: false, batched: vec![] }
    }

    fn queued(job: TurnJob) -> Mail {
        Box::new(Queued::turn(job, true))
    }

    #[test]
    fn only_chat_platforms_batch_and_zero_turns_it_off() {
        let half = Duration::from_millis(500);
        for platform in ["telegram", "discord", "slack", "terminal"] {
            assert!(batches(platform, false, half), "{platform}");
            assert!(!batches(platform, false, Duration::ZERO), "{platform} with 0s");
            assert!(!batches(platform, true, half), "{platform} answering per request");
        }
        for platform in ["api", "cron", "webhook", "local", "homeassistant_watch"] {
            assert!(!batches(platform, false, half), "{platform}");
        }
    }

    #[test]
    fn merged_jobs_keep_every_text_and_file_and_reply_to_the_latest() {
        let mut second = job(2, "u", "and this file");
        second.message.attachments.push(Attachment {
            kind: AttachmentKind::Document,
            path: "media/a.txt".into(),
            mime: None,
            name: Some("a.txt".into()),
            size: 3,
        });
        let merged = merge(vec![job(1, "u", "look at"), second, job(3, "u", "please")]);
        assert_eq!(merged.seq, 1, "the first event is the turn's own");
        assert_eq!(merged.batched, [2, 3]);
        assert_eq!(merged.message.text, "look at\nand this file\nplease");
        assert_eq!(merged.message.attachments.len(), 1);
        assert_eq!(merged.message.message_id, "m3");
    }

    #[tokio::test(start_paused = true)]
    async fn three_quick_messages_become_one_job_one_window_after_the_last() {
        let mailbox = Arc::new(Mailbox::new(8));
        let window = Duration::from_millis(500);
        let tx = mailbox.clone();
        let feeder = tokio::spawn(async move {
            for (seq, text) in [(2, "b"), (3, "c")] {
                tokio::time::sleep(Duration::from_millis(300)).await;
                tx.try_send(queued(job(seq, "u", text))).unwrap();
            }
            // Late: a window after the last one, so it starts the next turn.
            tokio::time::sleep(Duration::from_millis(900)).await;
            tx.try_send(queued(job(4, "u", "d"))).unwrap();
        });
        let count = Arc::new(AtomicUsize::new(0));
        let counter = count.clone();
        let started = Instant::now();
        let gathered = gather(job(1, "u", "a"), window, &mailbox, &CancellationToken::new(), &move || {
            counter.fetch_add(1, Ordering::SeqCst);
        })
        .await;
        let Some((turn, later)) = gathered else { panic!("not draining") };
        assert_eq!((turn.seq, turn.batched.clone(), turn.message.text.as_str()), (1, vec![2, 3], "a\nb\nc"));
        assert!(later.is_none());
        assert_eq!(started.elapsed(), Duration::from_millis(1_100), "one window after the last message");
        assert_eq!(count.load(Ordering::SeqCst), 2);
        feeder.await.unwrap();
        let lone = gather(job(5, "u", "e"), window, &mailbox, &CancellationToken::new(), &|| {}).await;
        let Some((turn, _)) = lone else { panic!("not draining") };
        assert_eq!(turn.batched, [4], "the late message waited in the mailbox for the next turn");
    }

    #[tokio::test(start_paused = true)]
    async fn another_sender_or_a_busy_time_message_ends_the_batch() {
        let mailbox = Mailbox::new(8);
        mailbox.try_send(queued(job(2, "other", "hi"))).unwrap();
        let started = Instant::now();
        let Some((turn, later)) =
            gather(job(1, "u", "a"), Duration::from_millis(500), &mailbox, &CancellationToken::new(), &|| {}).await
        else {
            panic!("not draining")
        };
        assert!(turn.batched.is_empty());
        assert_eq!(later.map(|q| q.job.seq), Some(2));
        assert_eq!(started.elapsed(), Duration::ZERO, "no wait once the batch cannot grow");
        mailbox.try_send(Box::new(Queued::turn(job(3, "u", "queued while busy"), false))).unwrap();
        let Some((turn, later)) =
            gather(job(1, "u", "a"), Duration::from_millis(500), &mailbox, &CancellationToken::new(), &|| {}).await
        else {
            panic!("not draining")
        };
        assert!(turn.batched.is_empty());
        assert_eq!(later.map(|q| q.job.seq), Some(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_is_cut_at_the_cap() {
        let mailbox = Mailbox::new(64);
        for seq in 2..40 {
            mailbox.try_send(queued(job(seq, "u", "x"))).unwrap();
        }
        let Some((turn, later)) =
            gather(job(1, "u", "x"), Duration::from_millis(500), &mailbox, &CancellationToken::new(), &|| {}).await
        else {
            panic!("not draining")
        };
        assert_eq!(turn.batched.len(), MAX_BATCH - 1);
        assert!(later.is_none(), "the rest stay in the mailbox");
        assert_eq!(mailbox.len(), 38 - (MAX_BATCH - 1));
    }
}
