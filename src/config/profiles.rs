//! `[profiles.<name>]`: several agents in one daemon. Each profile is an agent of its own: its
//! model chain, persona (`soul`), toolsets, agent overrides and daily limits, with its memory,
//! skills and `SOUL.md` under `$HERMESD_HOME/profiles/<name>/`.
//!
//! The top-level configuration is the profile `default`, with today's paths
//! (`$HERMESD_HOME/SOUL.md`, `memory/`, `skills/`), so a config without profiles means what it
//! always meant. A key a profile leaves out is the default profile's: a profile without
//! `[profiles.<name>.model]` uses the top-level `[model]` chain. Toolsets only narrow: a
//! profile's list is intersected with the platform's, never widened by it.
//!
//! `Profile` is one profile resolved against the default; `validate` checks every profile and
//! names it in each problem.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{BusyPolicy, Config, LimitsConfig, ModelConfig, Paths};

/// The persona file in a profile's folder.
pub const SOUL_FILE: &str = "SOUL.md";

/// The profile the top-level configuration is.
pub const DEFAULT_PROFILE: &str = "default";

/// The default profile's part of session keys (`agent:main:…`), kept from before profiles, so
/// no other profile may be called so.
pub const DEFAULT_KEY: &str = "main";

/// Longest profile name.
pub const MAX_PROFILE_NAME: usize = 32;

/// `[profiles.<name>]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProfileConfig {
    /// The persona: text, or a file (a single line starting with `/` or `./`, or ending in `.md`
    /// or `.txt`; relative to the profile's folder). Absent: the folder's `SOUL.md`, if any.
    pub soul: Option<String>,
    /// Other ids the API's `model` field may name it by (besides `profile:<name>` and its name).
    pub aliases: Vec<String>,
    /// Its own model chain (the keys of `[model]`, fallbacks and prices included); absent: the
    /// top-level `[model]`.
    pub model: Option<ModelConfig>,
    /// The toolsets it may use (intersected with the platform's); absent: `tools.toolsets`.
    pub toolsets: Option<Vec<String>>,
    /// Overrides of `[agent]`.
    pub agent: ProfileAgentConfig,
    /// Its own daily caps (the keys of `[limits]`); absent: the top-level `[limits]`.
    pub limits: Option<LimitsConfig>,
}

/// `[profiles.<name>.agent]`: what a profile may change of `[agent]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ProfileAgentConfig {
    /// What a message arriving during a turn does.
    pub busy_policy: Option<BusyPolicy>,
    /// Model calls per turn.
    pub max_iterations: Option<u32>,
}

/// Where a profile's persona comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Soul {
    /// Written in the config.
    Text(String),
    /// A file (which may be missing: then there is no persona).
    File(PathBuf),
}

/// One profile, resolved against the default profile.
#[derive(Debug, Clone)]
pub struct Profile<'a> {
    /// Its name (`default` for the top level).
    pub name: &'a str,
    /// Its folder: `$HERMESD_HOME` for the default, else `$HERMESD_HOME/profiles/<name>`.
    pub dir: PathBuf,
    /// Its persona.
    pub soul: Soul,
    /// Its model chain, primary first; empty when no model is configured.
    pub models: Vec<&'a ModelConfig>,
    /// Its toolsets.
    pub toolsets: &'a [String],
    /// Its busy policy.
    pub busy_policy: BusyPolicy,
    /// Its model calls per turn.
    pub max_iterations: u32,
    /// Its daily caps.
    pub limits: &'a LimitsConfig,
}

impl Profile<'_> {
    /// Its skills folder.
    pub fn skills(&self) -> PathBuf {
        self.dir.join("skills")
    }

    /// Its memory folder.
    pub fn memory(&self) -> PathBuf {
        self.dir.join("memory")
    }

    /// The root of its tools' folders: `tools.workdir` for the default; for another profile
    /// `<its folder>/<tools.workdir>`, or `<tools.workdir>/profiles/<name>` when that is absolute.
    pub fn workdir(&self, paths: &Paths, tools: &super::ToolsConfig) -> PathBuf {
        if self.name == DEFAULT_PROFILE {
            paths.workdir(tools)
        } else if tools.workdir.is_absolute() {
            tools.workdir.join("profiles").join(self.name)
        } else {
            self.dir.join(&tools.workdir)
        }
    }

    /// The toolsets a turn on `platform` gets: the platform's, narrowed to the profile's.
    pub fn toolsets_on<'b>(&'b self, config: &'b Config, platform: &str) -> Vec<&'b str> {
        let platform = config.tools.toolsets_for(platform);
        platform.iter().filter(|set| self.toolsets.contains(set)).map(String::as_str).collect()
    }
}

impl Config {
    /// Every profile's name: `default` first, then the named ones in order.
    pub fn profile_names(&self) -> Vec<&str> {
        std::iter::once(DEFAULT_PROFILE).chain(self.profiles.keys().map(String::as_str)).collect()
    }

    /// Profile `name` resolved against the default; `None` when there is no such profile.
    pub fn profile<'a>(&'a self, name: &'a str, paths: &Paths) -> Option<Profile<'a>> {
        let default = Profile {
            name: DEFAULT_PROFILE,
            dir: paths.home.clone(),
            soul: Soul::File(paths.home.join(SOUL_FILE)),
            models: self.model_chain(),
            toolsets: &self.tools.toolsets,
            busy_policy: self.agent.busy_policy,
            max_iterations: self.agent.max_iterations,
            limits: &self.limits,
        };
        if name == DEFAULT_PROFILE {
            return Some(default);
        }
        let (name, profile) = self.profiles.get_key_value(name)?;
        let dir = paths.home.join("profiles").join(name);
        let soul = match &profile.soul {
            Some(soul) => Soul::of(soul, &dir),
            None => Soul::File(dir.join(SOUL_FILE)),
        };
        let models = match &profile.model {
            Some(model) => model.chain(),
            None => default.models,
        };
        Some(Profile {
            name,
            dir,
            soul,
            models,
            toolsets: profile.toolsets.as_deref().unwrap_or(default.toolsets),
            busy_policy: profile.agent.busy_policy.unwrap_or(default.busy_policy),
            max_iterations: profile.agent.max_iterations.unwrap_or(default.max_iterations),
            limits: profile.limits.as_ref().unwrap_or(default.limits),
        })
    }
}

impl Soul {
    /// `text` as a persona: a file (relative to `dir`) when it has a path's shape, else the text.
    fn of(text: &str, dir: &Path) -> Soul {
        let line = text.trim();
        let single = !line.is_empty() && !line.contains('\n');
        let pathlike = line.starts_with('/')
            || line.starts_with("./")
            || ((line.ends_with(".md") || line.ends_with(".txt")) && !line.contains(char::is_whitespace));
        if single && pathlike { Soul::File(dir.join(line)) } else { Soul::Text(text.to_owned()) }
    }

    /// How `hermesd profiles` names it.
    pub fn describe(&self) -> String {
        match self {
            Soul::Text(text) => format!("inline, {} chars", text.chars().count()),
            Soul::File(path) if path.exists() => path.display().to_string(),
            Soul::File(path) => format!("{} (absent: no persona)", path.display()),
        }
    }
}

impl Config {
    /// What `hermesd check` and the daemon's start say about profiles no chat reaches: a profile
    /// no platform account or webhook names is reached only through the API and cron jobs.
    pub fn profile_advice(&self) -> Vec<String> {
        let mut named = std::collections::HashSet::new();
        for section in self.platforms.sections().into_iter().filter(|s| s.enabled()) {
            named.extend(section.profile().map(str::to_owned));
            let accounts = section.accounts().values();
            named.extend(accounts.filter_map(|keys| keys.get("profile")?.as_str().map(str::to_owned)));
        }
        named.extend(self.webhooks.iter().filter_map(|hook| hook.profile.clone()));
        named.extend(self.routes.iter().filter_map(|route| route.profile.clone()));
        self.profiles
            .keys()
            .filter(|name| !named.contains(*name))
            .map(|name| {
                format!(
                    "profiles.{name}: reached through the API only (model \"profile:{name}\") and `hermesd cron add \
                     --profile {name}`: no platform account, route or webhook names it (`profile = \"{name}\"`)"
                )
            })
            .collect()
    }
}

/// The API's `model` prefix that names a profile (`profile:work`).
pub const PROFILE_MODEL_PREFIX: &str = "profile:";

/// The model ids the API answers to, each naming a profile: `api.model_id` (the default), and
/// for each profile `profile:<name>`, its name and its aliases.
#[derive(Debug, Clone, Default)]
pub struct ApiModels {
    ids: Vec<(String, String)>,
}

impl ApiModels {
    /// The profile the API's `model` field names: one of the ids; the default for no model or an
    /// id of no profile (clients send whatever they were built with). `Err`: `profile:<x>`
    /// naming no profile.
    pub fn profile(&self, model: Option<&str>) -> Result<&str, String> {
        let Some(model) = model.map(str::trim).filter(|m| !m.is_empty()) else { return Ok(DEFAULT_PROFILE) };
        if let Some((_, profile)) = self.ids.iter().find(|(id, _)| id == model) {
            return Ok(profile);
        }
        match model.strip_prefix(PROFILE_MODEL_PREFIX) {
            Some(DEFAULT_PROFILE) => Ok(DEFAULT_PROFILE),
            Some(name) => {
                let mut known: Vec<&str> = self.ids.iter().map(|(_, p)| p.as_str()).collect();
                known.dedup();
                Err(format!("no profile {name:?} (known: {})", known.join(", ")))
            }
            None => Ok(DEFAULT_PROFILE),
        }
    }

    /// The ids `/v1/models` lists: the default's first, then `profile:<name>` of each profile
    /// (names and aliases are accepted, not listed).
    pub fn listed(&self) -> impl Iterator<Item = &str> {
        self.ids
            .iter()
            .map(|(id, _)| id.as_str())
            .filter(|id| self.ids.first().is_some_and(|(first, _)| first == id) || id.starts_with(PROFILE_MODEL_PREFIX))
    }
}

impl Config {
    /// The ids the API answers to.
    pub fn api_models(&self) -> ApiModels {
        let mut ids = vec![(self.platforms.api.model_id.clone(), DEFAULT_PROFILE.to_owned())];
        for (name, profile) in &self.profiles {
            ids.push((format!("{PROFILE_MODEL_PREFIX}{name}"), name.clone()));
            ids.push((name.clone(), name.clone()));
            ids.extend(profile.aliases.iter().map(|alias| (alias.clone(), name.clone())));
        }
        ApiModels { ids }
    }
}

/// A profile's part of its session keys: `main` for the default (today's keys), else its name.
pub fn profile_key(profile: &str) -> &str {
    if profile == DEFAULT_PROFILE { DEFAULT_KEY } else { profile }
}

/// The profile a session key (`agent:<profile>:…`) belongs to; the default for a key of another
/// shape.
pub fn profile_of_session_key(key: &str) -> &str {
    let part = key.strip_prefix("agent:").and_then(|rest| rest.split(':').next());
    part.map_or(DEFAULT_PROFILE, profile_of_key)
}

/// The profile a key part names (`profile_key` undone).
pub fn profile_of_key(part: &str) -> &str {
    if part == DEFAULT_KEY { DEFAULT_PROFILE } else { part }
}

/// Whether `name` may name a profile: lowercase letters, digits, `-` and `_`, starting with a
/// letter, at most `MAX_PROFILE_NAME` characters (it becomes a folder and part of session keys).
pub fn is_profile_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name.len() <= MAX_PROFILE_NAME
}

/// Every problem of `[profiles.*]`, each naming its profile's key path.
pub(super) fn check_profiles(
    config: &Config,
    check_model: &dyn Fn(&str, &ModelConfig, &mut Vec<String>),
    problems: &mut Vec<String>,
) {
    for (name, profile) in &config.profiles {
        let at = format!("profiles.{name}");
        if name == DEFAULT_PROFILE {
            problems.push(format!("{at}: `default` is the top-level configuration; set those keys there"));
            continue;
        }
        if name == DEFAULT_KEY {
            problems.push(format!("{at}: `main` names the default profile's sessions; choose another name"));
        }
        for alias in &profile.aliases {
            let taken =
                config.profiles.iter().any(|(other, p)| other != name && (other == alias || p.aliases.contains(alias)));
            if alias.trim().is_empty() || alias.starts_with(PROFILE_MODEL_PREFIX) {
                problems.push(format!("{at}.aliases: {alias:?} is not a model id (not empty, not `profile:…`)"));
            } else if taken || alias == DEFAULT_PROFILE || alias == &config.platforms.api.model_id {
                problems.push(format!("{at}.aliases: {alias:?} already names another profile"));
            }
        }
        if !is_profile_name(name) {
            problems.push(format!(
                "{at}: {name:?} is not a profile name (a lowercase letter, then lowercase letters, digits, '-' or '_'; \
                 at most {MAX_PROFILE_NAME})"
            ));
        }
        if let Some(model) = &profile.model {
            super::validate::check_chain(&format!("{at}.model"), model, check_model, problems);
        }
        if let Some(soul) = &profile.soul
            && soul.trim().is_empty()
        {
            problems.push(format!("{at}.soul: must not be empty (leave it out for the folder's SOUL.md)"));
        }
        for set in profile.toolsets.iter().flatten() {
            if !super::is_known_toolset(set) {
                problems.push(format!(
                    "{at}.toolsets: unknown toolset {set:?} (known: {})",
                    super::ALL_TOOLSETS.join(", ")
                ));
            }
        }
        if profile.agent.max_iterations == Some(0) {
            problems.push(format!("{at}.agent.max_iterations: must be at least 1"));
        }
        if let Some(limits) = &profile.limits {
            let models = profile.model.as_ref().map_or_else(|| config.model_chain(), ModelConfig::chain);
            let priced = models.iter().any(|m| m.input_per_mtok.is_some() || m.output_per_mtok.is_some());
            let mut found = Vec::new();
            super::limits::check_limits(limits, priced, &mut found);
            problems.extend(found.into_iter().map(|p| format!("{at}.{p}")));
        }
    }
}

/// The profiles table's type, as `Config` holds it.
pub type Profiles = BTreeMap<String, ProfileConfig>;

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::config::Env;

    const TWO: &str = r#"
[model]
provider = "chat_completions"
base_url = "http://127.0.0.1:9/v1"
name = "main-model"

[tools]
toolsets = ["memory", "web", "files", "terminal"]

[profiles.work]
soul = "You are the work assistant. Be brief."
toolsets = ["web", "files", "cron"]
agent = { busy_policy = "interrupt", max_iterations = 7 }

[profiles.work.model]
provider = "anthropic_messages"
base_url = "http://127.0.0.1:10"
name = "work-model"

[[profiles.work.model.fallback]]
provider = "chat_completions"
base_url = "http://127.0.0.1:11/v1"
name = "work-fallback"

[profiles.family]
soul = "family.md"
"#;

    fn paths() -> Paths {
        Paths { home: PathBuf::from("/srv/hermesd"), config: PathBuf::from("/srv/hermesd/config.toml") }
    }

    #[test]
    fn a_profile_takes_what_it_sets_and_the_default_profile_the_rest() {
        let config = Config::parse(TWO).unwrap();
        assert_eq!(config.profile_names(), ["default", "family", "work"]);
        let paths = paths();
        let default = config.profile("default", &paths).unwrap();
        assert_eq!(default.dir, Path::new("/srv/hermesd"), "the default keeps today's paths");
        assert_eq!(default.soul, Soul::File(PathBuf::from("/srv/hermesd/SOUL.md")));
        assert_eq!(default.skills(), Path::new("/srv/hermesd/skills"));
        assert_eq!(default.memory(), Path::new("/srv/hermesd/memory"));

        let work = config.profile("work", &paths).unwrap();
        assert_eq!(work.dir, Path::new("/srv/hermesd/profiles/work"));
        assert_eq!(work.soul, Soul::Text("You are the work assistant. Be brief.".into()));
        let models: Vec<&str> = work.models.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(models, ["work-model", "work-fallback"]);
        assert_eq!((work.busy_policy, work.max_iterations), (BusyPolicy::Interrupt, 7));
        assert_eq!(work.skills(), Path::new("/srv/hermesd/profiles/work/skills"));
        assert_eq!(work.toolsets_on(&config, "telegram"), ["web", "files"], "platform and profile intersect");

        let family = config.profile("family", &paths).unwrap();
        assert_eq!(family.soul, Soul::File(PathBuf::from("/srv/hermesd/profiles/family/family.md")));
        assert_eq!(family.models[0].name, "main-model", "no model of its own: the top-level chain");
        assert_eq!(family.max_iterations, config.agent.max_iterations);
        assert_eq!(family.toolsets_on(&config, "telegram"), ["memory", "web", "files", "terminal"]);
        assert!(config.profile("nobody", &paths).is_none());
        assert!(Config::default().profiles.is_empty(), "no profiles: only the default");
    }

    #[test]
    fn the_api_model_names_a_profile_and_workdirs_are_the_profiles_own() {
        let text = format!("{TWO}\n[profiles.helper]\naliases = [\"helpdesk\"]\n");
        let config = Config::parse(&text).unwrap();
        let models = config.api_models();
        for (model, profile) in [
            (None, "default"),
            (Some("hermes-agent"), "default"),
            (Some("gpt-4o"), "default"),
            (Some("profile:default"), "default"),
            (Some("profile:work"), "work"),
            (Some("work"), "work"),
            (Some(" helpdesk "), "helper"),
        ] {
            assert_eq!(models.profile(model), Ok(profile), "{model:?}");
        }
        let unknown = models.profile(Some("profile:nope")).unwrap_err();
        assert_eq!(unknown, "no profile \"nope\" (known: default, family, helper, work)");
        let listed: Vec<&str> = models.listed().collect();
        assert_eq!(listed, ["hermes-agent", "profile:family", "profile:helper", "profile:work"]);

        let paths = paths();
        let tools = &config.tools;
        assert_eq!(config.profile("default", &paths).unwrap().workdir(&paths, tools), paths.workdir(tools));
        let work = config.profile("work", &paths).unwrap();
        assert_eq!(work.workdir(&paths, tools), Path::new("/srv/hermesd/profiles/work").join(&tools.workdir));
        let absolute = crate::config::ToolsConfig { workdir: PathBuf::from("/var/work"), ..tools.clone() };
        assert_eq!(work.workdir(&paths, &absolute), Path::new("/var/work/profiles/work"));
        assert_eq!((profile_key("default"), profile_key("work")), ("main", "work"));
        assert_eq!((profile_of_key("main"), profile_of_key("work")), ("default", "work"));
    }

    #[test]
    fn soul_text_and_files_are_told_apart() {
        let dir = Path::new("/p");
        assert_eq!(Soul::of("./persona.txt", dir), Soul::File(PathBuf::from("/p/./persona.txt")));
        assert_eq!(Soul::of("/etc/hermesd/soul.md", dir), Soul::File(PathBuf::from("/etc/hermesd/soul.md")));
        assert_eq!(Soul::of("Answer in French.", dir), Soul::Text("Answer in French.".into()));
        let two_lines = "Read notes.md\nthen answer.";
        assert_eq!(Soul::of(two_lines, dir), Soul::Text(two_lines.into()));
        assert_eq!(Soul::of("Be like notes.md", dir), Soul::Text("Be like notes.md".into()));
    }

    #[test]
    fn every_profile_problem_names_its_profile() {
        let text = r#"
[profiles.default]
soul = "x"

[profiles.Work]
toolsets = ["webz"]

[profiles.ops]
soul = " "
agent = { max_iterations = 0 }
limits = { user_daily_cost = -1.0 }

[profiles.ops.model]
provider = "chat_completions"
base_url = "ftp://x"
name = ""

[profiles.main]
aliases = ["hermes-agent", "profile:x", "shared"]

[profiles.other]
aliases = ["shared"]
"#;
        let config = Config::parse(text).unwrap();
        let problems = config.validate(&Env::from_map(HashMap::new()));
        let profile_problems: Vec<&String> = problems.iter().filter(|p| p.starts_with("profiles.")).collect();
        for needle in [
            "profiles.default: `default` is the top-level configuration",
            "profiles.Work: \"Work\" is not a profile name",
            "profiles.Work.toolsets: unknown toolset \"webz\"",
            "profiles.ops.model.base_url: \"ftp://x\" is not an http(s) URL",
            "profiles.ops.model.name: must not be empty",
            "profiles.ops.soul: must not be empty",
            "profiles.ops.agent.max_iterations: must be at least 1",
            "profiles.ops.limits.user_daily_cost:",
            "profiles.main: `main` names the default profile's sessions",
            "profiles.main.aliases: \"hermes-agent\" already names another profile",
            "profiles.main.aliases: \"profile:x\" is not a model id",
            "profiles.main.aliases: \"shared\" already names another profile",
            "profiles.other.aliases: \"shared\" already names another profile",
        ] {
            assert!(
                profile_problems.iter().any(|p| p.starts_with(needle)),
                "{needle} missing in {profile_problems:#?}"
            );
        }
        assert_eq!(profile_problems.len(), 13, "{profile_problems:#?}");
        assert!(Config::parse(TWO).unwrap().validate(&Env::from_map(HashMap::new())).is_empty());
        assert!(is_profile_name("work-2_b") && !is_profile_name("2work") && !is_profile_name(&"a".repeat(33)));
    }
}
