//! Configuration: the TOML schema (DESIGN.md §10), its defaults, and loading.
//!
//! Two phases: `Config::validate` is pure and lists every problem at once (what `hermesd check`
//! prints, exit 78); `Runtime` wiring does the IO afterwards. Secrets never live in this file's
//! structs: only the names of the variables that hold them.

mod auxiliary;
mod http;
mod limits;
mod load;
mod mcp;
mod memory;
mod model;
mod platforms;
mod profiles;
mod routes;
mod secrets;
mod sessions;
mod terminal;
mod validate;
mod web_search;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use auxiliary::{AuxiliaryConfig, TranscriptionConfig};
pub use hermesd_platform::duration::{HumanDuration, parse_duration};
pub use http::{MIN_RETENTION_SECS, normalize_origin};
pub use limits::{LimitsConfig, ModelPrices};
pub use load::{ConfigFile, Locator};
pub use mcp::{MAX_SERVER_NAME, McpConfig, McpSandbox, McpServerConfig, McpToolFilter};
pub use memory::{MemoryConfig, MemoryScope};
pub use model::{AgentConfig, BusyPolicy, CompressionConfig, ModelConfig, ProviderKind};
pub use platforms::{ApiPlatformConfig, NotBuilt, PlatformsConfig};
pub use profiles::{
    ApiModels, DEFAULT_KEY, DEFAULT_PROFILE, MAX_PROFILE_NAME, PROFILE_MODEL_PREFIX, Profile, ProfileAgentConfig,
    ProfileConfig, Profiles, SOUL_FILE, Soul, is_profile_name, profile_key, profile_of_key, profile_of_session_key,
};
pub use routes::RouteConfig;
pub use secrets::{Env, EnvSource, ProcessEnv, Secret, SecretTrail, parse_dotenv};
pub use sessions::{
    RecoveryConfig, ResetMode, ResetOverride, ResetPolicy, RetentionConfig, SessionsConfig, StoreConfig,
};
pub use terminal::{SandboxMode, TerminalConfig};
pub use web_search::{
    BRAVE_URL as BRAVE_SEARCH_URL, MAX_RESULTS_LIMIT as WEB_SEARCH_MAX_RESULTS, SearchBackend, WebSearchConfig,
};

/// The whole configuration file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// The one HTTP listener (health, metrics, API, webhooks).
    pub http: HttpConfig,
    /// The primary model; absent means every turn answers "no model provider configured".
    pub model: Option<ModelConfig>,
    /// Turn execution.
    pub agent: AgentConfig,
    /// Context compression.
    pub compression: CompressionConfig,
    /// Platform adapters.
    pub platforms: PlatformsConfig,
    /// Tools and toolsets.
    pub tools: ToolsConfig,
    /// Signed webhook routes.
    pub webhooks: Vec<WebhookConfig>,
    /// Scheduled prompts.
    pub cron: CronConfig,
    /// Session keys and reset policy.
    pub sessions: SessionsConfig,
    /// The SQLite store.
    pub store: StoreConfig,
    /// What happens to unfinished work after a restart.
    pub recovery: RecoveryConfig,
    /// Skills under `$HERMESD_HOME/skills`.
    pub skills: SkillsConfig,
    /// MCP servers whose tools the agent may call.
    pub mcp: McpConfig,
    /// How long records that only serve deduplication are kept.
    pub retention: RetentionConfig,
    /// Helper models for media: image descriptions and transcription.
    pub auxiliary: AuxiliaryConfig,
    /// Whose memory a turn sees, and the memory-only turn before context is lost.
    pub memory: MemoryConfig,
    /// Daily caps on what one user or one chat may spend (tokens, cost, turns).
    pub limits: LimitsConfig,
    /// Agents of their own besides the top-level one (the profile `default`).
    pub profiles: Profiles,
    /// `[[routes]]`: chats bound to a profile and overrides per channel, first match wins.
    pub routes: Vec<RouteConfig>,
}

/// `[http]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HttpConfig {
    /// Address and port to listen on.
    pub listen: String,
    /// Largest request body accepted, in bytes (413 above it).
    pub max_body_bytes: usize,
    /// Interval between SSE keepalive comments on streaming API responses.
    pub sse_keepalive: HumanDuration,
    /// Extra `Host` names (port ignored) accepted on `/v1/*` and `/admin/*` while the API has no
    /// key; IP literals and loopback names are always accepted (DNS-rebinding defence).
    pub allowed_hosts: Vec<String>,
    /// Browser origins (`scheme://host[:port]`) allowed on `/v1/*` and `/admin/*`; any other
    /// `Origin` is refused with 403 and gets no CORS preflight.
    pub allowed_origins: Vec<String>,
    /// Time to send a request's headers, and the longest a connection waits for its first
    /// request (or, HTTP/1.1 keep-alive, its next); then it is closed.
    pub header_read_timeout: HumanDuration,
    /// How long a connection with no request in progress stays open after serving one.
    pub idle_timeout: HumanDuration,
    /// Time to send a request's whole body, from its headers (400 and a closed connection after).
    pub body_timeout: HumanDuration,
    /// Connections served at once; further ones wait in the listen backlog.
    pub max_connections: usize,
    /// Requests per minute to `/v1/*` per API key (per client address without a key); 0: off.
    pub rate_limit_per_minute: u32,
}

impl Default for HttpConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8642".into(),
            max_body_bytes: 1024 * 1024,
            sse_keepalive: HumanDuration::secs(15),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            header_read_timeout: HumanDuration::secs(10),
            idle_timeout: HumanDuration::secs(60),
            body_timeout: HumanDuration::secs(30),
            max_connections: 512,
            rate_limit_per_minute: 600,
        }
    }
}

/// Every built-in toolset, the default for each platform. `mcp` admits every MCP server's
/// toolset (`mcp:<server>`); see `is_known_toolset`.
pub const ALL_TOOLSETS: &[&str] = &[
    "memory",
    "session_search",
    "todo",
    "clarify",
    "files",
    "terminal",
    "web",
    "delegate",
    "cron",
    "messaging",
    "skills",
    "mcp",
    "homeassistant",
];

/// Whether `set` names a toolset: a built-in one, `mcp`, or `mcp:<server>` (servers may be
/// added later, so any well-formed server name is accepted).
pub fn is_known_toolset(set: &str) -> bool {
    ALL_TOOLSETS.contains(&set)
        || set.strip_prefix("mcp:").is_some_and(|server| {
            !server.is_empty()
                && server.len() <= MAX_SERVER_NAME
                && server.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        })
}

/// `[tools]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ToolsConfig {
    /// Directory file and terminal tools work in; relative paths are under `HERMESD_HOME`.
    pub workdir: PathBuf,
    /// Toolsets every platform gets unless `platforms` says otherwise.
    pub toolsets: Vec<String>,
    /// Per-platform toolsets, e.g. `api = ["memory", "web"]`.
    pub platforms: std::collections::BTreeMap<String, Vec<String>>,
    /// How long a dangerous command waits for `/approve` before it is denied.
    pub approval_timeout: HumanDuration,
    /// Commands that run without asking, for everyone: the exact command, or `prefix *` for the
    /// prefix followed by arguments (no `;`, `|`, `&`, `$`, backquotes or redirections). They
    /// still run in the sandbox.
    pub approved_commands: Vec<String>,
    /// How long `clarify` waits for an answer.
    pub clarify_timeout: HumanDuration,
    /// Let `web_fetch` reach private-use networks (RFC 1918, shared CGNAT space, unique-local
    /// IPv6); loopback, link-local and the other special-purpose blocks stay refused.
    pub web_allow_private: bool,
    /// Size cap of MEMORY.md, in characters.
    pub memory_chars: usize,
    /// Size cap of USER.md, in characters.
    pub user_chars: usize,
    /// `[tools.terminal]`: the commands' sandbox.
    pub terminal: TerminalConfig,
    /// `[tools.web_search]`: the search service `web_search` asks (none by default).
    pub web_search: WebSearchConfig,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            workdir: PathBuf::from("workspace"),
            toolsets: ALL_TOOLSETS.iter().map(|s| (*s).to_owned()).collect(),
            platforms: Default::default(),
            approval_timeout: HumanDuration::secs(300),
            approved_commands: Vec::new(),
            clarify_timeout: HumanDuration::secs(600),
            web_allow_private: false,
            memory_chars: 2_200,
            user_chars: 1_375,
            terminal: TerminalConfig::default(),
            web_search: WebSearchConfig::default(),
        }
    }
}

impl ToolsConfig {
    /// The toolsets `platform` gets.
    pub fn toolsets_for(&self, platform: &str) -> &[String] {
        // An account (`telegram@work`) has its platform's toolsets unless it has its own: an
        // operator who narrowed a platform narrowed every bot on it.
        let base = platform.split_once('@').map(|(base, _)| base);
        self.platforms.get(platform).or_else(|| base.and_then(|b| self.platforms.get(b))).unwrap_or(&self.toolsets)
    }
}

/// `[skills]`: skills in the Agent Skills format under `$HERMESD_HOME/skills/<name>/SKILL.md`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SkillsConfig {
    /// Skills hidden everywhere (index, `/skills`, `/<name>`, `skill_view`).
    pub disabled: Vec<String>,
    /// Skills hidden on one platform, e.g. `telegram = ["deploy"]`.
    pub platform_disabled: std::collections::BTreeMap<String, Vec<String>>,
    /// `skill_manage` (create, edit, patch, delete) asks a human first; where nobody can answer
    /// it is refused.
    pub require_approval: bool,
    /// Largest skill index in the system prompt, in characters; descriptions are shortened and
    /// the rest left to `skills_list`.
    pub index_chars: usize,
    /// Largest `SKILL.md`, in bytes (larger ones are not loaded, nor written).
    pub max_skill_bytes: usize,
    /// Largest file beside a skill that `skill_view` reads or `skill_manage` writes, in bytes.
    pub max_file_bytes: usize,
}

impl Default for SkillsConfig {
    fn default() -> Self {
        Self {
            disabled: Vec::new(),
            platform_disabled: Default::default(),
            require_approval: true,
            index_chars: 8_000,
            max_skill_bytes: 64 * 1024,
            max_file_bytes: 256 * 1024,
        }
    }
}

/// One `[[webhooks]]` route.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Served at `/webhooks/{route}` (letters, digits, `-` and `_`).
    pub route: String,
    /// Name of the variable holding the signing secret (GitHub HMAC, GitLab token or generic HMAC).
    pub secret_env: String,
    /// Prompt template with `{dot.path}`, `{event_type}` and `{__raw__}` placeholders.
    pub prompt: String,
    /// Delivery target of the reply: `local`, `<platform>` or `<platform>:<chat_id>[:<thread_id>]`.
    pub deliver: String,
    /// Event types to act on (from `X-GitHub-Event`, `X-Gitlab-Event` or `X-Event-Type`); empty: all.
    #[serde(default)]
    pub events: Vec<String>,
    /// Send the rendered template to the target as it is, without running the agent.
    #[serde(default)]
    pub deliver_only: bool,
    /// Accepted deliveries per minute on this route (429 above it).
    #[serde(default = "default_webhook_rate")]
    pub rate_limit_per_minute: u32,
    /// Largest body accepted on this route, in bytes (413 above it).
    #[serde(default = "default_webhook_body")]
    pub max_body_bytes: usize,
    /// Longest value inserted for one placeholder, in characters.
    #[serde(default = "default_webhook_value_chars")]
    pub max_value_chars: usize,
    /// The profile its turns belong to (its model, persona and memory); absent: `default`.
    #[serde(default)]
    pub profile: Option<String>,
}

fn default_webhook_rate() -> u32 {
    30
}

fn default_webhook_body() -> usize {
    1024 * 1024
}

fn default_webhook_value_chars() -> usize {
    2_000
}

/// `[cron]`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CronConfig {
    /// Run the scheduler in this daemon.
    pub enabled: bool,
    /// Interval between scheduler ticks.
    pub tick: HumanDuration,
    /// Time zone (IANA name) for cron expressions and ISO times without an offset.
    pub timezone: String,
    /// Delivery target of jobs created without one.
    pub default_deliver: String,
}

impl Default for CronConfig {
    fn default() -> Self {
        Self { enabled: true, tick: HumanDuration::secs(60), timezone: "UTC".into(), default_deliver: "origin".into() }
    }
}

/// Where hermesd keeps its state and which config file it reads.
#[derive(Debug, Clone)]
pub struct Paths {
    /// `HERMESD_HOME`.
    pub home: PathBuf,
    /// The config file (may not exist: embedded defaults then).
    pub config: PathBuf,
}

impl Paths {
    /// Resolve from flags, then `HERMESD_HOME`, then `~/.hermesd`.
    pub fn resolve(home: Option<PathBuf>, config: Option<PathBuf>, env: &dyn EnvSource) -> Self {
        let home = home.or_else(|| env.var("HERMESD_HOME").map(PathBuf::from)).unwrap_or_else(|| {
            env.var("HOME").map(PathBuf::from).unwrap_or_else(|| PathBuf::from(".")).join(".hermesd")
        });
        let config = config.unwrap_or_else(|| home.join("config.toml"));
        Self { home, config }
    }

    /// The tools' working directory.
    pub fn workdir(&self, tools: &ToolsConfig) -> PathBuf {
        if tools.workdir.is_absolute() { tools.workdir.clone() } else { self.home.join(&tools.workdir) }
    }

    /// The skills folder, `$HERMESD_HOME/skills`.
    pub fn skills(&self) -> PathBuf {
        self.home.join("skills")
    }

    /// The database file.
    pub fn database(&self, store: &StoreConfig) -> PathBuf {
        if store.path.is_absolute() { store.path.clone() } else { self.home.join(&store.path) }
    }
}

/// Why a config could not be loaded or is invalid; every problem is listed.
#[derive(Debug, thiserror::Error)]
#[error("invalid configuration:\n  - {}", problems.join("\n  - "))]
pub struct ConfigError {
    /// One line per problem.
    pub problems: Vec<String>,
}

impl Config {
    /// Read `path`; a missing file gives the embedded defaults. Every structural problem is
    /// listed (see `ConfigFile`).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        ConfigFile::read(path)?.into_config()
    }

    /// Parse TOML text, listing every structural problem.
    pub fn parse(text: &str) -> Result<Self, ConfigError> {
        ConfigFile::from_text(text, "config").into_config()
    }

    /// Every model endpoint in the order they are tried.
    pub fn model_chain(&self) -> Vec<&ModelConfig> {
        self.model.as_ref().map(ModelConfig::chain).unwrap_or_default()
    }
}
