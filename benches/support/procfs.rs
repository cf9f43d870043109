//! What the platform benches read of a daemon from `/proc` (Linux only): its RSS figures and its
//! CPU time, and the clock tick that CPU time is counted in.

use std::process::Command;

/// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in MB; `None` once the process is gone.
pub(crate) fn status_mb(pid: u32, field: &str) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(kb as f64 / 1024.0)
}

/// utime + stime of `pid` in clock ticks (fields 14 and 15 of `/proc/<pid>/stat`).
pub(crate) fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces; fields after its closing ')' start at field 3.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    Some(field(14)? + field(15)?)
}

/// `getconf CLK_TCK` (normally 100).
pub(crate) fn ticks_per_second() -> f64 {
    let out = Command::new("getconf").arg("CLK_TCK").output().expect("run getconf CLK_TCK");
    String::from_utf8_lossy(&out.stdout).trim().parse().expect("getconf CLK_TCK prints a number")
}
