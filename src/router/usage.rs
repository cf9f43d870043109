//! `/usage`: this session's context fill, tokens by kind, model calls and cost; the sender's
//! use today and over the last 30 days (UTC days); the chat's today in shared chats; and the
//! `[limits]` caps that bind them. Read-only: it never starts a session.

use hermesd_platform::{ChatType, InboundMessage};

use super::Router;
use crate::clock::now_ms;
use crate::delivery::turns::TurnOrigin;
use crate::store::UsageSum;
use crate::store::{SessionKey, UsageScope};
use crate::usage::account::summary_line;
use crate::usage::{Payer, describe_cost, utc_day, utc_day_before};

impl Router {
    pub(super) async fn usage(&self, key: &SessionKey, message: &InboundMessage) -> String {
        let mut lines = vec![self.session_usage(key).await];
        let accounting = self.inner.runner.accounting();
        let store = accounting.store();
        let profile = &self.inner.runner.agent(key).name;
        let payer = Payer::for_turn(message, &TurnOrigin::Chat).in_profile(profile);
        let now = now_ms();
        let (today, month_ago) = (utc_day(now), utc_day_before(now, 29));
        let sum = |scope: UsageScope, subject: &str, from: &str| {
            let (platform, subject, from, to) =
                (payer.platform.clone(), subject.to_owned(), from.to_owned(), today.clone());
            let profile = payer.profile.clone();
            async move { store.usage_between(scope, &platform, &profile, &subject, &from, &to).await }
        };
        let (user_today, user_month, chat_today) = match (
            sum(UsageScope::User, &payer.user, &today).await,
            sum(UsageScope::User, &payer.user, &month_ago).await,
            sum(UsageScope::Chat, &payer.chat, &today).await,
        ) {
            (Ok(a), Ok(b), Ok(c)) => (a, b, c),
            (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => {
                lines.push(format!("your daily usage is unknown ({e})"));
                return lines.join("\n");
            }
        };
        lines.push(format!("you today (UTC): {}", summary_line(&user_today)));
        lines.push(format!("you, last 30 days: {}", summary_line(&user_month)));
        if message.chat.chat_type != ChatType::Dm {
            lines.push(format!("this chat today: {}", summary_line(&chat_today)));
        }
        if let Some(caps) = accounting.caps_line(&payer, &user_today, &chat_today) {
            lines.push(caps);
        }
        lines.join("\n")
    }

    /// The session's lines: context fill at the last call, then tokens by kind, calls and cost.
    async fn session_usage(&self, key: &SessionKey) -> String {
        let store = self.inner.runner.store();
        let session = match store.route(&key.key).await {
            Ok(Some(s)) => store.session(&s.id).await,
            other => other,
        };
        let s = match session {
            Ok(Some(s)) => s,
            Ok(None) => return "No session yet in this chat: nothing used.".to_owned(),
            Err(e) => return format!("Could not read the session: {e}"),
        };
        let window = self.inner.runner.context_length(key, s.model.as_deref());
        let percent = s.last_prompt_tokens as f64 * 100.0 / window.max(1) as f64;
        let context = format!(
            "context: {} of {} tokens ({percent:.1}%) at the last model call · {} messages in the session",
            s.last_prompt_tokens, window, s.message_count
        );
        let totals = match store.session_usage(&s.id).await {
            Ok(t) => t,
            Err(e) => return format!("{context}\nthis session's token totals are unknown ({e})"),
        };
        let cost = match store.session_cost(&s.id).await {
            Ok((micros, unpriced)) => describe_cost(micros, unpriced, totals.calls),
            Err(e) => format!("cost unknown ({e})"),
        };
        let session = UsageSum { tokens: totals, ..UsageSum::default() };
        format!(
            "{context}\nthis session: {} prompt ({} read from the cache, {} written to it) · {} completion · \
             {} model calls · {} tokens in all · {cost}",
            totals.prompt,
            totals.cache_read,
            totals.cache_write,
            totals.completion,
            totals.calls,
            session.total_tokens()
        )
    }
}
