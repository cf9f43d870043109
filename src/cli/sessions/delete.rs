//! `hermesd sessions delete --user PLATFORM:ID`: erase one person — their sessions (messages,
//! full-text rows, routes, inbound events, reply chunks, task lists), the cron jobs they made,
//! their memory folder, their workdir folder (and its private temp dir) and their direct
//! conversations' media — and say what went. Safe while the daemon runs: the store part is one
//! write transaction (WAL), the folders are the person's own. It never touches another person's
//! or a shared chat's data.

use std::path::{Path, PathBuf};

use hermesd_platform::media::sanitise;

use crate::agent::tools::memory::MEMORY_DIR;
use crate::agent::tools::place::person_dir;
use crate::agent::tools::todo::todo_path;
use crate::store::{PersonStore, StoreResult};

/// The media folder under `HERMESD_HOME`.
const MEDIA_DIR: &str = "media";

/// `PLATFORM:ID` split at its first `:`: a platform name (lowercase letters, digits, `_`, `-`)
/// and a non-empty id.
pub(crate) fn parse_person(arg: &str) -> Result<(String, String), String> {
    let Some((platform, user)) = arg.split_once(':') else {
        return Err(format!("--user {arg:?}: expected PLATFORM:ID, e.g. telegram:123456789"));
    };
    let name_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-';
    if platform.is_empty() || !platform.chars().all(name_ok) {
        return Err(format!(
            "--user {arg:?}: {platform:?} is not a platform name (e.g. telegram, discord, slack, api)"
        ));
    }
    if user.trim().is_empty() {
        return Err(format!("--user {arg:?}: the id after {platform}: is empty"));
    }
    Ok((platform.to_owned(), user.to_owned()))
}

/// Erase `user` of `platform` from the store and from `home` (memory, media, task lists) and
/// `workdir` (their folder); returns one line per thing removed.
pub(crate) async fn erase(
    store: &dyn PersonStore,
    home: &Path,
    workdir: &Path,
    platform: &str,
    user: &str,
) -> StoreResult<Vec<String>> {
    let done = store.delete_person(platform, user).await?;
    let mut lines = vec![format!(
        "{platform}:{user}: deleted {} sessions ({} messages, {} inbound events, {} reply chunks, {} routes) \
         , {} cron jobs and {} days of usage",
        done.sessions.len(),
        done.messages,
        done.events,
        done.outbound,
        done.routes,
        done.cron_jobs,
        done.usage_days
    )];
    for session in &done.sessions {
        lines.push(format!("  session {} ({})", session.id, session.key));
    }
    let own = person_dir(workdir, platform, user);
    // The terminal's private temp dir of their folder lives outside it, in the system temp dir.
    let tmp = crate::sandbox::private_tmp(&own);
    let mut folders: Vec<PathBuf> = vec![person_dir(&home.join(MEMORY_DIR), platform, user), own, tmp];
    let media = home.join(MEDIA_DIR).join(sanitise(platform));
    folders.extend(done.sessions.iter().filter(|s| s.dm).map(|s| media.join(sanitise(&s.chat_id))));
    if platform != "api" {
        // A DM's chat id is the user's id on Telegram; their media outlives pruned sessions.
        folders.push(media.join(sanitise(user)));
    }
    folders.sort();
    folders.dedup();
    for folder in folders {
        match std::fs::remove_dir_all(&folder) {
            Ok(()) => lines.push(format!("removed {}", folder.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => lines.push(format!("could not remove {}: {e}", folder.display())),
        }
    }
    for session in &done.sessions {
        let todo = todo_path(home, &session.id);
        if std::fs::remove_file(&todo).is_ok() {
            lines.push(format!("removed {}", todo.display()));
        }
    }
    Ok(lines)
}
