//! OpenClaw's `openclaw.json` as hermesd's config: the model chain (`agents.defaults.model`, the
//! providers of `models.providers` and the keys of its auth profiles), and the channels hermesd
//! has adapters for, with their tokens moved to `.env` and their DM allowlists. Every other key is
//! listed with why it stays out.

use std::collections::BTreeMap;

use serde_json::Value;
use toml::{Table, Value as Toml};

use crate::cli::import::hermes::config::{Mapped, env_word, set};
use crate::cli::import::hermes::model::{endpoint, free_name};

/// Keys of `openclaw.json` that say nothing hermesd needs (bookkeeping, OpenClaw's own runtime).
const BOOKKEEPING: &[&str] = &["meta", "wizard", "plugins", "gateway", "update", "diagnostics", "ui", "logging"];

/// Map `config` (the parsed `openclaw.json`); `env` is OpenClaw's `<state>/.env`, `keys` the
/// provider keys of its auth profiles (provider → key).
pub(super) fn map(config: &Value, env: &BTreeMap<String, String>, keys: &BTreeMap<String, String>) -> Mapped {
    let mut out = Mapped::default();
    model_chain(config, env, keys, &mut out);
    channels(config, env, &mut out);
    if let Some(scope) = config.pointer("/session/dmScope").and_then(Value::as_str)
        && scope != "per-channel-peer"
        && scope != "per-account-channel-peer"
    {
        out.note(
            format!("session.dmScope = {scope}"),
            "hermesd keeps one conversation per chat; direct chats that OpenClaw shared across channels become one per channel",
        );
    }
    for (key, value) in config.as_object().into_iter().flatten() {
        match key.as_str() {
            "agents" | "models" | "auth" | "channels" | "session" | "commands" => {}
            "tools" => out.note(
                "tools",
                "OpenClaw's tool profiles have no counterpart; hermesd's toolsets are in [tools] (the defaults are on)",
            ),
            "skills" => out.note("skills", "per-skill settings stay out; the skills themselves are copied"),
            "cron" => out.note("cron", "scheduler settings stay out; the jobs are imported"),
            "env" => out.note("env", "inline variables stay out: hermesd reads secrets only from its .env"),
            key if BOOKKEEPING.contains(&key) => {}
            _ if value.is_null() => {}
            key => out.note(format!("openclaw.json: {key}"), "not a key this importer maps; left out"),
        }
    }
    out
}

/// A provider's key as OpenClaw writes it: a string, or a SecretRef naming a variable.
enum Key {
    Literal(String),
    Variable(String),
    Elsewhere(String),
}

fn key_of(value: &Value) -> Option<Key> {
    match value {
        Value::String(text) if text.trim().is_empty() => None,
        Value::String(text) => match text.strip_prefix("${").and_then(|t| t.strip_suffix('}')) {
            Some(variable) => Some(Key::Variable(variable.to_owned())),
            None => Some(Key::Literal(text.clone())),
        },
        Value::Object(reference) => match (reference.get("source").and_then(Value::as_str), reference.get("id")) {
            (Some("env"), Some(Value::String(id))) => Some(Key::Variable(id.clone())),
            (Some(source), _) => Some(Key::Elsewhere(source.to_owned())),
            _ => None,
        },
        _ => None,
    }
}

/// `[model]` and its fallbacks from `agents.defaults.model` (`"<provider>/<model>"`).
fn model_chain(config: &Value, env: &BTreeMap<String, String>, keys: &BTreeMap<String, String>, out: &mut Mapped) {
    let model = config.pointer("/agents/defaults/model");
    let primary = match model {
        Some(Value::String(name)) => Some(name.clone()),
        Some(Value::Object(m)) => m.get("primary").and_then(Value::as_str).map(str::to_owned),
        _ => None,
    };
    let Some(primary) = primary else {
        out.note(
            "agents.defaults.model",
            "names no model; hermesd answers \"no model provider configured\" until [model] is set",
        );
        return;
    };
    let fallbacks: Vec<String> = model
        .and_then(|m| m.get("fallbacks"))
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect();
    let Some(mut entry) = model_entry(config, &primary, env, keys, out) else { return };
    let chain: Vec<Toml> = fallbacks
        .iter()
        .filter(|name| **name != primary)
        .filter_map(|name| model_entry(config, name, env, keys, out))
        .map(Toml::Table)
        .collect();
    if !chain.is_empty() {
        entry.insert("fallback".into(), Toml::Array(chain));
    }
    out.table.insert("model".into(), Toml::Table(entry));
}

/// One model (`"<provider>/<model id>"`) as a `[model]` entry, or `None` (noted).
fn model_entry(
    config: &Value,
    name: &str,
    env: &BTreeMap<String, String>,
    keys: &BTreeMap<String, String>,
    out: &mut Mapped,
) -> Option<Table> {
    let Some((provider, model)) = name.split_once('/') else {
        out.note(format!("model {name}"), "not \"<provider>/<model>\"; left out");
        return None;
    };
    let custom = config.pointer(&format!("/models/providers/{}", provider.replace('~', "~0").replace('/', "~1")));
    let known = endpoint(provider);
    let base_url = custom
        .and_then(|c| c.get("baseUrl"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| known.as_ref().map(|e| e.base_url.to_owned()));
    let Some(base_url) = base_url else {
        out.note(
            format!("model {name}"),
            format!("provider {provider} has no baseUrl and is not one this importer knows"),
        );
        return None;
    };
    let kind = match custom.and_then(|c| c.get("api")).and_then(Value::as_str) {
        Some("openai-completions") => "chat_completions",
        Some("openai-responses") => "responses",
        Some("anthropic-messages") => "anthropic_messages",
        Some(other) => {
            out.note(format!("model {name}"), format!("its API {other:?} is not one hermesd speaks"));
            return None;
        }
        None => known.as_ref().map_or("chat_completions", |e| e.kind),
    };
    let mut entry = Table::new();
    entry.insert("provider".into(), kind.into());
    entry.insert("base_url".into(), base_url.trim_end_matches('/').into());
    entry.insert("name".into(), model.into());
    let default_var = known.as_ref().and_then(|e| e.keys.first().map(|k| (*k).to_owned()));
    let default_var = default_var.unwrap_or_else(|| format!("{}_API_KEY", env_word(provider)));
    let variable = match custom.and_then(|c| c.get("apiKey")).and_then(key_of) {
        Some(Key::Literal(key)) => {
            // A key written in openclaw.json moves to .env: hermesd keeps no secret in its config.
            let var = free_name(&default_var, &key, env, &out.env);
            out.env.insert(var.clone(), key);
            Some(var)
        }
        Some(Key::Variable(var)) => {
            if !out.copy_env(env, &var) {
                out.note(format!("model {name}: key {var}"), "not in OpenClaw's .env; set it in hermesd's .env");
            }
            Some(var)
        }
        Some(Key::Elsewhere(source)) => {
            out.note(
                format!("model {name}: key"),
                format!("kept in OpenClaw's {source} secret store, which this importer does not open; set {default_var} in hermesd's .env"),
            );
            Some(default_var)
        }
        None => match keys.get(provider) {
            Some(key) => {
                let var = free_name(&default_var, key, env, &out.env);
                out.env.insert(var.clone(), key.clone());
                Some(var)
            }
            None if out.copy_env(env, &default_var) => Some(default_var),
            None if base_url.starts_with("http://127.0.0.1") || base_url.starts_with("http://localhost") => None,
            None => {
                out.note(format!("model {name}: key"), format!("none found; set {default_var} in hermesd's .env"));
                Some(default_var)
            }
        },
    };
    if let Some(var) = variable {
        entry.insert("api_key_env".into(), var.into());
    }
    Some(entry)
}

/// The channel (or its default account) settings: `channels.<ch>`, with a multi-account
/// channel's default account over its root.
fn channel<'a>(config: &'a Value, name: &str, out: &mut Mapped) -> Option<BTreeMap<String, &'a Value>> {
    let root = config.pointer(&format!("/channels/{name}"))?.as_object()?;
    if root.get("enabled").and_then(Value::as_bool) == Some(false) {
        return None;
    }
    let mut merged: BTreeMap<String, &Value> = root.iter().map(|(k, v)| (k.clone(), v)).collect();
    if let Some(accounts) = root.get("accounts").and_then(Value::as_object) {
        let default = root.get("defaultAccount").and_then(Value::as_str).unwrap_or("default");
        if let Some(account) = accounts.get(default).and_then(Value::as_object) {
            merged.extend(account.iter().map(|(k, v)| (k.clone(), v)));
        }
        let others: Vec<&String> = accounts.keys().filter(|k| k.as_str() != default).collect();
        if !others.is_empty() {
            out.note(
                format!("channels.{name}.accounts"),
                format!(
                    "only the default account is mapped; add [[platforms.{name}.accounts]] for {}",
                    others.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                ),
            );
        }
    }
    merged.remove("accounts");
    Some(merged)
}

/// A channel's secret: the string, a `${VAR}` or env SecretRef (its value from OpenClaw's
/// `.env`), or the conventional variable in that `.env`.
fn secret(value: Option<&&Value>, conventional: &str, env: &BTreeMap<String, String>) -> Option<String> {
    match value.and_then(|v| key_of(v)) {
        Some(Key::Literal(text)) => Some(text),
        Some(Key::Variable(var)) => env.get(&var).cloned(),
        Some(Key::Elsewhere(_)) | None => env.get(conventional).cloned(),
    }
}

/// The DM allowlist of a channel as hermesd's `*_ALLOWED_USERS` (`"*"` and access groups stay out).
fn allowlist(settings: &BTreeMap<String, &Value>, channel: &str, out: &mut Mapped) {
    let policy = settings.get("dmPolicy").and_then(|v| v.as_str()).unwrap_or("pairing");
    let entries: Vec<String> = settings
        .get("allowFrom")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| match v {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        })
        .collect();
    let ids: Vec<String> = entries
        .iter()
        .filter(|e| e.as_str() != "*" && !e.starts_with("accessGroup:"))
        .map(|e| strip_channel(e, channel))
        .collect();
    if entries.iter().any(|e| e == "*") || policy == "open" {
        out.note(
            format!("channels.{channel}.dmPolicy = {policy}"),
            "anyone may talk to the bot there in OpenClaw; hermesd answers only allowed or paired people",
        );
    }
    if policy == "disabled" {
        out.note(format!("channels.{channel}.dmPolicy = disabled"), "hermesd has no switch for direct chats off");
    }
    if !ids.is_empty() {
        out.env.insert(format!("{}_ALLOWED_USERS", env_word(channel)), ids.join(","));
    }
    for key in ["groupPolicy", "groupAllowFrom", "groups"] {
        if settings.contains_key(key) {
            out.note(
                format!("channels.{channel}.{key}"),
                "group access stays out: hermesd answers groups where the bot is added",
            );
        }
    }
}

/// An id without its channel prefix (`tg:123`, `telegram:123` → `123`).
pub(super) fn strip_channel(id: &str, channel: &str) -> String {
    let id = id.trim();
    let prefixes: &[&str] = match channel {
        "telegram" => &["telegram:", "tg:"],
        other => return id.strip_prefix(&format!("{other}:")).unwrap_or(id).to_owned(),
    };
    prefixes.iter().find_map(|p| id.strip_prefix(p)).unwrap_or(id).to_owned()
}

/// The channels hermesd has adapters for.
fn channels(config: &Value, env: &BTreeMap<String, String>, out: &mut Mapped) {
    if let Some(telegram) = channel(config, "telegram", out) {
        match secret(telegram.get("botToken"), "TELEGRAM_BOT_TOKEN", env) {
            Some(token) => {
                set(&mut out.table, "platforms.telegram.enabled", true);
                out.env.insert("TELEGRAM_BOT_TOKEN".into(), token);
                if let Some(root) = telegram.get("apiRoot").and_then(|v| v.as_str()) {
                    set(&mut out.table, "platforms.telegram.api_url", root.trim_end_matches('/'));
                }
                allowlist(&telegram, "telegram", out);
            }
            None => {
                out.note("channels.telegram", "no bot token found (tokenFile and secret stores are not read): left off")
            }
        }
    }
    if let Some(discord) = channel(config, "discord", out) {
        match secret(discord.get("token"), "DISCORD_BOT_TOKEN", env) {
            Some(token) => {
                set(&mut out.table, "platforms.discord.enabled", true);
                out.env.insert("DISCORD_BOT_TOKEN".into(), token);
                allowlist(&discord, "discord", out);
            }
            None => out.note("channels.discord", "no bot token found: left off"),
        }
    }
    if let Some(slack) = channel(config, "slack", out) {
        let bot = secret(slack.get("botToken"), "SLACK_BOT_TOKEN", env);
        let app = secret(slack.get("appToken"), "SLACK_APP_TOKEN", env);
        let signing = secret(slack.get("signingSecret"), "SLACK_SIGNING_SECRET", env);
        match (bot, app, signing) {
            (Some(bot), Some(app), _) => {
                set(&mut out.table, "platforms.slack.enabled", true);
                out.env.insert("SLACK_BOT_TOKEN".into(), bot);
                out.env.insert("SLACK_APP_TOKEN".into(), app);
                allowlist(&slack, "slack", out);
            }
            (Some(bot), None, Some(signing)) => {
                set(&mut out.table, "platforms.slack.enabled", true);
                set(&mut out.table, "platforms.slack.mode", "events");
                out.env.insert("SLACK_BOT_TOKEN".into(), bot);
                out.env.insert("SLACK_SIGNING_SECRET".into(), signing);
                allowlist(&slack, "slack", out);
            }
            _ => out.note(
                "channels.slack",
                "needs a bot token and an app token (Socket Mode) or a signing secret: left off",
            ),
        }
    }
    if let Some(signal) = channel(config, "signal", out) {
        let account = signal.get("account").and_then(|v| v.as_str());
        let url = signal
            .get("transport")
            .and_then(|t| t.get("url"))
            .or_else(|| signal.get("httpUrl").copied())
            .and_then(Value::as_str);
        match (account, url) {
            (Some(account), Some(url)) => {
                set(&mut out.table, "platforms.signal.enabled", true);
                set(&mut out.table, "platforms.signal.account", account);
                set(&mut out.table, "platforms.signal.http_url", url.trim_end_matches('/'));
                allowlist(&signal, "signal", out);
            }
            (Some(account), None) => {
                out.env.insert("SIGNAL_ACCOUNT".into(), account.to_owned());
                out.note(
                    "channels.signal",
                    format!(
                        "OpenClaw runs signal-cli itself; hermesd talks to a signal-cli daemon over HTTP: start one for {account} and set [platforms.signal] http_url"
                    ),
                );
            }
            _ => out.note("channels.signal", "no account: left off"),
        }
    }
    if channel(config, "whatsapp", out).is_some() {
        out.note(
            "channels.whatsapp",
            "OpenClaw's WhatsApp is a WhatsApp Web login; hermesd speaks the WhatsApp Business Cloud API: set up [platforms.whatsapp] with a phone_number_id and WHATSAPP_ACCESS_TOKEN",
        );
    }
    for (name, _) in config.pointer("/channels").and_then(Value::as_object).into_iter().flatten() {
        if !["telegram", "discord", "slack", "signal", "whatsapp", "defaults"].contains(&name.as_str()) {
            out.note(format!("channels.{name}"), "hermesd has no adapter for it");
        }
    }
    // Command owners: admins of their platform.
    let owners = config.pointer("/commands/ownerAllowFrom").and_then(Value::as_array).cloned().unwrap_or_default();
    let mut admins: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for owner in owners.iter().filter_map(Value::as_str) {
        if let Some((platform, id)) = owner.split_once(':')
            && ["telegram", "discord", "slack", "signal"].contains(&platform)
        {
            admins.entry(platform.to_owned()).or_default().push(id.to_owned());
        }
    }
    for (platform, ids) in admins {
        out.env.insert(format!("{}_ADMIN_USERS", env_word(&platform)), ids.join(","));
    }
}
