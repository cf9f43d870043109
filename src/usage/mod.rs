//! Tokens, cost and daily caps. Prices come from the model entry that served each call (primary
//! or fallback) and are kept as integers (picodollars per token), so sums never drift; stored
//! costs are integer microdollars. A call priced by no configured price is counted as unpriced
//! and never as free.
//!
//! `account.rs` records a turn's usage per session, user and chat and checks the `[limits]`
//! caps before a turn runs; `board.rs` hands a turn's usage to the API's `usage` field.
//!
//! The words: `Usage` (one call's tokens as a provider reports them, cache reads and writes
//! included), `Prices` (a model entry's prices as integer picodollars per token; cache prices
//! default to the input price), `Cost` (the priced sum, plus the calls at unknown prices),
//! `TurnUsage` (a turn's calls, tokens and cost, which `ChainState::turn_usage` sums), UTC days and
//! `format_usd`. The stored sums (`UsageSum`) are the store's word (`store/usage.rs`). Metrics
//! carry token and cost totals without user or chat labels.

pub mod account;
pub mod board;

use chrono::{DateTime, Utc};

use crate::config::ModelPrices;
use crate::store::TokenTotals;

pub use account::{Accounting, Payer};
pub use board::{ClientCalls, UsageBoard};

/// Picodollars in one microdollar.
const PICOS_PER_MICRO: u64 = 1_000_000;

/// Token usage as the provider reported it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Prompt tokens, cached ones included.
    pub prompt_tokens: u64,
    /// Completion tokens (reasoning included).
    pub completion_tokens: u64,
    /// Prompt tokens read from the provider's prompt cache (Anthropic
    /// `cache_read_input_tokens`, OpenAI `cached_tokens`).
    pub cache_read_tokens: u64,
    /// Prompt tokens written to the prompt cache (Anthropic `cache_creation_input_tokens`).
    pub cache_write_tokens: u64,
}

impl Usage {
    /// Add another call's counts (a turn's total over its model calls).
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_write_tokens += other.cache_write_tokens;
    }
}

/// One model entry's prices in picodollars per token (equal to microdollars per million
/// tokens); `None`: not configured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Prices {
    input: Option<u64>,
    output: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
}

impl Prices {
    /// From a model entry's USD-per-million prices (validated: finite, not negative). Cache
    /// prices default to the input price, an upper bound for providers that discount them.
    pub fn from_config(prices: &ModelPrices) -> Self {
        // USD per million tokens × 10^6 = picodollars per token.
        let picos = |usd: Option<f64>| usd.map(|usd| (usd * 1e6).round().clamp(0.0, u64::MAX as f64) as u64);
        let input = picos(prices.input);
        Self {
            input,
            output: picos(prices.output),
            cache_read: picos(prices.cache_read).or(input),
            cache_write: picos(prices.cache_write).or(input),
        }
    }

    /// What one call cost, in picodollars; `None` when it used a kind of token without a price.
    /// Prompt tokens include cached ones (hermesd's providers normalise to that), so uncached
    /// input is prompt − cache reads − cache writes.
    pub fn cost(&self, usage: &Usage) -> Option<u64> {
        let cached = usage.cache_read_tokens.saturating_add(usage.cache_write_tokens);
        let uncached = usage.prompt_tokens.saturating_sub(cached);
        let part = |tokens: u64, price: Option<u64>| -> Option<u128> {
            if tokens == 0 { Some(0) } else { price.map(|p| u128::from(tokens) * u128::from(p)) }
        };
        let total = part(uncached, self.input)?
            + part(usage.cache_read_tokens, self.cache_read)?
            + part(usage.cache_write_tokens, self.cache_write)?
            + part(usage.completion_tokens, self.output)?;
        Some(u64::try_from(total).unwrap_or(u64::MAX))
    }
}

/// The cost of some model calls: what the priced ones cost and how many had no price.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Cost {
    /// Sum over priced calls, picodollars.
    pub picos: u64,
    /// Calls whose cost is unknown (no price for a kind of token they used, or no usage reported).
    pub unpriced_calls: u64,
}

impl Cost {
    /// Count one call; `None`: its cost is unknown.
    pub fn add_call(&mut self, picos: Option<u64>) {
        match picos {
            Some(picos) => self.picos = self.picos.saturating_add(picos),
            None => self.unpriced_calls += 1,
        }
    }

    /// The priced part in microdollars, rounded to the nearest.
    pub fn micros(&self) -> i64 {
        i64::try_from((self.picos + PICOS_PER_MICRO / 2) / PICOS_PER_MICRO).unwrap_or(i64::MAX)
    }
}

/// What one model's calls used (a turn that fell back used several).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ModelUse {
    /// The model's name.
    pub model: String,
    /// Its calls' tokens and cost.
    pub usage: TurnUsage,
}

/// Add one answered call of `model` (its `usage` as reported, its cost `picos`, `None`:
/// unknown) to `by_model`.
pub fn add_model_call(by_model: &mut Vec<ModelUse>, model: &str, usage: Option<&Usage>, picos: Option<u64>) {
    let index = match by_model.iter().position(|m| m.model == model) {
        Some(index) => index,
        None => {
            by_model.push(ModelUse { model: model.to_owned(), usage: TurnUsage::default() });
            by_model.len() - 1
        }
    };
    let entry = &mut by_model[index].usage;
    let u = usage.copied().unwrap_or_default();
    let t = &mut entry.tokens;
    t.calls += 1;
    t.prompt += u.prompt_tokens;
    t.completion += u.completion_tokens;
    t.cache_read += u.cache_read_tokens;
    t.cache_write += u.cache_write_tokens;
    entry.cost.add_call(picos);
}

/// What one turn used, summed over its model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TurnUsage {
    /// Tokens and calls.
    pub tokens: TokenTotals,
    /// Their cost.
    pub cost: Cost,
}

impl TurnUsage {
    /// What `calls` model calls that used `usage` tokens and cost `cost` add up to.
    pub fn of(calls: u64, usage: &Usage, cost: Cost) -> Self {
        let tokens = TokenTotals {
            calls,
            prompt: usage.prompt_tokens,
            completion: usage.completion_tokens,
            cache_read: usage.cache_read_tokens,
            cache_write: usage.cache_write_tokens,
        };
        Self { tokens, cost }
    }

    /// Add this usage to `tokens` and `cost` (a turn's totals).
    pub fn add_to(&self, tokens: &mut TokenTotals, cost: &mut Cost) {
        let t = &self.tokens;
        tokens.calls += t.calls;
        tokens.prompt += t.prompt;
        tokens.completion += t.completion;
        tokens.cache_read += t.cache_read;
        tokens.cache_write += t.cache_write;
        cost.picos = cost.picos.saturating_add(self.cost.picos);
        cost.unpriced_calls += self.cost.unpriced_calls;
    }
}

/// `$1.50`, `$0.012345`: microdollars exactly, trailing zeros trimmed to at least cents.
pub fn format_usd(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let micros = micros.unsigned_abs();
    let mut fraction = format!("{:06}", micros % 1_000_000);
    while fraction.len() > 2 && fraction.ends_with('0') {
        fraction.pop();
    }
    format!("{sign}${}.{fraction}", micros / 1_000_000)
}

/// The cost part of a usage line: the amount, and what is unknown about it.
pub fn describe_cost(cost_micros: i64, unpriced_calls: u64, calls: u64) -> String {
    match unpriced_calls {
        0 => format_usd(cost_micros),
        n if n >= calls => "cost unknown (no prices configured for the model)".to_owned(),
        n => format!("{} + {n} call{} at unknown prices", format_usd(cost_micros), if n == 1 { "" } else { "s" }),
    }
}

/// USD to microdollars (caps in the config are USD).
pub fn usd_to_micros(usd: f64) -> i64 {
    (usd * 1e6).round().clamp(0.0, i64::MAX as f64) as i64
}

/// The UTC day of `at_ms` as `YYYY-MM-DD` (caps and daily rows are per UTC day).
pub fn utc_day(at_ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(at_ms).unwrap_or_default().format("%Y-%m-%d").to_string()
}

/// The UTC day `days` before the day of `at_ms`.
pub fn utc_day_before(at_ms: i64, days: i64) -> String {
    utc_day(at_ms.saturating_sub(days.saturating_mul(24 * 3600 * 1000)))
}

/// Milliseconds from `at_ms` to the next UTC midnight (when daily caps reset).
pub fn ms_to_midnight(at_ms: i64) -> i64 {
    const DAY: i64 = 24 * 3600 * 1000;
    DAY - at_ms.rem_euclid(DAY)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(prompt: u64, completion: u64, read: u64, write: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cache_read_tokens: read,
            cache_write_tokens: write,
        }
    }

    #[test]
    fn a_call_is_priced_by_kind_with_cached_tokens_taken_out_of_the_input() {
        let prices = Prices::from_config(&ModelPrices {
            input: Some(3.0),
            output: Some(15.0),
            cache_read: Some(0.3),
            cache_write: Some(3.75),
        });
        // 1000 prompt tokens of which 600 read and 100 written: 300 × $3 + 600 × $0.3
        // + 100 × $3.75 + 200 × $15 per million.
        let picos = prices.cost(&usage(1000, 200, 600, 100)).unwrap();
        let expected_usd: f64 = (300.0 * 3.0 + 600.0 * 0.3 + 100.0 * 3.75 + 200.0 * 15.0) / 1e6;
        assert_eq!(picos, (expected_usd * 1e12).round() as u64);
        let mut cost = Cost::default();
        cost.add_call(Some(picos));
        assert_eq!(cost.micros(), 4455);
    }

    #[test]
    fn cache_prices_default_to_input_and_missing_prices_make_cost_unknown() {
        let input_only = Prices::from_config(&ModelPrices { input: Some(1.0), ..ModelPrices::default() });
        assert_eq!(input_only.cost(&usage(100, 0, 40, 10)), Some(100 * 1_000_000));
        assert_eq!(input_only.cost(&usage(100, 5, 0, 0)), None, "completion tokens without an output price");
        assert_eq!(Prices::default().cost(&usage(1, 0, 0, 0)), None);
        assert_eq!(Prices::default().cost(&usage(0, 0, 0, 0)), Some(0));
        // More cached than prompt (a provider's odd report) never underflows.
        assert_eq!(input_only.cost(&usage(10, 0, 30, 0)), Some(30 * 1_000_000));
    }

    #[test]
    fn small_prices_sum_without_drift() {
        let prices = Prices::from_config(&ModelPrices { input: Some(0.075), output: Some(0.3), ..Default::default() });
        let mut cost = Cost::default();
        for _ in 0..1000 {
            cost.add_call(prices.cost(&usage(100, 10, 0, 0)));
        }
        // 1000 × (100 × 0.075 + 10 × 0.3) / 10^6 USD = $0.0105 exactly.
        assert_eq!(cost.micros(), 10_500);
        cost.add_call(None);
        assert_eq!(cost.unpriced_calls, 1);
    }

    #[test]
    fn amounts_days_and_resets_render() {
        assert_eq!(format_usd(1_500_000), "$1.50");
        assert_eq!(format_usd(12_345), "$0.012345");
        assert_eq!(format_usd(0), "$0.00");
        assert_eq!(describe_cost(10, 0, 3), "$0.00001");
        assert_eq!(describe_cost(0, 3, 3), "cost unknown (no prices configured for the model)");
        assert_eq!(describe_cost(2_000_000, 1, 3), "$2.00 + 1 call at unknown prices");
        assert_eq!(usd_to_micros(2.5), 2_500_000);
        let at = 1_767_225_600_000 + 3_600_000; // 2026-01-01 01:00 UTC
        assert_eq!(utc_day(at), "2026-01-01");
        assert_eq!(utc_day_before(at, 1), "2025-12-31");
        assert_eq!(ms_to_midnight(at), 23 * 3_600_000);
    }
}
