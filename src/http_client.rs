//! The one place outbound HTTP clients are built, so timeouts and TLS are set the same way for
//! every provider call.

use std::time::Duration;

use hermesd_platform::HTTP_POOL_IDLE_TIMEOUT;

/// A client for model providers: bounded connect time, pooled connections that close after
/// [`HTTP_POOL_IDLE_TIMEOUT`] unused (a burst of turns leaves nothing open behind it for long),
/// rustls (ring), no automatic retries (the runtime owns them). Up to 64 idle connections per
/// host, so that many sessions in step each reuse one.
pub fn build() -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .pool_idle_timeout(HTTP_POOL_IDLE_TIMEOUT)
        .pool_max_idle_per_host(64)
        .user_agent(concat!("hermesd/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// A client for `web_fetch`: names are resolved only by `resolver` (which checks the addresses it
/// returns), proxies from the environment are ignored (a proxy would connect on its own terms),
/// and redirects are never followed by the client, because the tool follows them itself and
/// checks every hop.
pub fn build_fetcher(resolver: std::sync::Arc<dyn reqwest::dns::Resolve>) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(resolver)
        .user_agent(concat!("hermesd/", env!("CARGO_PKG_VERSION"), " (web_fetch)"))
        .build()
}

/// A client for `web_search`: it talks only to the operator's configured search endpoint, so
/// redirects are never followed (a redirect could lead anywhere) and proxies from the
/// environment are ignored, as for `web_fetch`; `timeout` bounds each search.
pub fn build_searcher(timeout: Duration) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(10))
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .user_agent(concat!("hermesd/", env!("CARGO_PKG_VERSION"), " (web_search)"))
        .build()
}
