//! Checks of `[http]` and `[retention]`: pure problems (what makes the config invalid) and advice
//! (what `hermesd check` suggests without refusing the config). Nothing here reads the network.
//!
//! The `[http]` keys checked are the browser and connection ones (allowed hosts and origins,
//! timeouts, connection caps). Advice, for example: `http.allowed_hosts` for a keyless API that
//! listens beyond loopback or sits behind a proxy.

use std::net::SocketAddr;

use super::{Config, Env};

/// The shortest age `[retention]` keeps records and files for (but `idempotency`), seconds. Signed
/// webhooks rely on it: their deduplication records outlive the signature's timestamp window.
pub const MIN_RETENTION_SECS: u64 = 3600;

/// Problems with `[http]`'s browser and connection settings and `[retention]`.
pub(super) fn check_http(config: &Config, problems: &mut Vec<String>) {
    let http = &config.http;
    for host in &http.allowed_hosts {
        if let Err(why) = host_entry(host) {
            problems.push(format!("http.allowed_hosts: {host:?} {why}"));
        }
    }
    for origin in &http.allowed_origins {
        if normalize_origin(origin).is_none() {
            problems.push(format!(
                "http.allowed_origins: {origin:?} is not an origin such as \"https://ui.example.com\" or \
                 \"http://localhost:3000\" (scheme, host and optional port; no path, no wildcard)"
            ));
        }
    }
    for (key, timeout) in [
        ("header_read_timeout", http.header_read_timeout),
        ("idle_timeout", http.idle_timeout),
        ("body_timeout", http.body_timeout),
    ] {
        if !(1..=600).contains(&timeout.get().as_secs()) {
            problems.push(format!("http.{key}: must be between 1s and 10m"));
        }
    }
    if http.max_connections == 0 || http.max_connections > 65_536 {
        problems.push("http.max_connections: must be between 1 and 65536".into());
    }
    if config.retention.idempotency.get().as_secs() < 60 {
        problems.push("retention.idempotency: must be at least 1m".into());
    }
    let retention = &config.retention;
    for (key, age) in [
        ("inbound_events", retention.inbound_events),
        ("outbound", retention.outbound),
        ("archived_messages", retention.archived_messages),
        ("media", retention.media),
        ("cron_output", retention.cron_output),
        ("responses", retention.responses),
    ] {
        if age.get().as_secs() < MIN_RETENTION_SECS {
            problems.push(format!("retention.{key}: must be at least 1h"));
        }
    }
    if !(60..=86_400).contains(&retention.interval.get().as_secs()) {
        problems.push("retention.interval: must be between 1m and 24h".into());
    }
}

/// Why an `allowed_hosts` entry is unusable, if it is.
fn host_entry(host: &str) -> Result<(), &'static str> {
    if host.trim().is_empty() {
        return Err("is empty");
    }
    if host.contains("://") || host.contains('/') {
        return Err("must be a host name such as \"hermes.example.com\", not a URL");
    }
    if host.chars().any(|c| c.is_whitespace() || c == '*') {
        return Err("must be a plain host name (no spaces, no wildcards)");
    }
    Ok(())
}

/// An origin in the form browsers send it (`scheme://host[:port]`, lower case), or `None` when
/// `text` is not one. A trailing slash is tolerated in config.
pub fn normalize_origin(text: &str) -> Option<String> {
    let text = text.trim().trim_end_matches('/').to_ascii_lowercase();
    let (scheme, rest) = text.split_once("://")?;
    let host_ok = !rest.is_empty() && !rest.contains(['/', '?', '#', '*', '@', ' ']);
    (matches!(scheme, "http" | "https") && host_ok).then_some(text)
}

impl Config {
    /// Suggestions for a valid config that may not do what the operator wants; `hermesd check`
    /// prints them without failing.
    pub fn advice(&self, env: &Env) -> Vec<String> {
        let mut notes = Vec::new();
        if !self.http.allowed_hosts.is_empty() {
            return notes;
        }
        let keyed = matches!(env.secret("API_SERVER_KEY"), Ok(Some(_)));
        let public = self.http.listen.parse::<SocketAddr>().is_ok_and(|a| !a.ip().is_loopback());
        let mut signed: Vec<String> = Vec::new();
        for section in self.platforms.sections().into_iter().filter(|s| s.enabled()) {
            match section.signed_requests() {
                Some("") => signed.push(format!("platforms.{}", section.name())),
                Some(mode) => signed.push(format!("platforms.{} ({mode})", section.name())),
                None => {}
            }
        }
        if !self.webhooks.is_empty() {
            signed.push("[[webhooks]]".into());
        }
        if public {
            let rule = if keyed { "any Host is accepted with the bearer key; " } else { "" };
            notes.push(format!(
                "http.listen {} is not loopback and http.allowed_hosts is empty: {rule}without API_SERVER_KEY, \
                 /v1/* and /admin/* answer 421 to every Host but an IP address or localhost; set \
                 http.allowed_hosts to the names clients use",
                self.http.listen
            ));
        }
        if !signed.is_empty() && !keyed {
            notes.push(format!(
                "{} receive signed requests behind a reverse proxy with any Host, but /v1/* and /admin/* \
                 reached through that proxy by name answer 421 while API_SERVER_KEY is unset; set \
                 http.allowed_hosts to the proxy's public name, or set API_SERVER_KEY",
                signed.join(", ")
            ));
        }
        notes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text).expect("parses")
    }

    #[test]
    fn origins_are_normalised_or_refused() {
        assert_eq!(normalize_origin("https://UI.example.com/").as_deref(), Some("https://ui.example.com"));
        assert_eq!(normalize_origin("http://localhost:3000").as_deref(), Some("http://localhost:3000"));
        for bad in ["*", "ui.example.com", "https://ui.example.com/path", "ftp://x", "https://", "https://*.x"] {
            assert_eq!(normalize_origin(bad), None, "{bad}");
        }
    }

    #[test]
    fn bad_http_keys_are_listed() {
        let c = config(
            "[http]\nallowed_hosts = [\"https://x.example\", \"\"]\nallowed_origins = [\"*\"]\n\
             header_read_timeout = \"0s\"\nidle_timeout = \"11m\"\nbody_timeout = \"0s\"\nmax_connections = 0\n\
             [retention]\nidempotency = \"5s\"\n",
        );
        let mut problems = Vec::new();
        check_http(&c, &mut problems);
        assert_eq!(problems.len(), 8, "{problems:#?}");
        let mut ok = Vec::new();
        check_http(&config("[http]\nallowed_hosts = [\"hermes.example.com:443\"]\n"), &mut ok);
        assert!(ok.is_empty(), "{ok:?}");
    }

    #[test]
    fn retention_ages_and_interval_out_of_range_are_listed() {
        let c = config("[retention]\nmedia = \"5m\"\ninbound_events = \"0s\"\ninterval = \"2d\"\n");
        let mut problems = Vec::new();
        check_http(&c, &mut problems);
        assert_eq!(
            problems,
            [
                "retention.inbound_events: must be at least 1h",
                "retention.media: must be at least 1h",
                "retention.interval: must be between 1m and 24h"
            ],
        );
        assert!(Config::parse("[retention]\nmedia = \"soon\"\n").is_err(), "a malformed age is refused");
    }

    #[test]
    fn advice_names_allowed_hosts_for_public_listens_and_webhook_modes() {
        let env = Env::from_map(Default::default());
        assert!(Config::default().advice(&env).is_empty());
        let public = config("[http]\nlisten = \"0.0.0.0:8642\"\n").advice(&env);
        assert!(public.len() == 1 && public[0].contains("http.allowed_hosts"), "{public:?}");
        let webhook = config("[platforms.telegram]\nenabled = true\nmode = \"webhook\"\n");
        let notes = webhook.advice(&env);
        assert!(notes.len() == 1 && notes[0].contains("telegram"), "{notes:?}");
        let keyed = Env::from_map([("API_SERVER_KEY".to_owned(), "k".to_owned())].into_iter().collect());
        assert!(webhook.advice(&keyed).is_empty(), "with a key the Host rule is off");
        let set = config("[http]\nlisten = \"0.0.0.0:8642\"\nallowed_hosts = [\"h.example\"]\n").advice(&env);
        assert!(set.is_empty());
    }
}
