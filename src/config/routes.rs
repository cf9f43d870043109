//! `[[routes]]`: bind chats of a shared bot to a profile, and override per channel. A route
//! matches on the adapter (`platform`, `account`), the chat (`chat`, `guild` for a Discord guild
//! or Slack team, `thread`) and the sender (`user`); every matcher it sets must hold. It sets
//! the `profile`, the `model` a session starts on, a `system_prompt` appended to the persona, the
//! `toolsets` (narrowing only) and `require_mention`. The first route that matches wins.

use hermesd_platform::ChatRef;
use serde::{Deserialize, Serialize};

use super::Config;

/// Adapters that are not `[platforms.*]` tables.
const BUILT_IN: &[&str] = &["api", "cron", "webhook", "terminal"];

/// One `[[routes]]` entry.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RouteConfig {
    /// The platform (`discord`: every account of it) or one adapter (`discord@work`).
    pub platform: Option<String>,
    /// The platform's account (`work`); with `platform`.
    pub account: Option<String>,
    /// The chat or channel id.
    pub chat: Option<String>,
    /// The Discord guild or Slack team id.
    pub guild: Option<String>,
    /// The thread id.
    pub thread: Option<String>,
    /// The sender's id.
    pub user: Option<String>,
    /// The profile the chat's sessions belong to.
    pub profile: Option<String>,
    /// The model (of the profile's chain) its sessions start on.
    pub model: Option<String>,
    /// Text appended to the persona in its sessions' system prompt.
    pub system_prompt: Option<String>,
    /// The toolsets its turns may use (narrows the platform's and the profile's).
    pub toolsets: Option<Vec<String>>,
    /// `true`: answer only messages that address the bot (mention, reply, DM). A platform that
    /// already drops unaddressed messages keeps doing so whatever a route says.
    pub require_mention: Option<bool>,
}

impl RouteConfig {
    /// Whether this route matches a message in `chat` from `user`.
    pub fn matches(&self, chat: &ChatRef, user: &str) -> bool {
        let (platform, account) = match chat.platform.split_once('@') {
            Some((platform, account)) => (platform, Some(account)),
            None => (chat.platform.as_str(), None),
        };
        let platform_ok = self.platform.as_deref().is_none_or(|p| match p.split_once('@') {
            Some(_) => p == chat.platform,
            None => p == platform,
        });
        platform_ok
            && self.account.as_deref().is_none_or(|a| Some(a) == account)
            && self.chat.as_deref().is_none_or(|c| c == chat.chat_id)
            && self.guild.as_deref().is_none_or(|g| Some(g) == chat.guild.as_deref())
            && self.thread.as_deref().is_none_or(|t| Some(t) == chat.thread_id.as_deref())
            && self.user.as_deref().is_none_or(|u| u == user)
    }

    /// Whether every message this route matches is matched by `earlier` too (so, after it, this
    /// route never wins).
    fn shadowed_by(&self, earlier: &RouteConfig) -> bool {
        let covers = |general: &Option<String>, specific: &Option<String>| general.is_none() || general == specific;
        let (mine, theirs) = (self.adapter(), earlier.adapter());
        let adapter = match (&theirs.0, &mine.0) {
            (None, _) => true,
            (Some(t), Some(m)) => t == m && (theirs.1.is_none() || theirs.1 == mine.1),
            (Some(_), None) => false,
        };
        adapter
            && covers(&earlier.chat, &self.chat)
            && covers(&earlier.guild, &self.guild)
            && covers(&earlier.thread, &self.thread)
            && covers(&earlier.user, &self.user)
    }

    /// The platform and account it names, `discord@work` and `account` read alike.
    fn adapter(&self) -> (Option<String>, Option<String>) {
        let (platform, account) = match self.platform.as_deref().map(|p| p.split_once('@')) {
            Some(Some((p, a))) => (Some(p.to_owned()), Some(a.to_owned())),
            Some(None) => (self.platform.clone(), None),
            None => (None, None),
        };
        (platform, account.or_else(|| self.account.clone()))
    }

    /// Whether it sets anything.
    fn sets_something(&self) -> bool {
        self.profile.is_some()
            || self.model.is_some()
            || self.system_prompt.is_some()
            || self.toolsets.is_some()
            || self.require_mention.is_some()
    }
}

impl Config {
    /// The first route matching a message in `chat` from `user`, with its index.
    pub fn route_for(&self, chat: &ChatRef, user: &str) -> Option<(usize, &RouteConfig)> {
        self.routes.iter().enumerate().find(|(_, route)| route.matches(chat, user))
    }
}

/// Every problem of `[[routes]]`: what they name must exist, and a route that an earlier one
/// always wins over, or whose adapter does not run, can never match.
pub(super) fn check_routes(config: &Config, extra: &[&str], problems: &mut Vec<String>) {
    let profiles = config.profile_names();
    // Only the profile's models are read, never its folders.
    let nowhere = super::Paths { home: std::path::PathBuf::new(), config: std::path::PathBuf::new() };
    for (i, route) in config.routes.iter().enumerate() {
        let at = format!("routes[{i}]");
        if !route.sets_something() {
            problems
                .push(format!("{at}: sets nothing (set profile, model, system_prompt, toolsets or require_mention)"));
        }
        if route.account.is_some() && route.platform.is_none() {
            problems.push(format!("{at}.account: needs platform"));
        }
        if let (Some(platform), Some(_)) = (&route.platform, &route.account)
            && platform.contains('@')
        {
            problems.push(format!("{at}.account: {platform:?} already names an account"));
        }
        let (platform, account) = route.adapter();
        if let Some(platform) = &platform {
            let adapter = match &account {
                Some(account) => format!("{platform}@{account}"),
                None => platform.clone(),
            };
            let runs = config.platforms.enabled(&adapter)
                || extra.contains(&adapter.as_str())
                || (BUILT_IN.contains(&adapter.as_str()) && (adapter != "api" || config.platforms.api.enabled));
            if !runs {
                problems.push(format!("{at}: can never match: {adapter:?} is not enabled in this config"));
            }
        }
        if let Some(j) = config.routes[..i].iter().position(|earlier| route.shadowed_by(earlier)) {
            problems.push(format!("{at}: can never match: routes[{j}] before it matches every message it does"));
        }
        let profile = route.profile.as_deref().unwrap_or(super::DEFAULT_PROFILE);
        if !profiles.contains(&profile) {
            problems.push(format!("{at}.profile: no profile {profile:?} (profiles: {})", profiles.join(", ")));
        } else if let Some(model) = &route.model
            && let Some(resolved) = config.profile(profile, &nowhere)
            && !resolved.models.iter().any(|m| &m.name == model)
        {
            let names: Vec<&str> = resolved.models.iter().map(|m| m.name.as_str()).collect();
            let has = match names.is_empty() {
                true => "it has no model configured".to_owned(),
                false => format!("its models: {}", names.join(", ")),
            };
            problems.push(format!("{at}.model: {model:?} is not a model of profile {profile:?} ({has})"));
        }
        for set in route.toolsets.iter().flatten() {
            if !super::is_known_toolset(set) {
                problems.push(format!(
                    "{at}.toolsets: unknown toolset {set:?} (known: {})",
                    super::ALL_TOOLSETS.join(", ")
                ));
            }
        }
        if route.system_prompt.as_deref().is_some_and(|p| p.trim().is_empty()) {
            problems.push(format!("{at}.system_prompt: must not be empty"));
        }
    }
}

#[cfg(test)]
mod tests {
    use hermesd_platform::ChatType;

    use super::*;

    fn chat(platform: &str, id: &str, guild: Option<&str>) -> ChatRef {
        ChatRef { guild: guild.map(str::to_owned), ..ChatRef::new(platform, id, ChatType::Group) }
    }

    fn route(toml_text: &str) -> RouteConfig {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn every_matcher_set_must_hold() {
        let guild = route("platform = \"discord\"\nguild = \"G1\"\nprofile = \"work\"");
        assert!(guild.matches(&chat("discord", "c1", Some("G1")), "u"));
        assert!(guild.matches(&chat("discord@other", "c1", Some("G1")), "u"), "every account of the platform");
        assert!(!guild.matches(&chat("discord", "c1", Some("G2")), "u"));
        assert!(!guild.matches(&chat("discord", "c1", None), "u"));
        assert!(!guild.matches(&chat("slack", "c1", Some("G1")), "u"));
        let account = route("platform = \"telegram\"\naccount = \"work\"\nuser = \"7\"\nmodel = \"m\"");
        assert!(account.matches(&chat("telegram@work", "1", None), "7"));
        assert!(!account.matches(&chat("telegram", "1", None), "7"));
        assert!(!account.matches(&chat("telegram@work", "1", None), "8"));
        let adapter = route("platform = \"telegram@work\"\nrequire_mention = true");
        assert!(adapter.matches(&chat("telegram@work", "1", None), "7"));
        assert!(!adapter.matches(&chat("telegram", "1", None), "7"));
    }

    #[test]
    fn check_names_routes_that_can_never_match_and_what_does_not_exist() {
        let text = r#"
[platforms.discord]
enabled = true

[profiles.work]

[[routes]]
platform = "discord"
profile = "work"

[[routes]]
platform = "discord"
guild = "G1"
model = "fake"

[[routes]]
platform = "slack"
profile = "work"

[[routes]]
platform = "discord@nobody"
profile = "wrok"
toolsets = ["webz"]

[[routes]]
user = "1"

[[routes]]
account = "x"
system_prompt = " "
"#;
        let config = Config::parse(text).unwrap();
        let mut problems = Vec::new();
        check_routes(&config, &[], &mut problems);
        let expected: [&str; 10] = [
            "routes[1]: can never match: routes[0] before it matches every message it does",
            "routes[1].model: \"fake\" is not a model of profile \"default\" (it has no model configured)",
            "routes[2]: can never match: \"slack\" is not enabled in this config",
            "routes[3]: can never match: \"discord@nobody\" is not enabled in this config",
            "routes[3]: can never match: routes[0] before it matches every message it does",
            "routes[3].profile: no profile \"wrok\" (profiles: default, work)",
            &format!("routes[3].toolsets: unknown toolset \"webz\" (known: {})", super::super::ALL_TOOLSETS.join(", ")),
            "routes[4]: sets nothing (set profile, model, system_prompt, toolsets or require_mention)",
            "routes[5].account: needs platform",
            "routes[5].system_prompt: must not be empty",
        ];
        assert_eq!(problems, expected);
        let api = Config::parse("[[routes]]\nplatform = \"api\"\nuser = \"ann\"\nprofile = \"default\"\n").unwrap();
        let mut none = Vec::new();
        check_routes(&api, &[], &mut none);
        assert!(none.is_empty(), "{none:?}");
    }
}
