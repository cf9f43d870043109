//! The `web_fetch` tool: GET one http(s) URL and return it as readable text (HTML stripped to its
//! words, JSON and plain text as they are). It must never connect to an address the IANA
//! special-purpose registries name (loopback, private, link-local, NAT64, 6to4, Teredo, …), nor
//! let a second DNS answer replace the checked one, nor use a proxy from the environment, nor read
//! an unbounded body, nor follow more than `MAX_REDIRECTS` redirects, each of which is checked.
//!
//! IP literals are checked before the request; redirects are followed by hand, every hop checked.
//! Private-use networks are reachable only with `tools.web_allow_private`; loopback never, but
//! through a test-only constructor that configuration cannot reach.

mod resolve;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::net_guard::AddressPolicy;
use resolve::GuardedResolver;
pub use resolve::{Lookup, Refused, SystemLookup};

const FETCH_TIMEOUT: Duration = Duration::from_secs(20);
const MAX_REDIRECTS: usize = 5;
const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;
const DEFAULT_MAX_CHARS: usize = 20_000;
const LIMIT_MAX_CHARS: usize = 100_000;

/// Fetches web pages.
#[derive(Clone)]
pub struct WebFetchTool {
    http: reqwest::Client,
    policy: AddressPolicy,
}

impl std::fmt::Debug for WebFetchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebFetchTool").field("policy", &self.policy).finish_non_exhaustive()
    }
}

impl WebFetchTool {
    /// A fetch tool resolving names through the system resolver, connecting only to addresses
    /// `policy` permits.
    pub fn new(policy: AddressPolicy) -> reqwest::Result<Self> {
        Self::with_lookup(policy, Arc::new(SystemLookup))
    }

    /// A fetch tool resolving names through `lookup` (tests script DNS answers with it).
    pub fn with_lookup(policy: AddressPolicy, lookup: Arc<dyn Lookup>) -> reqwest::Result<Self> {
        let resolver = GuardedResolver {
            lookup,
            policy,
            #[cfg(test)]
            stand_ins: Default::default(),
        };
        Self::with_resolver(resolver)
    }

    /// A fetch tool whose checked addresses in `stand_ins` are connected at another address
    /// (tests serve "public" hosts from 127.0.0.1); test builds only.
    #[cfg(test)]
    pub(crate) fn with_stand_ins(
        lookup: Arc<dyn Lookup>,
        stand_ins: std::collections::HashMap<IpAddr, std::net::SocketAddr>,
    ) -> reqwest::Result<Self> {
        Self::with_resolver(GuardedResolver {
            lookup,
            policy: AddressPolicy::default(),
            stand_ins: Arc::new(stand_ins),
        })
    }

    fn with_resolver(resolver: GuardedResolver) -> reqwest::Result<Self> {
        let policy = resolver.policy;
        let http = crate::http_client::build_fetcher(Arc::new(resolver))?;
        Ok(Self { http, policy })
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    url: String,
    max_chars: Option<usize>,
}

#[async_trait]
impl Tool for WebFetchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_fetch".into(),
            description: "Fetch a public http(s) URL and return its content as text: HTML pages as readable \
                          text (title first), JSON and plain text as they are. Binary content is refused."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "url": {"type": "string", "description": "An http:// or https:// URL"},
                    "max_chars": {"type": "integer", "minimum": 1, "maximum": LIMIT_MAX_CHARS, "description": "Longest text to return (default 20000)"}
                },
                "required": ["url"],
                "additionalProperties": false
            }),
            toolset: "web".into(),
            parallel_safe: true,
            max_result_chars: LIMIT_MAX_CHARS + 1_000,
            timeout: FETCH_TIMEOUT + Duration::from_secs(10),
        }
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let url = Url::parse(args.url.trim())
            .map_err(|e| ToolError::InvalidArguments(format!("{:?} is not a valid URL ({e})", args.url)))?;
        if !url.username().is_empty() || url.password().is_some() {
            return Err(ToolError::InvalidArguments("URLs with a user name or password are not supported".into()));
        }
        let max_chars = args.max_chars.unwrap_or(DEFAULT_MAX_CHARS).clamp(1, LIMIT_MAX_CHARS);
        let shown = url.to_string();
        tokio::time::timeout(FETCH_TIMEOUT, self.fetch(url, max_chars)).await.unwrap_or_else(|_| {
            Err(ToolError::Failed(format!("fetching {shown} took longer than {} s", FETCH_TIMEOUT.as_secs())))
        })
    }
}

impl WebFetchTool {
    /// GET `url`, following redirects by hand: every hop is checked before it is requested, and
    /// named hosts are checked by the resolver at connect time.
    async fn fetch(&self, url: Url, max_chars: usize) -> Result<String, ToolError> {
        let accept = "text/html, application/json;q=0.9, text/plain;q=0.9, */*;q=0.5";
        read(self.get_checked(url, accept).await?, max_chars).await
    }

    /// GET `url` with the same protections (checked addresses, no proxies, every redirect hop
    /// checked) and return the final response, unread; `send_file` streams it to disk.
    pub(crate) async fn get_checked(&self, mut url: Url, accept: &str) -> Result<reqwest::Response, ToolError> {
        for hop in 0..=MAX_REDIRECTS {
            self.check(&url)?;
            let response = self.http.get(url.clone()).header(ACCEPT, accept).send().await;
            let response = response.map_err(|e| request_error(&url, &e))?;
            let location = response.headers().get(LOCATION).and_then(|l| l.to_str().ok());
            match location {
                Some(location) if response.status().is_redirection() => {
                    if hop == MAX_REDIRECTS {
                        return Err(ToolError::Failed(format!(
                            "more than {MAX_REDIRECTS} redirects; stopped at {url}"
                        )));
                    }
                    url = url.join(location).map_err(|e| {
                        ToolError::Failed(format!("{url} redirects to an invalid location {location:?} ({e})"))
                    })?;
                }
                _ => return Ok(response),
            }
        }
        unreachable!("the last hop returns or fails")
    }

    /// Only http(s); an IP-literal host is checked here, since reqwest connects to a literal
    /// without asking the resolver. Named hosts are checked when the resolver answers.
    fn check(&self, url: &Url) -> Result<(), ToolError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(ToolError::InvalidArguments(format!("only http and https URLs can be fetched, not {url}")));
        }
        // The URL parser normalises IPv4 literals (`2130706433`, `0x7f.1`) to dotted quads.
        let host = url.host_str().unwrap_or_default();
        let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() else {
            if host.is_empty() {
                return Err(ToolError::InvalidArguments(format!("{url} has no host")));
            }
            return Ok(());
        };
        match self.policy.check(ip) {
            Ok(()) => Ok(()),
            Err(special) => Err(denied(&Refused { host: ip.to_string(), ip, special })),
        }
    }
}

fn denied(refused: &Refused) -> ToolError {
    ToolError::Denied(format!("{refused}; web_fetch only fetches public internet addresses"))
}

pub(crate) fn request_error(url: &Url, e: &reqwest::Error) -> ToolError {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(cause) = source {
        if let Some(refused) = cause.downcast_ref::<Refused>() {
            return denied(refused);
        }
        source = cause.source();
    }
    if e.is_timeout() {
        return ToolError::Failed(format!("fetching {url} timed out"));
    }
    let mut message = format!("cannot fetch {url}");
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    ToolError::Failed(message)
}

async fn read(mut response: reqwest::Response, max_chars: usize) -> Result<String, ToolError> {
    let (status, url) = (response.status(), response.url().clone());
    let content_type =
        response.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or_default().to_ascii_lowercase();
    let textual = content_type.is_empty()
        || content_type.starts_with("text/")
        || ["json", "xml", "javascript", "html"].iter().any(|t| content_type.contains(t));
    if !textual {
        return Err(ToolError::Failed(format!(
            "{url} is {content_type}, not text; web_fetch reads HTML, JSON and plain text"
        )));
    }
    let mut body = Vec::new();
    let mut cut = false;
    while let Some(chunk) = response.chunk().await.map_err(|e| request_error(&url, &e))? {
        let room = MAX_BODY_BYTES - body.len();
        if chunk.len() > room {
            body.extend_from_slice(&chunk[..room]);
            cut = true;
            break;
        }
        body.extend_from_slice(&chunk);
    }
    let raw = String::from_utf8_lossy(&body);
    let start = raw.trim_start().get(..15).unwrap_or_default().to_ascii_lowercase();
    let html = content_type.contains("html") || start.starts_with("<!doctype html") || start.starts_with("<html");
    let text = if html { html_to_text(&raw) } else { raw.into_owned() };
    if !status.is_success() {
        let excerpt: String = text.chars().take(1_000).collect();
        return Err(ToolError::Failed(format!("GET {url} returned HTTP {status}\n{excerpt}")));
    }
    let total = text.chars().count();
    let mut out = format!("URL: {url}\n\n");
    out.extend(text.chars().take(max_chars));
    if total > max_chars {
        out.push_str(&format!(
            "\n[… truncated: showing {max_chars} of {total} characters; raise max_chars (up to {LIMIT_MAX_CHARS}) for more]"
        ));
    }
    if cut {
        out.push_str(&format!("\n[the body was longer than {} MB and was cut there]", MAX_BODY_BYTES / 1_048_576));
    }
    Ok(out)
}

/// Elements whose content is never text for a reader.
const SKIPPED_ELEMENTS: &[&str] = &["script", "style", "noscript", "template", "svg", "title"];
/// Elements set off by a blank line.
const PARAGRAPH_ELEMENTS: &[&str] = &[
    "p",
    "ul",
    "ol",
    "dl",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "nav",
    "main",
    "aside",
    "pre",
    "blockquote",
    "hr",
    "form",
    "figure",
];
/// Elements that start a new line.
const LINE_ELEMENTS: &[&str] = &["div", "li", "tr", "dt", "dd", "figcaption"];

/// HTML as readable text: the title on the first line, then the body's text with scripts,
/// styles and comments removed, block elements on their own lines, entities decoded and
/// whitespace collapsed. A forgiving scan, not a parser.
pub fn html_to_text(html: &str) -> String {
    // ASCII lowercasing keeps byte offsets, so indices into `lower` are valid in `html`.
    let lower = html.to_ascii_lowercase();
    let title = lower.find("<title").and_then(|open| {
        let start = tag_end(&lower, open);
        let close = lower[start..].find("</title")?;
        Some(collapse_spaces(&decode_entities(&html[start..start + close])))
    });
    let mut text = String::new();
    let mut at = 0;
    while let Some(found) = lower[at..].find('<') {
        let lt = at + found;
        push_text(&mut text, &html[at..lt]);
        let after = lower.as_bytes().get(lt + 1).copied().unwrap_or(b' ');
        if lower[lt..].starts_with("<!--") {
            at = lower[lt..].find("-->").map_or(html.len(), |end| lt + end + 3);
            continue;
        }
        if !(after.is_ascii_alphabetic() || matches!(after, b'/' | b'!' | b'?')) {
            text.push('<');
            at = lt + 1;
            continue;
        }
        let end = tag_end(&lower, lt);
        let name: String =
            lower[lt + 1..end].trim_start_matches('/').chars().take_while(char::is_ascii_alphanumeric).collect();
        let closing = after == b'/';
        at = end;
        if !closing && SKIPPED_ELEMENTS.contains(&name.as_str()) {
            at = lower[end..].find(&format!("</{name}")).map_or(html.len(), |close| tag_end(&lower, end + close));
        } else if name == "br" {
            text.push('\n');
        } else if PARAGRAPH_ELEMENTS.contains(&name.as_str()) {
            break_line(&mut text, 2);
        } else if LINE_ELEMENTS.contains(&name.as_str()) {
            break_line(&mut text, 1);
            if name == "li" && !closing {
                text.push_str("- ");
            }
        } else if matches!(name.as_str(), "td" | "th") {
            text.push(' ');
        }
    }
    push_text(&mut text, &html[at..]);
    let mut lines: Vec<String> = Vec::new();
    for line in text.split('\n').map(collapse_spaces) {
        if !line.is_empty() || lines.last().is_some_and(|l| !l.is_empty()) {
            lines.push(line);
        }
    }
    let body = lines.join("\n").trim().to_string();
    match title {
        Some(title) if !title.is_empty() && !body.is_empty() => format!("{title}\n\n{body}"),
        Some(title) if !title.is_empty() => title,
        _ => body,
    }
}

/// End `text` with at least `breaks` line breaks (a blank line for 2), unless it is empty.
fn break_line(text: &mut String, breaks: usize) {
    text.truncate(text.trim_end_matches(' ').len());
    let have = text.len() - text.trim_end_matches('\n').len();
    if !text.is_empty() {
        text.extend(std::iter::repeat_n('\n', breaks.saturating_sub(have)));
    }
}

/// The index just past the `>` closing the tag that opens at `lt`, skipping quoted attributes.
fn tag_end(lower: &str, lt: usize) -> usize {
    let mut quote = None;
    for (i, byte) in lower.bytes().enumerate().skip(lt + 1) {
        match (quote, byte) {
            (None, b'"' | b'\'') => quote = Some(byte),
            (Some(q), b) if q == b => quote = None,
            (None, b'>') => return i + 1,
            _ => {}
        }
    }
    lower.len()
}

/// Text between tags: entities decoded, source line breaks and tabs made spaces (only block
/// elements break lines).
fn push_text(out: &mut String, raw: &str) {
    out.extend(decode_entities(raw).chars().map(|c| if c.is_whitespace() { ' ' } else { c }));
}

fn collapse_spaces(line: &str) -> String {
    line.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn decode_entities(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded =
            rest.bytes().take(12).position(|b| b == b';').and_then(|semi| Some((entity(&rest[1..semi])?, semi)));
        match decoded {
            Some((c, semi)) => {
                out.push(c);
                rest = &rest[semi + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity(name: &str) -> Option<char> {
    let numeric = |digits: &str, radix| u32::from_str_radix(digits, radix).ok().and_then(char::from_u32);
    match name {
        "amp" => Some('&'),
        "lt" => Some('<'),
        "gt" => Some('>'),
        "quot" => Some('"'),
        "apos" => Some('\''),
        "nbsp" => Some(' '),
        "mdash" => Some('—'),
        "ndash" => Some('–'),
        "hellip" => Some('…'),
        "copy" => Some('©'),
        "rsquo" => Some('’'),
        "lsquo" => Some('‘'),
        "ldquo" => Some('“'),
        "rdquo" => Some('”'),
        _ => match name.strip_prefix('#')? {
            hex if hex.starts_with(['x', 'X']) => numeric(&hex[1..], 16),
            decimal => numeric(decimal, 10),
        },
    }
}

#[cfg(test)]
mod rebinding;
#[cfg(test)]
mod tests;
