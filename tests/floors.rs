//! The import rule of `src/`: every folder stands on a floor of the table in ARCHITECTURE.md
//! ("Floors"), a file imports only from its own floor or below, and no circle of imports runs
//! through more than one folder. Test code (`#[cfg(test)]` items and modules, fuzz entry points)
//! is outside the rule. There is no exception list: a new import that breaks the rule moves a
//! word down, not the rule.
//!
//! The imports are read from the source: `use` trees and inline paths that start with `crate::`
//! or `super::`, after comments, strings and test-only items are dropped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

/// A token of Rust source, as far as paths are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    /// `::`
    Path,
    Punct(char),
}

/// Tokens of `text` with comments, strings, chars and lifetimes dropped.
fn lex(text: &str) -> Vec<Tok> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c == b'/' && b.get(i + 1) == Some(&b'/') {
            while i < b.len() && b[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && b.get(i + 1) == Some(&b'*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == b'"' {
            i = skip_string(b, i + 1);
        } else if (c == b'r' || c == b'b') && raw_string_start(b, i).is_some() {
            let (hashes, body) = raw_string_start(b, i).expect("checked");
            let close: Vec<u8> = std::iter::once(b'"').chain(std::iter::repeat_n(b'#', hashes)).collect();
            i = body;
            while i < b.len() && !b[i..].starts_with(&close) {
                i += 1;
            }
            i += close.len();
        } else if c == b'b' && b.get(i + 1) == Some(&b'"') {
            i = skip_string(b, i + 2);
        } else if c == b'\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime ('a).
            if b.get(i + 1) == Some(&b'\\') {
                i += 2;
                while i < b.len() && b[i] != b'\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&b'\'') {
                i += 3;
            } else {
                let len = text[i + 1..].chars().next().map_or(1, char::len_utf8);
                if b.get(i + 1 + len) == Some(&b'\'') {
                    i += 2 + len;
                } else {
                    i += 1;
                    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                        i += 1;
                    }
                }
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            out.push(Tok::Ident(text[start..i].to_owned()));
        } else if c.is_ascii_digit() {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b'.') {
                i += 1;
            }
        } else if c == b':' && b.get(i + 1) == Some(&b':') {
            out.push(Tok::Path);
            i += 2;
        } else {
            if !c.is_ascii_whitespace() {
                out.push(Tok::Punct(char::from(c)));
            }
            i += 1;
        }
    }
    out
}

fn skip_string(b: &[u8], mut i: usize) -> usize {
    while i < b.len() && b[i] != b'"' {
        i += if b[i] == b'\\' { 2 } else { 1 };
    }
    i + 1
}

/// `r"`, `r#"`, `br"`…: the number of hashes and where the body starts.
fn raw_string_start(b: &[u8], mut i: usize) -> Option<(usize, usize)> {
    if i > 0 && (b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_') {
        return None;
    }
    if b[i] == b'b' {
        i += 1;
    }
    if b.get(i) != Some(&b'r') {
        return None;
    }
    i += 1;
    let hashes = b[i..].iter().take_while(|&&c| c == b'#').count();
    (b.get(i + hashes) == Some(&b'"')).then_some((hashes, i + hashes + 1))
}

/// The tokens with every item under a test-only `#[cfg(…)]` removed, and the names of the
/// test-only `mod x;` declarations.
fn drop_test_items(toks: &[Tok]) -> (Vec<Tok>, BTreeSet<String>) {
    let mut kept = Vec::new();
    let mut test_mods = BTreeSet::new();
    let mut i = 0;
    while i < toks.len() {
        if let Some(end) = test_cfg(toks, i) {
            // Skip further attributes, then the item: up to a `;` or a balanced `{…}` at depth 0.
            let mut j = end;
            while toks.get(j) == Some(&Tok::Punct('#')) {
                j = attribute_end(toks, j);
            }
            if let (Some(Tok::Ident(kw)), Some(Tok::Ident(name)), Some(Tok::Punct(';'))) =
                (toks.get(j), toks.get(j + 1), toks.get(j + 2))
                && kw == "mod"
            {
                test_mods.insert(name.clone());
            }
            let mut depth = 0usize;
            while j < toks.len() {
                match toks[j] {
                    Tok::Punct('{') | Tok::Punct('(') | Tok::Punct('[') => depth += 1,
                    Tok::Punct('}') | Tok::Punct(')') | Tok::Punct(']') => {
                        depth = depth.saturating_sub(1);
                        if depth == 0 && toks[j] == Tok::Punct('}') {
                            j += 1;
                            break;
                        }
                    }
                    Tok::Punct(';') if depth == 0 => {
                        j += 1;
                        break;
                    }
                    _ => {}
                }
                j += 1;
            }
            i = j;
        } else {
            kept.push(toks[i].clone());
            i += 1;
        }
    }
    (kept, test_mods)
}

/// Where the attribute starting at `i` (`#[…]` or `#![…]`) ends.
fn attribute_end(toks: &[Tok], mut i: usize) -> usize {
    i += 1;
    if toks.get(i) == Some(&Tok::Punct('!')) {
        i += 1;
    }
    let mut depth = 0usize;
    while i < toks.len() {
        match toks[i] {
            Tok::Punct('[') => depth += 1,
            Tok::Punct(']') => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    i
}

/// When `#[cfg(…)]` at `i` names `test` (and no `not`), where the attribute ends.
fn test_cfg(toks: &[Tok], i: usize) -> Option<usize> {
    if toks.get(i) != Some(&Tok::Punct('#')) || toks.get(i + 1) != Some(&Tok::Punct('[')) {
        return None;
    }
    if toks.get(i + 2) != Some(&Tok::Ident("cfg".into())) {
        return None;
    }
    let end = attribute_end(toks, i);
    let names = |n: &str| toks[i..end].contains(&Tok::Ident(n.into()));
    (names("test") && !names("not")).then_some(end)
}

/// A production file of the crate: its module path and its tokens.
struct File {
    module: Vec<String>,
    /// Whether the module has child modules (a `mod.rs`, or `foo.rs` beside `foo/`).
    has_children: bool,
    toks: Vec<Tok>,
}

/// Every production module file reachable from `src/lib.rs` through `mod x;`.
fn module_tree(src: &Path) -> Vec<File> {
    let mut files = Vec::new();
    let mut stack = vec![(src.join("lib.rs"), Vec::<String>::new())];
    while let Some((path, module)) = stack.pop() {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (toks, test_mods) = drop_test_items(&lex(&text));
        let dir: PathBuf = if module.is_empty() || path.ends_with("mod.rs") {
            path.parent().expect("a parent").to_owned()
        } else {
            path.with_extension("")
        };
        let mut has_children = false;
        for w in toks.windows(3) {
            if let [Tok::Ident(kw), Tok::Ident(name), Tok::Punct(';')] = w
                && kw == "mod"
                && !test_mods.contains(name)
            {
                let child = [dir.join(format!("{name}.rs")), dir.join(name).join("mod.rs")]
                    .into_iter()
                    .find(|p| p.is_file())
                    .unwrap_or_else(|| panic!("mod {name} of {}: no file", path.display()));
                let mut child_module = module.clone();
                child_module.push(name.clone());
                stack.push((child, child_module));
                has_children = true;
            }
        }
        files.push(File { module, has_children, toks });
    }
    files
}

/// The module paths `toks` import: `use` trees and inline paths from `crate::` or `super::`,
/// made absolute from `module` (the importing file's module).
fn imports(module: &[String], toks: &[Tok]) -> BTreeSet<Vec<String>> {
    let mut found = BTreeSet::new();
    let mut i = 0;
    while i < toks.len() {
        if toks[i] == Tok::Ident("use".into()) {
            let mut j = i + 1;
            let mut paths = Vec::new();
            use_tree(toks, &mut j, Vec::new(), &mut paths);
            found.extend(paths.into_iter().filter_map(|p| absolute(module, &p)));
            i = j;
        } else if matches!(&toks[i], Tok::Ident(s) if s == "crate" || s == "super")
            && toks.get(i + 1) == Some(&Tok::Path)
            && (i == 0 || toks[i - 1] != Tok::Path)
        {
            let mut path = Vec::new();
            let mut j = i;
            while let Some(Tok::Ident(s)) = toks.get(j) {
                path.push(s.clone());
                if toks.get(j + 1) != Some(&Tok::Path) {
                    break;
                }
                j += 2;
            }
            found.extend(absolute(module, &path));
            i = j + 1;
        } else {
            i += 1;
        }
    }
    found
}

/// Read one use tree at `*i` under `prefix`, pushing each full path.
fn use_tree(toks: &[Tok], i: &mut usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) {
    let mut path = prefix;
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) if s == "as" => {
                *i += 2;
                out.push(path);
                return;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
            }
            Some(Tok::Path) => *i += 1,
            Some(Tok::Punct('{')) => {
                *i += 1;
                while toks.get(*i).is_some_and(|t| *t != Tok::Punct('}')) {
                    use_tree(toks, i, path.clone(), out);
                    if toks.get(*i) == Some(&Tok::Punct(',')) {
                        *i += 1;
                    }
                }
                *i += 1;
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push(path);
                return;
            }
            _ => {
                if path.last().is_some_and(|s| s == "self") {
                    path.pop();
                }
                out.push(path);
                return;
            }
        }
    }
}

/// `path` as seen from `module`, from the crate root; `None` for paths that leave the crate or
/// go down from the importing module (`self::`, a child module by name).
fn absolute(module: &[String], path: &[String]) -> Option<Vec<String>> {
    match path.first().map(String::as_str) {
        Some("crate") => Some(path[1..].to_vec()),
        Some("super") => {
            let mut base = module.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop()?;
                rest = &rest[1..];
            }
            base.extend(rest.iter().filter(|s| *s != "self").cloned());
            Some(base)
        }
        _ => None,
    }
}

/// The floors of ARCHITECTURE.md's table: folder (a module path such as `agent` or
/// `agent/tools`) → (floor number, floor name).
fn floor_table(architecture: &str) -> BTreeMap<String, (u32, String)> {
    let mut table = BTreeMap::new();
    let section = architecture.split("\n## Floors").nth(1).expect("ARCHITECTURE.md has a `## Floors` section");
    for line in section.lines().take_while(|l| !l.starts_with("## ")) {
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        let (Some(number), Some(name), Some(folders)) = (cells.get(1), cells.get(2), cells.get(3)) else { continue };
        let Ok(number) = number.parse::<u32>() else { continue };
        for folder in folders.split('`').skip(1).step_by(2) {
            let folder = folder.trim_end_matches('/').to_owned();
            assert!(table.insert(folder.clone(), (number, (*name).to_owned())).is_none(), "{folder} is listed twice");
        }
    }
    assert!(table.len() > 5, "the floor table has only {} folders", table.len());
    table
}

/// The folder a module's file belongs to, for the circle rule: the module itself when it has
/// children (`foo.rs` beside `foo/`, `foo/mod.rs`), its parent otherwise.
fn folder(file: &File) -> String {
    let parts = if file.has_children { &file.module[..] } else { &file.module[..file.module.len().saturating_sub(1)] };
    if parts.is_empty() { "src".to_owned() } else { parts.join("/") }
}

/// Strongly connected components (Tarjan) of more than one node.
fn circles(edges: &BTreeMap<usize, BTreeSet<usize>>, nodes: usize) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a BTreeMap<usize, BTreeSet<usize>>,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        found: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges.get(&v).into_iter().flatten() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(index) if s.on_stack[w] => s.low[v] = s.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                s.found.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: vec![None; nodes],
        low: vec![0; nodes],
        on_stack: vec![false; nodes],
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in 0..nodes {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.found
}

/// Every broken rule of the tree at `root`, one line each.
fn broken_rules(root: &Path) -> Vec<String> {
    let architecture = std::fs::read_to_string(root.join("ARCHITECTURE.md")).expect("ARCHITECTURE.md");
    let table = floor_table(&architecture);
    let files = module_tree(&root.join("src"));
    let by_module: HashMap<&[String], usize> = files.iter().enumerate().map(|(n, f)| (&f.module[..], n)).collect();
    let name = |n: usize| if files[n].module.is_empty() { "lib".to_owned() } else { files[n].module.join("/") };
    let floor_of = |module: &[String]| {
        (0..=module.len())
            .rev()
            .find_map(|len| table.get(&module[..len].join("/")).map(|f| (module[..len].join("/"), f)))
    };
    let mut problems = Vec::new();
    let mut edges: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
    for (n, file) in files.iter().enumerate() {
        if file.module.is_empty() {
            continue;
        }
        let Some((_, &(floor, _))) = floor_of(&file.module) else {
            problems.push(format!("{}: its folder has no floor in ARCHITECTURE.md's table", name(n)));
            continue;
        };
        for path in imports(&file.module, &file.toks) {
            // The longest prefix of the path that is a module file is what is imported.
            let Some(target) = (1..=path.len()).rev().find_map(|len| by_module.get(&path[..len]).copied()) else {
                continue;
            };
            if target == n || files[target].module.is_empty() || file.module.starts_with(&files[target].module) {
                // Itself, the crate root (macros), or an ancestor's own items re-exported down.
                if target != n && !files[target].module.is_empty() {
                    edges.entry(n).or_default().insert(target);
                }
                continue;
            }
            edges.entry(n).or_default().insert(target);
            if let Some((folder, &(to_floor, ref to_name))) = floor_of(&files[target].module)
                && to_floor > floor
            {
                problems.push(format!(
                    "{} (floor {floor}) imports {} from `{folder}` (floor {to_floor}, {to_name}): a floor imports only from below",
                    name(n),
                    path.join("::"),
                ));
            }
        }
    }
    for circle in circles(&edges, files.len()) {
        let folders: BTreeSet<String> = circle.iter().map(|&n| folder(&files[n])).collect();
        if folders.len() > 1 {
            let mut names: Vec<String> = circle.iter().map(|&n| name(n)).collect();
            names.sort();
            problems.push(format!("a circle of imports through {} folders: {}", folders.len(), names.join(", ")));
        }
    }
    problems
}

#[test]
fn every_import_runs_down_the_floors_and_no_circle_leaves_a_folder() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let problems = broken_rules(Path::new(&manifest));
    assert!(problems.is_empty(), "{} broken import rules:\n{}", problems.len(), problems.join("\n"));
}

#[test]
fn the_reader_sees_what_the_rule_needs() {
    let toks = lex(r##"
        use crate::a::{b::{C, D as E}, f, self};
        use super::{g, super::h::I};
        // use crate::commented::Out;
        let s = "crate::in_string::X"; let r = r#"crate::raw::Y"#; let c = '{'; fn f<'a>() {}
        #[cfg(test)]
        mod tests { use crate::tested::Z; }
        #[cfg(test)]
        mod props;
        #[cfg(any(fuzzing, test))]
        pub fn fuzz() { crate::fuzzed::W(); }
        #[cfg(not(test))]
        fn real() { crate::inline::path::call(); }
    "##);
    let (kept, test_mods) = drop_test_items(&toks);
    assert_eq!(test_mods.into_iter().collect::<Vec<_>>(), ["props"]);
    let module = ["x".to_owned(), "y".to_owned()];
    let got: Vec<String> = imports(&module, &kept).into_iter().map(|p| p.join("::")).collect();
    assert_eq!(got, ["a", "a::b::C", "a::b::D", "a::f", "h::I", "inline::path::call", "x::g"]);
    let table = floor_table(
        "x\n## Floors\n| Floor | Name | Folders |\n|---|---|---|\n| 0 | words | `vocab`, `clock` |\n| 1 | state | `config`, `store/` |\n| 2 | x | `a`, `b` |\n## Next\n| 9 | z | `late` |",
    );
    assert_eq!(table.get("store"), Some(&(1, "state".to_owned())));
    assert!(!table.contains_key("late"));
}
