//! Tool names for MCP tools: `mcp_<server>_<tool>`, sanitised to what every provider accepts
//! (`^[a-zA-Z0-9_-]{1,64}$`), capped, and made unique deterministically. Never depends on the
//! order a server lists its tools in, so the same tools always get the same names.

use std::collections::{BTreeMap, BTreeSet};

/// Longest tool name the providers accept (OpenAI and Anthropic both cap at 64).
pub const MAX_TOOL_NAME: usize = 64;

/// Characters providers accept in a tool name; anything else becomes `_`.
fn sanitise(text: &str) -> String {
    text.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// A short stable hash of `text` (FNV-1a), used to tell apart names cut to the same prefix.
fn short_hash(text: &str) -> String {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{:06x}", hash & 0x00ff_ffff)
}

/// The hermesd name for each of `server`'s tools, keyed by the server's tool name. Names that
/// sanitise or cut to the same string get a hash of the original name as a suffix, so the
/// result depends only on the set of names, never on their order.
pub fn tool_names<'a>(server: &str, tools: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    let prefix = format!("mcp_{}_", sanitise(server));
    let originals: BTreeSet<&str> = tools.into_iter().collect();
    let plain = |tool: &str| -> String {
        let full = format!("{prefix}{}", sanitise(tool));
        if full.len() <= MAX_TOOL_NAME { full } else { full[..MAX_TOOL_NAME].to_owned() }
    };
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for tool in &originals {
        *counts.entry(plain(tool)).or_default() += 1;
    }
    let mut names = BTreeMap::new();
    for tool in originals {
        let base = plain(tool);
        let name = if counts[&base] == 1 {
            base
        } else {
            let suffix = format!("_{}", short_hash(tool));
            let keep = (MAX_TOOL_NAME - suffix.len()).min(base.len());
            format!("{}{suffix}", &base[..keep])
        };
        names.insert(tool.to_owned(), name);
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_and_sanitised() {
        let names = tool_names("time", ["get_current_time", "convert.time zone"]);
        assert_eq!(names["get_current_time"], "mcp_time_get_current_time");
        assert_eq!(names["convert.time zone"], "mcp_time_convert_time_zone");
    }

    #[test]
    fn long_names_are_capped() {
        let long = "x".repeat(100);
        let names = tool_names("srv", [long.as_str()]);
        assert_eq!(names[&long].len(), MAX_TOOL_NAME);
        assert!(names[&long].starts_with("mcp_srv_xxx"));
    }

    #[test]
    fn collisions_get_distinct_names_whatever_the_order() {
        let a = tool_names("s", ["a.b", "a_b", "a b"]);
        let b = tool_names("s", ["a b", "a_b", "a.b"]);
        assert_eq!(a, b);
        let distinct: BTreeSet<&String> = a.values().collect();
        assert_eq!(distinct.len(), 3, "{a:?}");
        assert!(a.values().all(|n| n.len() <= MAX_TOOL_NAME && n.starts_with("mcp_s_a_b_")));
    }

    #[test]
    fn capped_collisions_stay_within_the_limit() {
        let one = format!("{}1", "y".repeat(80));
        let two = format!("{}2", "y".repeat(80));
        let names = tool_names("server", [one.as_str(), two.as_str()]);
        assert_ne!(names[&one], names[&two]);
        assert!(names.values().all(|n| n.len() == MAX_TOOL_NAME));
    }
}
