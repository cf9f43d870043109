//! `[tools.web_search]`: which search service the `web_search` tool asks, where, and with which
//! key. Only this configured endpoint is ever contacted by the tool; the model supplies the
//! query, never a URL.

use serde::{Deserialize, Serialize};

use super::{Env, HumanDuration};

/// The default endpoint of the Brave Search web search API.
pub const BRAVE_URL: &str = "https://api.search.brave.com/res/v1/web/search";
/// The variable the Brave key is read from when `api_key_env` is not set.
pub(super) const BRAVE_KEY_ENV: &str = "BRAVE_SEARCH_API_KEY";
/// Most results one search may return, whatever the configuration says.
pub const MAX_RESULTS_LIMIT: usize = 20;

/// A search service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchBackend {
    /// A SearXNG instance's JSON API (`GET {url}/search?q=…&format=json`): keyless and
    /// self-hostable; the instance must list `json` under `search.formats` in its settings.
    Searxng,
    /// The Brave Search API (`GET {url}?q=…&count=…` with the `X-Subscription-Token` header).
    Brave,
}

/// `[tools.web_search]`. Without a `backend` the tool is not offered.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WebSearchConfig {
    /// `searxng` or `brave`; unset: no `web_search` tool.
    pub backend: Option<SearchBackend>,
    /// The search endpoint: a SearXNG instance's base URL (required for `searxng`, e.g.
    /// `http://127.0.0.1:8888`; private and loopback addresses are allowed, since the operator
    /// chose it), or the Brave endpoint (default `https://api.search.brave.com/res/v1/web/search`).
    pub url: Option<String>,
    /// Name of the environment variable holding the API key: required by `brave` (default
    /// `BRAVE_SEARCH_API_KEY`); for `searxng`, sent as a bearer token to an instance behind an
    /// authenticating proxy when set.
    pub api_key_env: Option<String>,
    /// Most results returned per search (1–20); the model may ask for fewer.
    pub max_results: usize,
    /// How long one search may take.
    pub timeout: HumanDuration,
}

impl Default for WebSearchConfig {
    fn default() -> Self {
        Self { backend: None, url: None, api_key_env: None, max_results: 5, timeout: HumanDuration::secs(15) }
    }
}

impl WebSearchConfig {
    /// The endpoint searches go to, when a backend is configured and has one.
    pub fn endpoint(&self) -> Option<&str> {
        match self.backend? {
            SearchBackend::Searxng => self.url.as_deref(),
            SearchBackend::Brave => Some(self.url.as_deref().unwrap_or(BRAVE_URL)),
        }
    }

    /// The variable the key is read from, if any.
    pub fn key_env(&self) -> Option<&str> {
        match self.backend? {
            SearchBackend::Searxng => self.api_key_env.as_deref(),
            SearchBackend::Brave => Some(self.api_key_env.as_deref().unwrap_or(BRAVE_KEY_ENV)),
        }
    }

    /// Every problem of this section (pure apart from reading the key's variable).
    pub fn problems(&self, env: &Env) -> Vec<String> {
        let at = "tools.web_search";
        let mut problems = Vec::new();
        if !(1..=MAX_RESULTS_LIMIT).contains(&self.max_results) {
            problems.push(format!("{at}.max_results: {} is not between 1 and {MAX_RESULTS_LIMIT}", self.max_results));
        }
        if self.timeout.get().as_secs() == 0 {
            problems.push(format!("{at}.timeout: must be at least 1s"));
        }
        let Some(backend) = self.backend else { return problems };
        match self.endpoint() {
            None => problems.push(format!("{at}.url: the {backend:?} backend needs the URL of its instance")),
            Some(url) => match reqwest::Url::parse(url) {
                Ok(parsed) if matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some() => {
                    if !parsed.username().is_empty() || parsed.password().is_some() {
                        problems.push(format!("{at}.url: put credentials in api_key_env, not in the URL"));
                    }
                }
                _ => problems.push(format!("{at}.url: {url:?} is not an http(s) URL")),
            },
        }
        if let Some(var) = self.key_env() {
            match env.secret(var) {
                Ok(Some(_)) => {}
                Ok(None) => problems.push(format!("{at}.api_key_env: the variable {var} is not set")),
                Err(e) => problems.push(format!("{at}.api_key_env: {e}")),
            }
        }
        problems
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn env(vars: &[(&str, &str)]) -> Env {
        Env::from_map(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>())
    }

    #[test]
    fn off_by_default_and_every_problem_listed() {
        assert!(WebSearchConfig::default().problems(&env(&[])).is_empty());
        assert_eq!(WebSearchConfig::default().endpoint(), None);
        let bad = WebSearchConfig {
            backend: Some(SearchBackend::Searxng),
            max_results: 0,
            api_key_env: Some("SEARX_TOKEN".into()),
            ..WebSearchConfig::default()
        };
        let problems = bad.problems(&env(&[]));
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems[0].starts_with("tools.web_search.max_results"), "{problems:?}");
        assert!(problems[1].contains("needs the URL"), "{problems:?}");
        assert!(problems[2].contains("SEARX_TOKEN is not set"), "{problems:?}");
        let ftp = WebSearchConfig { url: Some("ftp://x".into()), ..bad.clone() };
        assert!(ftp.problems(&env(&[])).iter().any(|p| p.contains("is not an http(s) URL")));
    }

    #[test]
    fn brave_has_a_default_endpoint_and_needs_its_key() {
        let brave = WebSearchConfig { backend: Some(SearchBackend::Brave), ..WebSearchConfig::default() };
        assert_eq!(brave.endpoint(), Some(BRAVE_URL));
        assert_eq!(brave.key_env(), Some(BRAVE_KEY_ENV));
        assert_eq!(
            brave.problems(&env(&[])),
            ["tools.web_search.api_key_env: the variable BRAVE_SEARCH_API_KEY is not set"]
        );
        assert!(brave.problems(&env(&[(BRAVE_KEY_ENV, "BSA-test-key")])).is_empty());
        let local = WebSearchConfig {
            backend: Some(SearchBackend::Searxng),
            url: Some("http://127.0.0.1:8888".into()),
            ..WebSearchConfig::default()
        };
        assert!(local.problems(&env(&[])).is_empty(), "a keyless local instance is fine");
    }
}
