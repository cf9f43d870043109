//! `hermesd pairing list | approve | revoke`: the operator's side of DM pairing.

use std::process::ExitCode;

use clap::Subcommand;

use super::Loaded;
use crate::access;
use crate::clock::now_ms;
use crate::store::{AccessStore, PairingApproval};

/// `hermesd pairing …`.
#[derive(Debug, Subcommand)]
pub enum PairingCommand {
    /// Approved users and codes waiting for approval.
    List,
    /// Approve the user who was given `code` on `platform`.
    Approve {
        /// The platform (`telegram`, `discord`, `slack`).
        platform: String,
        /// The code the user received.
        code: String,
    },
    /// Remove a user's approval.
    Revoke {
        /// The platform.
        platform: String,
        /// The user's id on that platform.
        user_id: String,
    },
}

/// Approve with the home's pairing key (made here if the daemon never ran, so no code matches).
async fn approve(
    loaded: &Loaded,
    store: &crate::store::SqliteStore,
    platform: &str,
    code: &str,
) -> Result<PairingApproval, String> {
    let key = access::PairingKey::load_or_create(&loaded.paths.home).map_err(|e| e.to_string())?;
    access::approve(store, &key, platform, code).await.map_err(|e| e.to_string())
}

fn time(ms: i64) -> String {
    super::format_time(ms, false)
}

pub(super) async fn run(loaded: Loaded, command: PairingCommand) -> ExitCode {
    let store = match super::open_store(&loaded).await {
        Ok(store) => store,
        Err(code) => return code,
    };
    let code = match command {
        PairingCommand::List => match store.access_entries(now_ms()).await {
            Ok(entries) if entries.is_empty() => {
                println!("no approved users and no waiting codes");
                ExitCode::SUCCESS
            }
            Ok(entries) => {
                for e in entries {
                    let name = e.user_name.as_deref().unwrap_or("-");
                    let state = if e.approved {
                        format!("approved {}", time(e.at))
                    } else {
                        format!("waiting, code expires {}", time(e.at))
                    };
                    println!("{:<10} {:<20} {:<20} {state}", e.platform, e.user_id, name);
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("hermesd: {e}");
                ExitCode::FAILURE
            }
        },
        PairingCommand::Approve { platform, code } => match approve(&loaded, &store, &platform, &code).await {
            Ok(PairingApproval::Approved { user_id, user_name }) => {
                println!("approved {platform} user {user_id} ({})", user_name.as_deref().unwrap_or("no name"));
                ExitCode::SUCCESS
            }
            Ok(PairingApproval::NoSuchCode) => {
                eprintln!("hermesd: no waiting {platform} pairing code matches (codes expire after 1 hour)");
                ExitCode::FAILURE
            }
            Ok(PairingApproval::Locked { until }) => {
                eprintln!("hermesd: too many wrong codes; {platform} approvals are locked until {} UTC", time(until));
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("hermesd: {e}");
                ExitCode::FAILURE
            }
        },
        PairingCommand::Revoke { platform, user_id } => match store.revoke_user(&platform, &user_id).await {
            Ok(true) => {
                println!("revoked {platform} user {user_id}");
                ExitCode::SUCCESS
            }
            Ok(false) => {
                eprintln!("hermesd: {platform} user {user_id} was not approved");
                ExitCode::FAILURE
            }
            Err(e) => {
                eprintln!("hermesd: {e}");
                ExitCode::FAILURE
            }
        },
    };
    store.close().await;
    code
}
