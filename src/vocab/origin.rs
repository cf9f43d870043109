//! Who a turn is from: a person on a chat platform, a program through the API, the operator's
//! own terminal, a cron run, a webhook delivery, a watched Home Assistant change, or the `local`
//! inbox. Every event carries a platform name in its `ChatRef`; the names that are not chat
//! platforms are defined here and nowhere else, and every floor asks `Origin` what they mean
//! (trusted or checked, one-shot or conversational, whether a person stands behind it) instead
//! of keeping a list of names.
//!
//! `Origin::of` reads a chat's platform name; access, batching, the session lifecycle and memory
//! placement ask `authenticates_itself`, `fixed_admin`, `one_shot`, `read_by_people` and
//! `answered_alone`.

/// Where a turn comes from, read off its chat's platform name (`Origin::of`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A person on a chat platform (Telegram, Slack, e-mail, Home Assistant's requests, …):
    /// allowlists apply, and the conversation goes on across turns.
    Chat,
    /// A program through the OpenAI-compatible API: authenticated by its key, answered per
    /// request, and reads only answers.
    Api,
    /// The operator's own shell (`hermesd chat`): trusted, and the operator is its admin.
    Terminal,
    /// A cron run: one session per run; nobody stands behind it to answer questions.
    Cron,
    /// A signed webhook delivery: one session per delivery.
    Webhook,
    /// A change of a watched Home Assistant entity: one session per change.
    HassWatch,
    /// The `local` inbox: where output goes when it has nowhere else to go.
    Local,
}

impl Origin {
    /// The API's platform name.
    pub const API: &str = "api";
    /// The terminal channel's platform name.
    pub const TERMINAL: &str = "terminal";
    /// The platform name cron runs carry.
    pub const CRON: &str = "cron";
    /// The platform name webhook deliveries carry.
    pub const WEBHOOK: &str = "webhook";
    /// The platform name of watched Home Assistant changes (the Home Assistant crate emits them).
    pub const HASS_WATCH: &str = "homeassistant_watch";
    /// The `local` inbox's platform name.
    pub const LOCAL: &str = "local";

    /// Every origin but `Chat`, with its platform name.
    const NAMED: [(Origin, &str); 6] = [
        (Origin::Api, Self::API),
        (Origin::Terminal, Self::TERMINAL),
        (Origin::Cron, Self::CRON),
        (Origin::Webhook, Self::WEBHOOK),
        (Origin::HassWatch, Self::HASS_WATCH),
        (Origin::Local, Self::LOCAL),
    ];

    /// The origin of a turn on `platform` (a `ChatRef`'s platform name).
    pub fn of(platform: &str) -> Self {
        Self::NAMED.iter().find(|(_, name)| *name == platform).map_or(Origin::Chat, |(origin, _)| *origin)
    }

    /// Whether its sessions are one run or one delivery each, owned by nobody in particular:
    /// the session lifecycle (resets, flushes, titles) leaves them alone, and their memory and
    /// files are the chat's, not a person's.
    pub fn one_shot(self) -> bool {
        matches!(self, Origin::Cron | Origin::Webhook | Origin::HassWatch | Origin::Local)
    }

    /// Whether it proves who it is its own way (a key, a signature, the operator's own jobs and
    /// shell), so allowlists and pairing do not apply.
    pub fn authenticates_itself(self) -> bool {
        matches!(self, Origin::Api | Origin::Terminal | Origin::Cron | Origin::Webhook | Origin::HassWatch)
    }

    /// Who its admin is when that does not depend on an allowlist: `Some(true)` for the
    /// operator's terminal, `Some(false)` where nobody stands behind the turn; `None`: the
    /// admin lists decide.
    pub fn fixed_admin(self) -> Option<bool> {
        match self {
            Origin::Terminal => Some(true),
            Origin::Cron | Origin::Webhook | Origin::HassWatch => Some(false),
            Origin::Chat | Origin::Api | Origin::Local => None,
        }
    }

    /// Whether people read its chat, so a session reset is told there and sessions get
    /// titles (API clients read only answers; one-shot sessions are nobody's conversation).
    pub fn read_by_people(self) -> bool {
        !self.one_shot() && self != Origin::Api
    }

    /// Whether each of its events is a turn of its own, never merged with neighbours (each API
    /// request, run and delivery is answered alone).
    pub fn answered_alone(self) -> bool {
        self == Origin::Api || self.one_shot()
    }
}

#[cfg(test)]
mod tests {
    use super::Origin;

    #[test]
    fn every_name_reads_back_as_its_origin() {
        for (origin, name) in Origin::NAMED {
            assert_eq!(Origin::of(name), origin, "{name}");
        }
        for chat in ["telegram", "slack", "homeassistant", "email", ""] {
            assert_eq!(Origin::of(chat), Origin::Chat, "{chat}");
        }
    }

    #[test]
    fn what_each_origin_means() {
        let all = [
            Origin::Chat,
            Origin::Api,
            Origin::Terminal,
            Origin::Cron,
            Origin::Webhook,
            Origin::HassWatch,
            Origin::Local,
        ];
        let one_shot: Vec<Origin> = all.into_iter().filter(|o| o.one_shot()).collect();
        assert_eq!(one_shot, [Origin::Cron, Origin::Webhook, Origin::HassWatch, Origin::Local]);
        let checked: Vec<Origin> = all.into_iter().filter(|o| !o.authenticates_itself()).collect();
        assert_eq!(checked, [Origin::Chat, Origin::Local]);
        let read: Vec<Origin> = all.into_iter().filter(|o| o.read_by_people()).collect();
        assert_eq!(read, [Origin::Chat, Origin::Terminal]);
        let alone: Vec<Origin> = all.into_iter().filter(|o| o.answered_alone()).collect();
        assert_eq!(alone, [Origin::Api, Origin::Cron, Origin::Webhook, Origin::HassWatch, Origin::Local]);
    }
}
