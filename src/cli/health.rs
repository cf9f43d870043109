//! `hermesd health`: asks the daemon of this config for `/healthz` on its own listen address and
//! exits 0 when it answers 200 — the container's health check, with no HTTP client in the image.

use std::process::ExitCode;
use std::time::Duration;

use super::Loaded;

/// The address to ask: the listen address, with a wildcard host replaced by loopback.
fn local_url(listen: &str) -> String {
    let address = match listen.rsplit_once(':') {
        Some(("0.0.0.0", port)) => format!("127.0.0.1:{port}"),
        Some(("[::]", port)) => format!("[::1]:{port}"),
        _ => listen.to_owned(),
    };
    format!("http://{address}/healthz")
}

pub(super) async fn run(loaded: &Loaded) -> ExitCode {
    let url = local_url(&loaded.config.http.listen);
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = match reqwest::Client::builder().timeout(Duration::from_secs(3)).no_proxy().build() {
        Ok(client) => client,
        Err(e) => {
            eprintln!("hermesd: http client: {e}");
            return ExitCode::FAILURE;
        }
    };
    match client.get(&url).send().await {
        Ok(answer) if answer.status().is_success() => ExitCode::SUCCESS,
        Ok(answer) => {
            eprintln!("hermesd: {url}: HTTP {}", answer.status().as_u16());
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("hermesd: {url}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn wildcard_addresses_are_asked_on_loopback() {
        assert_eq!(super::local_url("0.0.0.0:8642"), "http://127.0.0.1:8642/healthz");
        assert_eq!(super::local_url("[::]:8642"), "http://[::1]:8642/healthz");
        assert_eq!(super::local_url("127.0.0.1:9000"), "http://127.0.0.1:9000/healthz");
    }
}
