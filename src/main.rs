//! The `hermesd` binary: a thin shell over the library's CLI.
//!
//! Before anything else the file creation mask becomes 077, so everything hermesd creates — its
//! home, the store with its `-wal`/`-shm` files, memory, media, deliveries, cron output — is
//! readable by its own user only, whatever umask the shell or service manager passed on.
//!
//! With the default feature `alloc-jemalloc` the allocator is jemalloc with its background
//! threads on, which return freed memory to the system within seconds of it going idle (glibc's
//! malloc kept the memory of 10,000 idle sessions for good).

#[cfg(feature = "alloc-jemalloc")]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o077));
    // Purging runs on jemalloc's own threads, so memory freed by threads that then sleep (an
    // idle runtime) still goes back. Without it hermesd works as before, only holds more. Not in
    // the sandbox helper: it must stay single-threaded to create a user namespace.
    #[cfg(feature = "alloc-jemalloc")]
    if std::env::args_os().nth(1).is_none_or(|a| a != hermesd::sandbox::HELPER_SUBCOMMAND) {
        let _ = tikv_jemalloc_ctl::background_thread::write(true);
    }
    hermesd::cli::main()
}
