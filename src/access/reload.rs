//! SIGHUP, `hermesd reload` and `POST /admin/reload`: read the config file and
//! `$HERMESD_HOME/.env` again. A config with problems is refused and the running one kept (the
//! problems are logged and answered); a good one takes effect for what can change in place —
//! the allowlists and admins (`*_ALLOWED_USERS`, `*_ADMIN_USERS`, … from `.env` and the process
//! environment, which still wins), and what the parts above this floor registered with
//! `on_reload` (the MCP servers, the log filter) — and the log and answer name the tables whose
//! changes wait for a restart. `/readyz` says which config is live.

use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::Access;
use crate::config::{Config, ConfigFile, Env, Paths, ProcessEnv};

/// The config in force, as `/readyz` shows it.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct LiveConfig {
    /// The config file.
    pub path: String,
    /// The first 12 hex digits of the file's SHA-256 (`none`: no file, the defaults).
    pub digest: String,
    /// When it was loaded, Unix ms.
    pub loaded_at: i64,
    /// Reloads that took effect since the start.
    pub reloads: u64,
    /// Why the last reload was refused, when it was (the running config stayed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// What a reload did.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Reloaded {
    /// What took effect now.
    pub applied: Vec<String>,
    /// Top-level tables whose changes wait for a restart.
    pub restart_needed: Vec<String>,
}

/// A part of the daemon that takes a new config in place: the tables it covers, and what it does
/// with them (returning one line per change it made).
pub type ReloadHook = Box<dyn Fn(&Config, &Env) -> Vec<String> + Send + Sync>;

/// Reads the config again and applies what can change in place.
pub struct Reloader {
    paths: Paths,
    access: Arc<Access>,
    redaction: crate::redact::Redaction,
    running: Mutex<(serde_json::Value, LiveConfig)>,
    /// Parts above this floor that reload themselves (MCP servers, the log filter), each with the
    /// top-level tables it covers.
    hooks: Mutex<Vec<(&'static [&'static str], ReloadHook)>>,
}

fn digest(path: &std::path::Path) -> String {
    match std::fs::read(path) {
        Ok(bytes) => Sha256::digest(&bytes).iter().take(6).map(|b| format!("{b:02x}")).collect(),
        Err(_) => "none".into(),
    }
}

impl Reloader {
    /// A reloader for the daemon started with `config` from `paths`.
    pub fn new(config: &Config, paths: Paths, access: Arc<Access>, redaction: crate::redact::Redaction) -> Self {
        let live = LiveConfig {
            path: paths.config.display().to_string(),
            digest: digest(&paths.config),
            loaded_at: crate::clock::now_ms(),
            reloads: 0,
            refused: None,
        };
        let shape = serde_json::to_value(config).unwrap_or_default();
        Self { paths, access, redaction, running: Mutex::new((shape, live)), hooks: Mutex::new(Vec::new()) }
    }

    /// Have `hook` take each accepted config; changes of `tables` then need no restart.
    pub fn on_reload(&self, tables: &'static [&'static str], hook: ReloadHook) {
        self.hooks.lock().unwrap_or_else(PoisonError::into_inner).push((tables, hook));
    }

    /// The config in force.
    pub fn live(&self) -> LiveConfig {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).1.clone()
    }

    /// Read the config file and `.env` again; `Err` with every problem when the new config is
    /// refused (the running one stays).
    pub fn reload(&self) -> Result<Reloaded, Vec<String>> {
        let outcome = self.read();
        let mut running = self.running.lock().unwrap_or_else(PoisonError::into_inner);
        match outcome {
            Ok((config, env)) => {
                self.access.reload(&env);
                let shape = serde_json::to_value(&config).unwrap_or_default();
                let mut applied = vec!["allowlists and admins (*_ALLOWED_USERS, *_ADMIN_USERS, …)".to_owned()];
                let hooks = self.hooks.lock().unwrap_or_else(PoisonError::into_inner);
                for (_, hook) in hooks.iter() {
                    applied.extend(hook(&config, &env));
                }
                let covered: Vec<String> =
                    hooks.iter().flat_map(|(tables, _)| tables.iter().map(|t| format!("[{t}]"))).collect();
                drop(hooks);
                let restart_needed: Vec<String> =
                    changed_tables(&running.0, &shape).into_iter().filter(|t| !covered.contains(t)).collect();
                running.0 = shape;
                running.1.digest = digest(&self.paths.config);
                running.1.loaded_at = crate::clock::now_ms();
                running.1.reloads += 1;
                running.1.refused = None;
                tracing::info!(digest = %running.1.digest, ?applied, "config reloaded");
                if !restart_needed.is_empty() {
                    tracing::warn!(
                        tables = %restart_needed.join(", "),
                        "these changed tables take effect at the next restart"
                    );
                }
                Ok(Reloaded { applied, restart_needed })
            }
            Err(problems) => {
                tracing::error!(problems = %problems.join("; "), "config reload refused: the running config stays");
                running.1.refused = Some(problems.join("; "));
                Err(problems)
            }
        }
    }

    fn read(&self) -> Result<(Config, Env), Vec<String>> {
        let file = ConfigFile::read(&self.paths.config).map_err(|e| e.problems)?;
        let env = Env::load(Box::new(ProcessEnv), &self.paths.home).map_err(|e| vec![e])?;
        let env = env.with_redaction(self.redaction.clone());
        let problems = if file.problems.is_empty() { file.all_problems(&env) } else { file.problems.clone() };
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok((file.config, env))
    }
}

/// The top-level tables (and keys) that differ between two configs.
fn changed_tables(old: &serde_json::Value, new: &serde_json::Value) -> Vec<String> {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else { return vec!["(all)".into()] };
    let mut keys: Vec<&String> = old.keys().chain(new.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter().filter(|k| old.get(*k) != new.get(*k)).map(|k| format!("[{k}]")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_tables_are_named() {
        let old = serde_json::json!({"agent": {"x": 1}, "tools": {"y": 2}});
        let new = serde_json::json!({"agent": {"x": 1}, "tools": {"y": 3}, "routes": []});
        assert_eq!(changed_tables(&old, &new), ["[routes]", "[tools]"]);
    }
}
