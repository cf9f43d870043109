//! Reading a config file and reporting every structural problem in it at once: syntax errors,
//! unknown keys (with "did you mean"), type errors and bad enum values, each with file, line and
//! key path.
//!
//! The serde types stay the only schema. The document is parsed with spans, then deserialised
//! into `Config`; each error is located in the document by its span, recorded, and the offending
//! entry removed before the next attempt, so the next error surfaces. This never keeps a second
//! list of keys: whatever fields the structs grow are checked the same way.
//!
//! `ConfigFile` is the result: the config, every problem as `file:line: key.path: problem`, and a
//! `Locator`, which gives the problems `validate` finds later their line.

use std::collections::{BTreeMap, HashSet};
use std::ops::Range;
use std::path::Path;

use serde::Deserialize;
use toml::Spanned;
use toml::de::{DeArray, DeTable, DeValue};

use super::{Config, ConfigError, Env};

/// Attempts before giving up on a document (each attempt removes one bad entry).
const MAX_ROUNDS: usize = 200;

/// A config file read and checked against the schema.
#[derive(Debug, Clone, Default)]
pub struct ConfigFile {
    /// The config with every bad entry left at its default (the whole config when `problems` is
    /// empty).
    pub config: Config,
    /// One line per structural problem: `file:line: key.path: what is wrong`.
    pub problems: Vec<String>,
    /// Where each key of the file is, for locating later problems.
    pub locator: Locator,
}

/// The file name and the line of each key path present in a config file.
#[derive(Debug, Clone, Default)]
pub struct Locator {
    /// The file name used in messages.
    name: String,
    /// Line (1-based) of each key path present in the file.
    lines: BTreeMap<String, usize>,
}

impl Locator {
    /// `problem` (which starts with a key path, as `Config::validate` writes them) prefixed with
    /// the file and the line of that key, when the file sets it.
    pub fn locate(&self, problem: &str) -> String {
        let key = problem.split(|c: char| c == ':' || c.is_whitespace()).next().unwrap_or("");
        match self.lines.get(key) {
            Some(line) => format!("{}:{line}: {problem}", self.name),
            None => problem.to_owned(),
        }
    }
}

impl ConfigFile {
    /// Read and check `path`; a missing file gives the embedded defaults. Only an unreadable
    /// file is an error: every problem inside one is in `problems`.
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Ok(Self::from_text(&text, &path.display().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let locator = Locator { name: path.display().to_string(), ..Locator::default() };
                Ok(Self { locator, ..Self::default() })
            }
            Err(e) => Err(ConfigError { problems: vec![format!("read {}: {e}", path.display())] }),
        }
    }

    /// Check TOML `text`, naming it `name` in messages.
    pub fn from_text(text: &str, name: &str) -> Self {
        let (document, syntax) = DeTable::parse_recoverable(text);
        // (line, message), sorted by line at the end so the list reads top to bottom.
        let mut problems: Vec<(usize, String)> = syntax
            .iter()
            .map(|e| {
                let line = e.span().map(|s| line_of(text, s.start)).unwrap_or(1);
                (line, format!("{name}:{line}: {}", e.message().trim()))
            })
            .collect();
        let mut document = document.into_inner();
        let mut lines = BTreeMap::new();
        index_lines(text, &document, "", &mut lines);
        let mut removed = HashSet::new();
        let mut config = None;
        for _ in 0..MAX_ROUNDS {
            let error = match Config::deserialize(toml::de::Deserializer::from(Spanned::new(
                0..text.len(),
                document.clone(),
            ))) {
                Ok(parsed) => {
                    config = Some(parsed);
                    break;
                }
                Err(error) => error,
            };
            let message = error.message().trim().to_owned();
            let Some(span) = error.span() else {
                problems.push((usize::MAX, format!("{name}: {message}")));
                break;
            };
            let line = line_of(text, span.start);
            let Some(at) = locate(&document, &span) else {
                problems.push((line, format!("{name}:{line}: {message}")));
                break;
            };
            let path = render_path(&at);
            if removed.contains(&path) {
                // The entry could not be taken out: stop rather than report it again.
                break;
            }
            // A required key removed for being wrong is reported once, not again as missing.
            let missing = backticked(&message).into_iter().next().filter(|_| message.starts_with("missing field"));
            let what = match &missing {
                Some(first) => {
                    let keys: Vec<String> = all_missing(&document, &at, first, &span)
                        .into_iter()
                        .filter(|key| !removed.contains(&join(&path, key)))
                        .collect();
                    (!keys.is_empty()).then(|| describe_missing(&keys))
                }
                None => Some(describe(&message)),
            };
            if let Some(what) = what {
                let text = if path.is_empty() {
                    format!("{name}:{line}: {what}")
                } else {
                    format!("{name}:{line}: {path}: {what}")
                };
                problems.push((line, text));
            }
            remove(&mut document, &at);
            removed.insert(path);
        }
        if config.is_none() {
            problems
                .push((usize::MAX, format!("{name}: checking stopped here; fix the problems above and check again")));
        }
        problems.sort_by_key(|(line, _)| *line);
        let problems = problems.into_iter().map(|(_, text)| text).collect();
        Self { config: config.unwrap_or_default(), problems, locator: Locator { name: name.to_owned(), lines } }
    }

    /// The config, or every structural problem in it.
    pub fn into_config(self) -> Result<Config, ConfigError> {
        if self.problems.is_empty() { Ok(self.config) } else { Err(ConfigError { problems: self.problems }) }
    }

    /// Structural problems, then `Config::validate` problems of what could be read, located.
    pub fn all_problems(&self, env: &Env) -> Vec<String> {
        let mut all = self.problems.clone();
        all.extend(self.config.validate(env).iter().map(|p| self.locator.locate(p)));
        all
    }
}

/// Every required key the table at `at` lacks, `first` (serde's report) included. serde names
/// one missing field per attempt, so each is filled with a placeholder of whichever type it
/// takes until the table reports no more (bounded; the table is removed afterwards anyway).
fn all_missing(document: &DeTable<'_>, at: &[Step], first: &str, table_span: &Range<usize>) -> Vec<String> {
    let mut probe = document.clone();
    let mut missing = vec![first.to_owned()];
    // An empty span right at the table marks the placeholders apart from the table itself.
    let marker = table_span.start..table_span.start;
    'keys: while missing.len() < 16 {
        let key = missing.last().cloned().unwrap_or_default();
        let mut candidates = std::collections::VecDeque::from(placeholders());
        let mut tries = 0;
        while let Some(placeholder) = candidates.pop_front().filter(|_| tries < 8) {
            tries += 1;
            let Some(table) = table_at(&mut probe, at) else { break 'keys };
            table.insert(Spanned::new(marker.clone(), key.clone().into()), Spanned::new(marker.clone(), placeholder));
            let attempt = Config::deserialize(toml::de::Deserializer::from(Spanned::new(0..0, probe.clone())));
            let Err(error) = attempt else { break 'keys };
            if error.span().as_ref() == Some(&marker) {
                // Wrong type for this key: try the next placeholder; an enum names its values.
                if error.message().starts_with("unknown variant")
                    && let Some(value) = backticked(error.message()).get(1)
                {
                    candidates.push_front(DeValue::String(value.clone().into()));
                }
                continue;
            }
            let next = backticked(error.message()).into_iter().next();
            match next {
                Some(next)
                    if error.message().starts_with("missing field")
                        && error.span().as_ref() == Some(table_span)
                        && !missing.contains(&next) =>
                {
                    missing.push(next);
                    continue 'keys;
                }
                _ => break 'keys,
            }
        }
        break;
    }
    missing
}

/// One value of each TOML type, for `all_missing`.
fn placeholders() -> [DeValue<'static>; 5] {
    [
        DeValue::String("".into()),
        DeValue::Integer(Default::default()),
        DeValue::Boolean(false),
        DeValue::Array(DeArray::new()),
        DeValue::Table(DeTable::new()),
    ]
}

/// The table at `path`, if that is a table.
fn table_at<'a, 'i>(table: &'a mut DeTable<'i>, path: &[Step]) -> Option<&'a mut DeTable<'i>> {
    let Some((first, rest)) = path.split_first() else { return Some(table) };
    let Step::Key(key) = first else { return None };
    let mut value = table.get_mut(key.as_str())?.get_mut();
    let mut rest = rest;
    loop {
        match (value, rest.split_first()) {
            (DeValue::Table(inner), _) => return table_at(inner, rest),
            (DeValue::Array(items), Some((Step::Index(i), tail))) => {
                value = items.get_mut(*i)?.get_mut();
                rest = tail;
            }
            _ => return None,
        }
    }
}

fn describe_missing(keys: &[String]) -> String {
    let names = keys.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", ");
    if keys.len() == 1 { format!("missing key {names}") } else { format!("missing keys {names}") }
}

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Key(String),
    Index(usize),
}

/// The path of the entry `span` points at: a key whose name or value is exactly there, else the
/// innermost value containing it.
fn locate(table: &DeTable<'_>, span: &Range<usize>) -> Option<Vec<Step>> {
    let mut best: Option<(usize, Vec<Step>)> = None;
    let mut path = Vec::new();
    search_table(table, span, &mut path, &mut best);
    best.map(|(_, path)| path)
}

fn consider(found: Range<usize>, span: &Range<usize>, path: &[Step], best: &mut Option<(usize, Vec<Step>)>) {
    if found.start <= span.start && span.end <= found.end {
        let width = found.end - found.start;
        if best.as_ref().is_none_or(|(w, p)| width < *w || (width == *w && path.len() > p.len())) {
            *best = Some((width, path.to_vec()));
        }
    }
}

fn search_table(table: &DeTable<'_>, span: &Range<usize>, path: &mut Vec<Step>, best: &mut Option<(usize, Vec<Step>)>) {
    for (key, value) in table.iter() {
        path.push(Step::Key(key.get_ref().to_string()));
        // An error on the key itself (an unknown key) wins over any value span covering it.
        if key.span() == *span {
            *best = Some((0, path.clone()));
        }
        search_value(value, span, path, best);
        path.pop();
    }
}

fn search_value(
    value: &Spanned<DeValue<'_>>,
    span: &Range<usize>,
    path: &mut Vec<Step>,
    best: &mut Option<(usize, Vec<Step>)>,
) {
    consider(value.span(), span, path, best);
    match value.get_ref() {
        DeValue::Table(inner) => search_table(inner, span, path, best),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                search_value(item, span, path, best);
                path.pop();
            }
        }
        _ => {}
    }
}

/// Remove the entry at `path` (a key from its table, an element from its array).
fn remove(table: &mut DeTable<'_>, path: &[Step]) {
    let Some((Step::Key(first), rest)) = path.split_first() else { return };
    if rest.is_empty() {
        table.remove(first.as_str());
        return;
    }
    if let Some(value) = table.get_mut(first.as_str()) {
        remove_in(value.get_mut(), rest);
    }
}

fn remove_in(value: &mut DeValue<'_>, path: &[Step]) {
    match (value, path) {
        (DeValue::Table(table), _) => remove(table, path),
        (DeValue::Array(items), [Step::Index(i), rest @ ..]) => {
            if rest.is_empty() {
                let mut kept = DeArray::new();
                for (j, item) in items.iter().enumerate() {
                    if j != *i {
                        kept.push(item.clone());
                    }
                }
                *items = kept;
            } else if let Some(item) = items.get_mut(*i) {
                remove_in(item.get_mut(), rest);
            }
        }
        _ => {}
    }
}

/// Record the line of every key path in the document.
fn index_lines(text: &str, table: &DeTable<'_>, prefix: &str, lines: &mut BTreeMap<String, usize>) {
    for (key, value) in table.iter() {
        let path = join(prefix, &render_key(key.get_ref()));
        lines.entry(path.clone()).or_insert_with(|| line_of(text, key.span().start));
        index_value(text, value, &path, lines);
    }
}

fn index_value(text: &str, value: &Spanned<DeValue<'_>>, path: &str, lines: &mut BTreeMap<String, usize>) {
    match value.get_ref() {
        DeValue::Table(inner) => index_lines(text, inner, path, lines),
        DeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let at = format!("{path}[{i}]");
                lines.entry(at.clone()).or_insert_with(|| line_of(text, item.span().start));
                index_value(text, item, &at, lines);
            }
        }
        _ => {}
    }
}

fn render_path(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => out = join(&out, &render_key(key)),
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

fn render_key(key: &str) -> String {
    let bare = !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { key.to_owned() } else { format!("{key:?}") }
}

fn join(prefix: &str, key: &str) -> String {
    if prefix.is_empty() { key.to_owned() } else { format!("{prefix}.{key}") }
}

/// 1-based line of byte `offset` in `text`.
fn line_of(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    text.as_bytes()[..end].iter().filter(|b| **b == b'\n').count() + 1
}

/// The names serde quotes in backticks, in order (`unknown field `x`, expected `a` or `b``).
fn backticked(message: &str) -> Vec<String> {
    message.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

/// serde's message in an operator's words, with a suggestion for a misspelt key or value.
fn describe(message: &str) -> String {
    let names = backticked(message);
    let (found, expected) = match names.split_first() {
        Some((found, expected)) => (found.as_str(), expected),
        None => return message.to_owned(),
    };
    let known = || expected.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ");
    if message.starts_with("unknown field") {
        match closest(found, expected) {
            Some(guess) => format!("unknown key (did you mean `{guess}`?)"),
            None if expected.is_empty() => "unknown key (this table takes no keys)".to_owned(),
            None => format!("unknown key (known keys: {})", known()),
        }
    } else if message.starts_with("unknown variant") {
        match closest(found, expected) {
            Some(guess) => format!("unknown value {found:?} (did you mean `{guess}`?)"),
            None => format!("unknown value {found:?} (expected one of {})", known()),
        }
    } else {
        message.to_owned()
    }
}

/// The candidate nearest to `word` by edit distance, when it is near enough to be a typo.
fn closest<'a>(word: &str, candidates: &'a [String]) -> Option<&'a str> {
    let limit = (word.chars().count() / 3).max(2);
    candidates
        .iter()
        .map(|c| (edit_distance(&word.to_lowercase(), &c.to_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

/// Levenshtein distance over chars.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = if ca == *cb { diagonal } else { 1 + diagonal.min(above).min(row[j]) };
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests;
