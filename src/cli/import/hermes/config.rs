//! Hermes' `config.yaml` and `.env` mapped to hermesd's `config.toml`: the model chain, the
//! platforms Hermes' `.env` enables and their settings, toolsets, MCP servers, sessions, cron's
//! time zone and routes. Every key read is marked (`Tree`); what is left is listed with a reason,
//! never fatal.

use std::collections::BTreeMap;

use serde_json::Value;
use toml::{Table, Value as Toml};

use super::super::Note;
use super::super::yaml::{Tree, boolean, list, text};
use super::mcp::mcp;
use super::model::model_chain;

/// Top-level keys Hermes 0.19 knows (its defaults and the optional roots it accepts); any other
/// is reported as unknown to this importer (a newer Hermes may have added it).
const HERMES_KEYS: &[&str] = &[
    "model",
    "providers",
    "fallback_providers",
    "credential_pool_strategies",
    "toolsets",
    "max_concurrent_sessions",
    "max_live_sessions",
    "agent",
    "terminal",
    "web",
    "browser",
    "checkpoints",
    "context_file_max_chars",
    "file_read_max_chars",
    "mcp_discovery_timeout",
    "mcp",
    "tool_output",
    "tool_loop_guardrails",
    "compression",
    "kanban",
    "prompt_caching",
    "openrouter",
    "bedrock",
    "auxiliary",
    "display",
    "dashboard",
    "privacy",
    "tts",
    "stt",
    "voice",
    "human_delay",
    "context",
    "memory",
    "delegation",
    "prefill_messages_file",
    "goals",
    "moa",
    "skills",
    "curator",
    "honcho",
    "timezone",
    "slack",
    "discord",
    "whatsapp",
    "telegram",
    "mattermost",
    "matrix",
    "approvals",
    "command_allowlist",
    "quick_commands",
    "platform_hints",
    "hooks",
    "hooks_auto_accept",
    "personalities",
    "security",
    "cron",
    "code_execution",
    "tools",
    "logging",
    "model_catalog",
    "network",
    "gateway",
    "streaming",
    "sessions",
    "onboarding",
    "updates",
    "lsp",
    "x_search",
    "secrets",
    "paste_collapse_threshold",
    "paste_collapse_threshold_fallback",
    "paste_collapse_char_threshold",
    "computer_use",
    "desktop",
    "vertex",
    "_config_version",
    "custom_providers",
    "fallback_model",
    "mcp_servers",
    "image_gen",
    "video_gen",
    "plugins",
    "smart_model_routing",
    "platform_toolsets",
    "known_plugin_toolsets",
    "session_reset",
    "group_sessions_per_user",
    "thread_sessions_per_user",
    "stt_echo_transcripts",
    "reset_triggers",
    "always_log_local",
    "filter_silence_narration",
    "multiplex_profiles",
    "profile_routes",
    "platforms",
    "require_mention",
    "unauthorized_dm_behavior",
    "signal",
];

/// Why a Hermes setting has no hermesd counterpart, by top-level key (others: a generic reason).
fn reason(key: &str) -> &'static str {
    match key {
        "terminal" => "hermesd runs commands in its own sandbox (no docker, ssh or modal backends)",
        "browser" | "computer_use" | "desktop" => "hermesd has no browser or desktop tools",
        "tts" | "voice" => "hermesd does not speak replies yet",
        "stt" => "hermesd transcribes with [auxiliary.transcription]; set it by hand",
        "auxiliary" => "hermesd's helper models are [auxiliary.vision] and [auxiliary.transcription]; set them by hand",
        "display"
        | "dashboard"
        | "onboarding"
        | "paste_collapse_threshold"
        | "paste_collapse_threshold_fallback"
        | "paste_collapse_char_threshold"
        | "updates" => "a setting of Hermes' own terminal or web UI",
        "logging" => "hermesd logs to stderr (the journal); set HERMESD_LOG=debug for more",
        "security" | "approvals" | "command_allowlist" => {
            "hermesd asks before risky commands and runs every command sandboxed; pre-approve exact commands in [tools] approved_commands"
        }
        "kanban"
        | "goals"
        | "moa"
        | "curator"
        | "honcho"
        | "lsp"
        | "x_search"
        | "image_gen"
        | "video_gen"
        | "plugins"
        | "code_execution"
        | "checkpoints"
        | "smart_model_routing"
        | "hooks"
        | "hooks_auto_accept"
        | "quick_commands"
        | "personalities"
        | "prefill_messages_file" => "a Hermes feature hermesd does not have",
        "matrix" | "mattermost" | "whatsapp" => "hermesd has no adapter that reads these settings",
        "secrets" => "hermesd reads secrets from the environment and $HERMESD_HOME/.env only",
        _ => "hermesd has no such setting",
    }
}

/// The platforms whose bot token in `.env` turns them on, as hermesd names them.
const TOKEN_PLATFORMS: &[(&str, &str)] =
    &[("telegram", "TELEGRAM_BOT_TOKEN"), ("discord", "DISCORD_BOT_TOKEN"), ("slack", "SLACK_BOT_TOKEN")];

/// Platforms Hermes has and hermesd does not, by the prefix of their variables.
const OTHER_PLATFORMS: &[(&str, &str)] = &[
    ("MATRIX_", "Matrix"),
    ("MATTERMOST_", "Mattermost"),
    ("DINGTALK_", "DingTalk"),
    ("FEISHU_", "Feishu"),
    ("WECOM_", "WeCom"),
    ("WEIXIN_", "WeChat"),
    ("BLUEBUBBLES_", "BlueBubbles (iMessage)"),
    ("QQ_", "QQ"),
    ("SMS_", "SMS"),
    ("TWILIO_", "SMS (Twilio)"),
];

/// The access variables hermesd reads, copied as they are when Hermes' `.env` has them.
fn is_access_variable(name: &str) -> bool {
    const PREFIXES: &[&str] = &["GATEWAY", "TELEGRAM", "DISCORD", "SLACK", "SIGNAL", "EMAIL", "HASS", "WHATSAPP"];
    const SUFFIXES: &[&str] = &["_ALLOWED_USERS", "_ALLOW_ALL_USERS", "_ALLOWED_ROLES", "_ADMIN_USERS"];
    SUFFIXES
        .iter()
        .filter_map(|suffix| name.strip_suffix(suffix))
        .any(|prefix| PREFIXES.iter().any(|p| prefix == *p || prefix.starts_with(&format!("{p}_"))))
}

/// What one Hermes home (the main one or a profile's) maps to.
#[derive(Debug, Default)]
pub(crate) struct Mapped {
    /// The config tables.
    pub(crate) table: Table,
    /// Variables to copy into hermesd's `.env`: name → value.
    pub(crate) env: BTreeMap<String, String>,
    /// What could not be mapped.
    pub(crate) notes: Vec<Note>,
}

impl Mapped {
    pub(crate) fn note(&mut self, what: impl Into<String>, why: impl Into<String>) {
        self.notes.push(Note { what: what.into(), why: why.into() });
    }

    /// Copy a variable from Hermes' `.env` when it has it.
    pub(crate) fn copy_env(&mut self, env: &BTreeMap<String, String>, name: &str) -> bool {
        match env.get(name) {
            Some(value) => {
                self.env.insert(name.to_owned(), value.clone());
                true
            }
            None => false,
        }
    }
}

/// Map a Hermes home's `config.yaml` (as `tree`) and `.env`.
pub(crate) fn map(tree: &Tree, env: &BTreeMap<String, String>) -> Mapped {
    let mut out = Mapped::default();
    tree.skip("_config_version");
    // Profile routes are read with the profiles (`hermes::routes`); providers only where the
    // chain names them.
    for path in ["gateway.profile_routes", "profile_routes", "gateway.multiplex_profiles", "multiplex_profiles"] {
        tree.skip(path);
    }
    model_chain(tree, env, &mut out);
    platforms(tree, env, &mut out);
    tools(tree, &mut out);
    mcp(tree, env, &mut out);
    sessions(tree, &mut out);
    agent(tree, &mut out);
    for name in env.keys().filter(|name| is_access_variable(name)) {
        out.env.insert(name.clone(), env[name].clone());
    }
    for key in tree.keys() {
        if !HERMES_KEYS.contains(&key.as_str()) {
            tree.skip(&key);
            out.note(format!("config.yaml: {key}"), "not a key this importer knows (a newer Hermes?); left out");
        }
    }
    for path in tree.unread("") {
        let top = path.split('.').next().unwrap_or_default();
        out.note(format!("config.yaml: {path}"), reason(top));
    }
    out
}

/// Put `value` at a dotted path of `table`, making the tables on the way.
pub(crate) fn set(table: &mut Table, path: &str, value: impl Into<Toml>) {
    let mut parts: Vec<&str> = path.split('.').collect();
    let last = parts.pop().unwrap_or_default();
    let mut at = table;
    for part in parts {
        let entry = at.entry(part.to_owned()).or_insert_with(|| Toml::Table(Table::new()));
        if !entry.is_table() {
            *entry = Toml::Table(Table::new());
        }
        at = entry.as_table_mut().expect("made a table just above");
    }
    at.insert(last.to_owned(), value.into());
}

/// `text` as a variable-name word: upper case, other characters `_`.
pub(crate) fn env_word(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_uppercase() } else { '_' }).collect()
}

/// The platforms Hermes' `.env` turns on, with their settings from `config.yaml`.
fn platforms(tree: &Tree, env: &BTreeMap<String, String>, out: &mut Mapped) {
    let setting = |platform: &str, key: &str| {
        [
            format!("platforms.{platform}.extra.{key}"),
            format!("platforms.{platform}.{key}"),
            format!("{platform}.{key}"),
        ]
        .into_iter()
        .find_map(|path| tree.get(&path).cloned())
    };
    let global_mention = tree.bool("require_mention");
    for (platform, token) in TOKEN_PLATFORMS {
        let enabled_flag = setting(platform, "enabled").as_ref().and_then(boolean);
        if !env.contains_key(*token) || enabled_flag == Some(false) {
            continue;
        }
        let at = format!("platforms.{platform}");
        set(&mut out.table, &format!("{at}.enabled"), true);
        out.copy_env(env, token);
        let env_mention =
            env.get(&format!("{}_REQUIRE_MENTION", env_word(platform))).and_then(|v| super::super::yaml::truthy(v));
        if let Some(mention) =
            setting(platform, "require_mention").as_ref().and_then(boolean).or(env_mention).or(global_mention)
        {
            set(&mut out.table, &format!("{at}.require_mention"), mention);
        }
        for free in setting(platform, "free_response_channels").iter().flat_map(list) {
            // A channel where Hermes answers without a mention: a route that says so.
            let mut route = Table::new();
            route.insert("platform".into(), (*platform).into());
            route.insert("chat".into(), free.into());
            route.insert("require_mention".into(), false.into());
            push_route(out, route);
        }
        if let Some(channels) = setting(platform, "allowed_channels").map(|v| list(&v)).filter(|v| !v.is_empty()) {
            if *platform == "telegram" {
                out.note(format!("{platform}.allowed_channels"), "hermesd's Telegram has no channel allowlist");
            } else {
                set(&mut out.table, &format!("{at}.allowed_channels"), channels);
            }
        }
        match *platform {
            "telegram" => {
                if let Some(base) = setting("telegram", "base_url").as_ref().and_then(text) {
                    // python-telegram-bot's base_url ends in /bot (the token follows); hermesd's
                    // api_url is the server itself.
                    let url = base.trim_end_matches('/');
                    set(&mut out.table, "platforms.telegram.api_url", url.strip_suffix("/bot").unwrap_or(url));
                }
                if let Some(patterns) =
                    setting("telegram", "mention_patterns").map(|v| list(&v)).filter(|v| !v.is_empty())
                {
                    set(&mut out.table, "platforms.telegram.mention_patterns", patterns);
                }
                if let Some(url) = env.get("TELEGRAM_WEBHOOK_URL") {
                    set(&mut out.table, "platforms.telegram.mode", "webhook");
                    set(&mut out.table, "platforms.telegram.webhook_url", url.as_str());
                    out.copy_env(env, "TELEGRAM_WEBHOOK_SECRET");
                }
            }
            "discord" => {
                if let Some(auto) = setting("discord", "auto_thread").as_ref().and_then(boolean) {
                    set(&mut out.table, "platforms.discord.auto_thread", auto);
                }
                if let Some(ignored) = env.get("DISCORD_IGNORED_CHANNELS") {
                    set(&mut out.table, "platforms.discord.ignored_channels", list(&Value::String(ignored.clone())));
                }
                channel_overrides(tree, out);
            }
            "slack" => {
                if env.contains_key("SLACK_APP_TOKEN") {
                    out.copy_env(env, "SLACK_APP_TOKEN");
                } else if out.copy_env(env, "SLACK_SIGNING_SECRET") {
                    set(&mut out.table, "platforms.slack.mode", "events");
                } else {
                    out.note(
                        "slack",
                        "neither SLACK_APP_TOKEN (Socket Mode) nor SLACK_SIGNING_SECRET (Events API) is set: left off",
                    );
                    if let Some(Toml::Table(platforms)) = out.table.get_mut("platforms") {
                        platforms.remove("slack");
                    }
                }
            }
            _ => {}
        }
    }
    if let (Some(url), Some(account)) = (env.get("SIGNAL_HTTP_URL"), env.get("SIGNAL_ACCOUNT")) {
        set(&mut out.table, "platforms.signal.enabled", true);
        set(&mut out.table, "platforms.signal.http_url", url.as_str());
        set(&mut out.table, "platforms.signal.account", account.as_str());
    }
    if let (Some(address), Some(host)) = (env.get("EMAIL_ADDRESS"), env.get("EMAIL_IMAP_HOST")) {
        set(&mut out.table, "platforms.email.enabled", true);
        set(&mut out.table, "platforms.email.address", address.as_str());
        let imap_port = env.get("EMAIL_IMAP_PORT").map_or("993", String::as_str);
        set(&mut out.table, "platforms.email.imap_url", format!("imaps://{host}:{imap_port}"));
        let smtp_host = env.get("EMAIL_SMTP_HOST").unwrap_or(host);
        let smtp_url = match env.get("EMAIL_SMTP_PORT").map_or("587", String::as_str) {
            "465" => format!("smtps://{smtp_host}:465"),
            port => format!("smtp://{smtp_host}:{port}?tls=required"),
        };
        set(&mut out.table, "platforms.email.smtp_url", smtp_url);
        if !out.copy_env(env, "EMAIL_PASSWORD") {
            out.note("email", "EMAIL_PASSWORD is not set in Hermes' .env: left off");
            if let Some(Toml::Table(platforms)) = out.table.get_mut("platforms") {
                platforms.remove("email");
            }
        }
    }
    if env.contains_key("HASS_TOKEN") {
        set(&mut out.table, "platforms.homeassistant.enabled", true);
        if let Some(url) = env.get("HASS_URL") {
            set(&mut out.table, "platforms.homeassistant.url", url.as_str());
        }
        out.copy_env(env, "HASS_TOKEN");
    }
    if env.get("WHATSAPP_ENABLED").and_then(|v| super::super::yaml::truthy(v)) == Some(true) {
        out.note(
            "WhatsApp",
            "Hermes' WhatsApp is a WhatsApp Web bridge; hermesd speaks the WhatsApp Business Cloud API: set up [platforms.whatsapp] with a phone_number_id and WHATSAPP_ACCESS_TOKEN",
        );
    }
    for (prefix, name) in OTHER_PLATFORMS {
        if env.keys().any(|k| k.starts_with(prefix)) {
            out.note(name.to_string(), "hermesd has no adapter for it");
        }
    }
    let api_on = env.get("API_SERVER_ENABLED").and_then(|v| super::super::yaml::truthy(v)).unwrap_or(false)
        || env.contains_key("API_SERVER_KEY");
    if api_on {
        set(&mut out.table, "platforms.api.enabled", true);
        out.copy_env(env, "API_SERVER_KEY");
        if env.contains_key("API_SERVER_PORT") || env.contains_key("API_SERVER_HOST") {
            let host = match env.get("API_SERVER_HOST").map(|h| h.trim()) {
                None | Some("localhost" | "") => "127.0.0.1",
                Some(host) => host,
            };
            let port = env.get("API_SERVER_PORT").map_or("8642", |p| p.trim());
            let listen = format!("{host}:{port}");
            if listen.parse::<std::net::SocketAddr>().is_ok() {
                set(&mut out.table, "http.listen", listen);
            } else {
                out.note(
                    "API_SERVER_HOST / API_SERVER_PORT",
                    format!("{listen} is not an IP address and port; [http] listen stays 127.0.0.1:8642"),
                );
            }
        }
    }
    // The settings Hermes bridges into each adapter's `extra` are read above; the rest of these
    // tables is listed by `map` with its reason.
}

/// Discord's per-channel model and prompt overrides, as routes.
fn channel_overrides(tree: &Tree, out: &mut Mapped) {
    let Some(Value::Object(channels)) = tree.get("platforms.discord.channel_overrides") else { return };
    for (channel, spec) in channels {
        let mut route = Table::new();
        route.insert("platform".into(), "discord".into());
        route.insert("chat".into(), channel.clone().into());
        if let Some(prompt) = spec.get("system_prompt").and_then(text) {
            route.insert("system_prompt".into(), prompt.into());
        }
        if let Some(model) = spec.get("model").and_then(text) {
            // A route may only pick a model of the chain; checked once the chain is known.
            route.insert("model".into(), model.into());
        }
        push_route(out, route);
    }
}

fn push_route(out: &mut Mapped, route: Table) {
    let routes = out.table.entry("routes").or_insert_with(|| Toml::Array(Vec::new()));
    if let Toml::Array(routes) = routes
        && !routes.iter().any(|r| r.as_table() == Some(&route))
    {
        routes.push(Toml::Table(route));
    }
}

/// Hermes toolset names hermesd has under another name (or the same).
fn toolset(name: &str) -> Option<&'static str> {
    Some(match name {
        "web" => "web",
        "terminal" => "terminal",
        "file" | "files" => "files",
        "memory" => "memory",
        "skills" => "skills",
        "cronjob" | "cron" => "cron",
        "delegation" | "delegate" => "delegate",
        "todo" => "todo",
        "session_search" => "session_search",
        "clarify" => "clarify",
        "homeassistant" => "homeassistant",
        "messaging" => "messaging",
        _ => return None,
    })
}

/// Hermes' toolsets as hermesd's: a `hermes-*` preset is every toolset (hermesd's default).
fn toolsets(names: &[String], at: &str, out: &mut Mapped) -> Option<Vec<String>> {
    if names.iter().any(|n| n.starts_with("hermes-") || n == "all") {
        return None;
    }
    let mut mapped: Vec<String> = Vec::new();
    for name in names {
        match toolset(name) {
            Some(set) if !mapped.iter().any(|m| m == set) => mapped.push(set.to_owned()),
            Some(_) => {}
            None => out.note(format!("{at}: {name}"), "hermesd has no such toolset"),
        }
    }
    Some(mapped)
}

fn tools(tree: &Tree, out: &mut Mapped) {
    if let Some(names) = tree.get("toolsets").map(list)
        && let Some(sets) = toolsets(&names, "toolsets", out)
    {
        set(&mut out.table, "tools.toolsets", sets);
    }
    if let Some(Value::Object(per)) = tree.get("platform_toolsets") {
        for (platform, names) in per {
            if let Some(sets) = toolsets(&list(names), &format!("platform_toolsets.{platform}"), out) {
                set(&mut out.table, &format!("tools.platforms.{platform}"), sets);
            }
        }
    }
    for (from, to) in
        [("memory.memory_char_limit", "tools.memory_chars"), ("memory.user_char_limit", "tools.user_chars")]
    {
        if let Some(n) = tree.get(from).and_then(Value::as_u64).and_then(|n| i64::try_from(n).ok()) {
            set(&mut out.table, to, n);
        }
    }
}

/// `session_reset`, per-user groups and cron's time zone.
fn sessions(tree: &Tree, out: &mut Mapped) {
    let zone = tree.str("timezone");
    if let Some(zone) = &zone {
        match zone.parse::<chrono_tz::Tz>() {
            Ok(_) => set(&mut out.table, "cron.timezone", zone.as_str()),
            Err(_) => out.note("timezone", format!("{zone:?} is not an IANA time zone")),
        }
    }
    let reset = tree.get("session_reset").cloned();
    if let Some(reset) = reset {
        let mode = reset.get("mode").and_then(text).unwrap_or_else(|| "none".into());
        if ["none", "idle", "daily", "both"].contains(&mode.as_str()) {
            set(&mut out.table, "sessions.reset", mode.as_str());
        } else {
            out.note("session_reset.mode", format!("{mode:?} is not none, idle, daily or both"));
        }
        if let Some(idle) = reset.get("idle_minutes").and_then(Value::as_u64).and_then(|n| i64::try_from(n).ok()) {
            set(&mut out.table, "sessions.idle_minutes", idle);
        }
        if let Some(hour) = reset.get("at_hour").and_then(Value::as_i64).filter(|h| (0..24).contains(h)) {
            // Hermes reads the hour in its time zone; hermesd's is UTC. The zone's standard (winter)
            // offset, the same whenever the import runs.
            let offset = zone.as_deref().and_then(|z| z.parse::<chrono_tz::Tz>().ok()).map_or(0, |tz| {
                use chrono::{Offset, TimeZone};
                let winter = chrono::NaiveDate::from_ymd_opt(2025, 1, 15).and_then(|d| d.and_hms_opt(12, 0, 0));
                winter.map_or(0, |at| i64::from(tz.offset_from_utc_datetime(&at).fix().local_minus_utc()) / 3600)
            });
            let utc = (hour - offset).rem_euclid(24);
            set(&mut out.table, "sessions.at_hour", utc);
            if offset != 0 {
                out.note(
                    "session_reset.at_hour",
                    format!("{hour}:00 in {} is {utc}:00 UTC in winter (hermesd's hour is UTC; it does not follow daylight saving)", zone.as_deref().unwrap_or("UTC")),
                );
            }
        }
        if reset.get("notify").is_some() {
            // hermesd always tells the user their session started over.
        }
    }
    if let Some(per_user) = tree.bool("group_sessions_per_user") {
        set(&mut out.table, "sessions.group_per_user", per_user);
    }
}

/// `agent.max_turns`, the busy-input mode and the compression threshold.
fn agent(tree: &Tree, out: &mut Mapped) {
    if let Some(turns) =
        tree.get("agent.max_turns").and_then(Value::as_u64).filter(|n| *n > 0).and_then(|n| i64::try_from(n).ok())
    {
        set(&mut out.table, "agent.max_iterations", turns);
    }
    if let Some(mode) = tree.str("display.busy_input_mode") {
        match mode.as_str() {
            "queue" | "interrupt" | "steer" => set(&mut out.table, "agent.busy_policy", mode.as_str()),
            other => out.note("display.busy_input_mode", format!("{other:?} is not queue, interrupt or steer")),
        }
    }
    if let Some(threshold) = tree.get("compression.threshold").and_then(Value::as_f64) {
        set(&mut out.table, "compression.threshold", threshold);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::import::yaml::parse;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_model_key_in_config_moves_to_env_and_the_chain_keeps_its_order() {
        let tree = Tree::new(
            parse(
                "model:\n  default: qwen\n  provider: custom\n  base_url: http://10.0.0.5:8000/v1/\n  api_key: sk-secret\n\
                 fallback_providers:\n  - provider: openrouter\n    model: a/b\n  - provider: nous\n    model: x\n",
            )
            .unwrap(),
        );
        let mapped = map(&tree, &env(&[("OPENROUTER_API_KEY", "or")]));
        let model = mapped.table["model"].as_table().unwrap();
        assert_eq!(model["base_url"].as_str(), Some("http://10.0.0.5:8000/v1"));
        assert_eq!(model["api_key_env"].as_str(), Some("CUSTOM_API_KEY"));
        assert_eq!(mapped.env["CUSTOM_API_KEY"], "sk-secret");
        assert_eq!(mapped.env["OPENROUTER_API_KEY"], "or");
        let fallback = model["fallback"].as_array().unwrap();
        assert_eq!(fallback.len(), 1, "the OAuth provider is left out");
        assert!(mapped.notes.iter().any(|n| n.what.contains("nous") && n.why.contains("OAuth")));
        let text = toml::to_string(&mapped.table).unwrap();
        assert!(!text.contains("sk-secret"), "no secret in the config: {text}");
    }

    #[test]
    fn telegram_base_url_loses_its_bot_suffix_and_unknown_keys_are_listed() {
        let tree = Tree::new(
            parse(
                "platforms:\n  telegram:\n    extra:\n      base_url: http://127.0.0.1:9/bot\n      require_mention: true\n\
                 telegram:\n  reactions: true\nbrand_new_key: 1\nsession_reset:\n  mode: daily\n  at_hour: 4\n",
            )
            .unwrap(),
        );
        let mapped = map(&tree, &env(&[("TELEGRAM_BOT_TOKEN", "1:x"), ("TELEGRAM_ALLOWED_USERS", "5")]));
        let telegram = mapped.table["platforms"]["telegram"].as_table().unwrap();
        assert_eq!(telegram["api_url"].as_str(), Some("http://127.0.0.1:9"));
        assert_eq!(telegram["require_mention"].as_bool(), Some(true));
        assert_eq!(mapped.env["TELEGRAM_ALLOWED_USERS"], "5");
        assert_eq!(mapped.table["sessions"]["reset"].as_str(), Some("daily"));
        let whats: Vec<_> = mapped.notes.iter().map(|n| n.what.as_str()).collect();
        assert!(whats.contains(&"config.yaml: brand_new_key"), "{whats:?}");
        assert!(whats.contains(&"config.yaml: telegram.reactions"), "{whats:?}");
    }

    #[test]
    fn mcp_servers_keep_their_secrets_in_env() {
        let tree = Tree::new(
            parse(
                "mcp_servers:\n  api:\n    url: https://x/mcp\n    headers:\n      Authorization: Bearer ${TOK}\n      X-Key: literal\n\
                 \x20 'bad name!':\n    command: x\n",
            )
            .unwrap(),
        );
        let mapped = map(&tree, &env(&[("TOK", "t")]));
        let server = mapped.table["mcp"]["servers"]["api"].as_table().unwrap();
        assert_eq!(server["bearer_env"].as_str(), Some("TOK"));
        assert_eq!(server["headers_env"]["X-Key"].as_str(), Some("MCP_API_X_KEY"));
        assert_eq!(mapped.env["MCP_API_X_KEY"], "literal");
        assert!(mapped.notes.iter().any(|n| n.what.contains("bad name!")));
    }
}
