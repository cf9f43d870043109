//! An OpenClaw home (`~/.openclaw`, as OpenClaw 2026.7 and 2026.9 write it) read into a `Plan`.
//!
//! What is read: `openclaw.json` (JSON5; `config.rs`), `.env`, the state database
//! `state/openclaw.sqlite` (cron jobs, approved pairings, the auth profiles' provider keys), the
//! default agent's database `agents/<id>/agent/openclaw-agent.sqlite` or its older
//! `agents/<id>/sessions/` files (`sessions.rs`), the older `credentials/*-allowFrom.json` and
//! `cron/jobs.json` (`cron.rs`), the workspace's `MEMORY.md`, `USER.md` and `SOUL.md`, and the
//! skills of the workspace and of the home. Databases are read through copies (with their
//! write-ahead logs), so the home is never written. Other agents than the default one are
//! listed, not imported.
//!
//! OpenClaw's `MEMORY.md` is free Markdown: each list item (with the heading above it) becomes a
//! memory entry. Its `USER.md` holds directives marked `status: active`; those go to the owner
//! (`--owner`, else the one command owner or allowed person OpenClaw names).

mod config;
mod cron;
mod sessions;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;
use toml::Value as Toml;

use super::hermes::config::Mapped;
use super::{Approval, FileKind, FileWrite, Note, Plan, SkillCopy};
use crate::agent::tools::place::person_dir;

/// Read the OpenClaw home at `dir`; `owner` (`platform:id`) takes its `USER.md`.
pub(crate) fn read(dir: &Path, owner: Option<&str>, scratch: &Path) -> Result<Plan, String> {
    let config_path = ["openclaw.json", "clawdbot.json"].iter().map(|name| dir.join(name)).find(|p| p.is_file());
    if config_path.is_none() && !dir.join("state/openclaw.sqlite").is_file() && !dir.join("agents").is_dir() {
        return Err(format!("{} is not an OpenClaw home (no openclaw.json, state/ or agents/)", dir.display()));
    }
    let mut plan = Plan { source: "openclaw", from: dir.to_path_buf(), ..Plan::default() };
    let config = match &config_path {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
            super::json5::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => Value::Object(Default::default()),
    };
    if config.as_object().is_some_and(|c| c.contains_key("$include")) || text_has_include(&config) {
        plan.notes.push(Note {
            what: "openclaw.json: $include".into(),
            why: "included files are not read; their settings stay out".into(),
        });
    }
    let env = read_env(&dir.join(".env"), &mut plan.notes);
    let local = |path: &str| local_path(dir, path);
    let state = open_copy(&dir.join("state/openclaw.sqlite"), &scratch.join("state"))?;
    let agent = default_agent(&config);
    let agent_db =
        open_copy(&dir.join("agents").join(&agent).join("agent/openclaw-agent.sqlite"), &scratch.join("agent"))?;
    let keys = provider_keys(state.as_ref(), agent_db.as_ref(), &dir.join("agents").join(&agent).join("agent"));
    let Mapped { table, env: vars, notes } = config::map(&config, &env, &keys);
    plan.config = table;
    plan.env = vars;
    plan.notes.extend(notes);

    // Conversations of the default agent: its database, else the older files.
    let mut conversations = match &agent_db {
        Some(conn) => sessions::from_database(conn).map_err(|e| format!("agent {agent}'s database: {e}"))?,
        None => Vec::new(),
    };
    if conversations.is_empty() {
        conversations = sessions::from_files(&dir.join("agents").join(&agent).join("sessions"), &local)?;
    }
    sessions::sessions(&mut plan, &agent, conversations);
    for other in other_agents(&config, dir, &agent) {
        plan.notes.push(Note {
            what: format!("agent {other}"),
            why: "only the default agent is imported; make a [profiles] entry for it and bring its files by hand"
                .into(),
        });
    }

    let workspace = workspace_of(&config, dir, &agent, &local);
    let approvals = approvals(state.as_ref(), dir);
    let owner = owner_of(&config, owner, &approvals, &plan)?;
    memory(&mut plan, &workspace, owner.as_ref());
    persona(&mut plan, &workspace);
    skills(&mut plan, &[workspace.join("skills"), workspace.join(".agents/skills"), dir.join("skills")]);
    let tz = plan.config.get("cron").and_then(|c| c.get("timezone")).and_then(Toml::as_str).unwrap_or("UTC").to_owned();
    let jobs = match state.as_ref().and_then(cron::from_database) {
        Some(jobs) if !jobs.is_empty() => jobs,
        _ => cron::from_file(&dir.join("cron/jobs.json")),
    };
    cron::jobs(&mut plan, jobs, &tz);
    plan.approvals = approvals;
    Ok(plan)
}

fn text_has_include(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.contains_key("$include") || map.values().any(text_has_include),
        Value::Array(items) => items.iter().any(text_has_include),
        _ => false,
    }
}

/// `<state>/.env`, when there is one.
fn read_env(path: &Path, notes: &mut Vec<Note>) -> BTreeMap<String, String> {
    match std::fs::read_to_string(path) {
        Ok(text) => match crate::config::parse_dotenv(&text) {
            Ok(vars) => vars.into_iter().collect(),
            Err(e) => {
                notes.push(Note { what: path.display().to_string(), why: format!("not read: {e}") });
                BTreeMap::new()
            }
        },
        Err(_) => BTreeMap::new(),
    }
}

/// A path written in the home (absolute, on the machine it was made on) as a path under `dir`:
/// as written when it exists, else the shortest tail of it that exists under `dir`.
fn local_path(dir: &Path, written: &str) -> PathBuf {
    let written = Path::new(written);
    if written.exists() {
        return written.to_path_buf();
    }
    let parts: Vec<_> = written.components().collect();
    (1..=parts.len())
        .map(|n| parts[parts.len() - n..].iter().collect::<PathBuf>())
        .map(|tail| dir.join(tail))
        .find(|p| p.exists())
        .unwrap_or_else(|| dir.join(written.file_name().unwrap_or_default()))
}

/// A copy of the SQLite database `db` (with its log) in a 0700 folder, opened; `None` when
/// there is no such database.
fn open_copy(db: &Path, scratch: &Path) -> Result<Option<rusqlite::Connection>, String> {
    if !db.is_file() {
        return Ok(None);
    }
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(scratch)
        .map_err(|e| format!("{}: {e}", scratch.display()))?;
    let name = db.file_name().unwrap_or_default().to_string_lossy().into_owned();
    let copy = scratch.join(&name);
    std::fs::copy(db, &copy).map_err(|e| format!("copy {}: {e}", db.display()))?;
    for suffix in ["-wal", "-shm"] {
        let side = db.with_file_name(format!("{name}{suffix}"));
        if side.exists() {
            std::fs::copy(&side, scratch.join(format!("{name}{suffix}")))
                .map_err(|e| format!("copy {}: {e}", side.display()))?;
        }
    }
    rusqlite::Connection::open(&copy).map(Some).map_err(|e| format!("open {}: {e}", db.display()))
}

/// The default agent's id: the roster's default (or first) entry, else `main`.
fn default_agent(config: &Value) -> String {
    if let Some(entries) = config.pointer("/agents/entries").and_then(Value::as_object) {
        let default = entries.iter().find(|(_, e)| e.get("default").and_then(Value::as_bool) == Some(true));
        if let Some((id, _)) =
            default.or_else(|| entries.iter().find(|(id, _)| *id == "main")).or_else(|| entries.iter().next())
        {
            return id.clone();
        }
    }
    if let Some(list) = config.pointer("/agents/list").and_then(Value::as_array) {
        let default = list.iter().find(|e| e.get("default").and_then(Value::as_bool) == Some(true)).or(list.first());
        if let Some(id) = default.and_then(|e| e.get("id")).and_then(Value::as_str) {
            return id.to_owned();
        }
    }
    "main".into()
}

/// The agents other than `default`: in the config's roster or with a folder of their own.
fn other_agents(config: &Value, dir: &Path, default: &str) -> Vec<String> {
    let mut ids: Vec<String> = config
        .pointer("/agents/entries")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(id, _)| id.clone())
        .collect();
    ids.extend(
        config
            .pointer("/agents/list")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|e| e.get("id").and_then(Value::as_str).map(str::to_owned)),
    );
    ids.extend(
        std::fs::read_dir(dir.join("agents"))
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok()),
    );
    ids.sort();
    ids.dedup();
    ids.retain(|id| id != default);
    ids
}

/// The default agent's workspace: as configured (mapped onto `dir`), else `<dir>/workspace`.
fn workspace_of(config: &Value, dir: &Path, agent: &str, local: &dyn Fn(&str) -> PathBuf) -> PathBuf {
    let configured = config
        .pointer(&format!("/agents/entries/{agent}/workspace"))
        .or_else(|| config.pointer("/agents/defaults/workspace"))
        .and_then(Value::as_str);
    configured.map(local).filter(|p| p.is_dir()).unwrap_or_else(|| dir.join("workspace"))
}

/// Provider → API key from the auth profiles (the state database, the agent's database, or the
/// agent's older `auth-profiles.json`); OAuth sign-ins are not keys and stay out.
fn provider_keys(
    state: Option<&rusqlite::Connection>,
    agent: Option<&rusqlite::Connection>,
    agent_dir: &Path,
) -> BTreeMap<String, String> {
    let mut stores: Vec<String> = Vec::new();
    if let Some(conn) = state
        && let Ok(json) = conn.query_row(
            "SELECT value_json FROM config_machine_state WHERE state_key = 'authProfiles.store'",
            [],
            |r| r.get::<_, String>(0),
        )
    {
        stores.push(json);
    }
    if let Some(conn) = agent
        && let Ok(json) =
            conn.query_row("SELECT store_json FROM auth_profile_store WHERE store_key = 'primary'", [], |r| {
                r.get::<_, String>(0)
            })
    {
        stores.push(json);
    }
    stores.extend(std::fs::read_to_string(agent_dir.join("auth-profiles.json")));
    let mut keys = BTreeMap::new();
    for store in stores {
        let Ok(value) = serde_json::from_str::<Value>(&store) else { continue };
        for (id, profile) in value.get("profiles").and_then(Value::as_object).into_iter().flatten() {
            let provider = profile
                .get("provider")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| id.split(':').next().unwrap_or_default().to_owned());
            let key = match profile.get("type").and_then(Value::as_str) {
                Some("api_key") => profile.get("key"),
                Some("token") => profile.get("token"),
                _ => None,
            };
            if let Some(key) = key.and_then(Value::as_str).filter(|k| !k.is_empty()) {
                keys.entry(provider).or_insert_with(|| key.to_owned());
            }
        }
    }
    keys
}

/// People OpenClaw approved by pairing: the state database's entries, and the older
/// `credentials/<channel>[-<account>]-allowFrom.json` files.
fn approvals(state: Option<&rusqlite::Connection>, dir: &Path) -> Vec<Approval> {
    let mut out: Vec<Approval> = Vec::new();
    let mut push = |channel: &str, account: &str, user: &str| {
        let platform = if account == "default" { channel.to_owned() } else { format!("{channel}@{account}") };
        let user = config::strip_channel(user, channel);
        if !user.is_empty() && !out.iter().any(|a| a.platform == platform && a.user == user) {
            out.push(Approval { platform, user, name: None });
        }
    };
    if let Some(conn) = state
        && let Ok(mut query) =
            conn.prepare("SELECT channel_key, account_id, entry FROM channel_pairing_allow_entries ORDER BY sort_order")
        && let Ok(rows) =
            query.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?, r.get::<_, String>(2)?)))
    {
        for (channel, account, entry) in rows.flatten() {
            push(&channel, &account, &entry);
        }
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("credentials"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with("-allowFrom.json"))
        .collect();
    files.sort();
    for file in files {
        let stem =
            file.file_name().unwrap_or_default().to_string_lossy().trim_end_matches("-allowFrom.json").to_owned();
        let (channel, account) = stem.split_once('-').unwrap_or((stem.as_str(), "default"));
        let Ok(value) = std::fs::read_to_string(&file).map(|t| serde_json::from_str::<Value>(&t).unwrap_or_default())
        else {
            continue;
        };
        for entry in value.get("allowFrom").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
            push(channel, account, entry);
        }
    }
    // Only platforms hermesd has adapters for.
    out.retain(|a| {
        ["telegram", "discord", "slack", "signal"].contains(&a.platform.split('@').next().unwrap_or_default())
    });
    out
}

/// Who `USER.md` is about: `--owner`, else the one command owner, else the one person the
/// allowlists and pairings name.
fn owner_of(
    config: &Value,
    owner: Option<&str>,
    approvals: &[Approval],
    plan: &Plan,
) -> Result<Option<(String, String)>, String> {
    if let Some(owner) = owner {
        let (platform, id) = owner.split_once(':').ok_or_else(|| format!("--owner {owner}: not PLATFORM:ID"))?;
        return Ok(Some((platform.to_owned(), id.to_owned())));
    }
    let owners: Vec<&str> = config
        .pointer("/commands/ownerAllowFrom")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    if let [one] = owners.as_slice()
        && let Some((platform, id)) = one.split_once(':')
    {
        return Ok(Some((platform.to_owned(), id.to_owned())));
    }
    let mut people: Vec<(String, String)> = plan
        .env
        .iter()
        .filter_map(|(name, value)| Some((name.strip_suffix("_ALLOWED_USERS")?.to_ascii_lowercase(), value)))
        .flat_map(|(platform, value)| {
            value.split(',').map(move |id| (platform.clone(), id.trim().to_owned())).collect::<Vec<_>>()
        })
        .collect();
    if people.is_empty() {
        people = approvals.iter().map(|a| (a.platform.clone(), a.user.clone())).collect();
    }
    Ok(match people.as_slice() {
        [one] => Some(one.clone()),
        _ => None,
    })
}

/// The entries of OpenClaw's free-Markdown `MEMORY.md`: each list item, with its section's
/// heading in front; paragraphs outside lists as they are; the title left out.
fn memory_entries(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut section: Option<String> = None;
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, out: &mut Vec<String>, section: &Option<String>| {
        let text = paragraph.join(" ").trim().to_owned();
        paragraph.clear();
        if !text.is_empty() {
            out.push(match section {
                Some(section) => format!("{section}: {text}"),
                None => text,
            });
        }
    };
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(heading) = trimmed.strip_prefix('#') {
            flush(&mut paragraph, &mut out, &section);
            let heading = heading.trim_start_matches('#').trim();
            // The file's own title (`# MEMORY.md`) names no section.
            section = (trimmed.starts_with("##") && !heading.is_empty()).then(|| heading.to_owned());
        } else if let Some(item) = trimmed.strip_prefix("- ").or_else(|| trimmed.strip_prefix("* ")) {
            flush(&mut paragraph, &mut out, &section);
            paragraph.push(item);
        } else if trimmed.is_empty() {
            flush(&mut paragraph, &mut out, &section);
        } else {
            paragraph.push(trimmed);
        }
    }
    flush(&mut paragraph, &mut out, &section);
    out
}

/// The active directives of OpenClaw's `USER.md` (each list item after a `status: active`
/// marker with a real date; the template's placeholders and examples stay out).
fn user_directives(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut active = false;
    let mut in_code = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with("```") {
            in_code = !in_code;
            continue;
        }
        if in_code {
            continue;
        }
        if trimmed.starts_with("<!--") && trimmed.contains("observed:") {
            active = trimmed.contains("status: active") && !trimmed.contains("YYYY-MM-DD");
            continue;
        }
        if let Some(item) = trimmed.strip_prefix("- ")
            && active
        {
            if !item.ends_with("...") && !item.trim().is_empty() {
                out.push(item.trim().to_owned());
            }
            continue;
        }
        if trimmed.starts_with('#') {
            active = false;
        }
    }
    out
}

/// The workspace's `MEMORY.md` to the default profile's notes, `USER.md`'s directives to the
/// owner's; the daily notes are listed.
fn memory(plan: &mut Plan, workspace: &Path, owner: Option<&(String, String)>) {
    let folder = PathBuf::from(crate::agent::tools::memory::MEMORY_DIR);
    if let Ok(text) = std::fs::read_to_string(workspace.join("MEMORY.md")) {
        let entries = memory_entries(&text);
        if !entries.is_empty() {
            plan.files.push(FileWrite {
                dest: folder.join("MEMORY.md"),
                content: format!("{}\n", entries.join("\n§\n")),
                kind: FileKind::Memory,
                what: "the agent's notes (OpenClaw's MEMORY.md, one entry per item), in every conversation".into(),
            });
        }
    }
    if let Ok(text) = std::fs::read_to_string(workspace.join("USER.md")) {
        let directives = user_directives(&text);
        match owner {
            _ if directives.is_empty() => {}
            Some((platform, user)) => plan.files.push(FileWrite {
                dest: person_dir(&folder, platform, user).join("USER.md"),
                content: format!("{}\n", directives.join("\n§\n")),
                kind: FileKind::Memory,
                what: format!("OpenClaw's USER.md directives, as {platform}:{user}'s"),
            }),
            None => plan.notes.push(Note {
                what: "USER.md".into(),
                why: "whose it is is not clear (no single owner or allowed person): name one with --owner PLATFORM:ID"
                    .into(),
            }),
        }
    }
    let daily = std::fs::read_dir(workspace.join("memory")).map(|d| d.flatten().count()).unwrap_or(0);
    if daily > 0 {
        plan.notes.push(Note {
            what: format!("{daily} daily note(s) in the workspace's memory/"),
            why: "hermesd keeps curated entries, not daily notes; they stay in OpenClaw's workspace (copy what matters into MEMORY.md and import again)".into(),
        });
    }
}

/// `SOUL.md` as the default profile's persona; the workspace's other prompt files are listed.
fn persona(plan: &mut Plan, workspace: &Path) {
    if let Ok(soul) = std::fs::read_to_string(workspace.join("SOUL.md"))
        && !soul.trim().is_empty()
    {
        plan.files.push(FileWrite {
            dest: PathBuf::from("SOUL.md"),
            content: soul,
            kind: FileKind::Keep,
            what: "persona of the default profile (OpenClaw's SOUL.md)".into(),
        });
    }
    for name in ["AGENTS.md", "IDENTITY.md", "TOOLS.md", "HEARTBEAT.md", "BOOTSTRAP.md"] {
        if workspace.join(name).is_file() {
            plan.notes.push(Note {
                what: format!("workspace {name}"),
                why: "OpenClaw's own prompt conventions; hermesd builds its prompt from SOUL.md, memory and skills"
                    .into(),
            });
        }
    }
}

/// Skills: each folder holding a `SKILL.md` directly under a root; the first root naming a skill
/// wins, as in OpenClaw.
fn skills(plan: &mut Plan, roots: &[PathBuf]) {
    for root in roots {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(root)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.join("SKILL.md").is_file())
            .collect();
        dirs.sort();
        for dir in dirs {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.starts_with('.') || plan.skills.iter().any(|s| s.name == name) {
                continue;
            }
            plan.skills.push(SkillCopy { from: dir, dest: PathBuf::from("skills").join(&name), name });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_items_keep_their_section() {
        let text = "# MEMORY.md\n\nDurable facts.\n\n## People\n- Ada is the owner.\n- Bob\n  writes rarely.\n";
        assert_eq!(memory_entries(text), ["Durable facts.", "People: Ada is the owner.", "People: Bob writes rarely."]);
    }

    #[test]
    fn only_active_dated_directives_are_taken() {
        let text = "# USER.md\n```md\n<!-- observed: 2026-01-01 | status: active -->\n- Example\n```\n\
                    <!-- observed: YYYY-MM-DD | status: active -->\n- Prefer ...\n\
                    <!-- observed: 2026-02-01 | status: active -->\n- Prefer tea.\n\
                    <!-- observed: 2026-01-01 | status: superseded -->\n- Prefer coffee.\n";
        assert_eq!(user_directives(text), ["Prefer tea."]);
    }

    #[test]
    fn written_paths_land_in_the_home() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("workspace")).unwrap();
        assert_eq!(local_path(dir.path(), "/elsewhere/.openclaw/workspace"), dir.path().join("workspace"));
    }
}
