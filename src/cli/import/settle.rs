//! The mapped config made to pass `hermesd check`: what it would refuse is left out, each part
//! with a note saying why.

use toml::Table;

use super::{Note, Plan};
use crate::config::Config;

/// Leave out of the mapped config what `hermesd check` would refuse (a platform whose secret
/// Hermes did not have, a route that can never match, …), each with a note saying why, until it
/// passes; `Err` only when a problem names nothing that can be left out.
pub(super) fn settle(plan: &mut Plan) -> Result<(), String> {
    for _ in 0..32 {
        let text = toml::to_string(&plan.config).map_err(|e| e.to_string())?;
        let config: Config = toml::from_str(&text).map_err(|e| format!("it does not read back: {e}"))?;
        // Variables the config names but Hermes did not have are listed as to do, not refused.
        let mut vars: std::collections::HashMap<String, String> = plan.env.clone().into_iter().collect();
        for name in env_names(&plan.config) {
            vars.entry(name).or_insert_with(|| "set-me".into());
        }
        let problems = config.validate(&crate::config::Env::from_map(vars));
        if problems.is_empty() {
            return Ok(());
        }
        let mut left_out = false;
        let mut removed: Vec<String> = Vec::new();
        for problem in &problems {
            let (path, why) = problem.split_once(": ").unwrap_or((problem.as_str(), ""));
            let under = |done: &String| path.starts_with(&format!("{done}.")) || path.starts_with(&format!("{done}["));
            if removed.iter().any(under) {
                continue;
            }
            if remove_path(&mut plan.config, path) {
                removed.push(path.to_owned());
                left_out = true;
                plan.notes.push(Note { what: format!("config {path}"), why: format!("left out: {why}") });
            }
        }
        if !left_out {
            return Err(problems.join("\n  "));
        }
    }
    Err("the mapped config did not settle".into())
}

/// Remove the key at a dotted path (`routes[2]` names an array item) of `table`, or the deepest
/// part of the path that exists; false when nothing of it exists.
pub(super) fn remove_path(table: &mut Table, path: &str) -> bool {
    let mut parts: Vec<(String, Option<usize>)> = Vec::new();
    for part in path.split('.') {
        match part.split_once('[') {
            Some((name, rest)) => parts.push((name.to_owned(), rest.trim_end_matches(']').parse().ok())),
            None => parts.push((part.to_owned(), None)),
        }
    }
    // The deepest existing prefix.
    let exists = |depth: usize| {
        let mut at = toml::Value::Table(table.clone());
        for (name, index) in &parts[..depth] {
            at = match at.get(name) {
                Some(next) => next.clone(),
                None => return false,
            };
            if let Some(i) = index {
                at = match at.get(*i) {
                    Some(next) => next.clone(),
                    None => return false,
                };
            }
        }
        true
    };
    // Never a whole top-level table for a problem deeper in it (`platforms` for one platform).
    let shallowest = parts.len().min(2);
    let Some(depth) = (shallowest..=parts.len()).rev().find(|d| exists(*d)) else { return false };
    let mut at: &mut Table = table;
    for (name, index) in &parts[..depth - 1] {
        let next = match at.get_mut(name) {
            Some(next) => next,
            None => return false,
        };
        let next = match index {
            Some(i) => match next.get_mut(*i) {
                Some(item) => item,
                None => return false,
            },
            None => next,
        };
        at = match next.as_table_mut() {
            Some(table) => table,
            None => return false,
        };
    }
    let (name, index) = &parts[depth - 1];
    match index {
        Some(i) => match at.get_mut(name).and_then(toml::Value::as_array_mut) {
            Some(items) if *i < items.len() => {
                items.remove(*i);
                true
            }
            _ => false,
        },
        None => at.remove(name).is_some(),
    }
}

/// The variables a config names (its `*_env` keys).
pub(super) fn env_names(table: &Table) -> Vec<String> {
    fn walk(value: &toml::Value, out: &mut Vec<String>) {
        match value {
            toml::Value::Table(t) => {
                for (k, v) in t {
                    if k.ends_with("_env")
                        && let Some(s) = v.as_str()
                    {
                        out.push(s.to_owned());
                    }
                    walk(v, out);
                }
            }
            toml::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(&toml::Value::Table(table.clone()), &mut out);
    out
}
