//! SIGHUP, `hermesd reload` and `POST /admin/reload`: read the config file and
//! `$HERMESD_HOME/.env` again. A config with problems is refused and the running one kept (the
//! problems are logged and answered); a good one takes effect for what can change in place —
//! the allowlists and admins (`*_ALLOWED_USERS`, `*_ADMIN_USERS`, … from `.env` and the process
//! environment, which still wins), and what the parts above this floor registered with
//! `on_reload` (the MCP servers, the log filter, the profiles with routes and toolsets) — and the
//! log and answer name the tables (or keys of a table taken in part) whose changes wait for a
//! restart. `/readyz` says which config is live.

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
    /// The last config accepted (what the control panel checks a new cron job against).
    accepted: Mutex<Arc<Config>>,
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
        Self {
            paths,
            access,
            redaction,
            running: Mutex::new((shape, live)),
            accepted: Mutex::new(Arc::new(config.clone())),
            hooks: Mutex::new(Vec::new()),
        }
    }

    /// Have `hook` take each accepted config; changes of `tables` (a top-level table such as
    /// `model`, or one key of it such as `tools.toolsets`) then need no restart.
    pub fn on_reload(&self, tables: &'static [&'static str], hook: ReloadHook) {
        self.hooks.lock().unwrap_or_else(PoisonError::into_inner).push((tables, hook));
    }

    /// The config in force, as JSON (it holds no secret: those come from the environment).
    pub fn running(&self) -> serde_json::Value {
        self.running.lock().unwrap_or_else(PoisonError::into_inner).0.clone()
    }

    /// The allowlists and admins in force.
    pub fn access(&self) -> &Access {
        &self.access
    }

    /// The last config accepted, and the paths it was read with.
    pub fn accepted(&self) -> (Arc<Config>, &Paths) {
        (self.accepted.lock().unwrap_or_else(PoisonError::into_inner).clone(), &self.paths)
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
                let covered: Vec<&str> = hooks.iter().flat_map(|(tables, _)| tables.iter().copied()).collect();
                drop(hooks);
                let restart_needed = changed_tables(&running.0, &shape, &covered);
                running.0 = shape;
                *self.accepted.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(config);
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

/// The top-level tables that differ between two configs and are not `covered`; for a table of
/// which `covered` names only some keys (`tools.toolsets`), the other keys of it that differ.
fn changed_tables(old: &serde_json::Value, new: &serde_json::Value, covered: &[&str]) -> Vec<String> {
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else { return vec!["(all)".into()] };
    let mut out = Vec::new();
    for key in keys_of(old, new) {
        let (was, is) = (old.get(key), new.get(key));
        if was == is || covered.contains(&key.as_str()) {
            continue;
        }
        let prefix = format!("{key}.");
        let parts: Vec<&str> = covered.iter().filter_map(|c| c.strip_prefix(prefix.as_str())).collect();
        match (was.and_then(|v| v.as_object()), is.and_then(|v| v.as_object())) {
            (Some(was), Some(is)) if !parts.is_empty() => out.extend(
                keys_of(was, is)
                    .into_iter()
                    .filter(|sub| was.get(*sub) != is.get(*sub) && !parts.contains(&sub.as_str()))
                    .map(|sub| format!("[{key}] {sub}")),
            ),
            _ => out.push(format!("[{key}]")),
        }
    }
    out
}

/// The keys of two objects, sorted, each once.
fn keys_of<'a>(
    a: &'a serde_json::Map<String, serde_json::Value>,
    b: &'a serde_json::Map<String, serde_json::Value>,
) -> Vec<&'a String> {
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    keys
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_tables_are_named() {
        let old = serde_json::json!({"agent": {"x": 1}, "tools": {"y": 2}});
        let new = serde_json::json!({"agent": {"x": 1}, "tools": {"y": 3}, "routes": []});
        assert_eq!(changed_tables(&old, &new, &[]), ["[routes]", "[tools]"]);
        assert!(changed_tables(&old, &new, &["routes", "tools"]).is_empty());
    }

    #[test]
    fn a_table_covered_in_part_names_its_other_keys() {
        let old = serde_json::json!({"tools": {"toolsets": ["a"], "terminal": {"sandbox": "off"}, "z": 1}});
        let new = serde_json::json!({"tools": {"toolsets": ["b"], "terminal": {"sandbox": "on"}, "z": 1}});
        assert_eq!(changed_tables(&old, &new, &["tools.toolsets"]), ["[tools] terminal"]);
        let only_covered = serde_json::json!({"tools": {"toolsets": ["b"], "terminal": {"sandbox": "off"}, "z": 1}});
        assert!(changed_tables(&old, &only_covered, &["tools.toolsets"]).is_empty());
    }
}
