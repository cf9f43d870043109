//! The store capability behind usage accounting: a turn's tokens and cost added to its session
//! and to the day's rows of its user and its chat, sums over days for `/usage` and the
//! `[limits]` caps, and pruning of old daily rows.
//!
//! `UsageSum` is the sums' word, read by `crate::usage` and `/usage`.

use async_trait::async_trait;

use super::{StoreResult, TokenTotals};

/// Sums of usage over a span (a session, a day, 30 days).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageSum {
    /// Turns that ran (a turn refused by a cap is not one).
    pub turns: u64,
    /// Tokens and model calls.
    pub tokens: TokenTotals,
    /// Cost of the priced calls, microdollars.
    pub cost_micros: i64,
    /// Calls whose cost is unknown.
    pub unpriced_calls: u64,
}

impl UsageSum {
    /// Prompt plus completion tokens (what caps on tokens count).
    pub fn total_tokens(&self) -> u64 {
        self.tokens.prompt.saturating_add(self.tokens.completion)
    }
}

/// Whose daily row: one per (platform, user id) and one per (platform, chat id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsageScope {
    /// A person on one platform.
    User,
    /// A chat on one platform, whoever writes in it.
    Chat,
}

impl UsageScope {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            UsageScope::User => "user",
            UsageScope::Chat => "chat",
        }
    }
}

/// One turn's usage, to add to its session and to the day's user and chat rows.
#[derive(Debug, Clone, Copy)]
pub struct UsageRecord<'a> {
    /// The session the turn ran in.
    pub session_id: &'a str,
    /// The UTC day (`YYYY-MM-DD`).
    pub day: &'a str,
    /// The platform user and chat ids belong to.
    pub platform: &'a str,
    /// The profile whose turn it was: each profile counts a person's use apart.
    pub profile: &'a str,
    /// Who the turn is charged to.
    pub user: &'a str,
    /// The chat it is charged to.
    pub chat: &'a str,
    /// Tokens and model calls.
    pub tokens: TokenTotals,
    /// Cost of the priced calls, microdollars.
    pub cost_micros: i64,
    /// Calls whose cost is unknown.
    pub unpriced_calls: u64,
    /// The same calls by the model that answered them (their sums are the fields above).
    pub models: &'a [ModelUsage<'a>],
    /// A turn (counted in turns; its tokens reach the session's totals with the turn's end).
    /// `false`: model calls outside a turn (`/compress`), whose tokens are added to the
    /// session's totals here.
    pub turn: bool,
}

/// What one model's calls of a turn used.
#[derive(Debug, Clone, Copy)]
pub struct ModelUsage<'a> {
    /// The model's name (`[model] name`, or a fallback's).
    pub model: &'a str,
    /// Tokens and calls.
    pub tokens: TokenTotals,
    /// Cost of the priced calls, microdollars.
    pub cost_micros: i64,
    /// Calls whose cost is unknown.
    pub unpriced_calls: u64,
}

/// One day's usage of one model (every platform and profile summed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelDay {
    /// The UTC day (`YYYY-MM-DD`).
    pub day: String,
    /// The model.
    pub model: String,
    /// The sums (`turns` is 0: a turn may use several models).
    pub sum: UsageSum,
}

/// One day's usage of one profile on one platform (every chat's rows summed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDay {
    /// The UTC day (`YYYY-MM-DD`).
    pub day: String,
    /// The platform.
    pub platform: String,
    /// The profile.
    pub profile: String,
    /// The sums.
    pub sum: UsageSum,
}

/// One person's usage on one platform over a span, every profile summed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PersonUsage {
    /// The platform.
    pub platform: String,
    /// Their id there.
    pub user: String,
    /// The sums.
    pub sum: UsageSum,
}

/// Usage accounting.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Add a turn (one turn, its tokens and cost), or calls outside a turn, to the session's
    /// cost and to the day's rows.
    async fn record_usage(&self, record: &UsageRecord<'_>) -> StoreResult<()>;
    /// The session's cost so far: (microdollars, calls at unknown prices).
    async fn session_cost(&self, session_id: &str) -> StoreResult<(i64, u64)>;
    /// Usage of one user or chat under `profile` summed over the days `from..=to` (`YYYY-MM-DD`).
    async fn usage_between(
        &self,
        scope: UsageScope,
        platform: &str,
        profile: &str,
        subject: &str,
        from: &str,
        to: &str,
    ) -> StoreResult<UsageSum>;
    /// Every day's usage in `from..=to` (`YYYY-MM-DD`) by platform and profile, oldest first (the
    /// control panel's charts).
    async fn usage_by_day(&self, from: &str, to: &str) -> StoreResult<Vec<UsageDay>>;
    /// Every day's model calls in `from..=to` (`YYYY-MM-DD`) by model, oldest first.
    async fn usage_by_model(&self, from: &str, to: &str) -> StoreResult<Vec<ModelDay>>;
    /// The people who used the most over the days `from..=to` (`YYYY-MM-DD`), by cost then
    /// tokens, at most `limit` (the control panel's people page).
    async fn usage_by_person(&self, from: &str, to: &str, limit: u32) -> StoreResult<Vec<PersonUsage>>;
    /// Daily rows of days before `before` (`YYYY-MM-DD`), at most `limit`; returns how many.
    async fn prune_usage(&self, before: &str, limit: u32) -> StoreResult<u64>;
}
