//! The command line: `hermesd run | check | chat | send | sessions | cron | pairing | profiles |
//! skills | mcp | backup | store | service | doctor | health | reload | deliveries | events |
//! approvals | import`. Every subcommand reads
//! `$HERMESD_HOME/config.toml` unless `--config` says otherwise.
//!
//! The hidden `sandbox-exec` is dispatched before any config, logging or runtime, and the hidden
//! `mcp-shim` before the config is read. `init_logging` writes every log line through the daemon's
//! redaction.

mod approvals;
mod backup;
mod check;
mod cron;
mod daemon;
mod doctor;
mod health;
mod import;
mod mcp;
mod operator;
mod pairing;
mod profiles;
mod run;
mod send;
mod service;
mod sessions;
mod skills;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, ConfigFile, Env, Locator, Paths, ProcessEnv};

/// Exit code: configuration error (systemd's RestartPreventExitStatus).
pub const EXIT_CONFIG: u8 = 78;
/// Exit code: temporary failure, restart me.
pub const EXIT_TEMPFAIL: u8 = 75;

/// `hermesd --version`: the version and the test-only features compiled in (a build with
/// failpoints must never be mistaken for a release).
const LONG_VERSION: &str = if crate::failpoint::ENABLED {
    concat!(env!("CARGO_PKG_VERSION"), " (failpoints)")
} else {
    env!("CARGO_PKG_VERSION")
};

/// hermesd — a durable multi-platform messaging gateway for an AI agent.
#[derive(Debug, Parser)]
#[command(name = "hermesd", version, long_version = LONG_VERSION, about)]
pub struct Cli {
    /// Config file (default: $HERMESD_HOME/config.toml).
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// State directory (default: $HERMESD_HOME, else ~/.hermesd).
    #[arg(long, global = true, value_name = "DIR")]
    pub home: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway in the foreground (systemd Type=notify).
    Run,
    /// Validate the configuration; exit 78 listing every problem.
    Check,
    /// Chat with the agent from this terminal, through the same pipeline and store.
    Chat {
        /// Your user id in the local chat.
        #[arg(long, default_value = "local")]
        user: String,
    },
    /// Inspect sessions.
    Sessions {
        /// What to show.
        #[command(subcommand)]
        command: sessions::SessionsCommand,
    },
    /// Deliver a message to a target: local, <platform>, <platform>:<chat_id>[:<thread_id>].
    Send {
        /// Where it goes.
        target: String,
        /// The text (markdown).
        text: String,
        /// The platform account to send from (`--account work` with `telegram:42` is
        /// `telegram@work:42`).
        #[arg(long)]
        account: Option<String>,
    },
    /// Manage scheduled prompts.
    Cron {
        /// What to do.
        #[command(subcommand)]
        command: cron::CronCommand,
    },
    /// Approve or revoke chat users (DM pairing).
    Pairing {
        /// What to do.
        #[command(subcommand)]
        command: pairing::PairingCommand,
    },
    /// The agents this config defines: list them, show one.
    Profiles {
        /// What to show.
        #[command(subcommand)]
        command: profiles::ProfilesCommand,
    },
    /// List, show, install and remove skills ($HERMESD_HOME/skills).
    Skills {
        /// What to do.
        #[command(subcommand)]
        command: skills::SkillsCommand,
    },
    /// MCP servers: list them, test one.
    Mcp {
        /// What to do.
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// Copy the store to PATH while the daemon runs (consistent, integrity-checked).
    Backup {
        /// Where the copy goes; must not exist yet.
        path: PathBuf,
    },
    /// Store maintenance.
    Store {
        /// What to do.
        #[command(subcommand)]
        command: backup::StoreCommand,
    },
    /// Live checks of the config, models, platforms, MCP servers, sandbox, disk, store and unit;
    /// exit 1 when any fails.
    Doctor {
        /// The findings as a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Commands people approved for good: list them, revoke them.
    Approvals {
        /// What to do.
        #[command(subcommand)]
        command: approvals::ApprovalsCommand,
    },
    /// Outbound messages: list the failed ones, send one again, drop one.
    Deliveries {
        /// What to do.
        #[command(subcommand)]
        command: operator::DeliveriesCommand,
    },
    /// Inbound events: list the set-aside ones, replay one.
    Events {
        /// What to do.
        #[command(subcommand)]
        command: operator::EventsCommand,
    },
    /// Have the running daemon read its config file and .env again (as SIGHUP does).
    Reload,
    /// Exit 0 when the daemon of this config answers /healthz (a container's health check).
    Health,
    /// Where the control panel is, and the key to log in with when the daemon has no
    /// API_SERVER_KEY (the home's local key; printed here, never logged).
    Ui,
    /// Bring another gateway's home into this one (dry run unless --apply).
    Import {
        /// Which gateway.
        #[command(subcommand)]
        command: import::ImportCommand,
    },
    /// Install hermesd as a systemd service, and show how it runs.
    Service {
        /// What to do.
        #[command(subcommand)]
        command: service::ServiceCommand,
    },
    /// Internal: run one stdio MCP server under the daemon (process group, parent death, sandbox).
    #[command(hide = true)]
    McpShim(crate::agent::tools::mcp::shim::ShimArgs),
    /// Internal: restrict this process with the tools' sandbox, then exec a program.
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec(crate::sandbox::SandboxExecArgs),
}

/// Print a subcommand's result: the text on stdout (exit 0), or the error on stderr (exit 1).
fn report_outcome(result: Result<String, String>) -> ExitCode {
    match result {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("hermesd: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Config, paths and environment as every subcommand needs them.
pub struct Loaded {
    /// The parsed config (defaults when the file is absent).
    pub config: Config,
    /// Where things live.
    pub paths: Paths,
    /// Environment and `.env`.
    pub env: Env,
    /// Where each key of the config file is, for problems found later.
    pub locator: Locator,
}

/// Load config and environment; on failure print every problem (structure, environment and
/// validation, each with file and line where it has one) and return exit 78.
pub fn load(cli: &Cli) -> Result<Loaded, ExitCode> {
    try_load(cli).map_err(|(paths, problems)| {
        check::report(&paths, &problems);
        ExitCode::from(EXIT_CONFIG)
    })
}

/// Config and environment, or where they were looked for and every problem found.
fn try_load(cli: &Cli) -> Result<Loaded, (Paths, Vec<String>)> {
    let paths = Paths::resolve(cli.home.clone(), cli.config.clone(), &ProcessEnv);
    let env = Env::load(Box::new(ProcessEnv), &paths.home);
    let file = match ConfigFile::read(&paths.config) {
        Ok(file) => file,
        Err(e) => return Err((paths, e.problems)),
    };
    match env {
        Ok(env) if file.problems.is_empty() => {
            let ConfigFile { config, locator, .. } = file;
            Ok(Loaded { config, paths, env, locator })
        }
        Ok(env) => {
            let problems = file.all_problems(&env);
            Err((paths, problems))
        }
        Err(e) => {
            let problems: Vec<String> = file.problems.into_iter().chain(std::iter::once(e)).collect();
            Err((paths, problems))
        }
    }
}

/// Parse arguments and run.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    // The sandbox helper reads no config, secrets or logs setup: it restricts itself and execs.
    if let Command::SandboxExec(args) = cli.command {
        return crate::sandbox::exec_main(args);
    }
    // One redaction for logs and everything else: the secrets `Env` reads land in it.
    let redaction = crate::redact::Redaction::default();
    init_logging(redaction.clone());
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hermesd: start runtime: {e}");
            return ExitCode::from(EXIT_TEMPFAIL);
        }
    };
    runtime.block_on(async {
        if let Command::McpShim(args) = cli.command {
            // Needs no config: everything comes on the command line from the daemon.
            return crate::agent::tools::mcp::shim::run(args).await;
        }
        if let Command::Reload = cli.command {
            // The daemon judges the new config with its own environment.
            return health::reload(&cli).await;
        }
        if let Command::Import { command } = cli.command {
            // Reads this home's config itself: it may be about to write it.
            return import::run(cli.home, cli.config, command).await;
        }
        if let Command::Doctor { json } = cli.command {
            // Reports a broken config as one of its findings instead of stopping at it.
            return doctor::run(&cli, json, redaction).await;
        }
        let loaded = match load(&cli) {
            Ok(loaded) => Loaded { env: loaded.env.with_redaction(redaction), ..loaded },
            Err(code) => return code,
        };
        match cli.command {
            Command::Run => run::run(loaded).await,
            Command::Check => check::check(&loaded),
            Command::Chat { user } => run::chat(loaded, &user).await,
            Command::Sessions { command } => sessions::run(loaded, command).await,
            Command::Pairing { command } => pairing::run(loaded, command).await,
            Command::Send { target, text, account } => {
                let target = match account {
                    Some(account) => match crate::vocab::target::on_account(&target, &account) {
                        Ok(target) => target,
                        Err(e) => {
                            eprintln!("hermesd: {e}");
                            return ExitCode::FAILURE;
                        }
                    },
                    None => target,
                };
                send::run(loaded, &target, &text).await
            }
            Command::Cron { command } => cron::run(loaded, command).await,
            Command::Profiles { command } => profiles::run(&loaded, command),
            Command::Skills { command } => skills::run(loaded, command),
            Command::Mcp { command } => mcp::run(loaded, command).await,
            Command::Backup { path } => backup::backup(loaded, &path).await,
            Command::Store { command } => backup::store(loaded, command).await,
            Command::Service { command } => service::run(&loaded, command),
            Command::Health => health::run(&loaded).await,
            Command::Ui => health::ui(&loaded),
            Command::Deliveries { command } => operator::deliveries(loaded, command).await,
            Command::Approvals { command } => approvals::run(loaded, command).await,
            Command::Events { command } => operator::events(loaded, command).await,
            Command::McpShim(_) | Command::Doctor { .. } | Command::Reload | Command::Import { .. } => {
                unreachable!("handled before loading the config")
            }
            Command::SandboxExec(_) => unreachable!("handled before the runtime starts"),
        }
    })
}

/// Open the store for a one-shot command; prints why and gives the exit code when it cannot.
async fn open_store(loaded: &Loaded) -> Result<crate::store::SqliteStore, ExitCode> {
    let path = loaded.paths.database(&loaded.config.store);
    crate::store::SqliteStore::open(&path, loaded.config.store.busy_timeout.get(), 1).await.map_err(|e| {
        eprintln!("hermesd: open {}: {e}", path.display());
        ExitCode::from(EXIT_TEMPFAIL)
    })
}

/// A Unix-ms time as `YYYY-MM-DD HH:MM[:SS]` UTC.
fn format_time(ms: i64, seconds: bool) -> String {
    let format = if seconds { "%Y-%m-%d %H:%M:%S" } else { "%Y-%m-%d %H:%M" };
    chrono::DateTime::<chrono::Utc>::from_timestamp_millis(ms).map(|t| t.format(format).to_string()).unwrap_or_default()
}

/// Log lines go to stderr with every secret in `redaction` (and token shapes) masked.
fn init_logging(redaction: crate::redact::Redaction) {
    crate::logging::init(redaction);
}
