//! `hermesd sessions list | show | search | export | prune | delete`: read the store directly
//! (works while the daemon runs; SQLite WAL lets readers and the daemon's writer coexist).
//!
//! `export` writes jsonl (one JSON object per message) or md; `delete --user` is `agent::people::erase`.

use std::process::ExitCode;

use clap::Subcommand;

use super::Loaded;
use crate::store::{RetentionStore, SessionInfo, SessionStore, SqliteStore, StoreResult};

/// `hermesd sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Sessions, most recently active first.
    List {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
        /// Only this profile's sessions (`default` for the top-level agent).
        #[arg(long)]
        profile: Option<String>,
    },
    /// One session's messages (archived ones marked).
    Show {
        /// The session id (as `list` prints it).
        id: String,
    },
    /// Full-text search over all messages.
    Search {
        /// Words or a fragment to find.
        query: String,
        /// Only this session.
        #[arg(long)]
        session: Option<String>,
        /// Only this profile's sessions.
        #[arg(long)]
        profile: Option<String>,
        /// How many hits.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
    /// Write sessions with every message (archived ones included) to stdout.
    Export {
        /// The session id; omit with `--all`.
        id: Option<String>,
        /// Every session, most recently active first.
        #[arg(long, conflicts_with = "id")]
        all: bool,
        /// `jsonl` (one JSON object per message) or `md`.
        #[arg(long, value_enum, default_value_t = ExportFormat::Jsonl)]
        format: ExportFormat,
        /// With `--all`: only this profile's sessions.
        #[arg(long, requires = "all")]
        profile: Option<String>,
    },
    /// Delete sessions inactive for longer than a duration, with their messages.
    Prune {
        /// E.g. `90d`; sessions last active before then are deleted.
        #[arg(long, value_name = "AGE")]
        older_than: String,
    },
    /// Erase one person: their sessions, memory, files and direct-message media.
    Delete {
        /// The person as `PLATFORM:ID`, e.g. `telegram:123456789` or `api:alice`.
        #[arg(long, value_name = "PLATFORM:ID")]
        user: String,
    },
}

/// How `sessions export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ExportFormat {
    /// One JSON object per line: the session's id and key with each message.
    Jsonl,
    /// A readable transcript.
    Md,
}

fn time(ms: i64) -> String {
    super::format_time(ms, true)
}

/// The session key prefix of profile `name` (`agent:<key>:`); an error for a name no profile
/// can have. A profile gone from the config still names its stored sessions.
fn profile_prefix(name: &str) -> Result<String, String> {
    if name != crate::config::DEFAULT_PROFILE && !crate::config::is_profile_name(name) {
        return Err(format!("--profile {name:?} is not a profile name"));
    }
    Ok(format!("agent:{}:", crate::config::profile_key(name)))
}

pub(super) async fn run(loaded: Loaded, command: SessionsCommand) -> ExitCode {
    let profile = match &command {
        SessionsCommand::List { profile, .. }
        | SessionsCommand::Search { profile, .. }
        | SessionsCommand::Export { profile, .. } => profile.as_deref(),
        _ => None,
    };
    let prefix = match profile.map(profile_prefix).transpose() {
        Ok(prefix) => prefix,
        Err(e) => {
            eprintln!("hermesd: {e}");
            return ExitCode::from(2);
        }
    };
    let prefix = prefix.as_deref();
    let person = match &command {
        SessionsCommand::Delete { user } => match crate::agent::people::parse_person(user) {
            Ok(person) => Some(person),
            Err(e) => {
                eprintln!("hermesd: {e}");
                return ExitCode::from(2);
            }
        },
        _ => None,
    };
    let store = match super::open_store(&loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let result = match command {
        SessionsCommand::List { limit, .. } => store.list_sessions_with(prefix, limit).await.map(|sessions| {
            for s in sessions {
                let flag = if s.suspended { " [suspended]" } else { "" };
                println!("{}  {}  {:>5} msgs  {}{flag}", s.id, time(s.updated_at), s.message_count, s.key);
            }
        }),
        SessionsCommand::Show { id } => match store.session(&id).await {
            Ok(Some(session)) => store.full_history(&session.id).await.map(|messages| {
                println!("session {} ({})", session.id, session.key);
                for m in messages {
                    let archived = if m.archived { " (archived)" } else { "" };
                    let text = m.message.content.as_deref().unwrap_or("");
                    println!("[{}] {}{archived}: {text}", time(m.created_at), m.message.role.as_str());
                }
            }),
            Ok(None) => {
                eprintln!("hermesd: no session {id}");
                store.close().await;
                return ExitCode::FAILURE;
            }
            Err(e) => Err(e),
        },
        SessionsCommand::Export { id, all, format, .. } => {
            let sessions = match (id, all) {
                (Some(id), _) => match store.session(&id).await {
                    Ok(Some(session)) => Ok(vec![session]),
                    Ok(None) => {
                        eprintln!("hermesd: no session {id}");
                        store.close().await;
                        return ExitCode::FAILURE;
                    }
                    Err(e) => Err(e),
                },
                (None, true) => store.list_sessions_with(prefix, u32::MAX).await,
                (None, false) => {
                    eprintln!("hermesd: name a session id, or --all");
                    store.close().await;
                    return ExitCode::from(2);
                }
            };
            match sessions {
                Ok(sessions) => export(&store, &sessions, format, &mut std::io::stdout().lock()).await,
                Err(e) => Err(e),
            }
        }
        SessionsCommand::Prune { older_than } => {
            let age = match crate::config::parse_duration(&older_than) {
                Ok(age) => age,
                Err(e) => {
                    eprintln!("hermesd: --older-than {older_than:?}: {e}");
                    store.close().await;
                    return ExitCode::from(2);
                }
            };
            let before = chrono::Utc::now()
                .timestamp_millis()
                .saturating_sub(i64::try_from(age.as_millis()).unwrap_or(i64::MAX));
            prune(&store, before).await.map(|n| println!("deleted {n} sessions inactive since before {}", time(before)))
        }
        SessionsCommand::Delete { .. } => {
            let (platform, user) = person.expect("parsed before the store was opened");
            let workdir = loaded.paths.workdir(&loaded.config.tools);
            crate::agent::people::erase(&store, &loaded.paths.home, &workdir, &platform, &user).await.map(|lines| {
                for line in lines {
                    println!("{line}");
                }
            })
        }
        SessionsCommand::Search { query, session, limit, .. } => {
            store.search_with(&query, session.as_deref(), prefix, limit).await.map(|hits| {
                for hit in hits {
                    println!(
                        "{}  #{}  {}  {}",
                        hit.session_id,
                        hit.message_id,
                        hit.role,
                        hit.snippet.replace('\n', " ")
                    );
                }
            })
        }
    };
    store.close().await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermesd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Write `sessions` with their whole history to `out`.
async fn export(
    store: &SqliteStore,
    sessions: &[SessionInfo],
    format: ExportFormat,
    out: &mut dyn std::io::Write,
) -> StoreResult<()> {
    let io = |e: std::io::Error| crate::store::StoreError::Database(sqlx::Error::Io(e));
    for session in sessions {
        let messages = store.full_history(&session.id).await?;
        match format {
            ExportFormat::Jsonl => {
                for message in &messages {
                    let line =
                        serde_json::json!({ "session_id": session.id, "session_key": session.key, "message": message });
                    writeln!(out, "{line}").map_err(io)?;
                }
            }
            ExportFormat::Md => {
                let title = session.title.as_deref().unwrap_or("untitled");
                writeln!(
                    out,
                    "# {} — {title}\n\n`{}`, last active {}\n",
                    session.id,
                    session.key,
                    time(session.updated_at)
                )
                .map_err(io)?;
                for m in &messages {
                    let archived = if m.archived { " (archived)" } else { "" };
                    writeln!(out, "## {} · {}{archived}\n", m.message.role.as_str(), time(m.created_at)).map_err(io)?;
                    if let Some(text) = &m.message.content {
                        writeln!(out, "{text}\n").map_err(io)?;
                    }
                    for call in &m.message.tool_calls {
                        writeln!(out, "- tool call `{}`: `{}`\n", call.name, call.arguments).map_err(io)?;
                    }
                }
            }
        }
    }
    out.flush().map_err(io)
}

/// Delete sessions last active before `before`, a batch at a time.
/// Sessions deleted per transaction: each takes its messages and their full-text entries along,
/// so small batches keep the daemon's writer waiting briefly (`benches/retention.rs`).
const PRUNE_BATCH: u32 = 10;

async fn prune(store: &SqliteStore, before: i64) -> StoreResult<u64> {
    let mut total = 0;
    loop {
        let n = store.prune_sessions(before, PRUNE_BATCH).await?;
        total += n;
        if n < u64::from(PRUNE_BATCH) {
            // As the retention task does: drop the deleted messages' full-text entries and give
            // the freed pages back.
            if total > 0 {
                store.reclaim_space(16_384).await?;
            }
            return Ok(total);
        }
    }
}
