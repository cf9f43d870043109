//! Hermes' `mcp_servers` as `[mcp.servers.<name>]`: header secrets become variables in `.env`,
//! and an env value that looks secret stays out of config.toml.

use std::collections::BTreeMap;

use serde_json::Value;
use toml::{Table, Value as Toml};

use super::super::yaml::Tree;
use super::super::yaml::{boolean, list, text};
use super::config::{Mapped, env_word, set};

/// `mcp_servers` as `[mcp.servers.<name>]`.
pub(super) fn mcp(tree: &Tree, env: &BTreeMap<String, String>, out: &mut Mapped) {
    let Some(Value::Object(servers)) = tree.get("mcp_servers") else { return };
    for (name, spec) in servers {
        let at = format!("mcp_servers.{name}");
        let valid = !name.is_empty()
            && name.len() <= crate::config::MAX_SERVER_NAME
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            out.note(
                at,
                format!("hermesd's server names are 1-{} letters, digits, '-' or '_'", crate::config::MAX_SERVER_NAME),
            );
            continue;
        }
        let mut server = Table::new();
        let field = |key: &str| spec.get(key).and_then(text);
        if let Some(enabled) = spec.get("enabled").and_then(boolean) {
            server.insert("enabled".into(), enabled.into());
        }
        if let Some(command) = field("command") {
            server.insert("command".into(), command.into());
            let args: Vec<String> = spec.get("args").map(list).unwrap_or_default();
            if !args.is_empty() {
                server.insert("args".into(), args.into());
            }
            let mut vars = Table::new();
            if let Some(Value::Object(map)) = spec.get("env") {
                for (key, value) in map {
                    match text(value) {
                        Some(v) if v.contains("${") => {
                            out.note(
                                format!("{at}.env.{key}"),
                                "refers to a variable; hermesd passes literal values only: set it by hand",
                            );
                        }
                        Some(_) if looks_secret(key) => {
                            out.note(
                                format!("{at}.env.{key}"),
                                "looks like a secret, and a server's env is written in config.toml: left out, set it by hand if you accept that",
                            );
                        }
                        Some(v) => {
                            vars.insert(key.clone(), v.into());
                        }
                        None => {}
                    }
                }
            }
            if !vars.is_empty() {
                server.insert("env".into(), Toml::Table(vars));
            }
        } else if let Some(url) = field("url") {
            server.insert("url".into(), url.into());
            let mut headers = Table::new();
            if let Some(Value::Object(map)) = spec.get("headers") {
                for (header, value) in map {
                    let Some(value) = text(value) else { continue };
                    let reference = |v: &str| v.strip_prefix("${").and_then(|r| r.strip_suffix('}')).map(str::to_owned);
                    if header.eq_ignore_ascii_case("authorization")
                        && let Some(var) = value.strip_prefix("Bearer ").and_then(reference)
                    {
                        out.copy_env(env, &var);
                        server.insert("bearer_env".into(), var.into());
                        continue;
                    }
                    let var = reference(&value).unwrap_or_else(|| {
                        // A literal header value is a secret as far as hermesd knows: it moves to .env.
                        let var = format!("MCP_{}_{}", env_word(name), env_word(header));
                        out.env.insert(var.clone(), value.clone());
                        var
                    });
                    out.copy_env(env, &var);
                    headers.insert(header.clone(), var.into());
                }
            }
            if !headers.is_empty() {
                server.insert("headers_env".into(), Toml::Table(headers));
            }
        } else {
            out.note(at, "neither a command nor a url");
            continue;
        }
        for key in ["timeout", "connect_timeout"] {
            if let Some(secs) = spec.get(key).and_then(Value::as_f64).filter(|s| s.is_finite() && *s >= 1.0) {
                server.insert(key.into(), format!("{}s", secs.ceil() as u64).into());
            }
        }
        if let Some(tools) = spec.get("tools") {
            let mut filter = Table::new();
            for key in ["include", "exclude"] {
                let names = tools.get(key).map(list).unwrap_or_default();
                if !names.is_empty() {
                    filter.insert(key.into(), names.into());
                }
            }
            if !filter.is_empty() {
                server.insert("tools".into(), Toml::Table(filter));
            }
        }
        for key in spec.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>()).unwrap_or_default() {
            if !["enabled", "command", "args", "env", "url", "headers", "timeout", "connect_timeout", "tools"]
                .contains(&key.as_str())
            {
                out.note(format!("{at}.{key}"), "hermesd's MCP servers have no such setting");
            }
        }
        set(&mut out.table, &format!("mcp.servers.{name}"), Toml::Table(server));
    }
}

/// Whether a variable's name says it holds a secret.
fn looks_secret(name: &str) -> bool {
    let name = name.to_ascii_uppercase();
    ["TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY", "PRIVATE", "CREDENTIAL", "AUTH"]
        .iter()
        .any(|word| name.contains(word))
}
