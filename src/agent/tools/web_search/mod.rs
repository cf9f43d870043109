//! The `web_search` tool (toolset `web`): the model gives a query, the configured search service
//! answers, the model gets titles, URLs and snippets, capped. It lets the agent find pages, which
//! `web_fetch` can then read.
//!
//! It must never contact anything but the configured endpoint: the model supplies only the
//! query (sent encoded, as a parameter), redirects are not followed, and proxies from the
//! environment are ignored. The endpoint may be a private or loopback address (a self-hosted
//! SearXNG), because the operator chose it; no model-chosen URL ever gets that trust. The key
//! never appears in a result or an error.
//!
//! The backends are a SearXNG instance's JSON API and Brave Search (`backends.rs` holds their wire
//! formats); the key goes only to the configured endpoint, as a header.

mod backends;

use std::time::Duration;

use async_trait::async_trait;
use reqwest::header::{ACCEPT, AUTHORIZATION, RETRY_AFTER};
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use serde_json::{Value, json};

use super::files::parse_args;
use super::web_fetch::html_to_text;
use super::{Tool, ToolContext, ToolError, ToolSpec};
use crate::config::{Env, SearchBackend, WebSearchConfig};
use backends::Hit;

/// Longest answer read from the service, in bytes.
const MAX_BODY_BYTES: usize = 1024 * 1024;
/// Longest query, in chars.
const MAX_QUERY_CHARS: usize = 400;
const TITLE_CAP: usize = 200;
const URL_CAP: usize = 500;
const SNIPPET_CAP: usize = 400;

/// Why the search tool could not be built from its configuration.
#[derive(Debug, thiserror::Error)]
pub enum WebSearchSetupError {
    /// No backend, or no endpoint for it (validation reports the details).
    #[error("tools.web_search is not configured")]
    NotConfigured,
    /// The endpoint is not a URL.
    #[error("tools.web_search.url: {0}")]
    BadUrl(String),
    /// The key's variable could not be read, or is missing.
    #[error("tools.web_search.api_key_env: {0}")]
    Key(String),
    /// The HTTP client could not be built.
    #[error("build the web_search client: {0}")]
    Client(#[from] reqwest::Error),
}

/// Searches the web through the configured service.
#[derive(Clone)]
pub struct WebSearchTool {
    backend: SearchBackend,
    endpoint: Url,
    key: Option<String>,
    max_results: usize,
    timeout: Duration,
    http: reqwest::Client,
}

impl std::fmt::Debug for WebSearchTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSearchTool")
            .field("backend", &self.backend)
            .field("endpoint", &self.endpoint.as_str())
            .field("key", &self.key.as_ref().map(|_| "[redacted]"))
            .finish_non_exhaustive()
    }
}

impl WebSearchTool {
    /// The tool `config` describes, or `None` when no backend is configured. The key is read
    /// from `env` (so it is also masked wherever the daemon masks secrets).
    pub fn from_config(config: &WebSearchConfig, env: &Env) -> Result<Option<Self>, WebSearchSetupError> {
        let Some(backend) = config.backend else { return Ok(None) };
        let endpoint = config.endpoint().ok_or(WebSearchSetupError::NotConfigured)?;
        let endpoint = Url::parse(endpoint).map_err(|e| WebSearchSetupError::BadUrl(format!("{endpoint:?}: {e}")))?;
        let key = match config.key_env() {
            Some(var) => Some(
                env.secret(var)
                    .map_err(WebSearchSetupError::Key)?
                    .ok_or_else(|| WebSearchSetupError::Key(format!("the variable {var} is not set")))?
                    .expose()
                    .to_owned(),
            ),
            None => None,
        };
        let timeout = config.timeout.get();
        let http = crate::http_client::build_searcher(timeout)?;
        let max_results = config.max_results.clamp(1, crate::config::WEB_SEARCH_MAX_RESULTS);
        Ok(Some(Self { backend, endpoint, key, max_results, timeout, http }))
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    query: String,
    max_results: Option<usize>,
}

#[async_trait]
impl Tool for WebSearchTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "web_search".into(),
            description: "Search the web. Returns up to max_results results, each with a title, URL and \
                          snippet. Use it to find pages; read one in full with web_fetch."
                .into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "What to search for, as you would type it into a search engine"},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": self.max_results, "description": format!("How many results (default and most: {})", self.max_results)}
                },
                "required": ["query"],
                "additionalProperties": false
            }),
            toolset: "web".into(),
            parallel_safe: true,
            max_result_chars: self.max_results * (TITLE_CAP + URL_CAP + SNIPPET_CAP + 20) + 500,
            timeout: self.timeout + Duration::from_secs(5),
        }
    }

    async fn call(&self, _ctx: &ToolContext, args: Value) -> Result<String, ToolError> {
        let args: Args = parse_args(args)?;
        let query = args.query.split_whitespace().collect::<Vec<_>>().join(" ");
        if query.is_empty() {
            return Err(ToolError::InvalidArguments("the query is empty".into()));
        }
        if query.chars().count() > MAX_QUERY_CHARS {
            return Err(ToolError::InvalidArguments(format!("the query is longer than {MAX_QUERY_CHARS} characters")));
        }
        let wanted = args.max_results.unwrap_or(self.max_results).clamp(1, self.max_results);
        let hits = tokio::time::timeout(self.timeout, self.search(&query, wanted)).await.unwrap_or_else(|_| {
            Err(ToolError::Failed(format!("the search service did not answer within {} s", self.timeout.as_secs())))
        })?;
        Ok(render(&query, &hits, wanted))
    }
}

impl WebSearchTool {
    async fn search(&self, query: &str, count: usize) -> Result<Vec<Hit>, ToolError> {
        let url = backends::request_url(self.backend, &self.endpoint, query, count);
        let mut request = self.http.get(url).header(ACCEPT, "application/json");
        match (self.backend, &self.key) {
            (SearchBackend::Brave, Some(key)) => request = request.header("X-Subscription-Token", key),
            (SearchBackend::Searxng, Some(key)) => request = request.header(AUTHORIZATION, format!("Bearer {key}")),
            (_, None) => {}
        }
        let mut response = request.send().await.map_err(|e| self.request_error(&e))?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.status_error(status, &response));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(|e| self.request_error(&e))? {
            if body.len() + chunk.len() > MAX_BODY_BYTES {
                return Err(ToolError::Failed(format!(
                    "the search service answered with more than {} KB",
                    MAX_BODY_BYTES / 1024
                )));
            }
            body.extend_from_slice(&chunk);
        }
        backends::parse(self.backend, &body)
            .map_err(|e| ToolError::Failed(format!("the search service's answer is not the expected JSON ({e})")))
    }

    fn service(&self) -> String {
        let name = match self.backend {
            SearchBackend::Searxng => "SearXNG",
            SearchBackend::Brave => "Brave Search",
        };
        format!("{name} at {}", self.endpoint.host_str().unwrap_or_default())
    }

    fn request_error(&self, e: &reqwest::Error) -> ToolError {
        if e.is_timeout() {
            return ToolError::Failed(format!("{} timed out", self.service()));
        }
        let mut message = format!("cannot reach {}", self.service());
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            message.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        ToolError::Failed(message)
    }

    fn status_error(&self, status: StatusCode, response: &reqwest::Response) -> ToolError {
        let service = self.service();
        let text = match status {
            StatusCode::TOO_MANY_REQUESTS => {
                let after = response.headers().get(RETRY_AFTER).and_then(|v| v.to_str().ok()).unwrap_or("a while");
                format!(
                    "{service} is rate limiting searches (HTTP 429); try again after {after} s, or answer without searching"
                )
            }
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN if self.backend == SearchBackend::Searxng => format!(
                "{service} refused the search (HTTP {status}); the instance must allow the json format (search.formats in its settings.yml)"
            ),
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => {
                format!("{service} refused the API key (HTTP {status}); the operator must check it")
            }
            StatusCode::TEMPORARY_REDIRECT
            | StatusCode::PERMANENT_REDIRECT
            | StatusCode::FOUND
            | StatusCode::MOVED_PERMANENTLY
            | StatusCode::SEE_OTHER => {
                format!(
                    "{service} answered with a redirect (HTTP {status}), which web_search does not follow; the operator must fix tools.web_search.url"
                )
            }
            _ => format!("{service} answered HTTP {status}"),
        };
        ToolError::Failed(text)
    }
}

/// The results as text for the model: numbered, each with title, URL and snippet, capped; only
/// http(s) URLs.
fn render(query: &str, hits: &[Hit], wanted: usize) -> String {
    let shown: Vec<Hit> = hits
        .iter()
        .filter(|hit| hit.url.starts_with("https://") || hit.url.starts_with("http://"))
        .take(wanted)
        .map(|hit| Hit {
            title: clean(&hit.title, TITLE_CAP),
            url: hit.url.chars().filter(|c| !c.is_whitespace() && !c.is_control()).take(URL_CAP).collect(),
            snippet: clean(&hit.snippet, SNIPPET_CAP),
        })
        .collect();
    if shown.is_empty() {
        return format!("No results for \"{query}\".");
    }
    let mut out = format!("Results for \"{query}\":");
    for (n, hit) in shown.iter().enumerate() {
        let title = if hit.title.is_empty() { "(no title)" } else { hit.title.as_str() };
        out.push_str(&format!("\n\n{}. {title}\n   {}", n + 1, hit.url));
        if !hit.snippet.is_empty() {
            out.push_str(&format!("\n   {}", hit.snippet));
        }
    }
    out
}

/// Text from a result on one line: tags and entities removed, whitespace collapsed, cut to
/// `cap` chars with an ellipsis.
fn clean(text: &str, cap: usize) -> String {
    let plain = html_to_text(text);
    let line = plain.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= cap {
        return line;
    }
    let mut cut: String = line.chars().take(cap).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests;
