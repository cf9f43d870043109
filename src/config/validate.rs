//! The pure validation phase: every problem in a config, collected, nothing read or opened.
//!
//! `hermesd check` prints these and exits 78; `hermesd run` refuses to start on any of them.

use std::net::SocketAddr;

use super::{Config, Env, ModelConfig, ResetMode};

impl Config {
    /// List every problem, checking the secrets this config needs against `env`. Empty: valid.
    pub fn validate(&self, env: &Env) -> Vec<String> {
        self.validate_with(env, &[])
    }

    /// `validate`, with `extra` platforms (the terminal of `hermesd chat`, or an embedder's own)
    /// counted as running for delivery targets.
    pub fn validate_with(&self, env: &Env, extra: &[&str]) -> Vec<String> {
        let mut problems = Vec::new();
        let listen = self.http.listen.parse::<SocketAddr>();
        match &listen {
            Err(_) => problems
                .push(format!("http.listen: {:?} is not an address:port such as \"127.0.0.1:8642\"", self.http.listen)),
            Ok(addr) if self.platforms.api.enabled && !addr.ip().is_loopback() => match env.secret("API_SERVER_KEY") {
                Ok(Some(_)) => {}
                Ok(None) => problems.push(format!(
                    "platforms.api: http.listen {addr} is not a loopback address and API_SERVER_KEY is not set; \
                         set a key or listen on 127.0.0.1"
                )),
                Err(e) => problems.push(format!("platforms.api: {e}")),
            },
            Ok(_) => {}
        }
        if self.http.max_body_bytes < 1024 {
            problems.push("http.max_body_bytes: must be at least 1024".into());
        }
        super::http::check_http(self, &mut problems);
        check_skills(&self.skills, &mut problems);
        let check = |at: &str, model: &ModelConfig, problems: &mut Vec<String>| check_model(at, model, env, problems);
        if let Some(model) = &self.model {
            check_chain("model", model, &check, &mut problems);
        }
        super::auxiliary::check_auxiliary(&self.auxiliary, env, check, &mut problems);
        super::profiles::check_profiles(self, &check, &mut problems);
        let priced = self.model_chain().iter().any(|m| m.input_per_mtok.is_some() || m.output_per_mtok.is_some());
        super::limits::check_limits(&self.limits, priced, &mut problems);
        let agent = &self.agent;
        if agent.max_iterations == 0 {
            problems.push("agent.max_iterations: must be at least 1".into());
        }
        if agent.max_concurrent_turns == 0 || agent.max_concurrent_turns > 4096 {
            problems.push("agent.max_concurrent_turns: must be between 1 and 4096".into());
        }
        if agent.max_parked_turns == 0 || agent.max_parked_turns > 4096 {
            problems.push("agent.max_parked_turns: must be between 1 and 4096".into());
        }
        if agent.max_queued_per_session == 0 {
            problems.push("agent.max_queued_per_session: must be at least 1".into());
        }
        if agent.heartbeat_interval.get().as_secs() < 1 {
            problems.push("agent.heartbeat_interval: must be at least 1s".into());
        }
        if agent.retry_attempts == 0 || agent.retry_attempts > 10 {
            problems.push("agent.retry_attempts: must be between 1 and 10".into());
        }
        if agent.model_deadline.get().as_secs() < 1 {
            problems.push("agent.model_deadline: must be at least 1s".into());
        }
        if agent.batch_window.get() > std::time::Duration::from_secs(10) {
            problems.push("agent.batch_window: must be at most 10s".into());
        }
        if agent.inactivity_timeout.get().as_secs() < 1 {
            problems.push("agent.inactivity_timeout: must be at least 1s".into());
        }
        let toolsets = std::iter::once(("tools.toolsets".to_owned(), &self.tools.toolsets))
            .chain(self.tools.platforms.iter().map(|(p, sets)| (format!("tools.platforms.{p}"), sets)));
        for (at, sets) in toolsets {
            for set in sets {
                if !super::is_known_toolset(set) {
                    problems.push(format!("{at}: unknown toolset {set:?} (known: {})", super::ALL_TOOLSETS.join(", ")));
                }
            }
        }
        let threshold = self.compression.threshold;
        if !(0.1..=0.99).contains(&threshold) {
            problems.push(format!("compression.threshold: {threshold} is not between 0.1 and 0.99"));
        }
        check_platforms(self, env, extra, &mut problems);
        check_webhooks(self, env, extra, &mut problems);
        super::routes::check_routes(self, extra, &mut problems);
        problems.extend(self.mcp.problems());
        if self.cron.tick.get().as_millis() < 1000 {
            problems.push("cron.tick: must be at least 1s".into());
        }
        if self.cron.timezone.parse::<chrono_tz::Tz>().is_err() {
            problems.push(format!(
                "cron.timezone: {:?} is not an IANA time zone such as \"UTC\" or \"Europe/Berlin\"",
                self.cron.timezone
            ));
        }
        if let Err(e) = self.check_target_with(&self.cron.default_deliver, true, extra) {
            problems.push(format!("cron.default_deliver: {e}"));
        }
        let sessions = &self.sessions;
        if sessions.at_hour > 23 || sessions.overrides.iter().any(|o| o.at_hour.is_some_and(|h| h > 23)) {
            problems.push("sessions.at_hour: must be between 0 and 23".into());
        }
        let idle_needed = |mode| matches!(mode, ResetMode::Idle | ResetMode::Both);
        if idle_needed(sessions.reset) && sessions.idle_minutes == 0 {
            problems.push("sessions.idle_minutes: must be at least 1 with an idle reset".into());
        }
        if sessions.sweep_interval.get() < std::time::Duration::from_secs(1) {
            problems.push("sessions.sweep_interval: must be at least 1s".into());
        }
        if self.store.readers == 0 {
            problems.push("store.readers: must be at least 1".into());
        }
        if self.recovery.max_attempts == 0 {
            problems.push("recovery.max_attempts: must be at least 1".into());
        }
        problems.extend(self.tools.web_search.problems(env));
        problems
    }
}

/// A model table at `at` and its fallbacks, which may not have fallbacks of their own.
pub(super) fn check_chain(
    at: &str,
    model: &ModelConfig,
    check: &dyn Fn(&str, &ModelConfig, &mut Vec<String>),
    problems: &mut Vec<String>,
) {
    check(at, model, problems);
    for (i, fallback) in model.fallback.iter().enumerate() {
        let at = format!("{at}.fallback[{i}]");
        if !fallback.fallback.is_empty() {
            problems.push(format!("{at}: a fallback cannot have fallbacks of its own"));
        }
        check(&at, fallback, problems);
    }
}

fn check_model(at: &str, model: &ModelConfig, env: &Env, problems: &mut Vec<String>) {
    if !(model.base_url.starts_with("http://") || model.base_url.starts_with("https://")) {
        problems.push(format!("{at}.base_url: {:?} is not an http(s) URL", model.base_url));
    }
    if model.name.trim().is_empty() {
        problems.push(format!("{at}.name: must not be empty"));
    }
    if model.context_length < 1024 {
        problems.push(format!("{at}.context_length: {} is too small (at least 1024)", model.context_length));
    }
    super::limits::check_prices(at, &model.prices(), problems);
    if let Some(var) = &model.api_key_env {
        match env.secret(var) {
            Ok(Some(_)) => {}
            Ok(None) => problems.push(format!("{at}.api_key_env: the variable {var} is not set")),
            Err(e) => problems.push(format!("{at}.api_key_env: {e}")),
        }
    }
}

/// Every registered platform's table checks itself (and each of its accounts); a platform this
/// build has no adapter for must not be enabled.
fn check_platforms(config: &Config, env: &Env, extra: &[&str], problems: &mut Vec<String>) {
    for (name, enabled) in config.platforms.not_built() {
        if enabled {
            problems.push(format!(
                "platforms.{name}.enabled: this build of hermesd has no {name} adapter; set enabled = false"
            ));
        }
    }
    let targets = |target: &str| config.check_target_with(target, false, extra);
    for section in config.platforms.sections() {
        let at = format!("platforms.{}", section.name());
        problems.extend(section.problems(&at, env, &targets));
        for instance in section.instances(env).unwrap_or_default().iter().filter(|i| i.section.enabled()) {
            let Some(profile) = instance.section.profile() else { continue };
            if config.profile_names().contains(&profile) {
                continue;
            }
            let key = match &instance.account {
                Some(account) if section.accounts().get(account).is_some_and(|keys| keys.contains_key("profile")) => {
                    format!("{at}.accounts.{account}.profile")
                }
                _ => format!("{at}.profile"),
            };
            let problem = format!("{key}: no profile {profile:?} (profiles: {})", config.profile_names().join(", "));
            if !problems.contains(&problem) {
                problems.push(problem);
            }
        }
    }
}

fn check_webhooks(config: &Config, env: &Env, extra: &[&str], problems: &mut Vec<String>) {
    let mut seen = std::collections::HashSet::new();
    for (i, hook) in config.webhooks.iter().enumerate() {
        let at = format!("webhooks[{i}]");
        let valid_name = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
        if hook.route.is_empty() || !hook.route.chars().all(valid_name) {
            problems.push(format!("{at}.route: {:?} must be letters, digits, '-' or '_'", hook.route));
        } else if !seen.insert(hook.route.as_str()) {
            problems.push(format!("{at}.route: {:?} is defined twice", hook.route));
        }
        match env.secret(&hook.secret_env) {
            Ok(Some(secret)) if secret.expose().len() >= 8 => {}
            Ok(Some(_)) => {
                problems.push(format!("{at}.secret_env: the secret in {} is shorter than 8 bytes", hook.secret_env))
            }
            Ok(None) => problems.push(format!("{at}.secret_env: the variable {} is not set", hook.secret_env)),
            Err(e) => problems.push(format!("{at}.secret_env: {e}")),
        }
        if hook.prompt.trim().is_empty() {
            problems.push(format!("{at}.prompt: must not be empty"));
        }
        if let Some(profile) = hook.profile.as_deref().filter(|p| !config.profile_names().contains(p)) {
            let names = config.profile_names().join(", ");
            problems.push(format!("{at}.profile: no profile {profile:?} (profiles: {names})"));
        }
        if let Err(e) = config.check_target_with(&hook.deliver, false, extra) {
            problems.push(format!("{at}.deliver: {e}"));
        }
        if hook.rate_limit_per_minute == 0 {
            problems.push(format!("{at}.rate_limit_per_minute: must be at least 1"));
        }
        if hook.max_body_bytes < 1024 || hook.max_body_bytes > config.http.max_body_bytes {
            problems.push(format!(
                "{at}.max_body_bytes: must be between 1024 and http.max_body_bytes ({})",
                config.http.max_body_bytes
            ));
        }
    }
}

impl Config {
    /// Check a delivery target's form and that its platform is enabled; `origin` only where the
    /// sender has an originating chat.
    pub fn check_target(&self, text: &str, origin_allowed: bool) -> Result<(), String> {
        self.check_target_with(text, origin_allowed, &[])
    }

    /// `check_target`, with `extra` platforms counted as running.
    pub fn check_target_with(&self, text: &str, origin_allowed: bool, extra: &[&str]) -> Result<(), String> {
        let target = crate::vocab::target::Target::parse(text).map_err(|e| e.to_string())?;
        let platform = match &target {
            crate::vocab::target::Target::Origin if origin_allowed => return Ok(()),
            crate::vocab::target::Target::Origin => return Err("origin: there is no originating chat here".into()),
            crate::vocab::target::Target::Local => return Ok(()),
            crate::vocab::target::Target::Home(p) | crate::vocab::target::Target::Chat { platform: p, .. } => {
                p.as_str()
            }
        };
        let enabled = self.platforms.enabled(platform) || extra.contains(&platform);
        if enabled { Ok(()) } else { Err(format!("{text}: platform {platform:?} is not enabled in this config")) }
    }
}

/// `[skills]`: caps in a sane range and names that a skill folder could have.
fn check_skills(skills: &super::SkillsConfig, problems: &mut Vec<String>) {
    let ranges = [
        ("skills.index_chars", skills.index_chars, 200, 100_000),
        ("skills.max_skill_bytes", skills.max_skill_bytes, 1024, 16 * 1024 * 1024),
        ("skills.max_file_bytes", skills.max_file_bytes, 1024, 64 * 1024 * 1024),
    ];
    for (key, value, low, high) in ranges {
        if !(low..=high).contains(&value) {
            problems.push(format!("{key}: {value} is outside {low}..={high}"));
        }
    }
    let named = skills.disabled.iter().map(|name| ("skills.disabled".to_owned(), name));
    let per_platform = skills.platform_disabled.iter().flat_map(|(platform, names)| {
        names.iter().map(move |name| (format!("skills.platform_disabled.{platform}"), name))
    });
    for (key, name) in named.chain(per_platform) {
        let shape = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if name.is_empty() || name.chars().count() > 64 || !shape {
            problems.push(format!("{key}: {name:?} is not a skill name (lowercase letters, digits and hyphens)"));
        }
    }
}

#[cfg(test)]
mod tests;
