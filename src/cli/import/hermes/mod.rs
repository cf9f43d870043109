//! A Hermes home (`~/.hermes`, as hermes-agent 0.19 writes it) read into a `Plan`.
//!
//! What is read: `config.yaml` and `.env` (`config.rs`), `state.db` (`state.rs`, mapped to sessions
//! in `sessions.rs`), `cron/jobs.json` (`cron.rs`),
//! `platforms/pairing/<platform>-approved.json` (or the older `pairing/`), `memories/MEMORY.md`
//! and `USER.md`, `skills/`, `SOUL.md`, and each `profiles/<name>/` as a home of its own that
//! becomes `[profiles.<name>]`. Nothing here writes anywhere.
//!
//! Hermes keeps one `USER.md` per home, not per person; hermesd keeps one per person. It goes to
//! the owner: `--owner`, else the one person the `*_ALLOWED_USERS` variables name, else the one
//! listed or paired person whose direct chat is a home channel, else the one person Hermes
//! approved by pairing; with none of these it stays out and the plan says why.

pub(super) mod config;
mod cron;
mod mcp;
pub(super) mod model;
mod sessions;
mod state;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use hermesd_platform::{ChatRef, ChatType};
use serde_json::Value;
use toml::{Table, Value as Toml};

use self::config::{Mapped, env_word, set};
use self::cron::cron;
use self::sessions::{guess_chat_type, sessions};
use super::yaml::{Tree, text};
use super::{Approval, FileKind, FileWrite, Note, Plan, SkillCopy};
use crate::agent::tools::place::person_dir;
use crate::config::{DEFAULT_KEY, DEFAULT_PROFILE, is_profile_name};

/// One Hermes home: the main one or a profile's folder.
struct Home {
    dir: PathBuf,
    /// `main`, or the profile's name.
    profile: String,
    tree: Tree,
    env: BTreeMap<String, String>,
}

impl Home {
    fn read(dir: &Path, profile: &str, notes: &mut Vec<Note>) -> Result<Self, String> {
        let config = dir.join("config.yaml");
        let tree = match std::fs::read_to_string(&config) {
            Ok(text) => Tree::new(super::yaml::parse(&text).map_err(|e| format!("{}: {e}", config.display()))?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Tree::new(Value::Object(Default::default())),
            Err(e) => return Err(format!("{}: {e}", config.display())),
        };
        let env_path = dir.join(".env");
        let env = match std::fs::read_to_string(&env_path) {
            Ok(text) => match crate::config::parse_dotenv(&text) {
                Ok(vars) => vars.into_iter().collect(),
                Err(e) => {
                    notes.push(Note { what: env_path.display().to_string(), why: format!("not read: {e}") });
                    BTreeMap::new()
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => {
                notes.push(Note {
                    what: env_path.display().to_string(),
                    why: format!("not read ({e}): no keys or platforms from it"),
                });
                BTreeMap::new()
            }
        };
        Ok(Self { dir: dir.to_path_buf(), profile: profile.to_owned(), tree, env })
    }

    /// hermesd's profile name for this home.
    fn hermesd_profile(&self) -> &str {
        if self.profile == DEFAULT_KEY { DEFAULT_PROFILE } else { &self.profile }
    }

    /// Where this profile's files go under `HERMESD_HOME`.
    fn folder(&self) -> PathBuf {
        if self.profile == DEFAULT_KEY { PathBuf::new() } else { PathBuf::from("profiles").join(&self.profile) }
    }
}

/// Read the Hermes home at `dir`; `owner` (`platform:id`) takes Hermes' `USER.md`.
pub(crate) fn read(dir: &Path, owner: Option<&str>, scratch: &Path) -> Result<Plan, String> {
    if !dir.join("config.yaml").exists() && !dir.join("state.db").exists() {
        return Err(format!("{} is not a Hermes home (no config.yaml or state.db)", dir.display()));
    }
    let mut plan = Plan { source: "hermes", from: dir.to_path_buf(), ..Plan::default() };
    let main = Home::read(dir, DEFAULT_KEY, &mut plan.notes)?;
    let mapped = config::map(&main.tree, &main.env);
    let Mapped { table, env, notes } = mapped;
    plan.config = table;
    plan.env = env;
    plan.notes.extend(notes);
    let mut homes = vec![main];
    // Profiles: each a home of its own.
    let mut adapters: BTreeMap<(String, String), String> = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir.join("profiles")) {
        let mut names: Vec<String> =
            entries.flatten().filter(|e| e.path().is_dir()).filter_map(|e| e.file_name().into_string().ok()).collect();
        names.sort();
        for name in names {
            if !is_profile_name(&name) || name == DEFAULT_KEY || name == DEFAULT_PROFILE {
                plan.notes.push(Note {
                    what: format!("profile {name}"),
                    why: "not a name hermesd's profiles can have (lower-case letters, digits, '-' and '_'; not main or default)"
                        .into(),
                });
                continue;
            }
            let home = Home::read(&dir.join("profiles").join(&name), &name, &mut plan.notes)?;
            profile(&mut plan, &homes[0], &home, &mut adapters);
            homes.push(home);
        }
    }
    routes(&mut plan, &homes[0]);
    let owner = owner_of(&homes[0], owner, &mut plan.notes)?;
    let mut chat_types: BTreeMap<(String, String), ChatType> = BTreeMap::new();
    for home in &homes {
        let db = home.dir.join("state.db");
        if db.exists() {
            let scratch = scratch.join(&home.profile);
            let state = state::read(&db, &scratch)?;
            sessions(&mut plan, home, state, &adapters, &mut chat_types);
        }
        memory(&mut plan, home, owner.as_ref());
        skills(&mut plan, home);
        if let Ok(soul) = std::fs::read_to_string(home.dir.join("SOUL.md"))
            && !soul.trim().is_empty()
        {
            plan.files.push(FileWrite {
                dest: home.folder().join("SOUL.md"),
                content: soul,
                kind: FileKind::Keep,
                what: format!("persona of profile {}", home.hermesd_profile()),
            });
        }
        cron(&mut plan, home, &adapters, &chat_types);
    }
    approvals(&mut plan, &homes[0]);
    home_channels(&mut plan, &homes[0], &chat_types);
    check_route_models(&mut plan);
    Ok(plan)
}

/// `[profiles.<name>]` for a Hermes profile: its model chain and toolsets where they differ from
/// the main home's, and an account of its own for each bot token that differs from the main one.
fn profile(plan: &mut Plan, main: &Home, home: &Home, adapters: &mut BTreeMap<(String, String), String>) {
    let mapped = config::map(&home.tree, &home.env);
    let name = &home.profile;
    let mut table = Table::new();
    table.insert("soul".into(), "SOUL.md".into());
    if let Some(model) = mapped.table.get("model").filter(|m| Some(*m) != plan.config.get("model")) {
        table.insert("model".into(), model.clone());
    }
    let sets = mapped.table.get("tools").and_then(|t| t.get("toolsets"));
    if let Some(sets) = sets.filter(|s| Some(*s) != plan.config.get("tools").and_then(|t| t.get("toolsets"))) {
        table.insert("toolsets".into(), sets.clone());
    }
    set(&mut plan.config, &format!("profiles.{name}"), Toml::Table(table));
    // The variables the profile's model chain needs (its own keys, where they differ).
    for (var, value) in &mapped.env {
        match main.env.get(var) {
            Some(v) if v == value => {}
            // A bot token or allowlist of the profile's own goes to its account (below).
            _ if is_token(var) || is_access(var) => {}
            None => {
                plan.env.entry(var.clone()).or_insert_with(|| value.clone());
            }
            Some(_) => plan.notes.push(Note {
                what: format!("profile {name}: {var}"),
                why: "differs from the main home's; hermesd has one .env, so the main home's value is kept".into(),
            }),
        }
    }
    for (platform, token) in
        [("telegram", "TELEGRAM_BOT_TOKEN"), ("discord", "DISCORD_BOT_TOKEN"), ("slack", "SLACK_BOT_TOKEN")]
    {
        let Some(value) = home.env.get(token) else { continue };
        if main.env.get(token) == Some(value) {
            // The same bot: the profile's chats reach it through routes (`profile_routes`).
            continue;
        }
        // A bot of its own: an account of the platform that belongs to the profile.
        let word = env_word(name);
        let var = format!("{}_{word}_{}", env_word(platform), token.split_once('_').map_or(token, |(_, rest)| rest));
        plan.env.insert(var.clone(), value.clone());
        let at = format!("platforms.{platform}.accounts.{name}");
        let key = if platform == "slack" { "bot_token_env" } else { "token_env" };
        set(&mut plan.config, &format!("{at}.{key}"), var.as_str());
        set(&mut plan.config, &format!("{at}.profile"), name.as_str());
        if platform == "slack"
            && let Some(app) = home.env.get("SLACK_APP_TOKEN")
        {
            let app_var = format!("SLACK_{word}_APP_TOKEN");
            plan.env.insert(app_var.clone(), app.clone());
            set(&mut plan.config, &format!("{at}.app_token_env"), app_var.as_str());
        }
        if plan.config.get("platforms").and_then(|p| p.get(platform)).and_then(|t| t.get("enabled")).is_none() {
            // Hermes' main home has no such bot: only the account runs.
            set(&mut plan.config, &format!("platforms.{platform}.enabled"), true);
        }
        // The profile's allowlists become the account's (TELEGRAM_<ACCOUNT>_ALLOWED_USERS).
        let prefix = format!("{}_", env_word(platform));
        for (var, value) in home.env.iter().filter(|(k, _)| k.starts_with(&prefix)) {
            if let Some(rest) = ["ALLOWED_USERS", "ALLOW_ALL_USERS", "ADMIN_USERS", "ALLOWED_ROLES"]
                .iter()
                .find(|suffix| var.as_str() == format!("{prefix}{suffix}"))
            {
                plan.env.insert(format!("{prefix}{word}_{rest}"), value.clone());
            }
        }
        adapters.insert((name.clone(), platform.to_owned()), format!("{platform}@{name}"));
    }
    // The profile's other settings are the main home's in hermesd; only differences are worth a line.
    let main_notes: BTreeSet<(String, String)> =
        config::map(&main.tree, &main.env).notes.into_iter().map(|n| (n.what, n.why)).collect();
    for note in mapped.notes {
        if !main_notes.contains(&(note.what.clone(), note.why.clone())) {
            plan.notes.push(Note { what: format!("profile {name}: {}", note.what), why: note.why });
        }
    }
}

fn is_token(var: &str) -> bool {
    var.ends_with("_BOT_TOKEN") || var.ends_with("_APP_TOKEN")
}

fn is_access(var: &str) -> bool {
    ["_ALLOWED_USERS", "_ALLOW_ALL_USERS", "_ADMIN_USERS", "_ALLOWED_ROLES"].iter().any(|s| var.ends_with(s))
}

/// `gateway.profile_routes` (or the top-level form) as `[[routes]]` for profiles that came in.
fn routes(plan: &mut Plan, main: &Home) {
    let entries = main.tree.get("gateway.profile_routes").or_else(|| main.tree.get("profile_routes")).cloned();
    main.tree.skip("gateway.multiplex_profiles");
    main.tree.skip("multiplex_profiles");
    let Some(Value::Array(entries)) = entries else { return };
    let profiles = plan.config.get("profiles").and_then(Toml::as_table).cloned().unwrap_or_default();
    let mut made = Vec::new();
    for entry in entries {
        let field = |key: &str| entry.get(key).and_then(text);
        let label = field("name").unwrap_or_else(|| "a profile route".into());
        let Some(profile) = field("profile") else { continue };
        if !profiles.contains_key(&profile) {
            plan.notes.push(Note {
                what: format!("profile route {label}"),
                why: format!("profile {profile} was not imported"),
            });
            continue;
        }
        let mut route = Table::new();
        for (from, to) in [
            ("platform", "platform"),
            ("chat_id", "chat"),
            ("guild_id", "guild"),
            ("thread_id", "thread"),
            ("user_id", "user"),
        ] {
            if let Some(value) = field(from) {
                route.insert(to.into(), value.into());
            }
        }
        let known = ["name", "platform", "chat_id", "guild_id", "thread_id", "user_id", "profile"];
        let unknown: Vec<&String> =
            entry.as_object().map(|m| m.keys().filter(|k| !known.contains(&k.as_str())).collect()).unwrap_or_default();
        if !unknown.is_empty() || route.is_empty() {
            // A matcher left out would widen the route; one with none would take every chat.
            let why = if route.is_empty() {
                "it names no platform, chat, guild, thread or user: it would take every chat".to_owned()
            } else {
                format!("its keys {unknown:?} have no hermesd counterpart; without them it would match more chats")
            };
            plan.notes.push(Note { what: format!("profile route {label}"), why });
            continue;
        }
        route.insert("profile".into(), profile.into());
        made.push(Toml::Table(route));
    }
    let routes = plan.config.entry("routes").or_insert_with(|| Toml::Array(Vec::new()));
    if let Toml::Array(routes) = routes {
        // Profile routes first, in Hermes' order: hermesd's first matching route wins.
        routes.splice(0..0, made);
    }
}

/// A route may only start its sessions on a model of the chain.
fn check_route_models(plan: &mut Plan) {
    let chain: Vec<String> = plan
        .config
        .get("model")
        .map(|m| {
            std::iter::once(m)
                .chain(m.get("fallback").and_then(Toml::as_array).into_iter().flatten())
                .filter_map(|e| e.get("name").and_then(Toml::as_str).map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut notes = Vec::new();
    if let Some(Toml::Array(routes)) = plan.config.get_mut("routes") {
        for route in routes.iter_mut().filter_map(Toml::as_table_mut) {
            if let Some(model) = route.get("model").and_then(Toml::as_str).map(str::to_owned)
                && !chain.contains(&model)
            {
                route.remove("model");
                let chat = route.get("chat").and_then(Toml::as_str).unwrap_or_default();
                notes.push(Note {
                    what: format!("channel {chat}: model {model}"),
                    why: "not in the model chain; a route can only choose a model of the chain".into(),
                });
            }
        }
    }
    plan.notes.extend(notes);
}

/// The person who gets Hermes' `USER.md`, as (platform, id).
fn owner_of(main: &Home, owner: Option<&str>, notes: &mut Vec<Note>) -> Result<Option<(String, String)>, String> {
    if let Some(owner) = owner {
        let (platform, id) = owner
            .split_once(':')
            .filter(|(p, i)| !p.is_empty() && !i.is_empty())
            .ok_or_else(|| format!("--owner {owner:?}: expected PLATFORM:ID, such as telegram:12345"))?;
        return Ok(Some((platform.to_owned(), id.to_owned())));
    }
    let mut allowed = BTreeSet::new();
    for (var, value) in &main.env {
        let Some(prefix) = var.strip_suffix("_ALLOWED_USERS") else { continue };
        let platform = prefix.to_ascii_lowercase();
        if platform == "gateway" {
            continue;
        }
        for id in value.split(',').map(str::trim).filter(|id| !id.is_empty() && *id != "*") {
            allowed.insert((platform.clone(), id.to_owned()));
        }
    }
    if allowed.len() == 1 {
        return Ok(allowed.into_iter().next());
    }
    let paired: BTreeSet<(String, String)> = pairing(main).into_iter().map(|a| (a.platform, a.user)).collect();
    // Hermes adds each paired person to an allowlist the platform has, so several may be listed:
    // the one whose direct chat is the home channel is the owner.
    let homes: BTreeSet<(String, String)> = main
        .env
        .iter()
        .filter_map(|(var, chat)| {
            let platform = var.strip_suffix("_HOME_CHANNEL")?.to_ascii_lowercase();
            Some((platform, chat.trim().to_owned()))
        })
        .filter(|home| allowed.contains(home) || paired.contains(home))
        .collect();
    if homes.len() == 1 {
        return Ok(homes.into_iter().next());
    }
    if allowed.is_empty() && paired.len() == 1 {
        return Ok(paired.into_iter().next());
    }
    if main.dir.join("memories/USER.md").exists() {
        notes.push(Note {
            what: "memories/USER.md".into(),
            why: format!(
                "Hermes keeps one for everyone and hermesd one per person; {} people could own it: name them with --owner PLATFORM:ID",
                allowed.len().max(paired.len())
            ),
        });
    }
    Ok(None)
}

/// `memories/MEMORY.md` to the profile's shared file; `USER.md` to the owner's own.
fn memory(plan: &mut Plan, home: &Home, owner: Option<&(String, String)>) {
    let dir = home.dir.join("memories");
    let folder = home.folder().join(crate::agent::tools::memory::MEMORY_DIR);
    if let Ok(text) = std::fs::read_to_string(dir.join("MEMORY.md"))
        && !entries(&text).is_empty()
    {
        plan.files.push(FileWrite {
            dest: folder.join("MEMORY.md"),
            content: text,
            kind: FileKind::Memory,
            what: format!("the agent's notes (profile {}), in every conversation", home.hermesd_profile()),
        });
    }
    if let (Ok(text), Some((platform, user))) = (std::fs::read_to_string(dir.join("USER.md")), owner)
        && !entries(&text).is_empty()
    {
        plan.files.push(FileWrite {
            dest: person_dir(&folder, platform, user).join("USER.md"),
            content: text,
            kind: FileKind::Memory,
            what: format!(
                "what Hermes learned about its user, as {platform}:{user}'s (profile {})",
                home.hermesd_profile()
            ),
        });
    }
}

/// The entries of a memory file (Hermes' `\n§\n` or hermesd's `§` lines).
pub(crate) fn entries(text: &str) -> Vec<String> {
    // A line holding only `§` separates entries (Hermes writes `\n§\n`); text stays as written.
    let mut out = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim() == "§" {
            out.push(current.join("\n"));
            current.clear();
        } else {
            current.push(line);
        }
    }
    out.push(current.join("\n"));
    out.into_iter().map(|e| e.trim().to_owned()).filter(|e| !e.is_empty()).collect()
}

/// Skills: each folder holding a `SKILL.md`, `skills/<name>` or `skills/<category>/<name>`;
/// the ones Hermes ships itself (its `.bundled_manifest`) stay out.
fn skills(plan: &mut Plan, home: &Home) {
    let root = home.dir.join("skills");
    let bundled: BTreeSet<String> = std::fs::read_to_string(root.join(".bundled_manifest"))
        .map(|text| text.lines().filter_map(|l| l.split(':').next()).map(|l| l.trim().to_owned()).collect())
        .unwrap_or_default();
    let mut skipped = 0;
    let mut found = Vec::new();
    for first in read_dirs(&root) {
        if first.join("SKILL.md").is_file() {
            found.push(first);
        } else {
            found.extend(read_dirs(&first).into_iter().filter(|d| d.join("SKILL.md").is_file()));
        }
    }
    for dir in found {
        let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        if bundled.contains(&name) {
            skipped += 1;
            continue;
        }
        let relative = dir.strip_prefix(&root).unwrap_or(&dir).to_path_buf();
        plan.skills.push(SkillCopy { from: dir, dest: home.folder().join("skills").join(relative), name });
    }
    if skipped > 0 {
        plan.notes.push(Note {
            what: format!("{skipped} skill(s) of profile {}", home.hermesd_profile()),
            why: "shipped with Hermes itself (its .bundled_manifest), not yours".into(),
        });
    }
}

fn read_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir() && !p.file_name().is_some_and(|n| n.to_string_lossy().starts_with('.')))
                .collect()
        })
        .unwrap_or_default();
    dirs.sort();
    dirs
}

/// People Hermes approved by pairing.
fn pairing(main: &Home) -> Vec<Approval> {
    let mut out = Vec::new();
    for dir in [main.dir.join("platforms/pairing"), main.dir.join("pairing")] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files {
            let name = file.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            let Some(platform) = name.strip_suffix("-approved.json") else { continue };
            let Ok(Value::Object(users)) =
                std::fs::read_to_string(&file).map_err(|_| ()).and_then(|t| serde_json::from_str(&t).map_err(|_| ()))
            else {
                continue;
            };
            for (user, info) in users {
                if !out.iter().any(|a: &Approval| a.platform == platform && a.user == user) {
                    let name = info.get("user_name").and_then(text);
                    out.push(Approval { platform: platform.to_owned(), user, name });
                }
            }
        }
    }
    out
}

fn approvals(plan: &mut Plan, main: &Home) {
    plan.approvals = pairing(main);
}

/// `<PLATFORM>_HOME_CHANNEL` as the platform's home channel.
fn home_channels(plan: &mut Plan, main: &Home, chat_types: &BTreeMap<(String, String), ChatType>) {
    for platform in ["telegram", "discord", "slack", "signal", "email", "homeassistant"] {
        let var = format!("{}_HOME_CHANNEL", env_word(platform));
        let Some(chat) = main.env.get(&var).map(|c| c.trim().to_owned()).filter(|c| !c.is_empty()) else { continue };
        let chat_type = chat_types
            .get(&(platform.to_owned(), chat.clone()))
            .copied()
            .unwrap_or_else(|| guess_chat_type(platform, &chat));
        plan.homes.push(ChatRef::new(platform, chat, chat_type));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_entries_read_either_separator() {
        assert_eq!(entries("a\n§\nb c\n§\n\n"), vec!["a", "b c"]);
        assert_eq!(entries("one\n§\ntwo"), vec!["one", "two"]);
        assert!(entries("\n").is_empty());
    }

    #[test]
    fn chat_types_follow_the_ids() {
        assert_eq!(guess_chat_type("telegram", "-100"), ChatType::Group);
        assert_eq!(guess_chat_type("telegram@work", "5"), ChatType::Dm);
        assert_eq!(guess_chat_type("slack", "D1"), ChatType::Dm);
        assert_eq!(guess_chat_type("discord", "44"), ChatType::Channel);
    }
}
