//! `hermesd run` (the daemon, with signals; a standby while another daemon holds the home) and
//! `hermesd chat` (the terminal channel alone, beside a running daemon or without one).

use std::process::ExitCode;
use std::sync::Arc;

use tokio::signal::unix::{SignalKind, signal};

use super::Loaded;
use crate::daemon::{Daemon, DaemonOptions};
use crate::platforms::terminal::TerminalPlatform;

pub(super) async fn run(loaded: Loaded) -> ExitCode {
    let problems: Vec<String> = loaded.config.validate(&loaded.env).iter().map(|p| loaded.locator.locate(p)).collect();
    if !problems.is_empty() {
        super::check::report(&loaded.paths, &problems);
        return ExitCode::from(super::EXIT_CONFIG);
    }
    for warning in super::check::permission_warnings(&loaded.paths, &loaded.config) {
        tracing::warn!("{warning}");
    }
    crate::sandbox::harden_daemon();
    // Signals first: a daemon standing by for another's lease stops on them too.
    let stop = tokio_util::sync::CancellationToken::new();
    let (mut term, mut int, mut hup) =
        match (signal(SignalKind::terminate()), signal(SignalKind::interrupt()), signal(SignalKind::hangup())) {
            (Ok(t), Ok(i), Ok(h)) => (t, i, h),
            _ => {
                eprintln!("hermesd: cannot install signal handlers");
                return ExitCode::from(super::EXIT_TEMPFAIL);
            }
        };
    let stopping = stop.clone();
    // SIGHUP reloads once the daemon runs (before that there is nothing to reload into).
    let (reload_tx, mut reload_rx) = tokio::sync::mpsc::channel::<()>(1);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = term.recv() => { tracing::info!("SIGTERM received"); break; }
                _ = int.recv() => { tracing::info!("SIGINT received"); break; }
                _ = hup.recv() => {
                    tracing::info!("SIGHUP received: reading the config again");
                    // One pending reload is enough: a second signal meanwhile reads the same files.
                    let _ = reload_tx.try_send(());
                }
            }
        }
        stopping.cancel();
    });
    let options = DaemonOptions { systemd: true, lease: Some(stop.clone()), ..Default::default() };
    let daemon = match Daemon::start(loaded.config, loaded.paths, loaded.env, options).await {
        Ok(daemon) => daemon,
        Err(crate::daemon::StartError::Stopped) => return ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hermesd: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    let shutdown = daemon.shutdown_token();
    tokio::spawn(async move {
        stop.cancelled().await;
        shutdown.cancel();
    });
    let reloader = daemon.reloader.clone();
    tokio::spawn(async move {
        while reload_rx.recv().await.is_some() {
            let reloader = reloader.clone();
            // The outcome is logged by the reload itself.
            let _ = tokio::task::spawn_blocking(move || reloader.reload()).await;
        }
    });
    daemon.wait().await;
    ExitCode::SUCCESS
}

pub(super) async fn chat(loaded: Loaded, user: &str) -> ExitCode {
    crate::sandbox::harden_daemon();
    let terminal = TerminalPlatform::new(user);
    // Only the terminal channel: the configured adapters, cron and crash recovery of their work
    // belong to the daemon (`hermesd run`), running or not.
    let options = DaemonOptions {
        no_http: true,
        extra_platforms: vec![terminal.clone() as Arc<_>],
        extra_only: true,
        ..Default::default()
    };
    let daemon = match Daemon::start(loaded.config, loaded.paths, loaded.env, options).await {
        Ok(daemon) => daemon,
        Err(e) => {
            eprintln!("hermesd: {e}");
            return ExitCode::from(e.exit_code());
        }
    };
    eprintln!("hermesd chat — type a message and press Enter; Ctrl-D to quit.");
    tokio::select! {
        _ = terminal.finished.cancelled() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    daemon.stop().await;
    ExitCode::SUCCESS
}
