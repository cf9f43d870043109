//! The wire formats of the search services `web_search` speaks: how a query becomes a request,
//! and how an answer becomes results. Pure: no IO.

use reqwest::Url;
use serde::Deserialize;

use crate::config::SearchBackend;

/// One search result as the service gave it (before cleaning and caps).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Hit {
    pub(super) title: String,
    pub(super) url: String,
    pub(super) snippet: String,
}

/// The URL of a search for `query` asking for `count` results at `endpoint`.
pub(super) fn request_url(backend: SearchBackend, endpoint: &Url, query: &str, count: usize) -> Url {
    let mut url = endpoint.clone();
    match backend {
        SearchBackend::Searxng => {
            // The instance's base URL; its JSON API lives at `/search`.
            if !url.path().trim_end_matches('/').ends_with("/search") {
                let path = format!("{}/search", url.path().trim_end_matches('/'));
                url.set_path(&path);
            }
            url.query_pairs_mut().append_pair("q", query).append_pair("format", "json");
        }
        SearchBackend::Brave => {
            url.query_pairs_mut().append_pair("q", query).append_pair("count", &count.to_string());
        }
    }
    url
}

#[derive(Deserialize)]
struct SearxngAnswer {
    #[serde(default)]
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    #[serde(default)]
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct BraveAnswer {
    web: Option<BraveWeb>,
}

#[derive(Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<BraveResult>,
}

#[derive(Deserialize)]
struct BraveResult {
    #[serde(default)]
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: Option<String>,
}

/// The results in a service's JSON answer, in its order.
pub(super) fn parse(backend: SearchBackend, body: &[u8]) -> Result<Vec<Hit>, serde_json::Error> {
    let hit =
        |title: String, url: String, snippet: Option<String>| Hit { title, url, snippet: snippet.unwrap_or_default() };
    Ok(match backend {
        SearchBackend::Searxng => {
            let answer: SearxngAnswer = serde_json::from_slice(body)?;
            answer.results.into_iter().map(|r| hit(r.title, r.url, r.content)).collect()
        }
        SearchBackend::Brave => {
            let answer: BraveAnswer = serde_json::from_slice(body)?;
            let results = answer.web.map(|web| web.results).unwrap_or_default();
            results.into_iter().map(|r| hit(r.title, r.url, r.description)).collect()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_the_query_encoded() {
        let searx = Url::parse("http://127.0.0.1:8888/").unwrap();
        let url = request_url(SearchBackend::Searxng, &searx, "rust & tokio?", 5);
        assert_eq!(url.as_str(), "http://127.0.0.1:8888/search?q=rust+%26+tokio%3F&format=json");
        let prefixed = Url::parse("https://example.org/searx/search").unwrap();
        assert_eq!(request_url(SearchBackend::Searxng, &prefixed, "x", 5).path(), "/searx/search");
        let brave = Url::parse(crate::config::BRAVE_SEARCH_URL).unwrap();
        let url = request_url(SearchBackend::Brave, &brave, "a b", 3);
        assert_eq!(url.as_str(), "https://api.search.brave.com/res/v1/web/search?q=a+b&count=3");
    }

    #[test]
    fn answers_parse_into_hits_in_order() {
        let searx = br#"{"query":"q","number_of_results":2,"results":[
            {"url":"https://a.example/","title":"A","content":"first","engine":"ddg"},
            {"url":"https://b.example/","title":"B"}],"answers":[],"suggestions":[]}"#;
        let hits = parse(SearchBackend::Searxng, searx).unwrap();
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0], Hit { title: "A".into(), url: "https://a.example/".into(), snippet: "first".into() });
        assert_eq!(hits[1].snippet, "");
        let brave = br#"{"type":"search","query":{"original":"q"},"web":{"type":"search","results":[
            {"title":"Rust","url":"https://www.rust-lang.org/","description":"A <strong>language</strong>","age":"1 day"}]}}"#;
        let hits = parse(SearchBackend::Brave, brave).unwrap();
        assert_eq!(hits[0].title, "Rust");
        assert_eq!(hits[0].snippet, "A <strong>language</strong>");
        assert!(parse(SearchBackend::Brave, br#"{"type":"search"}"#).unwrap().is_empty(), "no web section: none");
        assert!(parse(SearchBackend::Searxng, b"<html>").is_err());
    }
}
