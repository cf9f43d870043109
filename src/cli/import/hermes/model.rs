//! Hermes' model, its fallbacks and its providers as hermesd's `[model]` chain: API-key providers
//! by endpoint and key variable, a key written in config.yaml moved to `.env`, OAuth providers
//! named and left out.

use std::collections::BTreeMap;

use serde_json::Value;
use toml::{Table, Value as Toml};

use super::super::yaml::{Tree, text};
use super::config::{Mapped, env_word};

/// An endpoint a Hermes provider id stands for: dialect, base URL and the key's variables.
pub(crate) struct Endpoint {
    pub(crate) kind: &'static str,
    pub(crate) base_url: &'static str,
    pub(crate) keys: &'static [&'static str],
}

/// Hermes' API-key providers (hermes_cli/auth.py) hermesd can call.
pub(crate) fn endpoint(provider: &str) -> Option<Endpoint> {
    let (kind, base_url, keys): (&str, &str, &[&str]) = match provider {
        "openrouter" => ("chat_completions", "https://openrouter.ai/api/v1", &["OPENROUTER_API_KEY"]),
        "openai" | "openai-api" => ("chat_completions", "https://api.openai.com/v1", &["OPENAI_API_KEY"]),
        "anthropic" => ("anthropic_messages", "https://api.anthropic.com", &["ANTHROPIC_API_KEY", "ANTHROPIC_TOKEN"]),
        "gemini" | "google" => (
            "chat_completions",
            "https://generativelanguage.googleapis.com/v1beta/openai",
            &["GOOGLE_API_KEY", "GEMINI_API_KEY"],
        ),
        "deepseek" => ("chat_completions", "https://api.deepseek.com/v1", &["DEEPSEEK_API_KEY"]),
        "xai" => ("chat_completions", "https://api.x.ai/v1", &["XAI_API_KEY"]),
        "zai" => ("chat_completions", "https://api.z.ai/api/paas/v4", &["GLM_API_KEY", "ZAI_API_KEY", "Z_AI_API_KEY"]),
        "kimi-coding" => ("chat_completions", "https://api.moonshot.ai/v1", &["KIMI_API_KEY", "KIMI_CODING_API_KEY"]),
        "kimi-coding-cn" => ("chat_completions", "https://api.moonshot.cn/v1", &["KIMI_CN_API_KEY"]),
        "minimax" => ("anthropic_messages", "https://api.minimax.io/anthropic", &["MINIMAX_API_KEY"]),
        "minimax-cn" => ("anthropic_messages", "https://api.minimaxi.com/anthropic", &["MINIMAX_CN_API_KEY"]),
        "nvidia" => ("chat_completions", "https://integrate.api.nvidia.com/v1", &["NVIDIA_API_KEY"]),
        "alibaba" => {
            ("chat_completions", "https://dashscope-intl.aliyuncs.com/compatible-mode/v1", &["DASHSCOPE_API_KEY"])
        }
        "arcee" => ("chat_completions", "https://api.arcee.ai/api/v1", &["ARCEEAI_API_KEY"]),
        "gmi" => ("chat_completions", "https://api.gmi-serving.com/v1", &["GMI_API_KEY"]),
        "lmstudio" => ("chat_completions", "http://127.0.0.1:1234/v1", &["LM_API_KEY"]),
        "ollama" => ("chat_completions", "http://127.0.0.1:11434/v1", &["OLLAMA_API_KEY"]),
        _ => return None,
    };
    Some(Endpoint { kind, base_url, keys })
}

/// Hermes providers that sign in with OAuth (kept in `auth.json`), which hermesd cannot reuse.
const OAUTH_PROVIDERS: &[&str] = &[
    "nous",
    "openai-codex",
    "xai-oauth",
    "qwen-oauth",
    "copilot",
    "copilot-acp",
    "minimax-oauth",
    "google-gemini-cli",
];

/// `[model]` with its fallbacks.
pub(super) fn model_chain(tree: &Tree, env: &BTreeMap<String, String>, out: &mut Mapped) {
    let primary = match tree.peek("model") {
        Some(Value::String(_)) => tree.str("model").map(|name| (None, name, None, None, None, None)),
        Some(Value::Object(_)) => {
            let name = tree.str("model.default").or_else(|| tree.str("model.model")).or_else(|| tree.str("model.name"));
            name.map(|name| {
                (
                    tree.str("model.provider"),
                    name,
                    tree.str("model.base_url"),
                    tree.str("model.key_env").or_else(|| tree.str("model.api_key_env")),
                    tree.str("model.api_key"),
                    tree.str("model.api_mode"),
                )
            })
        }
        _ => None,
    };
    let Some((provider, name, base_url, key_env, api_key, api_mode)) = primary else {
        out.note(
            "model",
            "config.yaml names no model; hermesd answers \"no model provider configured\" until [model] is set",
        );
        return;
    };
    let context = tree.get("model.context_length").and_then(Value::as_u64);
    let spec = Spec { provider, name, base_url, key_env, api_key, api_mode };
    let Some(mut entry) = model_entry(tree, &spec, env, out, "model") else { return };
    if let Some(context) = context.and_then(|c| i64::try_from(c).ok()) {
        entry.insert("context_length".into(), Toml::Integer(context));
    }
    let mut fallbacks = Vec::new();
    let mut seen = vec![(entry["base_url"].clone(), entry["name"].clone())];
    let mut chain: Vec<(String, Value)> = Vec::new();
    if let Some(Value::Array(items)) = tree.get("fallback_providers") {
        chain.extend(items.iter().enumerate().map(|(i, v)| (format!("fallback_providers[{i}]"), v.clone())));
    }
    match tree.get("fallback_model") {
        Some(Value::Array(items)) => {
            chain.extend(items.iter().enumerate().map(|(i, v)| (format!("fallback_model[{i}]"), v.clone())))
        }
        Some(item @ Value::Object(_)) => chain.push(("fallback_model".into(), item.clone())),
        _ => {}
    }
    for (at, item) in chain {
        let field = |key: &str| item.get(key).and_then(text);
        let Some(name) = field("model") else {
            out.note(at, "a fallback without a model");
            continue;
        };
        let spec = Spec {
            provider: field("provider"),
            name,
            base_url: field("base_url"),
            key_env: field("key_env"),
            api_key: field("api_key"),
            api_mode: field("api_mode"),
        };
        if let Some(fallback) = model_entry(tree, &spec, env, out, &at) {
            let id = (fallback["base_url"].clone(), fallback["name"].clone());
            if !seen.contains(&id) {
                seen.push(id);
                fallbacks.push(Toml::Table(fallback));
            }
        }
    }
    if !fallbacks.is_empty() {
        entry.insert("fallback".into(), Toml::Array(fallbacks));
    }
    out.table.insert("model".into(), Toml::Table(entry));
    tree.skip("providers");
    tree.skip("custom_providers");
}

/// One model as Hermes names it.
struct Spec {
    provider: Option<String>,
    name: String,
    base_url: Option<String>,
    key_env: Option<String>,
    api_key: Option<String>,
    api_mode: Option<String>,
}

/// A `[model]` entry for a Hermes provider and model, or `None` (noted) when hermesd cannot call it.
fn model_entry(tree: &Tree, spec: &Spec, env: &BTreeMap<String, String>, out: &mut Mapped, at: &str) -> Option<Table> {
    let mut provider = spec.provider.clone().unwrap_or_else(|| "auto".into()).to_ascii_lowercase();
    if provider == "auto" {
        // Hermes picks the first provider whose key is set.
        provider = ["openrouter", "anthropic", "openai"]
            .into_iter()
            .find(|p| endpoint(p).is_some_and(|e| e.keys.iter().any(|k| env.contains_key(*k))))
            .unwrap_or("custom")
            .to_owned();
    }
    if OAUTH_PROVIDERS.contains(&provider.as_str()) {
        out.note(
            format!("{at}: provider {provider}"),
            "signs in with OAuth (Hermes' auth.json), which hermesd cannot use; configure an API-key provider in [model]",
        );
        return None;
    }
    // A provider of `providers:` (or the legacy `custom_providers` list) by its key or name.
    let custom = tree.get(&format!("providers.{provider}")).cloned().or_else(|| {
        provider.strip_prefix("custom:").map_or(Some(provider.as_str()), Some).and_then(|name| {
            match tree.get("custom_providers") {
                Some(Value::Array(items)) => {
                    items.iter().find(|p| p.get("name").and_then(text).as_deref() == Some(name)).cloned()
                }
                _ => None,
            }
        })
    });
    let custom_field = |key: &str| custom.as_ref().and_then(|c| c.get(key)).and_then(text);
    let known = endpoint(&provider);
    let base_url = spec
        .base_url
        .clone()
        .or_else(|| custom_field("base_url"))
        .or_else(|| known.as_ref().map(|e| e.base_url.to_owned()));
    let Some(base_url) = base_url else {
        out.note(
            format!("{at}: provider {provider}"),
            "no base_url for it, and it is not a provider this importer knows",
        );
        return None;
    };
    let mode = spec.api_mode.clone().or_else(|| custom_field("api_mode"));
    let kind = match mode.as_deref() {
        Some("anthropic_messages") => "anthropic_messages",
        Some("codex_responses" | "responses") => "responses",
        Some(_) | None => known.as_ref().map_or("chat_completions", |e| e.kind),
    };
    let mut entry = Table::new();
    entry.insert("provider".into(), kind.into());
    entry.insert("base_url".into(), base_url.trim_end_matches('/').into());
    entry.insert("name".into(), spec.name.clone().into());
    let key_env = spec.key_env.clone().or_else(|| custom_field("key_env"));
    let literal = spec.api_key.clone().or_else(|| custom_field("api_key"));
    let variable = match (key_env, literal) {
        (Some(var), _) => {
            if !out.copy_env(env, &var) {
                out.note(format!("{at}: key_env {var}"), "not set in Hermes' .env; set it in hermesd's .env");
            }
            Some(var)
        }
        (None, Some(key)) => {
            // A key written in config.yaml moves to .env: hermesd keeps no secret in its config.
            let base = known
                .as_ref()
                .and_then(|e| e.keys.first().copied())
                .map_or_else(|| format!("{}_API_KEY", env_word(&provider)), str::to_owned);
            let var = free_name(&base, &key, env, &out.env);
            out.env.insert(var.clone(), key);
            Some(var)
        }
        (None, None) => known.as_ref().map(|e| {
            let found = e.keys.iter().find(|k| env.contains_key(**k)).copied();
            let var = found.unwrap_or(e.keys[0]);
            if !out.copy_env(env, var) && !e.keys.is_empty() && !base_is_local(e.base_url) {
                out.note(
                    format!("{at}: {provider} key"),
                    format!("{var} is not set in Hermes' .env; set it in hermesd's .env"),
                );
            }
            var.to_owned()
        }),
    };
    if let Some(var) = variable {
        entry.insert("api_key_env".into(), var.into());
    }
    Some(entry)
}

fn base_is_local(url: &str) -> bool {
    url.starts_with("http://127.0.0.1") || url.starts_with("http://localhost")
}

/// `base`, or `base_2`, … : a variable name not holding another value already.
pub(crate) fn free_name(
    base: &str,
    value: &str,
    hermes: &BTreeMap<String, String>,
    taken: &BTreeMap<String, String>,
) -> String {
    (1..)
        .map(|n| if n == 1 { base.to_owned() } else { format!("{base}_{n}") })
        .find(|name| [hermes.get(name), taken.get(name)].into_iter().flatten().all(|existing| existing == value))
        .expect("an unbounded range finds a free name")
}
