//! A platform's own `[platforms.<name>]` table: the crate owns its serde type (keys, defaults),
//! its checks for `hermesd check` and how an adapter is built from it; the host only lists the
//! crates in one registration table and asks every table the same questions through `Section`.
//!
//! A table may run several adapters (`accounts`): each account's table is the platform's own
//! table with the account's keys laid over it, merged before it is checked or built, so a key
//! set once on the platform applies to every account that does not set it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::environment::{Environment, Secret};
use crate::{AccessRules, Platform};

/// Accounts of one platform by name, each holding only the keys it sets itself.
pub type Accounts = BTreeMap<String, serde_json::Map<String, serde_json::Value>>;

static NO_ACCOUNTS: Accounts = BTreeMap::new();

/// What building an adapter gets from the host.
pub struct BuildContext<'a> {
    /// Variables and secrets.
    pub env: &'a dyn Environment,
    /// `HERMESD_HOME`.
    pub home: &'a Path,
    /// The account built; `None` for the platform's own table.
    pub account: Option<&'a str>,
}

impl BuildContext<'_> {
    /// Where `platform` keeps downloaded media: `media/<platform>`, and a folder per account.
    pub fn media_dir(&self, platform: &str) -> PathBuf {
        let dir = self.home.join("media").join(platform);
        match self.account {
            Some(account) => dir.join(account),
            None => dir,
        }
    }
}

/// The problems of one table, each starting with the key path it is about
/// (`platforms.slack.api_url: …`), so the host can give each its line in the file.
pub struct Checks<'a> {
    at: String,
    env: &'a dyn Environment,
    targets: &'a dyn Fn(&str) -> Result<(), String>,
    problems: Vec<String>,
}

impl<'a> Checks<'a> {
    /// Checks of the table at key path `at`; `targets` checks a delivery target's form and that
    /// its platform runs.
    pub fn new(
        at: impl Into<String>,
        env: &'a dyn Environment,
        targets: &'a dyn Fn(&str) -> Result<(), String>,
    ) -> Self {
        Self { at: at.into(), env, targets, problems: Vec::new() }
    }

    /// The table's key path.
    pub fn at(&self) -> &str {
        &self.at
    }

    /// The host's variables and secrets.
    pub fn env(&self) -> &'a dyn Environment {
        self.env
    }

    /// A problem of the table as a whole (`platforms.x: …`).
    pub fn table(&mut self, problem: impl fmt::Display) {
        self.problems.push(format!("{}: {problem}", self.at));
    }

    /// A problem of one key (`platforms.x.key: …`).
    pub fn key(&mut self, key: &str, problem: impl fmt::Display) {
        self.problems.push(format!("{}.{key}: {problem}", self.at));
    }

    /// A problem that already starts with its key (`key: …`), as the crates' settings checks
    /// write them.
    pub fn keyed(&mut self, problem: impl fmt::Display) {
        self.problems.push(format!("{}.{problem}", self.at));
    }

    /// A problem of an environment variable the table reads (`NAME: …`).
    pub fn variable(&mut self, name: &str, problem: impl fmt::Display) {
        self.problems.push(format!("{name}: {problem}"));
    }

    /// The secret `name`, which must be set; a problem of the table when it is not.
    pub fn secret(&mut self, name: &str) -> Option<Secret> {
        match self.env.secret(name) {
            Ok(Some(secret)) => Some(secret),
            Ok(None) => {
                self.table(format_args!("{name} is not set"));
                None
            }
            Err(e) => {
                self.table(e);
                None
            }
        }
    }

    /// `url` (the value of `key`) must be an http(s) URL.
    pub fn http_url(&mut self, key: &str, url: &str) {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            self.key(key, format_args!("{url:?} is not an http(s) URL"));
        }
    }

    /// `value` (of `key`) must not be zero.
    pub fn positive(&mut self, key: &str, value: u64) {
        if value == 0 {
            self.key(key, "must be positive");
        }
    }

    /// `target` (of `key`) must be a delivery target whose platform runs.
    pub fn target(&mut self, key: &str, target: &str) {
        if let Err(e) = (self.targets)(target) {
            self.key(key, e);
        }
    }

    /// Every problem found.
    pub fn finish(self) -> Vec<String> {
        self.problems
    }
}

/// A platform's table, as the host asks it. Implemented by each crate's config type.
pub trait Section: fmt::Debug + Send + Sync {
    /// The platform's name: its table, its delivery targets, its sessions.
    fn name(&self) -> &'static str;

    /// Whether the adapter runs (`enabled = true`).
    fn enabled(&self) -> bool;

    /// Every problem of an enabled table: its keys and the secrets it needs. Pure: nothing is
    /// opened or contacted.
    fn check(&self, checks: &mut Checks<'_>);

    /// The adapter, with its secrets from `cx.env`.
    fn build(&self, cx: &BuildContext<'_>) -> Result<Arc<dyn Platform>, String>;

    /// How the host's access lists name people here (as the built adapter answers it).
    fn access_rules(&self) -> AccessRules {
        AccessRules::DEFAULT
    }

    /// Whether answers stream as edited previews.
    fn streaming(&self) -> bool {
        false
    }

    /// When the adapter receives signed requests on the host's HTTP server, what to call it in
    /// advice (e.g. `"webhook mode"`; `Some("")` when it always does).
    fn signed_requests(&self) -> Option<&'static str> {
        None
    }

    /// Suggestions for `hermesd check` that are not errors.
    fn advice(&self, env: &dyn Environment) -> Vec<String> {
        let _ = env;
        Vec::new()
    }

    /// The accounts this table runs; none by default.
    fn accounts(&self) -> &Accounts {
        &NO_ACCOUNTS
    }

    /// The variable whose being set makes the table's own adapter run beside its accounts (its
    /// own token, e.g. `TELEGRAM_BOT_TOKEN`); `None`: see `runs_beside_accounts`.
    fn own_credential(&self) -> Option<&str> {
        None
    }

    /// Whether the table itself runs beside its accounts, as the platform's default account: by
    /// default when its `own_credential` is set; without one, only the accounts run.
    fn runs_beside_accounts(&self, env: &dyn Environment) -> bool {
        self.own_credential().is_some_and(|name| matches!(env.secret(name), Ok(Some(_))))
    }

    /// What this adapter is on its platform, compared (never shown) to tell two adapters apart:
    /// two of one table with the same identity would receive, and answer, the same messages.
    /// By default the value of `own_credential`; `None`: not known.
    fn identity(&self, env: &dyn Environment) -> Option<String> {
        let name = self.own_credential()?;
        env.secret(name).ok().flatten().map(|secret| format!("credential {}", secret.expose()))
    }

    /// The profile this table's (or account's) chats belong to (`profile = "…"`); `None`: the
    /// default profile.
    fn profile(&self) -> Option<&str> {
        None
    }
}

/// The adapter name of `platform`'s `account`: `<platform>@<account>`, or the platform's own name
/// for its table. Chats, sessions, cursors, pacers, metrics and delivery targets use it.
pub fn instance_name(platform: &str, account: Option<&str>) -> String {
    match account {
        Some(account) => format!("{platform}@{account}"),
        None => platform.to_owned(),
    }
}

/// Whether `name` may name an account: a lowercase letter, then lowercase letters, digits, `-`
/// or `_`, at most 32 characters (it becomes part of adapter names and environment variables).
pub fn is_account_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_lowercase())
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name.len() <= 32
}

/// One adapter a table runs: the table itself, or one of its accounts.
#[derive(Debug)]
pub struct Instance {
    /// The account; `None` for the table itself.
    pub account: Option<String>,
    /// Its table, with the platform's keys merged in.
    pub section: Box<dyn Section>,
}

impl Instance {
    /// The adapter's name (`instance_name`).
    pub fn name(&self) -> String {
        instance_name(self.section.name(), self.account.as_deref())
    }
}

/// A registered table: a `Section` that can also be split into its accounts.
pub trait Registered: Section {
    /// The adapters this table runs: itself, or each account with the table's keys merged in
    /// (and itself too when `runs_beside_accounts`).
    fn instances(&self, env: &dyn Environment) -> Result<Vec<Instance>, String>;
}

impl<S: Section + Clone + Serialize + DeserializeOwned + 'static> Registered for S {
    fn instances(&self, env: &dyn Environment) -> Result<Vec<Instance>, String> {
        if self.accounts().is_empty() {
            return Ok(vec![Instance { account: None, section: Box::new(self.clone()) }]);
        }
        let mut instances = Vec::new();
        if self.runs_beside_accounts(env) {
            instances.push(Instance { account: None, section: Box::new(self.clone()) });
        }
        for (name, keys) in self.accounts() {
            if !is_account_name(name) {
                return Err(format!(
                    "accounts.{name}: {name:?} is not an account name (a lowercase letter, then lowercase \
                     letters, digits, '-' or '_'; at most 32)"
                ));
            }
            let merged = merge_account(self, keys).map_err(|e| format!("accounts.{name}: {e}"))?;
            instances.push(Instance { account: Some(name.clone()), section: Box::new(merged) });
        }
        Ok(instances)
    }
}

impl dyn Registered + '_ {
    /// Every problem of this table at key path `at` (`platforms.<name>`), and of each of its
    /// accounts at `at.accounts.<account>`.
    pub fn problems(
        &self,
        at: &str,
        env: &dyn Environment,
        targets: &dyn Fn(&str) -> Result<(), String>,
    ) -> Vec<String> {
        let instances = match self.instances(env) {
            Ok(instances) => instances,
            Err(e) => return vec![format!("{at}.{e}")],
        };
        let mut problems = Vec::new();
        let mut seen: Vec<(String, String)> = Vec::new();
        for instance in instances.iter().filter(|i| i.section.enabled()) {
            let at = match &instance.account {
                Some(account) => format!("{at}.accounts.{account}"),
                None => at.to_owned(),
            };
            if let Some(identity) = instance.section.identity(env) {
                if let Some((first, _)) = seen.iter().find(|(_, other)| *other == identity) {
                    problems.push(format!(
                        "{at}: the same account as {first} (set its own credentials or number; two adapters would \
                         answer each message twice)"
                    ));
                }
                seen.push((at.clone(), identity));
            }
            let mut checks = Checks::new(at, env, targets);
            instance.section.check(&mut checks);
            problems.extend(checks.finish());
        }
        problems
    }

    /// Every adapter this table runs when enabled, each built with its own account.
    pub fn build_all(&self, env: &dyn Environment, home: &Path) -> Result<Vec<Arc<dyn Platform>>, String> {
        let mut built = Vec::new();
        for instance in self.instances(env)?.iter().filter(|i| i.section.enabled()) {
            let cx = BuildContext { env, home, account: instance.account.as_deref() };
            let platform = instance.section.build(&cx).map_err(|e| match &instance.account {
                Some(account) => format!("{}.accounts.{account}: {e}", self.name()),
                None => format!("{}: {e}", self.name()),
            })?;
            built.push(platform);
        }
        Ok(built)
    }
}

/// `shared` with the keys of one account laid over it. The account's own `accounts` key is an
/// error: accounts do not nest.
pub fn merge_account<S: Serialize + DeserializeOwned>(
    shared: &S,
    account: &serde_json::Map<String, serde_json::Value>,
) -> Result<S, String> {
    if account.contains_key("accounts") {
        return Err("an account cannot have accounts of its own".into());
    }
    let mut table = match serde_json::to_value(shared).map_err(|e| e.to_string())? {
        serde_json::Value::Object(table) => table,
        _ => return Err("the platform's table is not a table".into()),
    };
    table.remove("accounts");
    for (key, value) in account {
        table.insert(key.clone(), value.clone());
    }
    serde_json::from_value(serde_json::Value::Object(table)).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use serde::Deserialize;

    use super::*;

    #[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields, default)]
    struct Table {
        url: String,
        limit: u32,
        accounts: Accounts,
    }

    impl Default for Table {
        fn default() -> Self {
            Self { url: "https://example.org".into(), limit: 5, accounts: Accounts::new() }
        }
    }

    fn keys(json: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        json.as_object().unwrap().clone()
    }

    #[test]
    fn an_account_keeps_the_shared_keys_it_does_not_set() {
        let shared = Table { limit: 9, ..Table::default() };
        let merged = merge_account(&shared, &keys(serde_json::json!({"url": "https://b"}))).unwrap();
        assert_eq!(merged, Table { url: "https://b".into(), limit: 9, accounts: Accounts::new() });
        let bad = merge_account(&shared, &keys(serde_json::json!({"limit": "many"}))).unwrap_err();
        assert!(bad.contains("invalid type"), "{bad}");
        let unknown = merge_account(&shared, &keys(serde_json::json!({"lmit": 1}))).unwrap_err();
        assert!(unknown.contains("unknown field `lmit`"), "{unknown}");
        let nested = merge_account(&shared, &keys(serde_json::json!({"accounts": {}}))).unwrap_err();
        assert_eq!(nested, "an account cannot have accounts of its own");
    }

    #[test]
    fn checks_write_key_paths_and_ask_for_secrets() {
        let env = HashMap::from([("SET".to_owned(), "value".to_owned())]);
        let targets = |t: &str| if t == "local" { Ok(()) } else { Err(format!("{t}: unknown")) };
        let mut checks = Checks::new("platforms.x", &env, &targets);
        assert_eq!(checks.secret("SET").map(|s| s.expose().to_owned()).as_deref(), Some("value"));
        assert!(checks.secret("UNSET").is_none());
        checks.http_url("api_url", "ftp://x");
        checks.positive("max_file_mb", 0);
        checks.target("deliver", "nowhere:1");
        checks.target("deliver", "local");
        checks.variable("X_ALLOWED", "bad");
        assert_eq!(
            checks.finish(),
            [
                "platforms.x: UNSET is not set",
                "platforms.x.api_url: \"ftp://x\" is not an http(s) URL",
                "platforms.x.max_file_mb: must be positive",
                "platforms.x.deliver: nowhere:1: unknown",
                "X_ALLOWED: bad",
            ]
        );
    }
}
