//! `hermesd import hermes|openclaw [DIR] [--apply]`: another gateway's home brought into this one.
//!
//! Reading the source makes a `Plan` (`hermes/`, `openclaw/`): the config it maps to, the `.env` variables
//! hermesd uses, files (memory, personas), skills, conversations, cron jobs, approved people and
//! home channels, and a note for everything left out with its reason. Each item is then compared
//! with what this home has: new, already there (unchanged), or kept as this home has it. The dry
//! run prints that and writes nothing; `--apply` first copies this home (`backups/`), then writes
//! only the new items, so a second run changes nothing. The source home is only ever read.
//!
//! An existing `config.toml` is never overwritten: when it differs, the mapped one is written
//! beside it as `config.imported.toml` to compare.

mod files;
mod hermes;
mod json5;
mod openclaw;
mod settle;
mod write;
mod yaml;

use self::files::read_env;
use self::settle::{env_names, settle};

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use chrono::Utc;
use clap::Subcommand;
use hermesd_platform::ChatRef;
use toml::Table;

use super::{EXIT_CONFIG, EXIT_TEMPFAIL};
use crate::agent::tools::cronjob::jobs::{JobRules, JobSpec, prepare};
use crate::config::{Config, ConfigFile, Paths, ProcessEnv};
use crate::store::import::{ImportStore, ImportedSession};
use crate::store::{ExtrasStore, SqliteStore};
use crate::vocab::target::Target;

/// `hermesd import …`.
#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// A Hermes Agent home: config, .env, sessions, cron jobs, memory, skills, approvals, profiles.
    Hermes {
        /// The Hermes home (default ~/.hermes).
        dir: Option<PathBuf>,
        /// Do it (without: print what would be done and write nothing).
        #[arg(long)]
        apply: bool,
        /// Who Hermes' USER.md is about, as PLATFORM:ID (default: the one allowed or paired user).
        #[arg(long, value_name = "PLATFORM:ID")]
        owner: Option<String>,
    },
    /// An OpenClaw home: config, .env, the default agent's conversations, cron jobs, memory,
    /// persona, skills, approved pairings.
    Openclaw {
        /// The OpenClaw home (default $OPENCLAW_STATE_DIR, else ~/.openclaw).
        dir: Option<PathBuf>,
        /// Do it (without: print what would be done and write nothing).
        #[arg(long)]
        apply: bool,
        /// Who OpenClaw's USER.md is about, as PLATFORM:ID (default: the one command owner or
        /// allowed user).
        #[arg(long, value_name = "PLATFORM:ID")]
        owner: Option<String>,
    },
}

/// Something left out, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Note {
    /// What.
    pub(crate) what: String,
    /// Why.
    pub(crate) why: String,
}

/// How a file is brought in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    /// Memory entries: the ones this home's file lacks are added.
    Memory,
    /// Written only where there is no such file yet.
    Keep,
}

/// A file to write under `HERMESD_HOME`.
#[derive(Debug, Clone)]
pub(crate) struct FileWrite {
    /// Where, relative to `HERMESD_HOME`.
    pub(crate) dest: PathBuf,
    /// Its text.
    pub(crate) content: String,
    /// How.
    pub(crate) kind: FileKind,
    /// What it is, for people.
    pub(crate) what: String,
}

/// A skill folder to copy.
#[derive(Debug, Clone)]
pub(crate) struct SkillCopy {
    /// The source folder.
    pub(crate) from: PathBuf,
    /// Where, relative to `HERMESD_HOME`.
    pub(crate) dest: PathBuf,
    /// Its name.
    pub(crate) name: String,
}

/// A cron job to create.
#[derive(Debug, Clone)]
pub(crate) struct JobImport {
    /// Its id (the source's).
    pub(crate) id: String,
    /// Its mark (`hermes:<profile>:cron:<id>`).
    pub(crate) source: String,
    /// For people.
    pub(crate) label: String,
    /// Created paused.
    pub(crate) paused: bool,
    /// The job.
    pub(crate) spec: JobSpec,
}

/// A person approved on a platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Approval {
    /// The platform.
    pub(crate) platform: String,
    /// Their id.
    pub(crate) user: String,
    /// Their name, when known.
    pub(crate) name: Option<String>,
}

/// Everything an import would do.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    /// What the source is (`hermes`, `openclaw`): the command's word, and the prefix of the
    /// marks of what was imported from it.
    pub(crate) source: &'static str,
    /// The source home.
    pub(crate) from: PathBuf,
    /// The mapped config.
    pub(crate) config: Table,
    /// `.env` variables: name → value (never printed).
    pub(crate) env: BTreeMap<String, String>,
    /// Files.
    pub(crate) files: Vec<FileWrite>,
    /// Skills.
    pub(crate) skills: Vec<SkillCopy>,
    /// Conversations.
    pub(crate) sessions: Vec<ImportedSession>,
    /// Cron jobs.
    pub(crate) jobs: Vec<JobImport>,
    /// Approved people.
    pub(crate) approvals: Vec<Approval>,
    /// Home channels.
    pub(crate) homes: Vec<ChatRef>,
    /// What is left out.
    pub(crate) notes: Vec<Note>,
}

/// Whether an item is new here.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Status {
    /// Not here yet: written by `--apply`.
    New,
    /// Already here as the source has it.
    Same,
    /// Here differently: this home's is kept.
    Kept(String),
    /// Needs the operator: said why.
    Todo(String),
}

/// One line of the report.
struct Line {
    status: Status,
    kind: &'static str,
    text: String,
}

/// Run `hermesd import`.
pub(super) async fn run(home: Option<PathBuf>, config: Option<PathBuf>, command: ImportCommand) -> ExitCode {
    type Reader = fn(&Path, Option<&str>, &Path) -> Result<Plan, String>;
    let user_home = || std::env::var_os("HOME").map(PathBuf::from);
    let (dir, apply, owner, read, default): (_, _, _, Reader, _) = match command {
        ImportCommand::Hermes { dir, apply, owner } => {
            (dir, apply, owner, hermes::read as Reader, user_home().map(|h| h.join(".hermes")))
        }
        ImportCommand::Openclaw { dir, apply, owner } => {
            let default = std::env::var_os("OPENCLAW_STATE_DIR").map(PathBuf::from).or_else(|| {
                let home = std::env::var_os("OPENCLAW_HOME").map(PathBuf::from).or_else(user_home)?;
                // The home's name before OpenClaw's rename, when only that one exists.
                let current = home.join(".openclaw");
                let older = home.join(".clawdbot");
                Some(if !current.exists() && older.exists() { older } else { current })
            });
            (dir, apply, owner, openclaw::read as Reader, default)
        }
    };
    let paths = Paths::resolve(home, config, &ProcessEnv);
    let Some(dir) = dir.or(default) else {
        eprintln!("hermesd: name the home to import (no HOME to find it in)");
        return ExitCode::FAILURE;
    };
    // One spelling of the source, so the mapped config's text is the same on every run.
    let dir = dir.canonicalize().unwrap_or(dir);
    if same_place(&dir, &paths.home) {
        eprintln!("hermesd: {} is this hermesd home itself", dir.display());
        return ExitCode::FAILURE;
    }
    let scratch = std::env::temp_dir().join(format!("hermesd-import-{}", uuid::Uuid::new_v4().simple()));
    let plan = std::fs::create_dir_all(&scratch)
        .map_err(|e| format!("{}: {e}", scratch.display()))
        .and_then(|()| read(&dir, owner.as_deref(), &scratch));
    let _ = std::fs::remove_dir_all(&scratch);
    let mut plan = match plan {
        Ok(plan) => plan,
        Err(e) => {
            eprintln!("hermesd: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = settle(&mut plan) {
        eprintln!("hermesd: the mapped config has problems (a bug of this importer); nothing was written:\n  {e}");
        return ExitCode::from(EXIT_CONFIG);
    }
    match Importer::new(&paths, &plan).and_then(|importer| Ok((importer.config_problems()?, importer))) {
        Ok((problems, importer)) => {
            if !problems.is_empty() {
                eprintln!("hermesd: the mapped config has problems (a bug of this importer); nothing was written:");
                for problem in problems {
                    eprintln!("  {problem}");
                }
                return ExitCode::from(EXIT_CONFIG);
            }
            importer.run(apply).await
        }
        Err(e) => {
            eprintln!("hermesd: {e}");
            ExitCode::FAILURE
        }
    }
}

fn same_place(a: &Path, b: &Path) -> bool {
    match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// The plan against this home.
struct Importer<'a> {
    paths: &'a Paths,
    plan: &'a Plan,
    /// The mapped config as text, and as hermesd reads it.
    config_text: String,
    mapped: Config,
    /// Where the mapped config goes, and whether it is new there.
    config_dest: PathBuf,
    config_status: Status,
    /// The config the daemon will run with (this home's, when it keeps its own).
    effective: Config,
}

impl<'a> Importer<'a> {
    fn new(paths: &'a Paths, plan: &'a Plan) -> Result<Self, String> {
        let body = toml::to_string(&plan.config).map_err(|e| format!("write the mapped config: {e}"))?;
        let config_text = format!(
            "# Imported by `hermesd import {}` from {}.\n# Every key is documented in deploy/hermesd.example.toml.\n\n{body}",
            plan.source,
            plan.from.display()
        );
        let mapped: Config =
            toml::from_str(&config_text).map_err(|e| format!("the mapped config does not read back: {e}"))?;
        let (config_dest, config_status, effective) = match std::fs::read_to_string(&paths.config) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (paths.config.clone(), Status::New, mapped.clone()),
            Err(e) => return Err(format!("{}: {e}", paths.config.display())),
            Ok(existing) if existing == config_text => (paths.config.clone(), Status::Same, mapped.clone()),
            Ok(_) => {
                let beside = paths.config.with_file_name("config.imported.toml");
                let file = ConfigFile::read(&paths.config).map_err(|e| e.problems.join("; "))?;
                let status = match std::fs::read_to_string(&beside) {
                    Ok(text) if text == config_text => Status::Same,
                    _ => Status::New,
                };
                (beside, status, file.config)
            }
        };
        Ok(Self { paths, plan, config_text, mapped, config_dest, config_status, effective })
    }

    /// What `hermesd check` would say of the mapped config, secrets aside (they come with .env).
    fn config_problems(&self) -> Result<Vec<String>, String> {
        let mut env: std::collections::HashMap<String, String> = self.plan.env.clone().into_iter().collect();
        // The variables the mapped config names but Hermes did not have are reported as notes.
        for name in self.mapped_env_names() {
            env.entry(name).or_insert_with(|| "set-me".into());
        }
        let env = crate::config::Env::from_map(env);
        Ok(self.mapped.validate(&env))
    }

    /// The variables the mapped config names (`*_env` keys), set or not.
    fn mapped_env_names(&self) -> Vec<String> {
        env_names(&self.plan.config)
    }

    async fn run(&self, apply: bool) -> ExitCode {
        let db = self.paths.database(&self.effective.store);
        // The dry run reads this home's store without creating or upgrading it.
        let store = if apply {
            match SqliteStore::open(&db, self.effective.store.busy_timeout.get(), 1).await {
                Ok(store) => Some(store),
                Err(e) => {
                    eprintln!("hermesd: open {}: {e}", db.display());
                    return ExitCode::from(EXIT_TEMPFAIL);
                }
            }
        } else {
            match SqliteStore::open_read_only(&db, self.effective.store.busy_timeout.get()).await {
                Ok((store, version)) if version == SqliteStore::known_schema_version() => Some(store),
                Ok((store, _)) => {
                    store.close().await;
                    None
                }
                Err(_) => None,
            }
        };
        let lines = self.lines(store.as_ref()).await;
        let lines = match lines {
            Ok(lines) => lines,
            Err(e) => {
                eprintln!("hermesd: {e}");
                return ExitCode::FAILURE;
            }
        };
        let new = lines.iter().filter(|l| l.status == Status::New).count();
        println!(
            "hermesd import {}: {} into {}{}",
            self.plan.source,
            self.plan.from.display(),
            self.paths.home.display(),
            if apply { "" } else { " (dry run: nothing is written; --apply does it)" }
        );
        let mut result = Ok(());
        if apply && new > 0 {
            let backup = match self.backup(&db).await {
                Ok(backup) => backup,
                Err(e) => {
                    eprintln!("hermesd: backup before the import failed, nothing imported: {e}");
                    return ExitCode::FAILURE;
                }
            };
            println!("backup of this home: {}", backup.display());
            result = self.apply(store.as_ref().expect("opened for --apply")).await;
        }
        for line in &lines {
            let mark = match &line.status {
                Status::New if apply => "+ wrote",
                Status::New => "+ would write",
                Status::Same => "= unchanged",
                Status::Kept(_) => "! kept",
                Status::Todo(_) => "! to do",
            };
            let why = match &line.status {
                Status::Kept(why) | Status::Todo(why) => format!(" ({why})"),
                _ => String::new(),
            };
            println!("{mark:<14} {:<10} {}{why}", line.kind, line.text);
        }
        for note in &self.plan.notes {
            println!("{:<14} {:<10} {}: {}", "- left out", "", note.what, note.why);
        }
        if new == 0 {
            println!("nothing to do: this home already has everything the import brings");
        } else if !apply {
            println!("{new} item(s) to write");
        }
        if let Some(store) = store {
            store.close().await;
        }
        match result {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("hermesd: the import stopped: {e} (the backup above has this home as it was)");
                ExitCode::FAILURE
            }
        }
    }

    /// Every item with its status here. An item marked imported before is unchanged, even if it
    /// was removed here since.
    async fn lines(&self, store: Option<&SqliteStore>) -> Result<Vec<Line>, String> {
        let marked = |source: String| async move {
            match store {
                Some(store) => store.imported(&source).await.map(|found| found.is_some()).map_err(|e| e.to_string()),
                None => Ok(false),
            }
        };
        let mut lines = Vec::new();
        let dest = self.config_dest.strip_prefix(&self.paths.home).unwrap_or(&self.config_dest);
        let beside = if dest.ends_with("config.imported.toml") {
            " (config.toml differs and is kept: compare the two and merge by hand)"
        } else {
            ""
        };
        lines.push(Line {
            status: self.config_status.clone(),
            kind: "config",
            text: format!("{}: {}{beside}", dest.display(), summary(&self.mapped)),
        });
        let existing = read_env(&self.paths.home.join(".env"))?;
        let mut added = Vec::new();
        let mut same = Vec::new();
        for (name, value) in &self.plan.env {
            if marked(env_source(self.plan.source, name)).await? {
                same.push(name.clone());
                continue;
            }
            match existing.get(name) {
                None => added.push(name.clone()),
                Some(v) if v == value => same.push(name.clone()),
                Some(_) => lines.push(Line {
                    status: Status::Kept("this home's value differs and is kept".into()),
                    kind: ".env",
                    text: name.clone(),
                }),
            }
        }
        if !added.is_empty() {
            lines.push(Line {
                status: Status::New,
                kind: ".env",
                text: format!("{} (values not shown)", added.join(", ")),
            });
        }
        if !same.is_empty() {
            lines.push(Line { status: Status::Same, kind: ".env", text: same.join(", ") });
        }
        for name in self.mapped_env_names() {
            if !self.plan.env.contains_key(&name) && !existing.contains_key(&name) {
                lines.push(Line {
                    status: Status::Todo("the source had no value: set it in .env".into()),
                    kind: ".env",
                    text: name,
                });
            }
        }
        for file in &self.plan.files {
            let path = self.paths.home.join(&file.dest);
            let status = if marked(file_source(self.plan.source, &file.dest)).await? {
                Status::Same
            } else {
                match (file.kind, std::fs::read_to_string(&path)) {
                    (_, Err(_)) => Status::New,
                    (FileKind::Keep, Ok(text)) if text == file.content => Status::Same,
                    (FileKind::Keep, Ok(_)) => Status::Kept("this home has its own".into()),
                    (FileKind::Memory, Ok(text)) => {
                        let have = hermes::entries(&text);
                        if hermes::entries(&file.content).iter().all(|e| have.contains(e)) {
                            Status::Same
                        } else {
                            Status::New
                        }
                    }
                }
            };
            let count = hermes::entries(&file.content).len();
            let detail = if file.kind == FileKind::Memory { format!(" ({count} entries)") } else { String::new() };
            lines.push(Line { status, kind: "file", text: format!("{}{detail}: {}", file.dest.display(), file.what) });
        }
        for skill in &self.plan.skills {
            let path = self.paths.home.join(&skill.dest);
            let status = if marked(file_source(self.plan.source, &skill.dest)).await? {
                Status::Same
            } else if !path.exists() {
                Status::New
            } else if std::fs::read(path.join("SKILL.md")).ok() == std::fs::read(skill.from.join("SKILL.md")).ok() {
                Status::Same
            } else {
                Status::Kept("this home has a skill of that name".into())
            };
            lines.push(Line { status, kind: "skill", text: format!("{} ({})", skill.name, skill.dest.display()) });
        }
        for session in &self.plan.sessions {
            let status = if marked(session.source.clone()).await? { Status::Same } else { Status::New };
            let how = if session.route {
                format!("continues in {}", session.key.key)
            } else {
                "history (listed and searchable)".into()
            };
            let title = session.title.as_deref().map(|t| format!(" {t:?}")).unwrap_or_default();
            lines.push(Line {
                status,
                kind: "session",
                text: format!(
                    "{} {} {}{title}: {} messages, {how}",
                    session.key.platform,
                    session.key.chat_type.as_str(),
                    session.key.chat_id,
                    session.messages.len()
                ),
            });
        }
        for job in &self.plan.jobs {
            let status = if marked(job.source.clone()).await? {
                Status::Same
            } else {
                match self.prepare(job) {
                    Ok(_) => Status::New,
                    Err(e) => Status::Todo(format!("not imported: {e}")),
                }
            };
            let mut paused = if job.paused { ", paused".to_owned() } else { String::new() };
            if let Some(model) = &job.spec.model
                && let Ok(new) = self.prepare(job)
                && new.model.is_none()
            {
                paused.push_str(&format!(" (starts on the primary model: {model} is not in the chain)"));
            }
            lines.push(Line {
                status,
                kind: "cron",
                text: format!(
                    "{}: {} → {}{paused}",
                    job.label,
                    job.spec.schedule,
                    job.spec.deliver.as_deref().unwrap_or("default")
                ),
            });
        }
        for approval in &self.plan.approvals {
            let status =
                if marked(approval_source(self.plan.source, approval)).await? { Status::Same } else { Status::New };
            let name = approval.name.as_deref().map(|n| format!(" ({n})")).unwrap_or_default();
            lines.push(Line {
                status,
                kind: "approved",
                text: format!("{}:{}{name}", approval.platform, approval.user),
            });
        }
        for home in &self.plan.homes {
            let status = if marked(home_source(self.plan.source, home)).await? {
                Status::Same
            } else {
                match store {
                    Some(store) => match store.home_channel(&home.platform).await.map_err(|e| e.to_string())? {
                        None => Status::New,
                        Some(chat) if chat == *home => Status::Same,
                        Some(chat) => Status::Kept(format!("this home's is {}", chat.chat_id)),
                    },
                    None => Status::New,
                }
            };
            lines.push(Line { status, kind: "home", text: format!("{} → {}", home.platform, home.chat_id) });
        }
        Ok(lines)
    }

    /// A job as hermesd would store it, checked against the config the daemon will run.
    fn prepare(&self, job: &JobImport) -> Result<crate::store::NewJob, String> {
        let config = &self.effective;
        let tz = config.cron.timezone.parse().map_err(|_| format!("cron.timezone {:?}", config.cron.timezone))?;
        let profile = job.spec.profile.as_deref().unwrap_or(crate::config::DEFAULT_PROFILE);
        let models: Vec<String> = config
            .profile(profile, self.paths)
            .map(|p| p.models.iter().map(|m| m.name.clone()).collect())
            .unwrap_or_default();
        let mut spec = job.spec.clone();
        if spec.model.as_ref().is_some_and(|m| !models.contains(m)) {
            // A model outside the chain: the job starts on the primary.
            spec.model = None;
        }
        let check = |target: &Target| config.check_target(&target.to_string(), true);
        let default = match config.cron.default_deliver.as_str() {
            "origin" if spec.origin.is_none() => "local",
            other => other,
        };
        let rules = JobRules { tz, default_deliver: default, models: &models, check_target: &check };
        let mut new = prepare(spec, &rules, Utc::now())?;
        new.id = job.id.clone();
        Ok(new)
    }
}

/// The mark of an imported `.env` variable.
fn env_source(source: &str, name: &str) -> String {
    format!("{source}:env:{name}")
}

/// The mark of an imported file or folder (by where it went).
fn file_source(source: &str, dest: &Path) -> String {
    format!("{source}:file:{}", dest.display())
}

fn approval_source(source: &str, approval: &Approval) -> String {
    format!("{source}:approval:{}:{}", approval.platform, approval.user)
}

fn home_source(source: &str, chat: &ChatRef) -> String {
    format!("{source}:home:{}", chat.platform)
}

/// One line of what the mapped config sets up.
fn summary(config: &Config) -> String {
    let mut parts = Vec::new();
    if let Some(model) = &config.model {
        let fallbacks = match model.fallback.len() {
            0 => String::new(),
            n => format!(" + {n} fallback(s)"),
        };
        parts.push(format!("model {}{fallbacks}", model.name));
    }
    let platforms: Vec<String> = config
        .platforms
        .sections()
        .into_iter()
        .filter(|section| section.enabled())
        .map(|section| section.name().to_owned())
        .chain(config.platforms.api.enabled.then(|| "api".to_owned()))
        .collect();
    if !platforms.is_empty() {
        parts.push(format!("platforms {}", platforms.join(", ")));
    }
    if !config.mcp.servers.is_empty() {
        parts.push(format!("{} MCP server(s)", config.mcp.servers.len()));
    }
    if !config.profiles.is_empty() {
        parts.push(format!("profiles {}", config.profiles.keys().cloned().collect::<Vec<_>>().join(", ")));
    }
    if !config.routes.is_empty() {
        parts.push(format!("{} route(s)", config.routes.len()));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    use super::files::quote_env;
    use super::settle::remove_path;
    use super::*;

    #[test]
    fn remove_path_takes_the_deepest_existing_part() {
        let mut table: Table =
            toml::from_str("[platforms.email]\nenabled = true\n[[routes]]\nchat = \"1\"\n[[routes]]\nchat = \"2\"\n")
                .unwrap();
        assert!(remove_path(&mut table, "routes[0]"));
        assert_eq!(table["routes"].as_array().unwrap().len(), 1);
        assert!(remove_path(&mut table, "platforms.email.password_env"), "the table, as the key is not there");
        assert!(table["platforms"].as_table().unwrap().is_empty());
        assert!(!remove_path(&mut table, "nothing.here"));
    }

    #[test]
    fn a_config_hermesd_would_refuse_settles_by_leaving_parts_out() {
        let config = toml::from_str(
            "[platforms.email]\nenabled = true\naddress = \"a@example.com\"\nimap_url = \"imaps://imap.example.com:993\"\nsmtp_url = \"smtps://smtp.example.com:465\"\n\n[platforms.telegram]\nenabled = true\n",
        )
        .unwrap();
        let mut plan = Plan { config, ..Plan::default() };
        plan.env.insert("TELEGRAM_BOT_TOKEN".into(), "1:x".into());
        settle(&mut plan).unwrap();
        assert!(plan.config.get("platforms").is_some(), "{:?} {:?}", plan.notes, plan.config);
        assert!(plan.config["platforms"].get("email").is_none(), "no password: left out");
        assert!(plan.config["platforms"].get("telegram").is_some());
        assert!(plan.notes.iter().any(|n| n.what.contains("platforms.email")), "{:?}", plan.notes);
    }

    #[test]
    fn env_values_read_back_as_written() {
        for value in ["plain-1:2", "with space", "it's", "a#b", ""] {
            let text = format!("K={}\n", quote_env(value));
            let vars = crate::config::parse_dotenv(&text).unwrap();
            assert_eq!(vars["K"], value, "{text}");
        }
    }
}
