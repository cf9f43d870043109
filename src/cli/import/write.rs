//! The writes of `--apply`: this home copied to `backups/` first, then each new item written
//! and marked in the store, so a second run finds it there.

use std::path::{Path, PathBuf};

use chrono::Utc;

use super::files::{append_env, copy_tree, prune_backups, read_env, write_private};
use super::{FileKind, Importer, Status, approval_source, env_source, file_source, hermes, home_source};
use crate::clock::now_ms;
use crate::store::import::ImportStore;
use crate::store::{CronStore, ExtrasStore, JobState, JobUpdate, SqliteStore};

impl Importer<'_> {
    /// Copy this home before changing it: its config, `.env`, personas, memory, skills and
    /// profiles, and an online copy of the store.
    pub(super) async fn backup(&self, db: &Path) -> Result<PathBuf, String> {
        let stamp = Utc::now().format("%Y%m%dT%H%M%SZ");
        let dir = self.paths.home.join("backups").join(format!("before-import-{stamp}"));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        prune_backups(&self.paths.home.join("backups"));
        for name in ["config.toml", "config.imported.toml", ".env", "SOUL.md"] {
            let from = self.paths.home.join(name);
            if from.is_file() {
                std::fs::copy(&from, dir.join(name)).map_err(|e| format!("{}: {e}", from.display()))?;
            }
        }
        if self.paths.config.is_file() && !self.paths.config.starts_with(&self.paths.home) {
            std::fs::copy(&self.paths.config, dir.join("config.toml")).map_err(|e| e.to_string())?;
        }
        for name in ["memory", "skills", "profiles"] {
            let from = self.paths.home.join(name);
            if from.is_dir() {
                copy_tree(&from, &dir.join(name)).map_err(|e| format!("{}: {e}", from.display()))?;
            }
        }
        if db.exists() {
            crate::store::backup(db, &dir.join("state.db"), self.effective.store.busy_timeout.get())
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(dir)
    }

    /// Write the new items, marking each as imported once it is written.
    pub(super) async fn apply(&self, store: &SqliteStore) -> Result<(), String> {
        let home = &self.paths.home;
        let now = now_ms();
        let marked = |source: String| async move {
            store.imported(&source).await.map(|f| f.is_some()).map_err(|e| e.to_string())
        };
        let mark = |source: String, target: String| async move {
            store.mark_imported(&source, &target, now).await.map_err(|e| e.to_string())
        };
        if self.config_status == Status::New {
            write_private(&self.config_dest, self.config_text.as_bytes(), 0o640)?;
        }
        let existing = read_env(&home.join(".env"))?;
        let mut added: Vec<(&String, &String)> = Vec::new();
        for (name, value) in &self.plan.env {
            if !existing.contains_key(name) && !marked(env_source(self.plan.source, name)).await? {
                added.push((name, value));
            }
        }
        if !added.is_empty() {
            append_env(&home.join(".env"), &added)?;
        }
        for name in self.plan.env.keys() {
            mark(env_source(self.plan.source, name), ".env".into()).await?;
        }
        for file in &self.plan.files {
            let source = file_source(self.plan.source, &file.dest);
            if marked(source.clone()).await? {
                continue;
            }
            let path = home.join(&file.dest);
            match (file.kind, std::fs::read_to_string(&path)) {
                (_, Err(_)) => write_private(&path, file.content.as_bytes(), 0o600)?,
                (FileKind::Keep, Ok(_)) => {}
                (FileKind::Memory, Ok(text)) => {
                    let mut have = hermes::entries(&text);
                    let before = have.len();
                    for entry in hermes::entries(&file.content) {
                        if !have.contains(&entry) {
                            have.push(entry);
                        }
                    }
                    if have.len() > before {
                        write_private(&path, format!("{}\n", have.join("\n§\n")).as_bytes(), 0o600)?;
                    }
                }
            }
            mark(source, file.dest.display().to_string()).await?;
        }
        for skill in &self.plan.skills {
            let source = file_source(self.plan.source, &skill.dest);
            if marked(source.clone()).await? {
                continue;
            }
            let path = home.join(&skill.dest);
            if !path.exists() {
                // Copied beside, then renamed into place: a copy cut short is never taken for the skill.
                let partial = path.with_file_name(format!(".{}.import-partial", skill.name));
                let _ = std::fs::remove_dir_all(&partial);
                copy_tree(&skill.from, &partial).map_err(|e| format!("skill {}: {e}", skill.name))?;
                std::fs::rename(&partial, &path).map_err(|e| format!("skill {}: {e}", skill.name))?;
            }
            mark(source, skill.dest.display().to_string()).await?;
        }
        for session in &self.plan.sessions {
            store.import_session(session, now).await.map_err(|e| e.to_string())?;
        }
        for job in &self.plan.jobs {
            if marked(job.source.clone()).await? {
                continue;
            }
            let Ok(new) = self.prepare(job) else { continue };
            if store.job(&new.id).await.map_err(|e| e.to_string())?.is_none() {
                store.create_job(&new, now).await.map_err(|e| e.to_string())?;
            }
            if job.paused {
                // Paused before it is marked: a run cut short here pauses it on the next import.
                let update = JobUpdate { state: Some((JobState::Paused, None)), ..JobUpdate::default() };
                store.update_job(&new.id, &update, now).await.map_err(|e| e.to_string())?;
            }
            mark(job.source.clone(), new.id.clone()).await?;
        }
        for approval in &self.plan.approvals {
            let source = approval_source(self.plan.source, approval);
            if marked(source.clone()).await? {
                continue;
            }
            store
                .approve_user(&approval.platform, &approval.user, approval.name.as_deref(), now)
                .await
                .map_err(|e| e.to_string())?;
            mark(source, format!("{}:{}", approval.platform, approval.user)).await?;
        }
        for chat in &self.plan.homes {
            let source = home_source(self.plan.source, chat);
            if marked(source.clone()).await? {
                continue;
            }
            if store.home_channel(&chat.platform).await.map_err(|e| e.to_string())?.is_none() {
                store.set_home_channel(chat, now).await.map_err(|e| e.to_string())?;
            }
            mark(source, chat.chat_id.clone()).await?;
        }
        Ok(())
    }
}
