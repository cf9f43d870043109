//! `ToolPolicy`: the one filter every tool source passes (built-ins, MCP servers, skills), and
//! the only place that decides whether a toolset may be offered in a turn.
//!
//! A policy starts from a platform's configured toolsets and can only narrow: a delegated child
//! gets at most its parent's, a cron job created from a chat at most that chat's platform's.
//! It must never widen, and it must never be bypassed by registering tools elsewhere.
//!
//! The toolset name `mcp` admits every MCP server's toolset, `mcp:<server>` exactly that one.

use std::fmt;

/// The configured name that admits every MCP server's toolset (`mcp:<server>`).
const MCP: &str = "mcp";

/// The toolsets a turn may use. Matching: a configured `mcp` admits every toolset named
/// `mcp:<server>`; `mcp:<server>` admits exactly that one; any other name matches exactly.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ToolPolicy {
    /// Sorted, without duplicates, so equal policies compare equal.
    toolsets: Vec<String>,
}

impl ToolPolicy {
    /// A policy admitting `toolsets` (as configured: `files`, `mcp`, `mcp:docs`, ...).
    pub fn new<S: AsRef<str>>(toolsets: impl IntoIterator<Item = S>) -> Self {
        let mut toolsets: Vec<String> = toolsets.into_iter().map(|s| s.as_ref().trim().to_owned()).collect();
        toolsets.retain(|s| !s.is_empty());
        toolsets.sort();
        toolsets.dedup();
        Self { toolsets }
    }

    /// Whether a tool of `toolset` may be offered.
    pub fn admits(&self, toolset: &str) -> bool {
        self.toolsets.iter().any(|entry| entry_admits(entry, toolset))
    }

    /// What both policies admit: the result never admits a toolset either of them refuses.
    pub fn narrow(&self, other: &ToolPolicy) -> ToolPolicy {
        // An entry survives when the other side admits it whole: `mcp` ∩ `mcp:docs` = `mcp:docs`.
        let mine = self.toolsets.iter().filter(|entry| other.admits(entry));
        let theirs = other.toolsets.iter().filter(|entry| self.admits(entry));
        ToolPolicy::new(mine.chain(theirs))
    }

    /// The admitted entries, sorted.
    pub fn toolsets(&self) -> &[String] {
        &self.toolsets
    }

    /// The entries of `requested` this policy refuses (for a clear error when a job asks for
    /// more than its creator has).
    pub fn refused<'a>(&self, requested: &'a [String]) -> Vec<&'a str> {
        requested.iter().map(String::as_str).filter(|set| !self.admits(set)).collect()
    }
}

impl fmt::Display for ToolPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.toolsets.is_empty() {
            return f.write_str("(none)");
        }
        f.write_str(&self.toolsets.join(", "))
    }
}

pub(crate) fn entry_admits(entry: &str, toolset: &str) -> bool {
    entry == toolset || (entry == MCP && toolset.strip_prefix(MCP).is_some_and(|rest| rest.starts_with(':')))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(sets: &[&str]) -> ToolPolicy {
        ToolPolicy::new(sets.iter().copied())
    }

    #[test]
    fn names_match_exactly_and_mcp_admits_its_servers() {
        let p = policy(&["files", "mcp"]);
        assert!(p.admits("files") && p.admits("mcp:docs") && p.admits("mcp:time") && p.admits("mcp"));
        assert!(!p.admits("file") && !p.admits("files:x") && !p.admits("mcpx") && !p.admits("terminal"));
        let one = policy(&["mcp:docs"]);
        assert!(one.admits("mcp:docs"));
        assert!(!one.admits("mcp:time") && !one.admits("mcp") && !one.admits("mcp:docs2"));
    }

    #[test]
    fn narrowing_never_widens() {
        let parent = policy(&["delegate", "files", "mcp:docs", "memory"]);
        let child = policy(&["files", "terminal", "mcp", "web"]);
        let both = parent.narrow(&child);
        assert_eq!(both.toolsets(), ["files", "mcp:docs"]);
        assert_eq!(child.narrow(&parent), both);
        for set in ["terminal", "web", "mcp:time", "memory", "delegate"] {
            assert!(!both.admits(set), "{set}");
        }
        assert_eq!(policy(&["mcp:a"]).narrow(&policy(&["mcp:b"])), ToolPolicy::default());
        assert_eq!(policy(&["mcp"]).narrow(&policy(&["mcp"])).toolsets(), ["mcp"]);
    }

    #[test]
    fn refused_names_what_is_outside() {
        let p = policy(&["memory", "mcp"]);
        let asked = vec!["memory".to_owned(), "terminal".to_owned(), "mcp:x".to_owned()];
        assert_eq!(p.refused(&asked), ["terminal"]);
        assert_eq!(p.to_string(), "mcp, memory");
        assert_eq!(ToolPolicy::default().to_string(), "(none)");
    }
}
