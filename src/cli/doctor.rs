//! `hermesd doctor [--json]`: live checks of everything a running gateway depends on, one line
//! each: ✓ (works; a caveat is marked "warning" with what to do) or ✗ (broken) with the fix.
//!
//! In order: the config; every model of every profile's chain (a one-token request) and the
//! clock against a model server's `Date`; every enabled adapter's account (`Platform::probe`:
//! getMe and getWebhookInfo, users/@me, auth.test, the WhatsApp number, signal-cli, the IMAP
//! login, Home Assistant's auth); every enabled MCP server (connected, tools listed); the tools'
//! sandbox and the kernel features it uses; free disk space in the home; the store's
//! `quick_check` and the day's failed and set-aside rows; the installed systemd unit's settings.
//! Nothing is changed (but for what opening the store does for every command: a schema older than
//! this binary is brought up to date). Exit 1 when any check fails; `--json` prints the findings as a JSON array.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{Cli, Loaded};
use crate::agent::provider::{ChatRequest, Provider, ProviderError};
use crate::config::{ModelConfig, ProviderKind};
use crate::vocab::message::{Message, Role};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum Status {
    /// Works.
    Ok,
    /// Works, with something worth knowing.
    Warn,
    /// Broken: the gateway will fail at this.
    Fail,
}

/// One check's line.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Finding {
    /// What was checked (`model default/gpt-4o`, `platform telegram@work`).
    pub check: String,
    /// Whether it works (`ok` and `warn`).
    pub ok: bool,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it, when it is not fine.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: impl Into<String>, detail: impl Into<String>) -> Self {
        Self { check: check.into(), ok: true, status: Status::Ok, detail: detail.into(), fix: None }
    }

    fn warn(check: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self { check: check.into(), ok: true, status: Status::Warn, detail: detail.into(), fix: Some(fix.into()) }
    }

    fn fail(check: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Self { check: check.into(), ok: false, status: Status::Fail, detail: detail.into(), fix: Some(fix.into()) }
    }
}

/// The longest a model's one-token answer may take.
const MODEL_TIMEOUT: Duration = Duration::from_secs(30);
/// The adapter's own calls are bounded by `PROBE_TIMEOUT` each; this bounds a probe as a whole.
const PLATFORM_TIMEOUT: Duration = Duration::from_secs(45);
/// A clock further off than this breaks signed webhooks (Slack allows 5 minutes) and cron.
const MAX_SKEW: Duration = Duration::from_secs(60);
/// Below this much free space in the home, writes are at risk.
const MIN_FREE_BYTES: u64 = 1 << 30;

/// Runs every check, prints the findings, and exits 1 when any failed.
pub(super) async fn run(cli: &Cli, json: bool, redaction: crate::redact::Redaction) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut findings = match super::try_load(cli) {
        Ok(loaded) => checks(&Loaded { env: loaded.env.with_redaction(redaction.clone()), ..loaded }).await,
        Err((paths, problems)) => {
            let detail = format!("{} has {} problems: {}", paths.config.display(), problems.len(), problems.join("; "));
            vec![Finding::fail("config", detail, "hermesd check lists each problem with its line"), disk(&paths.home)]
        }
    };
    // What a server answered may quote a credential back; no secret reaches the terminal either.
    for finding in &mut findings {
        finding.detail = redaction.redact(&finding.detail);
    }
    print(&findings, json);
    if findings.iter().any(|f| f.status == Status::Fail) { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}

fn print(findings: &[Finding], json: bool) {
    if json {
        println!("{}", serde_json::to_string_pretty(findings).unwrap_or_else(|_| "[]".into()));
        return;
    }
    for finding in findings {
        let (mark, caveat) = match finding.status {
            Status::Ok => ("✓", ""),
            Status::Warn => ("✓", " (warning)"),
            Status::Fail => ("✗", ""),
        };
        // One line each, the fix on it.
        let fix = finding.fix.as_deref().map(|fix| format!(" — fix: {fix}")).unwrap_or_default();
        let detail = finding.detail.replace('\n', " ");
        println!("{mark} {}: {detail}{caveat}{fix}", finding.check);
    }
    let failed = findings.iter().filter(|f| f.status == Status::Fail).count();
    let warned = findings.iter().filter(|f| f.status == Status::Warn).count();
    println!("{} checks: {failed} failed, {warned} with warnings", findings.len());
}

async fn checks(loaded: &Loaded) -> Vec<Finding> {
    let profiles = loaded.config.profile_names().len();
    // What `hermesd check` judges: the file's structure passed loading, this is the rest.
    let problems: Vec<String> = loaded.config.validate(&loaded.env).iter().map(|p| loaded.locator.locate(p)).collect();
    let config = if problems.is_empty() {
        let plural = if profiles == 1 { "" } else { "s" };
        Finding::ok("config", format!("{} is valid ({profiles} profile{plural})", loaded.paths.config.display()))
    } else {
        let detail = format!("{} problems: {}", problems.len(), problems.join("; "));
        Finding::fail("config", detail, "hermesd check lists each problem with its line")
    };
    let mut findings = vec![config];
    findings.extend(models(loaded).await);
    findings.extend(platforms(loaded).await);
    findings.extend(mcp(loaded).await);
    findings.push(sandbox(loaded));
    findings.push(disk(&loaded.paths.home));
    findings.extend(store(loaded).await);
    findings.extend(systemd(loaded));
    findings
}

/// Each model of each profile's chain, once each, and the clock against the first model
/// server that sends a `Date`.
async fn models(loaded: &Loaded) -> Vec<Finding> {
    let http = match crate::http_client::build() {
        Ok(http) => http,
        Err(e) => return vec![Finding::fail("models", format!("no HTTP client: {e}"), "report this as a bug")],
    };
    let mut seen: Vec<&ModelConfig> = Vec::new();
    let mut checks = Vec::new();
    for name in loaded.config.profile_names() {
        let Some(profile) = loaded.config.profile(name, &loaded.paths) else { continue };
        for model in profile.models {
            if seen.iter().any(|m| std::ptr::eq(*m, model)) {
                continue;
            }
            seen.push(model);
            checks.push((format!("model {name}/{}", model.name), model));
        }
    }
    if checks.is_empty() {
        let fix = "add a [model] table (deploy/quickstart.toml has one for a local server)";
        return vec![Finding::warn("models", "no model configured: every message gets a configuration hint", fix)];
    }
    let mut findings = Vec::new();
    for (check, model) in &checks {
        findings.push(one_model(check, model, loaded, &http).await);
    }
    findings.push(clock(checks.iter().map(|(_, m)| m.base_url.as_str()), &http).await);
    findings
}

async fn one_model(check: &str, model: &ModelConfig, loaded: &Loaded, http: &reqwest::Client) -> Finding {
    let provider: Arc<dyn Provider> = match crate::agent::auxiliary::provider(model, &loaded.env, http, false) {
        Ok(provider) => provider,
        Err(e) => return Finding::fail(check, e, "set the variable api_key_env names"),
    };
    // The Responses API refuses fewer than 16 output tokens.
    let tokens = if model.provider == ProviderKind::Responses { 16 } else { 1 };
    let request = ChatRequest {
        messages: vec![Message::text(Role::User, "Reply with one word: ok")],
        max_tokens: Some(tokens),
        ..ChatRequest::default()
    };
    let started = Instant::now();
    let answer = tokio::time::timeout(MODEL_TIMEOUT, provider.complete(&request, None)).await;
    let key = model.api_key_env.as_deref().unwrap_or("api_key_env");
    match answer {
        Ok(Ok(_)) => {
            Finding::ok(check, format!("answers at {} ({} ms)", model.base_url, started.elapsed().as_millis()))
        }
        Err(_) => Finding::fail(
            check,
            format!("no answer from {} in 30 s", model.base_url),
            "is the server up and reachable?",
        ),
        Ok(Err(error @ ProviderError::Unauthorized(_))) => {
            Finding::fail(check, error.to_string(), format!("check {key}: the key is wrong or expired"))
        }
        Ok(Err(error @ ProviderError::Permanent(_))) => Finding::fail(
            check,
            error.to_string(),
            format!("check the model name {:?} and base_url {}", model.name, model.base_url),
        ),
        Ok(Err(error @ ProviderError::RateLimited { .. })) => {
            Finding::warn(check, error.to_string(), "the key works; the account is rate limited or out of credit")
        }
        Ok(Err(error)) => {
            Finding::fail(check, error.to_string(), format!("is {} reachable from here?", model.base_url))
        }
    }
}

/// The local clock against the `Date` of the first model server that answers.
async fn clock<'a>(urls: impl Iterator<Item = &'a str>, http: &reqwest::Client) -> Finding {
    for url in urls {
        let Ok(Ok(answer)) = tokio::time::timeout(Duration::from_secs(10), http.get(url).send()).await else {
            continue;
        };
        let Some(date) = answer.headers().get(reqwest::header::DATE).and_then(|d| d.to_str().ok()) else { continue };
        let Ok(theirs) = chrono::DateTime::parse_from_rfc2822(date) else { continue };
        let skew = chrono::Utc::now().signed_duration_since(theirs).num_seconds();
        let host = url.split('/').nth(2).unwrap_or(url);
        let detail = format!("{skew:+} s against {host}");
        return if skew.unsigned_abs() > MAX_SKEW.as_secs() {
            Finding::fail("clock", detail, "turn on time synchronisation (timedatectl set-ntp true)")
        } else {
            Finding::ok("clock", detail)
        };
    }
    Finding::warn("clock", "no model server sent a Date to compare with", "check the clock by hand (timedatectl)")
}

/// Every enabled adapter's account.
async fn platforms(loaded: &Loaded) -> Vec<Finding> {
    let mut findings = Vec::new();
    for section in loaded.config.platforms.sections() {
        let built = match section.build_all(&loaded.env, &loaded.paths.home) {
            Ok(built) => built,
            Err(e) => {
                findings.push(Finding::fail(format!("platform {}", section.name()), e, "hermesd check lists why"));
                continue;
            }
        };
        for platform in built {
            let check = format!("platform {}", platform.name());
            findings.push(match tokio::time::timeout(PLATFORM_TIMEOUT, platform.probe()).await {
                Ok(Some(Ok(who))) => Finding::ok(check, who),
                Ok(Some(Err(why))) => Finding::fail(check, why, "fix the credentials or the address named"),
                Ok(None) => Finding::ok(check, "configured (no live check for this platform)"),
                Err(_) => Finding::fail(check, "no answer in 45 s", "is the platform reachable from here?"),
            });
        }
    }
    findings
}

/// Every enabled MCP server, connected as the daemon would.
async fn mcp(loaded: &Loaded) -> Vec<Finding> {
    let config = &loaded.config.mcp;
    if !config.servers.values().any(|s| s.enabled) {
        return Vec::new();
    }
    let reports = match super::mcp::connect(loaded, config).await {
        Ok((reports, _)) => reports,
        Err(e) => return vec![Finding::fail("mcp", e, "report this as a bug")],
    };
    reports
        .into_iter()
        .map(|r| {
            let check = format!("mcp {}", r.name);
            match r.state {
                "ready" => Finding::ok(check, format!("connected, {} tools", r.tools)),
                state => Finding::fail(
                    check,
                    format!("{state}: {}", r.error.unwrap_or_default()),
                    format!("hermesd mcp test {} shows the server's own words", r.name),
                ),
            }
        })
        .collect()
}

/// The tools' sandbox and what the kernel offers it.
fn sandbox(loaded: &Loaded) -> Finding {
    let sandbox = crate::sandbox::Sandbox::new(loaded.config.tools.terminal.sandbox, None);
    let detail = sandbox.describe();
    if let Some(problem) = sandbox.problem() {
        return Finding::fail(
            "sandbox",
            problem,
            "run on Linux 5.13+ with Landlock enabled (lsm=…,landlock), or accept unconfined tools with \
             tools.terminal.sandbox = \"none\"",
        );
    }
    let warnings = sandbox.kernel_warnings();
    if warnings.is_empty() {
        return Finding::ok("sandbox", detail);
    }
    let fix = "a newer kernel, and user namespaces allowed (sysctl kernel.unprivileged_userns_clone=1; \
               kernel.apparmor_restrict_unprivileged_userns=0)";
    Finding::warn("sandbox", format!("{detail}; {}", warnings.join("; ")), fix)
}

/// Free space where the home is.
fn disk(home: &std::path::Path) -> Finding {
    let at = std::iter::successors(Some(home), |p| p.parent()).find(|p| p.exists()).unwrap_or(home);
    let stat = match rustix::fs::statvfs(at) {
        Ok(stat) => stat,
        Err(e) => {
            return Finding::warn("disk", format!("{}: {e}", at.display()), "check the free space by hand (df -h)");
        }
    };
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    let total = stat.f_blocks.saturating_mul(stat.f_frsize).max(1);
    let percent = free.saturating_mul(100) / total;
    let detail = format!("{:.1} GB free ({percent} %) at {}", free as f64 / 1e9, at.display());
    if free < MIN_FREE_BYTES {
        Finding::fail("disk", detail, "free space: hermesd store vacuum, hermesd sessions prune --older-than 90d")
    } else if percent < 10 {
        Finding::warn("disk", detail, "less than 10 % free: retention ([retention]) or a larger disk")
    } else {
        Finding::ok("disk", detail)
    }
}

/// The store's integrity and the day's rows that need an operator.
async fn store(loaded: &Loaded) -> Vec<Finding> {
    let path = loaded.paths.database(&loaded.config.store);
    if !path.exists() {
        return vec![Finding::ok(
            "store",
            format!("{} does not exist yet; the first start creates it", path.display()),
        )];
    }
    let store = match super::open_store(loaded).await {
        Ok(store) => store,
        Err(_) => {
            return vec![Finding::fail("store", format!("cannot open {}", path.display()), "see the error above")];
        }
    };
    let since = chrono::Utc::now().timestamp_millis() - 86_400_000;
    let checkup = store.checkup(since).await;
    store.close().await;
    let checkup = match checkup {
        Ok(checkup) => checkup,
        Err(e) => return vec![Finding::fail("store", e.to_string(), "hermesd backup to a new file, then restore it")],
    };
    let mut findings = vec![if checkup.integrity == "ok" {
        Finding::ok("store", format!("{}: quick_check ok", path.display()))
    } else {
        Finding::fail(
            "store",
            format!("{}: quick_check: {}", path.display(), checkup.integrity),
            "stop hermesd, restore the newest backup (hermesd backup makes one), or VACUUM INTO a new file",
        )
    }];
    let set_aside = checkup.quarantined_events + checkup.quarantined_deliveries + checkup.quarantined_messages;
    if set_aside > 0 {
        findings.push(Finding::fail(
            "last day",
            format!(
                "{} inbound events, {} deliveries and {} messages set aside as unreadable",
                checkup.quarantined_events, checkup.quarantined_deliveries, checkup.quarantined_messages
            ),
            "hermesd events list --quarantined and hermesd deliveries list --failed show them; replay or retry \
             them after an upgrade that reads them",
        ));
    }
    let failed = (checkup.failed_turns, checkup.failed_deliveries);
    findings.push(if failed == (0, 0) {
        Finding::ok("last day", "no failed turns or deliveries")
    } else {
        Finding::warn(
            "last day",
            format!("{} turns ended in an error, {} deliveries failed", failed.0, failed.1),
            "hermesd deliveries list --failed says why; hermesd deliveries retry ID sends one again",
        )
    });
    findings
}

/// The installed unit's settings, when systemd has one.
fn systemd(loaded: &Loaded) -> Option<Finding> {
    const PROPERTIES: &str = "LoadState,FragmentPath,SystemCallFilter,RestrictNamespaces,TimeoutStopUSec";
    let output = std::process::Command::new("systemctl")
        .args(["show", "hermesd.service", "--property", PROPERTIES])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let shown = String::from_utf8_lossy(&output.stdout);
    let property =
        |name: &str| shown.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix('=')).unwrap_or("").to_owned();
    if property("LoadState") != "loaded" {
        return None;
    }
    let mut problems = Vec::new();
    let sandboxed = loaded.config.tools.terminal.sandbox == crate::sandbox::SandboxMode::Landlock;
    let filter = property("SystemCallFilter");
    if sandboxed && !filter.is_empty() && !filter.starts_with('~') && !filter.contains("landlock_restrict_self") {
        problems.push("its SystemCallFilter refuses landlock_* (terminal commands fail with EPERM)".to_owned());
    }
    let namespaces = property("RestrictNamespaces");
    if sandboxed
        && !namespaces.is_empty()
        && namespaces != "no"
        && !["user", "net", "pid"].iter().all(|n| namespaces.contains(n))
    {
        problems.push(format!("RestrictNamespaces={namespaces} keeps commands out of namespaces of their own"));
    }
    let stop = parse_systemd_duration(&property("TimeoutStopUSec"));
    let drain = loaded.config.agent.drain_timeout.get() + Duration::from_secs(5);
    if stop.is_some_and(|stop| stop < drain) {
        problems.push(format!("TimeoutStopSec is shorter than [agent] drain_timeout + 5 s ({} s)", drain.as_secs()));
    }
    let fragment = property("FragmentPath");
    Some(if problems.is_empty() {
        Finding::ok("systemd", format!("{fragment}: sandbox and stop settings fit"))
    } else {
        Finding::fail(
            "systemd",
            format!("{fragment}: {}", problems.join("; ")),
            "sudo hermesd service install writes the unit anew (a drop-in under hermesd.service.d may override it)",
        )
    })
}

/// systemd's `show` form of a duration (`45s`, `1min 30s`, `infinity`); `None` when unknown.
fn parse_systemd_duration(text: &str) -> Option<Duration> {
    if text == "infinity" || text.is_empty() {
        return None;
    }
    let mut total = 0.0;
    for part in text.split_whitespace() {
        let split = part.find(|c: char| !c.is_ascii_digit() && c != '.')?;
        let (number, unit) = part.split_at(split);
        let number: f64 = number.parse().ok()?;
        total += number
            * match unit {
                "us" => 1e-6,
                "ms" => 1e-3,
                "s" => 1.0,
                "min" => 60.0,
                "h" => 3600.0,
                _ => return None,
            };
    }
    Some(Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systemd_durations_read_as_show_prints_them() {
        assert_eq!(parse_systemd_duration("45s"), Some(Duration::from_secs(45)));
        assert_eq!(parse_systemd_duration("1min 30s"), Some(Duration::from_secs(90)));
        assert_eq!(parse_systemd_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_systemd_duration("infinity"), None);
        assert_eq!(parse_systemd_duration("soon"), None);
    }
}
