//! Capabilities the sandbox helper drops before it execs, so a child running as root cannot use
//! what Landlock does not govern. It must drop them from the bounding set too: a root `exec`
//! refills the permitted set from it.

use rustix::thread::{
    CapabilitySet, CapabilitySets, capabilities, clear_ambient_capability_set, remove_capability_from_bounding_set,
    set_capabilities,
};

/// Dropped: `SYS_PTRACE` (with the daemon non-dumpable, this is what keeps a root child out of
/// `/proc/<daemon>/environ`), `SYS_RAWIO` (`/proc/kcore`, raw devices), `DAC_READ_SEARCH`
/// (`open_by_handle_at`), `NET_RAW` (raw sockets slip past Landlock's TCP rules), and the
/// administrative ones no tool needs.
const DROPPED: CapabilitySet = CapabilitySet::SYS_PTRACE
    .union(CapabilitySet::SYS_RAWIO)
    .union(CapabilitySet::DAC_READ_SEARCH)
    .union(CapabilitySet::NET_RAW)
    .union(CapabilitySet::NET_ADMIN)
    .union(CapabilitySet::SYS_ADMIN)
    .union(CapabilitySet::SYS_MODULE)
    .union(CapabilitySet::SYS_BOOT)
    .union(CapabilitySet::SYSLOG)
    .union(CapabilitySet::BPF)
    .union(CapabilitySet::PERFMON)
    .union(CapabilitySet::MAC_ADMIN)
    .union(CapabilitySet::MAC_OVERRIDE)
    .union(CapabilitySet::CHECKPOINT_RESTORE);

/// Drop `DROPPED` from the bounding, ambient, effective, permitted and inheritable sets of the
/// calling thread. Without `CAP_SETPCAP` (an unprivileged daemon) the bounding set cannot be
/// changed, but then there is nothing to regain: no-new-privs stops setuid and file capabilities.
pub(super) fn drop_capabilities() -> std::io::Result<()> {
    let current = capabilities(None)?;
    if current.effective.contains(CapabilitySet::SETPCAP) {
        for cap in DROPPED.iter() {
            remove_capability_from_bounding_set(cap)?;
        }
    }
    clear_ambient_capability_set()?;
    let held = current.effective.union(current.permitted).union(current.inheritable);
    // An unprivileged daemon holds none of them; skipping capset then keeps the helper working
    // under the unit's `SystemCallFilter=~@privileged`, which refuses capset.
    if held.intersects(DROPPED) {
        set_capabilities(
            None,
            CapabilitySets {
                effective: current.effective.difference(DROPPED),
                permitted: current.permitted.difference(DROPPED),
                inheritable: current.inheritable.difference(DROPPED),
            },
        )?;
    }
    Ok(())
}
