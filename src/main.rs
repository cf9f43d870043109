//! The `hermesd` binary: a thin shell over the library's CLI.
//!
//! Before anything else the file creation mask becomes 077, so everything hermesd creates — its
//! home, the store with its `-wal`/`-shm` files, memory, media, deliveries, cron output — is
//! readable by its own user only, whatever umask the shell or service manager passed on.
//!
//! With the default feature `alloc-mimalloc` the allocator is mimalloc, which returns freed
//! memory to the system (glibc's malloc kept the memory of 10,000 idle sessions for good).

#[cfg(feature = "alloc-mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    rustix::process::umask(rustix::fs::Mode::from_bits_truncate(0o077));
    hermesd::cli::main()
}
