//! `hermesd sessions list | show | search`: read the store directly (works while the daemon
//! runs; SQLite WAL lets readers and the daemon's writer coexist).

use std::process::ExitCode;

use clap::Subcommand;

use super::Loaded;
use crate::store::SessionStore;

/// `hermesd sessions …`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Sessions, most recently active first.
    List {
        /// How many.
        #[arg(long, default_value_t = 20)]
        limit: u32,
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
        /// How many hits.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

fn time(ms: i64) -> String {
    super::format_time(ms, true)
}

pub(super) async fn run(loaded: Loaded, command: SessionsCommand) -> ExitCode {
    let store = match super::open_store(&loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let result = match command {
        SessionsCommand::List { limit } => store.list_sessions(limit).await.map(|sessions| {
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
        SessionsCommand::Search { query, session, limit } => {
            store.search(&query, session.as_deref(), limit).await.map(|hits| {
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
