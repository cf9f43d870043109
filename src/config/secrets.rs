//! Where secrets come from (`Env`), in this order: the process environment, `$HERMESD_HOME/.env`,
//! `NAME_FILE` files and systemd credentials (`$CREDENTIALS_DIRECTORY/NAME`).
//!
//! Secret values are wrapped in `Secret`, whose `Debug` and `Display` never show the value, so a
//! secret cannot reach a log line by accident. Every name asked for and every file read is kept
//! in a `SecretTrail`, so the tools' sandbox can deny those files and scrub those variables.
//! Nothing here reads the config file.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::redact::Redaction;

/// A lookup of environment-style variables. Tests pass a map instead of mutating the process
/// environment.
pub trait EnvSource: Send + Sync {
    /// The value of `key`, if set.
    fn var(&self, key: &str) -> Option<String>;
}

/// The real process environment.
#[derive(Debug, Default, Clone, Copy)]
pub struct ProcessEnv;

impl EnvSource for ProcessEnv {
    fn var(&self, key: &str) -> Option<String> {
        std::env::var(key).ok()
    }
}

impl EnvSource for HashMap<String, String> {
    fn var(&self, key: &str) -> Option<String> {
        self.get(key).cloned()
    }
}

pub use hermesd_platform::Secret;

/// Where the daemon's secrets came from: the names it asked for (set or not, since a name the
/// config gives is a secret's name either way) and the files it read them from. Shared: clones
/// see what is recorded later, so secrets read after start-up count too.
#[derive(Debug, Clone, Default)]
pub struct SecretTrail(Arc<Mutex<Trail>>);

#[derive(Debug, Default)]
struct Trail {
    names: BTreeSet<String>,
    files: BTreeSet<PathBuf>,
}

impl SecretTrail {
    fn lock(&self) -> std::sync::MutexGuard<'_, Trail> {
        // A panic while holding the lock cannot leave the sets half-updated (single inserts).
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn record_name(&self, name: &str) {
        self.lock().names.insert(name.to_owned());
    }

    fn record_file(&self, path: &Path) {
        self.lock().files.insert(path.to_path_buf());
    }

    /// Whether `name` is a secret's variable or its `_FILE` twin.
    pub fn names_secret(&self, name: &str) -> bool {
        let trail = self.lock();
        trail.names.contains(name) || name.strip_suffix("_FILE").is_some_and(|stem| trail.names.contains(stem))
    }

    /// Every file a secret (or the `.env` holding some) was read from, and the credentials
    /// directory when one was named.
    pub fn files(&self) -> Vec<PathBuf> {
        self.lock().files.iter().cloned().collect()
    }
}

/// The layered environment hermesd reads secrets and allowlists from: the process environment
/// first, then `$HERMESD_HOME/.env`. Every secret value it hands out is recorded in its
/// `Redaction`, so the daemon masks it in tool output, chats and logs; where it came from is
/// recorded in its `SecretTrail`.
pub struct Env {
    process: Box<dyn EnvSource>,
    dotenv: HashMap<String, String>,
    redaction: Redaction,
    trail: SecretTrail,
}

impl Env {
    /// Layer `process` over the `.env` file in `home` (missing file: no layer).
    pub fn load(process: Box<dyn EnvSource>, home: &Path) -> Result<Self, String> {
        let path = home.join(".env");
        let dotenv = match std::fs::read_to_string(&path) {
            Ok(text) => parse_dotenv(&text).map_err(|e| format!("{}: {e}", path.display()))?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => HashMap::new(),
            Err(e) => return Err(format!("read {}: {e}", path.display())),
        };
        let trail = SecretTrail::default();
        trail.record_file(&path);
        Ok(Self { process, dotenv, redaction: Redaction::default(), trail })
    }

    /// An environment made of `vars` only (tests).
    pub fn from_map(vars: HashMap<String, String>) -> Self {
        Self {
            process: Box::new(vars),
            dotenv: HashMap::new(),
            redaction: Redaction::default(),
            trail: SecretTrail::default(),
        }
    }

    /// Record secrets in `redaction` (shared with the log writer) instead of a redaction of
    /// its own; call it before any secret is read.
    pub fn with_redaction(mut self, redaction: Redaction) -> Self {
        self.redaction = redaction;
        self
    }

    /// The redaction holding every secret read so far (and every one read later).
    pub fn redaction(&self) -> Redaction {
        self.redaction.clone()
    }

    /// Where every secret read so far (and every one read later) came from.
    pub fn trail(&self) -> SecretTrail {
        self.trail.clone()
    }

    /// A plain (non-secret) variable such as an allowlist.
    pub fn var(&self, key: &str) -> Option<String> {
        self.process.var(key).or_else(|| self.dotenv.get(key).cloned()).filter(|v| !v.trim().is_empty())
    }

    /// A secret: `NAME`, else the file named by `NAME_FILE`, else `$CREDENTIALS_DIRECTORY/NAME`.
    /// A file that is named but unreadable is an error, never a silent absence.
    pub fn secret(&self, name: &str) -> Result<Option<Secret>, String> {
        let secret = self.find_secret(name)?;
        if let Some(secret) = &secret {
            self.redaction.record(secret.expose());
        }
        Ok(secret)
    }

    fn find_secret(&self, name: &str) -> Result<Option<Secret>, String> {
        self.trail.record_name(name);
        if let Some(value) = self.var(name) {
            return Ok(Some(Secret::new(value.trim())));
        }
        if let Some(path) = self.var(&format!("{name}_FILE")) {
            self.trail.record_file(Path::new(&path));
            return read_secret_file(Path::new(&path), name).map(Some);
        }
        if let Some(dir) = self.var("CREDENTIALS_DIRECTORY") {
            // The whole directory: it holds the other credentials too.
            self.trail.record_file(Path::new(&dir));
            let path = Path::new(&dir).join(name);
            if path.exists() {
                return read_secret_file(&path, name).map(Some);
            }
        }
        Ok(None)
    }

    /// A secret that must be set (an adapter's token); its value, or why it is missing.
    pub fn required_secret(&self, name: &str) -> Result<String, String> {
        self.secret(name)?.map(|s| s.expose().to_owned()).ok_or_else(|| format!("{name} is not set"))
    }
}

impl hermesd_platform::Environment for Env {
    fn var(&self, name: &str) -> Option<String> {
        Env::var(self, name)
    }

    fn secret(&self, name: &str) -> Result<Option<Secret>, String> {
        Env::secret(self, name)
    }
}

fn read_secret_file(path: &Path, name: &str) -> Result<Secret, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("read secret {name} from {}: {e}", path.display()))?;
    let value = text.trim();
    if value.is_empty() {
        return Err(format!("secret {name} in {} is empty", path.display()));
    }
    Ok(Secret::new(value))
}

/// Parse `KEY=value` lines; `#` comments, `export ` prefixes and single or double quotes allowed.
pub fn parse_dotenv(text: &str) -> Result<HashMap<String, String>, String> {
    let mut vars = HashMap::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let line = line.strip_prefix("export ").unwrap_or(line);
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("line {}: expected KEY=value", index + 1));
        };
        let key = key.trim();
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("line {}: invalid variable name {key:?}", index + 1));
        }
        let value = value.trim();
        let value =
            ['"', '\''].iter().find_map(|q| value.strip_prefix(*q).and_then(|v| v.strip_suffix(*q))).unwrap_or(value);
        vars.insert(key.to_owned(), value.to_owned());
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dotenv_lines() {
        let vars = parse_dotenv("# c\nA=1\nexport B=\"two words\"\nC='x'\n\n").unwrap();
        assert_eq!(vars["A"], "1");
        assert_eq!(vars["B"], "two words");
        assert_eq!(vars["C"], "x");
        assert!(parse_dotenv("no equals").is_err());
    }

    #[test]
    fn secret_layers_and_redaction() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".env"), "FROM_DOTENV=abc\n").unwrap();
        let file = dir.path().join("tok");
        std::fs::write(&file, "s3cret\n").unwrap();
        let mut map = HashMap::new();
        map.insert("TOKEN_FILE".to_owned(), file.display().to_string());
        map.insert("MISSING_FILE".to_owned(), "/nonexistent/x".to_owned());
        let env = Env::load(Box::new(map), dir.path()).unwrap();
        assert_eq!(env.secret("FROM_DOTENV").unwrap().unwrap().expose(), "abc");
        let token = env.secret("TOKEN").unwrap().unwrap();
        assert_eq!(token.expose(), "s3cret");
        assert_eq!(format!("{token:?} {token}"), "[redacted] [redacted]");
        assert!(env.secret("MISSING").is_err());
        assert!(env.secret("NOPE").unwrap().is_none());
        let trail = env.trail();
        for name in ["TOKEN", "TOKEN_FILE", "NOPE", "NOPE_FILE", "FROM_DOTENV"] {
            assert!(trail.names_secret(name), "{name}");
        }
        assert!(!trail.names_secret("PATH") && !trail.names_secret("FILE"));
        let files = trail.files();
        for file in [file, dir.path().join(".env"), PathBuf::from("/nonexistent/x")] {
            assert!(files.contains(&file), "{} not in {files:?}", file.display());
        }
    }

    #[test]
    fn every_secret_read_is_recorded_in_the_shared_redaction() {
        let shared = crate::redact::Redaction::default();
        let vars = HashMap::from([
            ("KEY".to_owned(), " key-0123456789 ".to_owned()),
            ("PLAIN".to_owned(), "visible-value".to_owned()),
        ]);
        let env = Env::from_map(vars).with_redaction(shared.clone());
        let text = "key-0123456789 visible-value";
        assert_eq!(shared.redact(text), text, "nothing is masked before it is read");
        env.secret("KEY").unwrap();
        env.var("PLAIN");
        assert_eq!(shared.redact(text), "[redacted] visible-value");
        assert_eq!(env.redaction().redact(text), "[redacted] visible-value");
    }
}
