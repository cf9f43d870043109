//! The usage page: tokens and cost of the last 30 days, per day as bar charts drawn here in SVG
//! (no script, nothing fetched), and per platform and per profile as tables; and `/api/usage`
//! with the same rows. The store keeps usage per day, platform, profile, person and chat (not
//! per model).

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::super::AppState;
use super::html::{escape, page};
use super::pages::{api_reader, reader};
use crate::store::{UsageDay, UsageSum};

/// Days shown.
const DAYS: i64 = 30;

pub(super) fn span() -> (String, String) {
    let today = chrono::Utc::now().date_naive();
    let from = today - chrono::Duration::days(DAYS - 1);
    (from.format("%Y-%m-%d").to_string(), today.format("%Y-%m-%d").to_string())
}

fn add(into: &mut UsageSum, sum: &UsageSum) {
    into.turns += sum.turns;
    into.tokens.calls += sum.tokens.calls;
    into.tokens.prompt += sum.tokens.prompt;
    into.tokens.completion += sum.tokens.completion;
    into.cost_micros += sum.cost_micros;
    into.unpriced_calls += sum.unpriced_calls;
}

pub(super) fn dollars(micros: i64) -> String {
    format!("${:.4}", micros as f64 / 1_000_000.0)
}

/// A bar chart of `values` (one per day, oldest first) as inline SVG, labelled for screen readers.
fn bars(title: &str, days: &[String], values: &[f64], label: &dyn Fn(f64) -> String) -> String {
    let (width, height, gap) = (600.0_f64, 120.0_f64, 2.0_f64);
    let max = values.iter().copied().fold(0.0_f64, f64::max).max(1e-9);
    let step = width / values.len().max(1) as f64;
    let rects: String = values
        .iter()
        .zip(days)
        .enumerate()
        .map(|(i, (value, day))| {
            let h = (value / max * (height - 14.0)).max(if *value > 0.0 { 1.0 } else { 0.0 });
            format!(
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"currentColor\"><title>{}: {}</title></rect>",
                i as f64 * step,
                height - h,
                (step - gap).max(1.0),
                h,
                escape(day),
                escape(&label(*value))
            )
        })
        .collect();
    format!(
        "<figure><figcaption>{} (highest day {})</figcaption><svg role=\"img\" aria-label=\"{}\" viewBox=\"0 0 {width} {height}\" \
         width=\"100%\" preserveAspectRatio=\"none\" class=\"chart\">{rects}</svg></figure>",
        escape(title),
        escape(&label(max)),
        escape(title)
    )
}

/// A breakdown: one row per name with its turns (or, per model, its calls: a turn may use
/// several models), tokens drawn as a bar against the largest, cost and unpriced calls.
fn table(title: &str, rows: &BTreeMap<String, UsageSum>, count_calls: bool) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let most = rows.values().map(UsageSum::total_tokens).max().unwrap_or(0).max(1);
    let body: String = rows
        .iter()
        .map(|(name, sum)| {
            let width = sum.total_tokens() as f64 * 100.0 / most as f64;
            format!(
                "<tr><th scope=\"row\">{}</th><td>{}</td><td>{} <svg class=\"bar\" viewBox=\"0 0 100 6\" \
                 preserveAspectRatio=\"none\" aria-hidden=\"true\"><rect width=\"{width:.1}\" height=\"6\" fill=\"currentColor\"/></svg></td>\
                 <td>{}</td><td>{}</td></tr>",
                escape(name),
                if count_calls { sum.tokens.calls } else { sum.turns },
                sum.total_tokens(),
                dollars(sum.cost_micros),
                sum.unpriced_calls
            )
        })
        .collect();
    format!(
        "<h2>{}</h2><table><thead><tr><th></th><th>{}</th><th>Tokens</th><th>Cost</th><th>Unpriced calls</th></tr></thead><tbody>{body}</tbody></table>",
        escape(title),
        if count_calls { "Calls" } else { "Turns" }
    )
}

/// `GET /ui/usage`.
pub(super) async fn usage(State(state): State<AppState>, headers: HeaderMap) -> Response {
    let session = match reader(&state, &headers) {
        Ok(session) => session,
        Err(login) => return *login,
    };
    let (from, to) = span();
    let rows: Vec<UsageDay> = match state.store.usage_by_day(&from, &to).await {
        Ok(rows) => rows,
        Err(e) => return super::html::failed(&session.csrf, "Usage", e),
    };
    let start = chrono::NaiveDate::parse_from_str(&from, "%Y-%m-%d").unwrap_or_default();
    let days: Vec<String> =
        (0..DAYS).map(|i| (start + chrono::Duration::days(i)).format("%Y-%m-%d").to_string()).collect();
    let mut by_day: BTreeMap<&str, UsageSum> = BTreeMap::new();
    let (mut by_platform, mut by_profile) = (BTreeMap::new(), BTreeMap::new());
    let mut total = UsageSum::default();
    for row in &rows {
        add(by_day.entry(row.day.as_str()).or_default(), &row.sum);
        add(by_platform.entry(row.platform.clone()).or_default(), &row.sum);
        add(by_profile.entry(row.profile.clone()).or_default(), &row.sum);
        add(&mut total, &row.sum);
    }
    let per_day = |f: &dyn Fn(&UsageSum) -> f64| -> Vec<f64> {
        days.iter().map(|d| by_day.get(d.as_str()).map_or(0.0, f)).collect()
    };
    let tokens = per_day(&|s| s.total_tokens() as f64);
    let cost = per_day(&|s| s.cost_micros as f64);
    let mut body = format!(
        "<p>{from} to {to}: {} turns, {} tokens, {} ({} calls at unknown prices).</p>",
        total.turns,
        total.total_tokens(),
        dollars(total.cost_micros),
        total.unpriced_calls
    );
    body.push_str(&bars("Tokens per day", &days, &tokens, &|v| format!("{v:.0} tokens")));
    body.push_str(&bars("Cost per day", &days, &cost, &|v| dollars(v as i64)));
    body.push_str(&table("Per platform", &by_platform, false));
    body.push_str(&table("Per profile", &by_profile, false));
    match state.store.usage_by_model(&from, &to).await {
        Ok(models) => {
            let mut by_model = BTreeMap::new();
            for row in &models {
                add(by_model.entry(row.model.clone()).or_default(), &row.sum);
            }
            body.push_str(&table("Per model", &by_model, true));
        }
        Err(e) => body.push_str(&format!("<p class=\"bad\">{}</p>", escape(&e.to_string()))),
    }
    page(StatusCode::OK, "Usage", Some(&session.csrf), &body)
}

/// `GET /api/usage`: the last 30 days by day, platform and profile, and by day and model.
pub(super) async fn api_usage(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = api_reader(&state, &headers) {
        return *refused;
    }
    let (from, to) = span();
    let models = match state.store.usage_by_model(&from, &to).await {
        Ok(models) => models,
        Err(e) => return super::json::unavailable(e),
    };
    let models: Vec<_> = models
        .iter()
        .map(|m| {
            json!({ "day": m.day, "model": m.model, "calls": m.sum.tokens.calls,
                    "prompt_tokens": m.sum.tokens.prompt, "completion_tokens": m.sum.tokens.completion,
                    "cost_micros": m.sum.cost_micros, "unpriced_calls": m.sum.unpriced_calls })
        })
        .collect();
    match state.store.usage_by_day(&from, &to).await {
        Ok(rows) => {
            let rows: Vec<_> = rows
                .iter()
                .map(|r| {
                    json!({ "day": r.day, "platform": r.platform, "profile": r.profile, "turns": r.sum.turns,
                            "prompt_tokens": r.sum.tokens.prompt, "completion_tokens": r.sum.tokens.completion,
                            "cost_micros": r.sum.cost_micros, "unpriced_calls": r.sum.unpriced_calls })
                })
                .collect();
            Json(json!({ "from": from, "to": to, "days": rows, "models": models })).into_response()
        }
        Err(e) => super::json::unavailable(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_one_bar_per_day_scaled_to_the_highest() {
        let days: Vec<String> = ["d1", "d2", "d3"].iter().map(|s| (*s).to_owned()).collect();
        let svg = bars("Tokens", &days, &[0.0, 50.0, 100.0], &|v| format!("{v:.0}"));
        assert_eq!(svg.matches("<rect").count(), 3);
        assert!(svg.contains("<title>d3: 100</title>") && svg.contains("height=\"106.0\""), "{svg}");
        assert!(svg.contains("height=\"0.0\""), "an empty day has no bar: {svg}");
    }
}
