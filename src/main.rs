//! The `hermesd` binary: a thin shell over the library's CLI.
//!
//! Before anything else the file creation mask becomes 077, so everything hermesd creates — its
//! home, the store with its `-wal`/`-shm` files, memory, media, deliveries, cron output — is
//! readable by its own user only, whatever umask the shell or service manager passed on.
//!
//! With the default feature `alloc-jemalloc` the allocator is jemalloc with its background
//! threads on, which return freed memory to the system within seconds of it going idle (glibc's
//! malloc kept the memory of 10,000 idle sessions for good).
//!
//! The background threads are turned on at start (`tikv-jemalloc-ctl`, no unsafe): they purge freed
//! pages on their own clock, so memory freed by threads that then sleep goes back too. jemalloc is
//! built with one arena (`narenas:1`, `.cargo/config.toml`; `MALLOC_CONF` in the daemon's
//! environment overrides it): every arena keeps its own partly used pages and metadata, and hermesd
//! has a handful of threads, each allocating mostly from its own thread cache. It keeps its default
//! decay (freed pages purged over about 10 s): `dirty_decay_ms:1000` gave 57.9 and 26.4 MB for the
//! last two figures of the table but let CPU per message drift up as 100,000 chats accumulated
//! (`=chats` median ratio 1.21 against 1.05).
//!
//! Measured (`HERMESD_BENCH_SCALE=memory cargo bench --bench gateway`: 10,000 API sessions, one
//! message each, 200 in flight, `session_idle = "60s"`; ARCHITECTURE.md, "Memory", has the table):
//! with one arena, RSS 19.9 MB idle, 53.7 MB with all sessions alive, 25.6 MB 120 s after the last
//! actor exited. By `hermesd_allocator_bytes` (allocated / active / resident, MB), one arena: idle
//! 3.1 / 3.3 / 5.7, all alive 25.2 / 28.4 / 39.7, end of the watch 2.8 / 5.8 / 8.6; with four
//! arenas per CPU: idle 3.1 / 3.7 / 6.9, all alive 25.2 / 29.4 / 45.2, end 2.7 / 6.3 / 10.4. On the
//! main table (`HERMESD_BENCH_SCALE=none`) one arena was no slower: 3596–4420 against 3742–3748
//! turns/s at 50 sessions, 0.32–0.36 against 0.35 ms CPU per turn. What stays above idle after exit
//! is slab fragmentation (about 2.4 MB) and the code pages the turns touched.
//!
//! The idle figure: of 19.9 MB, about 11 MB are the binary's code pages touched at start and by the
//! first request (the kernel maps 64 KB around each fault; one `/readyz` alone adds about 1.2 MB),
//! 2.4 MB the C library's, 1.6 MB read-only data, 2 MB the relocated pointers of `.data.rel.ro` (a
//! non-PIE build would keep them clean but give up ASLR), and the allocator's pages (3.1 MB
//! allocated, 5.7 MB resident with its metadata). A lower `tcache_max` would save another 0.2–0.5
//! MB at the cost of arena trips for 1–32 KB allocations; not taken. jemalloc was picked over
//! mimalloc because only it gives the memory back (mimalloc purges on the freeing thread's next
//! call, so an idle thread keeps it); it costs about 60 s more on a clean release build. CPU per
//! message (`=chats`, 100,000 distinct chats in one run, on a shared machine): mimalloc 2.12 ms
//! after 100 chats, 2.09 ms after 95,000; jemalloc 1.67 ms, then 1.7–2.1 ms through 85,000, then
//! 2.23 and 2.60 ms once the first actors' idle time ran out and they exited while the load went
//! on. Telling the exit and purge cost from noise needs repeated runs on a quiet machine.

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
