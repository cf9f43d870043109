//! One person's data, whole: `export` gathers it (their sessions with every message, their
//! memory files) for the control panel's download; `erase` (`hermesd sessions delete --user
//! PLATFORM:ID`, the panel's Delete) removes one person — their sessions (messages,
//! full-text rows, routes, inbound events, reply chunks, stored API responses, task lists), the
//! cron jobs they made with their runs' sessions and output files, the files sent to them
//! (`media/outbound/`), their memory folder, their workdir folder (and its private temp dir) and
//! their direct conversations' media — and say what went. Safe while the daemon runs: the store
//! part is one write transaction (WAL), the folders are the person's own. It never touches
//! another person's or a shared chat's data.

use std::path::{Component, Path, PathBuf};

use hermesd_platform::media::sanitise;

use crate::agent::tools::memory::MEMORY_DIR;
use crate::agent::tools::place::person_dir;
use crate::agent::tools::send_file::stage::OUTBOUND_DIR;
use crate::agent::tools::todo::todo_path;
use crate::delivery::turns::{CRON_OUTPUT_DIR, job_output_dir};
use crate::store::{AccessStore, CronStore, PersonStore, SessionStore, StoreResult};
use crate::vocab::origin::Origin;

/// The media folder under `HERMESD_HOME`.
const MEDIA_DIR: &str = "media";

/// The memory files a person has in `"user"` scope.
const MEMORY_FILES: [&str; 2] = ["MEMORY.md", "USER.md"];

/// What hermesd keeps of `user` on `platform`, as one JSON document: each of their sessions
/// (those `erase` would delete) with its whole history, summarised messages included, their
/// memory files' text, the cron jobs they made and their pairing.
pub async fn export<S>(store: &S, home: &Path, platform: &str, user: &str, now: i64) -> StoreResult<serde_json::Value>
where
    S: PersonStore + SessionStore + CronStore + AccessStore + ?Sized,
{
    let mut sessions = Vec::new();
    for found in store.person_sessions(platform, user).await? {
        let info = store.session(&found.id).await?;
        let messages = store.full_history(&found.id).await?;
        sessions.push(serde_json::json!({
            "id": found.id,
            "key": found.key,
            "title": info.as_ref().and_then(|i| i.title.clone()),
            "created_at": info.as_ref().map(|i| i.created_at),
            "updated_at": info.as_ref().map(|i| i.updated_at),
            "messages": messages,
        }));
    }
    let dir = person_dir(&home.join(MEMORY_DIR), platform, user);
    let memory: serde_json::Map<String, serde_json::Value> = MEMORY_FILES
        .iter()
        .filter_map(|name| std::fs::read_to_string(dir.join(name)).ok().map(|text| ((*name).to_owned(), text.into())))
        .collect();
    // The cron jobs they made from a chat of this platform, and their pairing (a code waiting,
    // or the approval).
    let jobs: Vec<_> = store
        .list_jobs()
        .await?
        .into_iter()
        .filter(|job| job.created_by.as_deref() == Some(user))
        .filter(|job| job.origin.as_ref().is_some_and(|origin| origin.platform == platform))
        .collect();
    let access: Vec<_> =
        store.access_entries(now).await?.into_iter().filter(|e| e.platform == platform && e.user_id == user).collect();
    Ok(serde_json::json!({
        "platform": platform, "user": user, "exported_at": now, "sessions": sessions, "memory": memory,
        "cron_jobs": jobs, "access": access,
    }))
}

/// `PLATFORM:ID` split at its first `:`: a platform name (lowercase letters, digits, `_`, `-`)
/// and a non-empty id.
pub fn parse_person(arg: &str) -> Result<(String, String), String> {
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

/// The folder holding one sent copy, `media/outbound/<id>/<name>` (one folder per file), or
/// `None` for a path of any other shape: a stored path is never followed out of that folder.
fn sent_copy_dir(home: &Path, file: &str) -> Option<PathBuf> {
    let rest = Path::new(file).strip_prefix(OUTBOUND_DIR).ok()?;
    let parts: Vec<Component<'_>> = rest.components().collect();
    match parts.as_slice() {
        [Component::Normal(id), Component::Normal(_)] => Some(home.join(OUTBOUND_DIR).join(id)),
        _ => None,
    }
}

/// Erase `user` of `platform` from the store and from `home` (memory, media, task lists) and
/// `workdir` (their folder); returns one line per thing removed.
pub async fn erase(
    store: &dyn PersonStore,
    home: &Path,
    workdir: &Path,
    platform: &str,
    user: &str,
) -> StoreResult<Vec<String>> {
    let done = store.delete_person(platform, user).await?;
    let mut lines = vec![format!(
        "{platform}:{user}: deleted {} sessions ({} messages, {} inbound events, {} reply chunks, {} routes) \
         , {} cron jobs ({} runs), {} stored API responses and {} days of usage",
        done.sessions.len(),
        done.messages,
        done.events,
        done.outbound,
        done.routes,
        done.cron_jobs,
        done.cron_sessions,
        done.api_responses,
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
    if Origin::of(platform) != Origin::Api {
        // A DM's chat id is the user's id on Telegram; their media outlives pruned sessions.
        folders.push(media.join(sanitise(user)));
    }
    let outputs = home.join(CRON_OUTPUT_DIR);
    folders.extend(done.cron_job_ids.iter().map(|job| job_output_dir(&outputs, job)));
    folders.extend(done.files.iter().filter_map(|file| sent_copy_dir(home, file)));
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

#[cfg(test)]
mod tests {
    use async_trait::async_trait;

    use super::*;
    use crate::store::{PersonDeletion, PersonSession};

    /// A store that reports a fixed deletion.
    struct Deleted(PersonDeletion);

    #[async_trait]
    impl PersonStore for Deleted {
        async fn note_person(&self, _: &str, _: &str) -> StoreResult<()> {
            Ok(())
        }
        async fn person_sessions(&self, _: &str, _: &str) -> StoreResult<Vec<PersonSession>> {
            Ok(Vec::new())
        }
        async fn delete_person(&self, _: &str, _: &str) -> StoreResult<PersonDeletion> {
            Ok(self.0.clone())
        }
    }

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, "x").expect("write");
    }

    #[tokio::test]
    async fn erasing_removes_cron_output_and_sent_files_of_the_person_only() {
        let home = tempfile::tempdir().expect("home");
        let h = home.path();
        for file in [
            "cron/output/j1/5.md",
            "cron/output/j2/6.md",
            "media/outbound/a1/chart.png",
            "media/outbound/b2/bob.pdf",
            "secret.txt",
        ] {
            touch(&h.join(file));
        }
        let deletion = PersonDeletion {
            cron_job_ids: vec!["j1".into()],
            // The second is no file the outbox could have written, and is never followed.
            files: vec!["media/outbound/a1/chart.png".into(), "media/outbound/../../secret.txt".into()],
            ..PersonDeletion::default()
        };
        let lines = erase(&Deleted(deletion), h, &h.join("workspace"), "api", "ann").await.expect("erase");
        assert!(!h.join("cron/output/j1").exists(), "{lines:?}");
        assert!(!h.join("media/outbound/a1").exists(), "{lines:?}");
        for kept in ["cron/output/j2/6.md", "media/outbound/b2/bob.pdf", "secret.txt"] {
            assert!(h.join(kept).exists(), "{kept} removed: {lines:?}");
        }
    }
}
