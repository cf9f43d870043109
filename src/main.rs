//! The `hermesd` binary: a thin shell over the library's CLI.
//!
//! Before anything else the file creation mask becomes 077, so everything hermesd creates — its
//! home, the store with its `-wal`/`-shm` files, memory, media, deliveries, cron output — is
//! readable by its own user only, whatever umask the shell or service manager passed on.

fn main() -> std::process::ExitCode {
    rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o077));
    hermesd::cli::main()
}
