//! The armed failpoints of a `failpoints` build: parsing `HERMESD_FAILPOINTS`, the
//! process-wide table and what a hit does. Never compiled into other builds.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// The environment variable that arms failpoints at start.
pub const ENV: &str = "HERMESD_FAILPOINTS";

/// What an armed failpoint does when it fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// `std::process::abort()`: the process dies on the spot, like `kill -9`.
    Abort,
    /// The place returns the error it would return on a real fault.
    Error,
    /// The calling thread sleeps this long.
    Sleep(Duration),
    /// The calling task panics.
    Panic,
    /// A value a hook reads (`value`); never fires by itself.
    Value(String),
}

/// One armed failpoint: its action, the hit it fires first at and how many times it fires.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Armed {
    /// What it does.
    pub action: Action,
    /// The first hit (1-based) that fires.
    pub from: u64,
    /// How many hits fire from `from` on (`None`: all).
    pub times: Option<u64>,
    hits: u64,
}

/// Why a failpoint specification was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SpecError {
    /// An entry is not `name=action`.
    #[error("failpoint entry {0:?} is not name=action")]
    Entry(String),
    /// The action is unknown or malformed.
    #[error("failpoint {name}: unknown action {action:?}")]
    Action {
        /// The failpoint.
        name: String,
        /// What was given.
        action: String,
    },
}

/// Parse one action with its `@N` and `*M` suffixes.
pub fn parse_action(name: &str, text: &str) -> Result<Armed, SpecError> {
    let bad = || SpecError::Action { name: name.to_owned(), action: text.to_owned() };
    let (rest, times) = match text.rsplit_once('*') {
        Some((rest, m)) if !rest.ends_with('(') => (rest, Some(m.trim().parse::<u64>().map_err(|_| bad())?)),
        _ => (text, None),
    };
    let (action, from) = match rest.rsplit_once('@') {
        Some((action, n)) => (action, n.trim().parse::<u64>().map_err(|_| bad())?.max(1)),
        None => (rest, 1),
    };
    let action = action.trim();
    let action = match action {
        "abort" => Action::Abort,
        "error" => Action::Error,
        "panic" => Action::Panic,
        _ => {
            let arg = |prefix: &str| action.strip_prefix(prefix).and_then(|a| a.strip_suffix(')'));
            if let Some(ms) = arg("sleep(") {
                Action::Sleep(Duration::from_millis(ms.trim().parse().map_err(|_| bad())?))
            } else if let Some(value) = arg("value(") {
                Action::Value(value.to_owned())
            } else {
                return Err(bad());
            }
        }
    };
    Ok(Armed { action, from, times, hits: 0 })
}

/// Parse a whole `HERMESD_FAILPOINTS` value.
pub fn parse(spec: &str) -> Result<HashMap<String, Armed>, SpecError> {
    let mut armed = HashMap::new();
    for entry in spec.split(';').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, action) = entry.split_once('=').ok_or_else(|| SpecError::Entry(entry.to_owned()))?;
        let name = name.trim();
        armed.insert(name.to_owned(), parse_action(name, action)?);
    }
    Ok(armed)
}

fn registry() -> &'static Mutex<HashMap<String, Armed>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Armed>>> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let spec = std::env::var(ENV).unwrap_or_default();
        let armed = parse(&spec).unwrap_or_else(|e| {
            // A test that armed a failpoint wrongly must not pass by accident.
            eprintln!("{ENV}: {e}");
            std::process::abort();
        });
        Mutex::new(armed)
    })
}

/// Arm `name` with `action` (as in `HERMESD_FAILPOINTS`), or disarm it with `off`.
pub fn set(name: &str, action: &str) -> Result<(), SpecError> {
    let mut registry = registry().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if action.trim() == "off" {
        registry.remove(name);
    } else {
        registry.insert(name.to_owned(), parse_action(name, action)?);
    }
    Ok(())
}

/// Count a hit of `name` and return the action when this hit fires.
pub fn hit(name: &str) -> Option<Action> {
    let mut registry = registry().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let armed = registry.get_mut(name)?;
    if matches!(armed.action, Action::Value(_)) {
        return None;
    }
    armed.hits += 1;
    let past = armed.hits.checked_sub(armed.from)?;
    armed.times.is_none_or(|times| past < times).then(|| armed.action.clone())
}

/// The value `name` is armed with (`value(TEXT)`), for hooks that read a setting.
pub fn value(name: &str) -> Option<String> {
    let registry = registry().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    match &registry.get(name)?.action {
        Action::Value(value) => Some(value.clone()),
        _ => None,
    }
}

/// A hit of a failpoint that cannot fail its place (`failpoint!`): abort, sleep or panic.
pub fn fire_point(name: &str) {
    let _ = fire(name);
}

/// Act on a hit of `name`: abort, sleep or panic here; true when the place must fail.
pub fn fire(name: &str) -> bool {
    match hit(name) {
        None | Some(Action::Value(_)) => false,
        Some(Action::Abort) => {
            eprintln!("failpoint {name}: abort");
            std::process::abort();
        }
        Some(Action::Sleep(duration)) => {
            std::thread::sleep(duration);
            false
        }
        Some(Action::Panic) => panic!("failpoint {name}: panic"),
        Some(Action::Error) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_hit_and_count_suffixes() {
        let armed = parse("a=abort@3; b=error*2 ;c=sleep(250);d=value(64);e=error@2*1").unwrap();
        assert_eq!(armed["a"].action, Action::Abort);
        assert_eq!((armed["a"].from, armed["a"].times), (3, None));
        assert_eq!((armed["b"].action.clone(), armed["b"].times), (Action::Error, Some(2)));
        assert_eq!(armed["c"].action, Action::Sleep(Duration::from_millis(250)));
        assert_eq!(armed["d"].action, Action::Value("64".into()));
        assert_eq!((armed["e"].from, armed["e"].times), (2, Some(1)));
        assert!(parse("x").is_err());
        assert!(parse("x=explode").is_err());
        assert!(parse("x=abort@z").is_err());
    }

    #[test]
    fn a_failpoint_fires_from_its_hit_for_its_count() {
        set("test.window", "error@2*2").unwrap();
        let fired: Vec<bool> = (0..5).map(|_| hit("test.window").is_some()).collect();
        assert_eq!(fired, [false, true, true, false, false]);
        set("test.window", "off").unwrap();
        assert_eq!(hit("test.window"), None);
        set("test.value", "value(12)").unwrap();
        assert_eq!(value("test.value").as_deref(), Some("12"));
        assert_eq!(hit("test.value"), None, "a value never fires");
    }
}
