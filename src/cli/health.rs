//! `hermesd health`: asks the daemon of this config for `/healthz` on its own listen address and
//! exits 0 when it answers 200 — the container's health check, with no HTTP client in the image.
//! `hermesd reload`: has it read its config again (`POST /admin/reload`, as SIGHUP does) and
//! prints what took effect, or why the new config was refused. `hermesd ui`: where the control
//! panel is, and on a daemon without `API_SERVER_KEY` the home's local key to log in with.

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

/// `hermesd ui`.
pub(super) fn ui(loaded: &Loaded) -> ExitCode {
    let url = local_url(&loaded.config.http.listen).replace("/healthz", "/ui");
    println!("The control panel: {url}");
    match loaded.env.secret("API_SERVER_KEY") {
        Ok(Some(_)) => println!("Log in with this daemon's API_SERVER_KEY."),
        _ => match crate::access::PairingKey::load_or_create(&loaded.paths.home) {
            Ok(key) => println!("Log in with this home's local key: {}", key.local_api_key()),
            Err(e) => {
                eprintln!("hermesd: the home's local key: {e}");
                return ExitCode::FAILURE;
            }
        },
    }
    ExitCode::SUCCESS
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

/// The listen address a config file names, read leniently: the file may be the broken one the
/// daemon is about to refuse, and the daemon (not this command) judges it with its own secrets.
fn listen_of(path: &std::path::Path) -> String {
    let named = std::fs::read_to_string(path).ok().and_then(|text| {
        let table: toml::Table = text.parse().ok()?;
        table.get("http")?.get("listen")?.as_str().map(str::to_owned)
    });
    named.unwrap_or_else(|| crate::config::HttpConfig::default().listen)
}

/// `hermesd reload`, before (and without) loading the config: the running daemon reads it.
pub(super) async fn reload(cli: &super::Cli) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let paths = crate::config::Paths::resolve(cli.home.clone(), cli.config.clone(), &crate::config::ProcessEnv);
    let wait = Duration::from_secs(30);
    let listen = listen_of(&paths.config);
    let asked = super::daemon::post_to(&paths.home, &listen, "/admin/reload", &serde_json::json!({}), wait).await;
    let result = match asked {
        None => Err("no daemon answers on this config's listen address; nothing to reload".to_owned()),
        Some(Err(e)) => Err(e),
        Some(Ok((200, body))) => {
            let list = |key: &str| -> Vec<String> {
                body[key]
                    .as_array()
                    .map(|a| a.iter().filter_map(|v| v.as_str().map(str::to_owned)).collect())
                    .unwrap_or_default()
            };
            let mut lines = vec![format!("reloaded: {}", list("applied").join(", "))];
            let waiting = list("restart_needed");
            if !waiting.is_empty() {
                lines.push(format!("changed, and taking effect at the next restart: {}", waiting.join(", ")));
            }
            Ok(lines.join("\n"))
        }
        Some(Ok((status, body))) => {
            let problems: Vec<String> = body["problems"]
                .as_array()
                .map(|a| a.iter().filter_map(|v| v.as_str().map(|p| format!("  - {p}"))).collect())
                .unwrap_or_default();
            let error = body["error"].as_str().map_or_else(|| format!("the daemon answered {status}"), str::to_owned);
            Err(if problems.is_empty() { error } else { format!("{error}:\n{}", problems.join("\n")) })
        }
    };
    super::report_outcome(result)
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
