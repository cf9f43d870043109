//! What the soak sent and what came back: every API answer checked as it returns, every
//! Telegram send matched to the message or webhook delivery it answers (the fake model echoes,
//! so each reply names its request), cron deliveries counted per job; and which chats and
//! session keys were active lately (the bound actors and pacers are judged against).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::fake_telegram::Sent;

/// Keys older than this are forgotten (well past the longest window asked about, the pacers').
const ACTIVITY_HORIZON: Duration = Duration::from_secs(660);
/// Failure texts kept for the report.
const SAMPLES_KEPT: usize = 8;

/// One Telegram message the soak sent.
struct TgMessage {
    chat: i64,
    sent_at: Instant,
    replies: u32,
}

/// Counts of everything sent and answered; see the module doc.
#[derive(Default)]
pub struct Tally {
    /// API requests sent, answered with their echo, answered otherwise, failed (status or
    /// transport), and not sent because too many were in flight.
    pub api_sent: u64,
    /// Answered with the expected echo.
    pub api_ok: u64,
    /// Answered 200 with other text.
    pub api_wrong: u64,
    /// An error status, a transport error or a timeout.
    pub api_failed: u64,
    /// Ticks skipped because the in-flight cap was reached (the daemon fell behind).
    pub api_skipped: u64,
    /// (seconds since start when sent, seconds to the answer, overlapped an outage).
    pub api_latency: Vec<(f64, f64, bool)>,
    tg: HashMap<u64, TgMessage>,
    /// Telegram messages sent.
    pub tg_sent: u64,
    /// Ticks skipped because no chat of the population was ready.
    pub tg_skipped: u64,
    /// Seconds from send to first reply.
    pub tg_latency: Vec<f64>,
    wh: HashMap<u64, u32>,
    /// Webhook posts answered 202 (accepted).
    pub wh_accepted: u64,
    /// Webhook posts answered anything else (repeats excluded).
    pub wh_refused: u64,
    /// Repeats of a delivery id sent, and those not answered `200 duplicate`.
    pub wh_repeats: u64,
    /// Repeats that were not answered as duplicates.
    pub wh_repeats_run: u64,
    /// Cron deliveries per job index.
    pub cron: Vec<u32>,
    /// Sends that answer nothing the soak sent (notices, errors).
    pub other: u64,
    /// A few failures and unmatched sends, for the report.
    pub samples: Vec<String>,
    /// Sends read from the fake so far.
    pub seen: usize,
}

impl Tally {
    /// A tally for `cron_jobs` cron jobs.
    pub fn new(cron_jobs: usize) -> Self {
        Self { cron: vec![0; cron_jobs], ..Self::default() }
    }

    /// Note a failure text (a few are kept).
    pub fn note(&mut self, text: String) {
        if self.samples.len() < SAMPLES_KEPT {
            self.samples.push(text);
        }
    }

    /// Record a Telegram message `seq` sent to `chat`.
    pub fn tg_sent(&mut self, seq: u64, chat: i64) {
        self.tg_sent += 1;
        self.tg.insert(seq, TgMessage { chat, sent_at: Instant::now(), replies: 0 });
    }

    /// Record a webhook delivery `seq` accepted.
    pub fn wh_accepted(&mut self, seq: u64) {
        self.wh_accepted += 1;
        self.wh.entry(seq).or_insert(0);
    }

    /// Match new sends of the fake Bot API; returns the keys whose request got its first
    /// answer: `tg:<chat>` and `wh:<seq>`.
    pub fn absorb(&mut self, sent: &[Sent]) -> Vec<String> {
        let mut answered = Vec::new();
        for s in sent {
            self.seen += 1;
            let text = s.visible();
            if let Some(job) = cron_job(&text) {
                match self.cron.get_mut(job) {
                    Some(count) => *count += 1,
                    None => self.unmatched(s.chat_id, &text),
                }
            } else if let Some(seq) = token(&text, "echo: tg-") {
                match self.tg.get_mut(&seq) {
                    Some(m) if m.chat == s.chat_id => {
                        m.replies += 1;
                        if m.replies == 1 {
                            self.tg_latency.push(s.at.saturating_duration_since(m.sent_at).as_secs_f64());
                            answered.push(format!("tg:{}", m.chat));
                        }
                    }
                    _ => self.unmatched(s.chat_id, &text),
                }
            } else if let Some(seq) = token(&text, "wh-") {
                match self.wh.get_mut(&seq) {
                    Some(n) => {
                        *n += 1;
                        if *n == 1 {
                            answered.push(format!("wh:{seq}"));
                        }
                    }
                    None => self.unmatched(s.chat_id, &text),
                }
            } else {
                self.unmatched(s.chat_id, &text);
            }
        }
        answered
    }

    fn unmatched(&mut self, chat: i64, text: &str) {
        self.other += 1;
        let short: String = text.chars().take(120).collect();
        self.note(format!("unmatched send to chat {chat}: {short:?}"));
    }

    /// Telegram messages answered at least once.
    pub fn tg_answered(&self) -> u64 {
        self.tg.values().filter(|m| m.replies > 0).count() as u64
    }

    /// Telegram messages without a reply.
    pub fn tg_lost(&self) -> u64 {
        self.tg.values().filter(|m| m.replies == 0).count() as u64
    }

    /// Telegram messages answered more than once.
    pub fn tg_duplicated(&self) -> u64 {
        self.tg.values().filter(|m| m.replies > 1).count() as u64
    }

    /// Accepted webhook deliveries whose reply reached the target chat.
    pub fn wh_delivered(&self) -> u64 {
        self.wh.values().filter(|&&n| n > 0).count() as u64
    }

    /// Accepted webhook deliveries without a reply.
    pub fn wh_lost(&self) -> u64 {
        self.wh.values().filter(|&&n| n == 0).count() as u64
    }

    /// Webhook deliveries replied to more than once.
    pub fn wh_duplicated(&self) -> u64 {
        self.wh.values().filter(|&&n| n > 1).count() as u64
    }

    /// Everything answered so far (API echoes, Telegram replies, webhook and cron deliveries).
    pub fn turns(&self) -> u64 {
        self.api_ok + self.tg_answered() + self.wh_delivered() + self.cron.iter().map(|&n| u64::from(n)).sum::<u64>()
    }

    /// Whether every request sent so far has its answer (API requests are counted when they
    /// return, so only Telegram and webhooks can be waiting).
    pub fn settled(&self) -> bool {
        self.tg_lost() == 0 && self.wh_lost() == 0
    }
}

/// The job index of a cron delivery ("… soak cron job 2 …").
fn cron_job(text: &str) -> Option<usize> {
    token(text, "soak cron job ").and_then(|n| usize::try_from(n).ok())
}

/// The number right after `prefix` in `text`.
fn token(text: &str, prefix: &str) -> Option<u64> {
    let start = text.find(prefix)? + prefix.len();
    let digits: String = text[start..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// Chats and session keys the soak touched lately, by when.
#[derive(Default)]
pub struct Activity {
    last: HashMap<String, Instant>,
    pruned_at: Option<Instant>,
}

impl Activity {
    /// `key` was used now.
    pub fn touch(&mut self, key: String) {
        let now = Instant::now();
        self.last.insert(key, now);
        if self.pruned_at.is_none_or(|at| now.duration_since(at) > Duration::from_secs(30)) {
            self.last.retain(|_, at| now.duration_since(*at) < ACTIVITY_HORIZON);
            self.pruned_at = Some(now);
        }
    }

    /// Keys used within `window`.
    pub fn since(&self, window: Duration) -> usize {
        let now = Instant::now();
        self.last.values().filter(|at| now.duration_since(**at) <= window).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(chat: i64, text: &str) -> Sent {
        Sent {
            at: Instant::now(),
            chat_id: chat,
            message_id: 1,
            text: text.to_owned(),
            parse_mode: None,
            reply_to: None,
            thread_id: None,
            reply_markup: None,
        }
    }

    #[test]
    fn replies_are_matched_to_their_message_and_chat() {
        let mut tally = Tally::new(2);
        tally.tg_sent(7, 100);
        tally.tg_sent(8, 101);
        tally.wh_accepted(3);
        let answered = tally.absorb(&[
            sent(100, "echo: tg-7"),
            sent(100, "echo: tg-8"),
            sent(9, "🔔 Webhook soak\n\necho: soak webhook wh-3"),
            sent(5, "⏰ Cron job \"c1\" (x)\n\necho: soak cron job 1"),
            sent(100, "echo: tg-7"),
        ]);
        assert_eq!(answered, vec!["tg:100", "wh:3"]);
        assert_eq!((tally.tg_answered(), tally.tg_lost(), tally.tg_duplicated()), (1, 1, 1));
        assert_eq!((tally.wh_delivered(), tally.wh_lost()), (1, 0));
        assert_eq!(tally.cron, vec![0, 1]);
        assert_eq!(tally.other, 1, "tg-8's reply went to the wrong chat");
        assert!(!tally.settled());
    }
}
