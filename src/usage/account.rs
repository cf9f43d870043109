//! `Accounting`: who a turn is charged to, the `[limits]` check before it runs, and recording
//! what it used once it ran.
//!
//! A chat turn is charged to its sender and its chat; a cron run created from a chat to the
//! user who created it and that chat (so a job cannot outspend its creator's caps); cron jobs
//! of the operator and webhook deliveries are recorded under their own pseudo-platform and
//! never capped. Caps are per UTC day and checked before the turn: a turn that starts under a
//! cap runs to its end, so a day can pass a cap by at most the turns already running.
//!
//! `Payer` is whom a turn is charged to; `refusal` is the `[limits]` check before a turn (the
//! message naming the limit and when it resets, 00:00 UTC); `record` runs after the loop and before
//! the turn's end is stored; `caps_line` is `/usage`'s line on the caps that bind. Named admins
//! (`Access::is_named_admin`) are exempt.

use std::collections::HashMap;
use std::sync::Arc;

use hermesd_platform::InboundMessage;

use super::{ModelUse, TurnUsage, UsageBoard, describe_cost, format_usd, ms_to_midnight, usd_to_micros, utc_day};
use crate::config::LimitsConfig;
use crate::delivery::turns::TurnOrigin;
use crate::store::{ModelUsage, Store, UsageRecord, UsageScope, UsageSum};

/// Tells whether a (platform, user id) is exempt from caps (admins named explicitly).
pub type ExemptFn = dyn Fn(&str, &str) -> bool + Send + Sync;

/// Who a turn is charged to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payer {
    /// The platform the user and chat ids belong to.
    pub platform: String,
    /// The user.
    pub user: String,
    /// The chat.
    pub chat: String,
    /// Whether `[limits]` apply (people and the cron jobs they made; not operator automation).
    pub capped: bool,
    /// The profile whose turn it is: its `[limits]` bind, and its use is counted apart.
    pub profile: String,
}

impl Payer {
    /// The payer of a turn for `message`, which came from `origin`.
    pub fn for_turn(message: &InboundMessage, origin: &TurnOrigin) -> Self {
        let own = |capped| Payer {
            platform: message.chat.platform.clone(),
            user: message.sender.id.clone(),
            chat: message.chat.chat_id.clone(),
            capped,
            profile: crate::config::DEFAULT_PROFILE.to_owned(),
        };
        match origin {
            TurnOrigin::Chat => own(true),
            TurnOrigin::Cron(run) => match (&run.job.origin, &run.job.created_by) {
                (Some(chat), Some(user)) => Payer {
                    platform: chat.platform.clone(),
                    user: user.clone(),
                    chat: chat.chat_id.clone(),
                    capped: true,
                    profile: crate::config::DEFAULT_PROFILE.to_owned(),
                },
                _ => own(false),
            },
            TurnOrigin::RemovedJob | TurnOrigin::Webhook(_) | TurnOrigin::HassWatch { .. } => own(false),
        }
    }

    /// This payer in `profile`.
    pub fn in_profile(mut self, profile: &str) -> Self {
        profile.clone_into(&mut self.profile);
        self
    }
}

/// Records usage and enforces the daily caps.
pub struct Accounting {
    store: Arc<dyn Store>,
    limits: LimitsConfig,
    /// The caps of profiles with `limits` of their own.
    profile_limits: HashMap<String, LimitsConfig>,
    exempt: Box<ExemptFn>,
    board: Arc<UsageBoard>,
}

/// One cap: which key, what is counted, the limit, the use so far.
struct Cap {
    key: &'static str,
    scope: UsageScope,
    limit: i64,
    used: i64,
    unit: Unit,
}

#[derive(Clone, Copy)]
enum Unit {
    Tokens,
    Usd,
    Turns,
}

impl Unit {
    fn show(self, n: i64) -> String {
        match self {
            Unit::Tokens => format!("{n} tokens"),
            Unit::Usd => format_usd(n),
            Unit::Turns => format!("{n} turns"),
        }
    }
}

impl Accounting {
    /// Accounting over `store` with `limits`; `exempt` names the admins caps do not bind.
    pub fn new(store: Arc<dyn Store>, limits: LimitsConfig, exempt: Box<ExemptFn>, board: Arc<UsageBoard>) -> Self {
        Self { store, limits, profile_limits: HashMap::new(), exempt, board }
    }

    /// This accounting with `limits` for the turns of `profile`.
    pub fn with_profile_limits(mut self, profile: &str, limits: LimitsConfig) -> Self {
        self.profile_limits.insert(profile.to_owned(), limits);
        self
    }

    /// The caps of `profile`'s turns: its own, else the top-level `[limits]`.
    fn limits(&self, profile: &str) -> &LimitsConfig {
        self.profile_limits.get(profile).unwrap_or(&self.limits)
    }

    /// Where turns post their usage for the platform rendering it (the API).
    pub fn board(&self) -> &Arc<UsageBoard> {
        &self.board
    }

    /// The store (for `/usage`).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// Whether the caps of `profile` bind `payer` at all.
    fn binds(&self, payer: &Payer) -> bool {
        let limits = self.limits(&payer.profile);
        payer.capped && limits.any() && !(limits.exempt_admins && (self.exempt)(&payer.platform, &payer.user))
    }

    /// The message for `payer` when one of their caps under `profile` is reached today; `None`:
    /// the turn may run. A store that cannot be read lets the turn run (and says so in the log).
    pub async fn refusal(&self, payer: &Payer, now_ms: i64) -> Option<String> {
        if !self.binds(payer) {
            return None;
        }
        let user = self.today(UsageScope::User, payer, now_ms).await?;
        let chat = self.today(UsageScope::Chat, payer, now_ms).await?;
        let caps = self.caps(&payer.profile, &user, &chat);
        let reached = caps.iter().find(|c| c.limit > 0 && c.used >= c.limit)?;
        let who = match reached.scope {
            UsageScope::User => "You have",
            UsageScope::Chat => "This chat has",
        };
        Some(format!(
            "Daily limit reached: {who} used {} of the {} allowed per day (limits.{}), so this message was not \
             sent to the model. The limit resets at 00:00 UTC, in {}.",
            reached.unit.show(reached.used),
            reached.unit.show(reached.limit),
            reached.key,
            until(ms_to_midnight(now_ms)),
        ))
    }

    /// Every cap set, with today's use of `user` and `chat`.
    fn caps(&self, profile: &str, user: &UsageSum, chat: &UsageSum) -> Vec<Cap> {
        let l = self.limits(profile);
        let signed = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
        let all = [
            (
                "user_daily_tokens",
                UsageScope::User,
                signed(l.user_daily_tokens),
                signed(user.total_tokens()),
                Unit::Tokens,
            ),
            ("user_daily_cost", UsageScope::User, usd_to_micros(l.user_daily_cost), user.cost_micros, Unit::Usd),
            ("user_daily_turns", UsageScope::User, signed(l.user_daily_turns), signed(user.turns), Unit::Turns),
            (
                "chat_daily_tokens",
                UsageScope::Chat,
                signed(l.chat_daily_tokens),
                signed(chat.total_tokens()),
                Unit::Tokens,
            ),
            ("chat_daily_cost", UsageScope::Chat, usd_to_micros(l.chat_daily_cost), chat.cost_micros, Unit::Usd),
            ("chat_daily_turns", UsageScope::Chat, signed(l.chat_daily_turns), signed(chat.turns), Unit::Turns),
        ];
        all.into_iter()
            .filter(|c| c.2 > 0)
            .map(|(key, scope, limit, used, unit)| Cap { key, scope, limit, used, unit })
            .collect()
    }

    /// `/usage`'s line about the caps that bind `payer`: each one's use today; `None` when none
    /// binds.
    pub fn caps_line(&self, payer: &Payer, user: &UsageSum, chat: &UsageSum) -> Option<String> {
        if !self.binds(payer) {
            return None;
        }
        let parts: Vec<String> = self
            .caps(&payer.profile, user, chat)
            .iter()
            .map(|c| {
                let whose = if c.scope == UsageScope::User { "you" } else { "this chat" };
                format!("{} of {} ({whose})", c.unit.show(c.used), c.unit.show(c.limit))
            })
            .collect();
        Some(format!("daily limits (UTC): {}", parts.join(" · ")))
    }

    async fn today(&self, scope: UsageScope, payer: &Payer, now_ms: i64) -> Option<UsageSum> {
        let subject = match scope {
            UsageScope::User => &payer.user,
            UsageScope::Chat => &payer.chat,
        };
        let day = utc_day(now_ms);
        match self.store.usage_between(scope, &payer.platform, &payer.profile, subject, &day, &day).await {
            Ok(sum) => Some(sum),
            Err(e) => {
                tracing::warn!(error = %e, "daily usage unreadable: the turn runs without its cap check");
                None
            }
        }
    }

    /// Record a turn that ran (`turn`), or model calls outside a turn: the session's cost and
    /// the day's rows of its payer.
    pub async fn record(
        &self,
        payer: &Payer,
        session_id: &str,
        usage: &TurnUsage,
        by_model: &[ModelUse],
        turn: bool,
        now_ms: i64,
    ) {
        if !turn && usage.tokens.calls == 0 {
            return;
        }
        let day = utc_day(now_ms);
        let models: Vec<ModelUsage<'_>> = by_model
            .iter()
            .map(|m| ModelUsage {
                model: &m.model,
                tokens: m.usage.tokens,
                cost_micros: m.usage.cost.micros(),
                unpriced_calls: m.usage.cost.unpriced_calls,
            })
            .collect();
        let record = UsageRecord {
            session_id,
            day: &day,
            platform: &payer.platform,
            profile: &payer.profile,
            user: &payer.user,
            chat: &payer.chat,
            tokens: usage.tokens,
            cost_micros: usage.cost.micros(),
            unpriced_calls: usage.cost.unpriced_calls,
            models: &models,
            turn,
        };
        if let Err(e) = self.store.record_usage(&record).await {
            tracing::warn!(error = %e, "turn usage not recorded");
        }
    }
}

/// A summary line of usage: turns, tokens and cost.
pub fn summary_line(sum: &UsageSum) -> String {
    format!(
        "{} turn{} · {} tokens ({} prompt, {} completion) · {}",
        sum.turns,
        if sum.turns == 1 { "" } else { "s" },
        sum.total_tokens(),
        sum.tokens.prompt,
        sum.tokens.completion,
        describe_cost(sum.cost_micros, sum.unpriced_calls, sum.tokens.calls),
    )
}

/// `3 h 12 min`, `45 min`, `under a minute`.
fn until(ms: i64) -> String {
    let minutes = ms / 60_000;
    match (minutes / 60, minutes % 60) {
        (0, 0) => "under a minute".to_owned(),
        (0, m) => format!("{m} min"),
        (h, m) => format!("{h} h {m} min"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_plainly() {
        assert_eq!(until(30_000), "under a minute");
        assert_eq!(until(45 * 60_000), "45 min");
        assert_eq!(until(3 * 3_600_000 + 12 * 60_000), "3 h 12 min");
    }

    #[test]
    fn summary_lines_name_turns_tokens_and_cost() {
        let mut sum = UsageSum { turns: 2, cost_micros: 1_500_000, ..UsageSum::default() };
        sum.tokens.prompt = 30;
        sum.tokens.completion = 10;
        sum.tokens.calls = 2;
        assert_eq!(summary_line(&sum), "2 turns · 40 tokens (30 prompt, 10 completion) · $1.50");
    }
}
