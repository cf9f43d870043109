//! `[mcp.servers.NAME]`: MCP servers whose tools the agent may call. Pure schema and checks;
//! connecting is `agent::tools::mcp`. Secrets (bearer tokens, header values) are never in this
//! file's structs, only the names of the variables that hold them.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::HumanDuration;

/// `[mcp]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpConfig {
    /// Servers by name (letters, digits, `-` and `_`); the name is part of every tool name.
    pub servers: BTreeMap<String, McpServerConfig>,
}

/// How a stdio server is confined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpSandbox {
    /// The terminal's sandbox: broad reads except the data and credentials directories; writes
    /// only to a private temp dir, launcher caches and `write_paths`.
    #[default]
    Landlock,
    /// No confinement (only for servers you trust with the daemon's files).
    None,
}

/// Which of a server's tools are offered.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct McpToolFilter {
    /// Only these tool names (as the server names them); empty: all.
    pub include: Vec<String>,
    /// Never these tool names.
    pub exclude: Vec<String>,
}

impl McpToolFilter {
    /// Whether the server's tool `name` is offered.
    pub fn admits(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|n| n == name)) && !self.exclude.iter().any(|n| n == name)
    }
}

/// One `[mcp.servers.NAME]`: a stdio server (`command`) or a Streamable HTTP server (`url`).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// Start this server (set false to keep its settings but not run it).
    #[serde(default = "yes")]
    pub enabled: bool,
    /// stdio: the program to run (looked up in PATH).
    #[serde(default)]
    pub command: Option<String>,
    /// stdio: its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// stdio: environment for the server; only these, plus PATH, HOME and LANG, reach it.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// stdio: working directory (default: the tools' workdir).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// stdio: `landlock` (default) or `none`.
    #[serde(default)]
    pub sandbox: McpSandbox,
    /// stdio: extra paths the server may write under the sandbox.
    #[serde(default)]
    pub write_paths: Vec<PathBuf>,
    /// Streamable HTTP: the endpoint URL.
    #[serde(default)]
    pub url: Option<String>,
    /// Streamable HTTP: name of the variable holding a bearer token.
    #[serde(default)]
    pub bearer_env: Option<String>,
    /// Streamable HTTP: extra headers, header name → name of the variable holding its value.
    #[serde(default)]
    pub headers_env: BTreeMap<String, String>,
    /// Which tools are offered.
    #[serde(default)]
    pub tools: McpToolFilter,
    /// Longest a tool call may run (the call is cancelled on the server after it).
    #[serde(default = "default_call_timeout")]
    pub timeout: HumanDuration,
    /// Longest connecting and listing tools may take before the attempt counts as failed.
    #[serde(default = "default_connect_timeout")]
    pub connect_timeout: HumanDuration,
    /// Ask the user over chat before each call (same buttons as terminal approvals).
    #[serde(default)]
    pub approve: bool,
    /// Longest tool result (in chars) that enters the context.
    #[serde(default = "default_max_output")]
    pub max_output_chars: usize,
}

fn yes() -> bool {
    true
}

fn default_call_timeout() -> HumanDuration {
    HumanDuration::secs(60)
}

fn default_connect_timeout() -> HumanDuration {
    HumanDuration::secs(30)
}

fn default_max_output() -> usize {
    20_000
}

/// Longest server name: tool names are `mcp_<server>_<tool>` within 64 characters.
pub const MAX_SERVER_NAME: usize = 24;

impl McpConfig {
    /// Every problem with the `[mcp]` section, each prefixed with where it is.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        for (name, server) in &self.servers {
            let at = format!("mcp.servers.{name}");
            let name_ok = !name.is_empty()
                && name.len() <= MAX_SERVER_NAME
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !name_ok {
                problems.push(format!("{at}: a server name is 1-{MAX_SERVER_NAME} letters, digits, '-' or '_'"));
            }
            match (&server.command, &server.url) {
                (Some(_), Some(_)) => {
                    problems.push(format!("{at}: set either `command` (stdio) or `url` (HTTP), not both"))
                }
                (None, None) => problems.push(format!("{at}: set `command` (stdio) or `url` (Streamable HTTP)")),
                (Some(command), None) => {
                    if command.trim().is_empty() {
                        problems.push(format!("{at}.command: must not be empty"));
                    }
                    if server.bearer_env.is_some() || !server.headers_env.is_empty() {
                        problems.push(format!("{at}: `bearer_env` and `headers_env` are for HTTP servers (`url`)"));
                    }
                }
                (None, Some(url)) => {
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        problems.push(format!("{at}.url: must be an http:// or https:// URL"));
                    }
                    let stdio_keys = !server.args.is_empty()
                        || !server.env.is_empty()
                        || server.cwd.is_some()
                        || !server.write_paths.is_empty();
                    if stdio_keys {
                        problems.push(format!(
                            "{at}: `args`, `env`, `cwd` and `write_paths` are for stdio servers (`command`)"
                        ));
                    }
                }
            }
            for header in server.headers_env.keys() {
                let valid = !header.is_empty() && header.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
                if !valid {
                    problems.push(format!("{at}.headers_env: {header:?} is not a header name"));
                }
            }
            if server.timeout.get().as_millis() < 100 {
                problems.push(format!("{at}.timeout: must be at least 100ms"));
            }
            if server.connect_timeout.get().as_millis() < 100 {
                problems.push(format!("{at}.connect_timeout: must be at least 100ms"));
            }
            if server.max_output_chars < 100 {
                problems.push(format!("{at}.max_output_chars: must be at least 100"));
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> McpConfig {
        toml::from_str(text).expect("valid toml")
    }

    #[test]
    fn stdio_and_http_servers_parse_with_defaults() {
        let config = parse(
            r#"
            [servers.time]
            command = "uvx"
            args = ["mcp-server-time"]
            env = { LOCAL_TIMEZONE = "UTC" }

            [servers.docs]
            url = "https://mcp.example.com/mcp"
            bearer_env = "DOCS_MCP_TOKEN"
            tools = { include = ["search"] }
            "#,
        );
        assert!(config.problems().is_empty(), "{:?}", config.problems());
        let time = &config.servers["time"];
        assert_eq!(time.timeout.get().as_secs(), 60);
        assert_eq!(time.sandbox, McpSandbox::Landlock);
        assert!(time.enabled);
        let docs = &config.servers["docs"];
        assert!(docs.tools.admits("search"));
        assert!(!docs.tools.admits("delete"));
    }

    #[test]
    fn mistakes_are_listed() {
        let config = parse(
            r#"
            [servers."bad name"]
            command = "x"
            [servers.both]
            command = "x"
            url = "http://127.0.0.1:1/mcp"
            [servers.neither]
            [servers.web]
            url = "ftp://x"
            args = ["a"]
            "#,
        );
        let problems = config.problems().join("\n");
        assert!(problems.contains("mcp.servers.bad name: a server name"), "{problems}");
        assert!(problems.contains("mcp.servers.both: set either"), "{problems}");
        assert!(problems.contains("mcp.servers.neither: set `command`"), "{problems}");
        assert!(problems.contains("mcp.servers.web.url"), "{problems}");
        assert!(problems.contains("are for stdio servers"), "{problems}");
    }

    #[test]
    fn header_values_cannot_live_in_the_file() {
        let err =
            toml::from_str::<McpConfig>("[servers.a]\nurl = \"http://127.0.0.1:1\"\nheaders = { X = \"secret\" }\n");
        assert!(err.is_err());
    }

    #[test]
    fn mcp_toolsets_are_known() {
        assert!(crate::config::is_known_toolset("mcp"));
        assert!(crate::config::is_known_toolset("mcp:time"));
        assert!(!crate::config::is_known_toolset("mcp:"));
        assert!(!crate::config::is_known_toolset("mcp:bad name"));
        assert!(!crate::config::is_known_toolset("mcpx"));
    }

    #[test]
    fn exclude_wins_over_include() {
        let filter = McpToolFilter { include: vec!["a".into(), "b".into()], exclude: vec!["b".into()] };
        assert!(filter.admits("a"));
        assert!(!filter.admits("b"));
        assert!(!filter.admits("c"));
    }
}
