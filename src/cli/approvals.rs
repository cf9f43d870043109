//! `hermesd approvals list [--user PLATFORM:ID] | revoke PLATFORM:ID [COMMAND]`: the commands
//! people approved for good (`/approve always`), read and revoked in the store (safe while the
//! daemon runs: it asks the store at every command).

use std::process::ExitCode;

use clap::Subcommand;

use super::Loaded;
use crate::store::GrantStore;

/// `hermesd approvals …`.
#[derive(Debug, Subcommand)]
pub enum ApprovalsCommand {
    /// Lasting approvals, oldest first.
    List {
        /// Only this person's, as `PLATFORM:ID` (e.g. `telegram:123456789`).
        #[arg(long, value_name = "PLATFORM:ID")]
        user: Option<String>,
    },
    /// Revoke one person's approval of COMMAND, or all of theirs.
    Revoke {
        /// The person, as `PLATFORM:ID`.
        user: String,
        /// The command as listed; omitted: every one of theirs.
        command: Option<String>,
    },
}

fn person(text: &str) -> Result<(&str, &str), String> {
    text.split_once(':')
        .filter(|(platform, id)| !platform.is_empty() && !id.is_empty())
        .ok_or_else(|| format!("{text:?} is not PLATFORM:ID (e.g. telegram:123456789)"))
}

pub(super) async fn run(loaded: Loaded, command: ApprovalsCommand) -> ExitCode {
    let wanted = match &command {
        ApprovalsCommand::List { user: Some(user) } | ApprovalsCommand::Revoke { user, .. } => match person(user) {
            Ok(person) => Some(person),
            Err(e) => {
                eprintln!("hermesd: {e}");
                return ExitCode::from(2);
            }
        },
        ApprovalsCommand::List { user: None } => None,
    };
    let store = match super::open_store(&loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let result = match &command {
        ApprovalsCommand::List { .. } => store.grants(wanted).await.map(|grants| {
            if grants.is_empty() {
                return "no lasting approvals".to_owned();
            }
            grants
                .iter()
                .map(|g| {
                    format!("{}:{}  {}  {}", g.platform, g.user_id, super::format_time(g.created_at, false), g.pattern)
                })
                .collect::<Vec<_>>()
                .join("\n")
        }),
        ApprovalsCommand::Revoke { command, .. } => {
            let (platform, user) = wanted.expect("parsed above");
            let command = command.as_deref().map(crate::turn::approvals::normalise);
            store.revoke_grants(platform, user, command.as_deref()).await.map(|n| format!("revoked {n}"))
        }
    };
    store.close().await;
    super::report_outcome(result.map_err(|e| e.to_string()))
}
