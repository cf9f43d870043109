//! Another gateway's YAML read as a JSON value tree, and `Tree`: lookups by dotted path that
//! remember what was read, so whatever the importer did not map can be listed afterwards.

use std::cell::RefCell;
use std::collections::BTreeSet;

use serde_json::{Map, Value};
use yaml_rust2::{Yaml, YamlLoader};

/// The first document of `text` as JSON (an empty file is an empty map).
pub(crate) fn parse(text: &str) -> Result<Value, String> {
    let docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().next().map_or_else(|| Value::Object(Map::new()), to_json))
}

fn to_json(yaml: Yaml) -> Value {
    match yaml {
        Yaml::Real(text) => {
            text.parse::<f64>().ok().and_then(serde_json::Number::from_f64).map_or(Value::String(text), Value::Number)
        }
        Yaml::Integer(n) => Value::from(n),
        Yaml::String(s) => Value::String(s),
        Yaml::Boolean(b) => Value::Bool(b),
        Yaml::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Yaml::Hash(hash) => Value::Object(
            hash.into_iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) | Yaml::Real(s) => s,
                        Yaml::Integer(n) => n.to_string(),
                        Yaml::Boolean(b) => b.to_string(),
                        other => format!("{other:?}"),
                    };
                    (key, to_json(v))
                })
                .collect(),
        ),
        Yaml::Alias(_) | Yaml::Null | Yaml::BadValue => Value::Null,
    }
}

/// A value tree whose reads are remembered.
#[derive(Debug)]
pub(crate) struct Tree {
    root: Value,
    read: RefCell<BTreeSet<String>>,
}

impl Tree {
    /// A tree over `root`.
    pub(crate) fn new(root: Value) -> Self {
        Self { root, read: RefCell::new(BTreeSet::new()) }
    }

    /// The value at a dotted path (each part a map key), marked read with everything under it.
    pub(crate) fn get(&self, path: &str) -> Option<&Value> {
        let value = self.peek(path)?;
        self.read.borrow_mut().insert(path.to_owned());
        (!value.is_null()).then_some(value)
    }

    /// The value at a path without marking it.
    pub(crate) fn peek(&self, path: &str) -> Option<&Value> {
        path.split('.').try_fold(&self.root, |value, part| value.get(part))
    }

    /// Mark a path read without using it (bookkeeping keys).
    pub(crate) fn skip(&self, path: &str) {
        self.read.borrow_mut().insert(path.to_owned());
    }

    /// A string at a path (numbers and booleans as their text).
    pub(crate) fn str(&self, path: &str) -> Option<String> {
        self.get(path).and_then(text)
    }

    /// A boolean at a path (`true`/`false`, and the strings Hermes accepts).
    pub(crate) fn bool(&self, path: &str) -> Option<bool> {
        self.get(path).and_then(boolean)
    }

    /// The top-level keys, in file order.
    pub(crate) fn keys(&self) -> Vec<String> {
        self.root.as_object().map(|m| m.keys().cloned().collect()).unwrap_or_default()
    }

    /// Every leaf path under `prefix` (the whole tree with `""`) that no read covered.
    pub(crate) fn unread(&self, prefix: &str) -> Vec<String> {
        let mut out = Vec::new();
        let start = if prefix.is_empty() { Some(&self.root) } else { self.peek(prefix) };
        if let Some(value) = start {
            self.walk(prefix, value, &mut out);
        }
        out
    }

    fn walk(&self, path: &str, value: &Value, out: &mut Vec<String>) {
        if !path.is_empty() && self.read.borrow().contains(path) {
            return;
        }
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (key, child) in map {
                    let child_path = if path.is_empty() { key.clone() } else { format!("{path}.{key}") };
                    self.walk(&child_path, child, out);
                }
            }
            _ if !path.is_empty() => out.push(path.to_owned()),
            _ => {}
        }
    }
}

/// A scalar as text.
pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A boolean, or a string Hermes reads as one.
pub(crate) fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::String(s) => truthy(s),
        _ => None,
    }
}

/// `true`/`yes`/`1`/`on` and their opposites.
pub(crate) fn truthy(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" | "yes" | "1" | "on" => Some(true),
        "false" | "no" | "0" | "off" => Some(false),
        _ => None,
    }
}

/// A list of ids: a YAML list, or a comma-separated string.
pub(crate) fn list(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.iter().filter_map(text).collect(),
        other => text(other)
            .map(|s| s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_owned).collect())
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_are_remembered_and_the_rest_listed() {
        let tree = Tree::new(parse("a:\n  b: 1\n  c: [x, y]\nd: 'yes'\ne: {}\n").unwrap());
        assert_eq!(tree.str("a.b").as_deref(), Some("1"));
        assert_eq!(tree.bool("d"), Some(true));
        assert_eq!(tree.unread(""), vec!["a.c".to_owned(), "e".to_owned()]);
        tree.skip("a");
        assert_eq!(tree.unread(""), vec!["e".to_owned()]);
        assert_eq!(list(&parse("'1, 2,3'").unwrap()), vec!["1", "2", "3"]);
    }

    #[test]
    fn broken_yaml_is_an_error_not_a_panic() {
        assert!(parse("a: [1, 2\nb: }").is_err());
        assert_eq!(parse("").unwrap(), Value::Object(Map::new()));
    }
}
