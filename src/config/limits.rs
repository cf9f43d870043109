//! `[limits]`: optional daily caps on what one user or one chat may use (tokens, cost, turns),
//! and the price keys of model entries they are measured with (`ModelPrices`). Pure data and
//! validation; the check before a turn lives in `crate::usage`.

use serde::{Deserialize, Serialize};

/// Largest price accepted, USD per million tokens (a typo guard, far above any real model).
const MAX_PRICE: f64 = 100_000.0;

/// The prices of one model entry, USD per million tokens; `None`: not configured.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ModelPrices {
    /// Uncached prompt tokens.
    pub input: Option<f64>,
    /// Completion tokens.
    pub output: Option<f64>,
    /// Prompt tokens read from the cache (absent: `input`).
    pub cache_read: Option<f64>,
    /// Prompt tokens written to the cache (absent: `input`).
    pub cache_write: Option<f64>,
}

/// `[limits]`. Every cap is per UTC day; 0 means no cap. Tokens are prompt plus completion
/// tokens (cached prompt tokens included), summed over a turn's model calls.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Tokens one user (per platform) may use per day.
    pub user_daily_tokens: u64,
    /// USD one user (per platform) may spend per day, priced by the model entries' prices.
    pub user_daily_cost: f64,
    /// Turns one user (per platform) may start per day.
    pub user_daily_turns: u64,
    /// Tokens one chat may use per day, whoever writes in it.
    pub chat_daily_tokens: u64,
    /// USD one chat may spend per day.
    pub chat_daily_cost: f64,
    /// Turns one chat may start per day.
    pub chat_daily_turns: u64,
    /// Admins named in `<PLATFORM>_ADMIN_USERS` or `GATEWAY_ADMIN_USERS` (and the terminal)
    /// are not capped. Users who are admins only because no admin list is set are capped.
    pub exempt_admins: bool,
    /// Cron jobs one user (per platform and profile) may have made from chat (the `cronjob` tool); 0 for
    /// no cap. Jobs added with `hermesd cron add` are the operator's and never counted.
    pub cron_jobs_per_user: u32,
    /// The shortest interval between runs of a recurring job a non-admin may schedule from chat.
    pub cron_min_interval: super::HumanDuration,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        Self {
            user_daily_tokens: 0,
            user_daily_cost: 0.0,
            user_daily_turns: 0,
            chat_daily_tokens: 0,
            chat_daily_cost: 0.0,
            chat_daily_turns: 0,
            exempt_admins: true,
            cron_jobs_per_user: 20,
            cron_min_interval: super::HumanDuration::secs(300),
        }
    }
}

impl LimitsConfig {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.user_daily_tokens > 0
            || self.user_daily_cost > 0.0
            || self.user_daily_turns > 0
            || self.chat_daily_tokens > 0
            || self.chat_daily_cost > 0.0
            || self.chat_daily_turns > 0
    }
}

/// Problems with one model entry's prices (`at` names the entry).
pub(super) fn check_prices(at: &str, prices: &ModelPrices, problems: &mut Vec<String>) {
    let keys = [
        ("input_per_mtok", prices.input),
        ("output_per_mtok", prices.output),
        ("cache_read_per_mtok", prices.cache_read),
        ("cache_write_per_mtok", prices.cache_write),
    ];
    for (key, value) in keys {
        if let Some(value) = value
            && !(value.is_finite() && (0.0..=MAX_PRICE).contains(&value))
        {
            problems.push(format!("{at}.{key}: {value} is not a price in USD per million tokens (0 to {MAX_PRICE})"));
        }
    }
    let cache_only = prices.input.is_none() && (prices.cache_read.is_some() || prices.cache_write.is_some());
    if cache_only {
        problems.push(format!("{at}.input_per_mtok: cache prices are set but the input price is not"));
    }
}

/// Problems with `[limits]`; `priced`: some model entry has prices (else a cost cap could
/// never be reached, which would be a cap in name only).
pub(super) fn check_limits(limits: &LimitsConfig, priced: bool, problems: &mut Vec<String>) {
    for (key, value) in [("user_daily_cost", limits.user_daily_cost), ("chat_daily_cost", limits.chat_daily_cost)] {
        if !(value.is_finite() && value >= 0.0) {
            problems.push(format!("limits.{key}: {value} is not an amount in USD (0 for no cap)"));
        } else if value > 0.0 && !priced {
            problems.push(format!(
                "limits.{key}: no model entry has prices (input_per_mtok, output_per_mtok), so no cost can reach this cap"
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn prices_and_caps_parse_and_bad_values_are_listed() {
        let text = "[model]\nprovider = \"chat_completions\"\nbase_url = \"http://x\"\nname = \"m\"\n\
                    input_per_mtok = 3.0\noutput_per_mtok = 15\ncache_read_per_mtok = 0.3\n\
                    [[model.fallback]]\nprovider = \"chat_completions\"\nbase_url = \"http://y\"\nname = \"f\"\n\
                    input_per_mtok = -1.0\ncache_write_per_mtok = 1e9\n\
                    [limits]\nuser_daily_cost = 2.5\nchat_daily_turns = 40\n";
        let config = Config::parse(text).unwrap();
        let model = config.model.as_ref().unwrap();
        assert_eq!(model.prices().input, Some(3.0));
        assert_eq!(model.prices().output, Some(15.0));
        assert_eq!(model.prices().cache_write, None);
        assert_eq!(config.limits.user_daily_cost, 2.5);
        assert_eq!(config.limits.chat_daily_turns, 40);
        assert!(config.limits.exempt_admins && config.limits.any());
        let problems = config.validate(&crate::config::Env::from_map(Default::default()));
        assert!(problems.iter().any(|p| p.contains("model.fallback[0].input_per_mtok: -1")), "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("model.fallback[0].cache_write_per_mtok")), "{problems:?}");
        assert!(!problems.iter().any(|p| p.starts_with("model.input")), "{problems:?}");
    }

    #[test]
    fn cache_prices_need_an_input_price_and_costs_must_be_amounts() {
        let mut problems = Vec::new();
        check_prices("model", &ModelPrices { cache_read: Some(0.1), ..ModelPrices::default() }, &mut problems);
        assert!(problems[0].contains("model.input_per_mtok"), "{problems:?}");
        let limits = LimitsConfig { chat_daily_cost: f64::NAN, user_daily_cost: -1.0, ..LimitsConfig::default() };
        let mut problems = Vec::new();
        check_limits(&limits, true, &mut problems);
        assert_eq!(problems.len(), 2, "{problems:?}");
        let limits = LimitsConfig { user_daily_cost: 1.0, ..LimitsConfig::default() };
        let mut problems = Vec::new();
        check_limits(&limits, false, &mut problems);
        assert!(problems[0].contains("no model entry has prices"), "{problems:?}");
        assert!(!LimitsConfig::default().any());
    }

    #[test]
    fn unknown_limit_keys_are_refused() {
        assert!(Config::parse("[limits]\nuser_daily_tokenz = 5\n").is_err());
    }
}
