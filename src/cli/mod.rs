//! The command line: `hermesd run | check | chat | send | sessions | cron | pairing`. Every subcommand reads
//! `$HERMESD_HOME/config.toml` unless `--config` says otherwise.

mod cron;
mod pairing;
mod run;
mod send;
mod sessions;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::config::{Config, Env, Paths, ProcessEnv};

/// Exit code: configuration error (systemd's RestartPreventExitStatus).
pub const EXIT_CONFIG: u8 = 78;
/// Exit code: temporary failure, restart me.
pub const EXIT_TEMPFAIL: u8 = 75;

/// hermesd — a durable multi-platform messaging gateway for an AI agent.
#[derive(Debug, Parser)]
#[command(name = "hermesd", version, about)]
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
    /// Internal: restrict this process with the tools' sandbox, then exec a program.
    #[command(name = "sandbox-exec", hide = true)]
    SandboxExec(crate::sandbox::SandboxExecArgs),
}

/// Config, paths and environment as every subcommand needs them.
pub struct Loaded {
    /// The parsed config (defaults when the file is absent).
    pub config: Config,
    /// Where things live.
    pub paths: Paths,
    /// Environment and `.env`.
    pub env: Env,
}

/// Load config and environment; on failure print every problem and return exit 78.
pub fn load(cli: &Cli) -> Result<Loaded, ExitCode> {
    let paths = Paths::resolve(cli.home.clone(), cli.config.clone(), &ProcessEnv);
    let env = match Env::load(Box::new(ProcessEnv), &paths.home) {
        Ok(env) => env,
        Err(e) => {
            eprintln!("hermesd: invalid configuration:\n  - {e}");
            return Err(ExitCode::from(EXIT_CONFIG));
        }
    };
    match Config::load(&paths.config) {
        Ok(config) => Ok(Loaded { config, paths, env }),
        Err(e) => {
            eprintln!("hermesd: {e}");
            Err(ExitCode::from(EXIT_CONFIG))
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
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("hermesd: start runtime: {e}");
            return ExitCode::from(EXIT_TEMPFAIL);
        }
    };
    runtime.block_on(async {
        let loaded = match load(&cli) {
            Ok(loaded) => loaded,
            Err(code) => return code,
        };
        match cli.command {
            Command::Run => run::run(loaded).await,
            Command::Check => check(&loaded),
            Command::Chat { user } => run::chat(loaded, &user).await,
            Command::Sessions { command } => sessions::run(loaded, command).await,
            Command::Pairing { command } => pairing::run(loaded, command).await,
            Command::Send { target, text } => send::run(loaded, &target, &text).await,
            Command::Cron { command } => cron::run(loaded, command).await,
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

fn check(loaded: &Loaded) -> ExitCode {
    let problems = loaded.config.validate(&loaded.env);
    if problems.is_empty() {
        let source = if loaded.paths.config.exists() {
            loaded.paths.config.display().to_string()
        } else {
            format!("embedded defaults ({} not found)", loaded.paths.config.display())
        };
        println!("configuration OK: {source}");
        let sandbox = crate::sandbox::Sandbox::new(loaded.config.tools.terminal.sandbox, None);
        println!("{}", sandbox.describe());
        if sandbox.problem().is_some() {
            eprintln!(
                "hermesd: the tools' sandbox is unavailable; set tools.terminal.sandbox = \"none\" to accept running tools unconfined"
            );
            return ExitCode::from(EXIT_CONFIG);
        }
        ExitCode::SUCCESS
    } else {
        eprintln!("hermesd: invalid configuration ({}):", loaded.paths.config.display());
        for problem in problems {
            eprintln!("  - {problem}");
        }
        ExitCode::from(EXIT_CONFIG)
    }
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("HERMESD_LOG")
        .or_else(|_| tracing_subscriber::EnvFilter::try_from_default_env())
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,sqlx=warn"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(std::io::stderr).init();
}
