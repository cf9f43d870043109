//! The helper's namespaces: a user namespace (so an unprivileged daemon may create the others),
//! a network namespace holding only its own loopback interface, and a PID namespace whose first
//! child is the command. In the new network namespace no address of the host is reachable — not
//! the daemon's keyless API on 127.0.0.1, nor signal-cli's JSON-RPC, nor a local model server —
//! whatever ports they use, TCP and UDP alike; the only way out is the forwarder the helper puts
//! on the namespace's 127.0.0.1 towards the daemon's egress proxy (`forward.rs`).
//!
//! `enter` must run while the helper is single-threaded (the kernel refuses a new user namespace
//! to a multi-threaded process) and before Landlock (writing `/proc/self/uid_map` is a write
//! outside every grant).

use std::io;

use rustix::net::{AddressFamily, RecvFlags, SendFlags, SocketType, netlink};
use rustix::thread::UnshareFlags;

/// What the namespaces are for, in words (the probe's marker and the log's wording).
pub(super) const PROBE_OK: &str = "namespaces: user, network and pid available";

/// Unshare the user and network namespaces, keep the caller's uid and gid mapped (so files it
/// writes keep their owner) and bring the new namespace's loopback up. The PID namespace comes
/// later (`enter_pid`): once the calling thread has one, it can start no thread.
pub(super) fn enter() -> io::Result<()> {
    let (uid, gid) = (rustix::process::geteuid().as_raw(), rustix::process::getegid().as_raw());
    unshare(UnshareFlags::NEWUSER | UnshareFlags::NEWNET)
        .map_err(|e| io::Error::other(format!("unshare user and network namespaces: {e}")))?;
    // An unprivileged process may map only its own ids, and its gid only once setgroups is off.
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text).map_err(|e| io::Error::other(format!("write {file}: {e}")))
    };
    write("setgroups", "deny".into())?;
    write("uid_map", format!("{uid} {uid} 1\n"))?;
    write("gid_map", format!("{gid} {gid} 1\n"))?;
    loopback_up().map_err(|e| io::Error::other(format!("bring the namespace's loopback up: {e}")))
}

/// Put this thread's future children in a new PID namespace (the first becomes its init: when
/// it exits, everything left in it is killed). After this the calling thread starts no thread,
/// so the forwarder must already run; the command must be spawned, not exec'd in place.
pub(super) fn enter_pid() -> io::Result<()> {
    unshare(UnshareFlags::NEWPID).map_err(|e| io::Error::other(format!("unshare the pid namespace: {e}")))
}

/// `unshare(2)` through rustix's safe wrapper. It is deprecated for `UnshareFlags::FILES`, which
/// can invalidate other threads' descriptors; only namespace flags are passed here, by a
/// single-threaded helper, so the call has nothing to invalidate.
#[allow(deprecated)]
fn unshare(flags: UnshareFlags) -> io::Result<()> {
    Ok(rustix::thread::unshare(flags)?)
}

/// Set `IFF_UP` on interface 1 (every network namespace's loopback) with one `RTM_NEWLINK`
/// netlink request, and read the kernel's acknowledgement.
fn loopback_up() -> io::Result<()> {
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    const LOOPBACK_INDEX: i32 = 1;
    let mut message = Vec::with_capacity(32);
    // struct nlmsghdr: length, type, flags, sequence, port id.
    message.extend_from_slice(&32u32.to_ne_bytes());
    message.extend_from_slice(&RTM_NEWLINK.to_ne_bytes());
    message.extend_from_slice(&(NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    message.extend_from_slice(&1u32.to_ne_bytes());
    message.extend_from_slice(&0u32.to_ne_bytes());
    // struct ifinfomsg: family, padding, type, index, flags, change mask.
    message.extend_from_slice(&[0, 0, 0, 0]);
    message.extend_from_slice(&LOOPBACK_INDEX.to_ne_bytes());
    message.extend_from_slice(&IFF_UP.to_ne_bytes());
    message.extend_from_slice(&IFF_UP.to_ne_bytes());
    let socket = rustix::net::socket(AddressFamily::NETLINK, SocketType::RAW, None)?;
    rustix::net::sendto(&socket, &message, SendFlags::empty(), &netlink::SocketAddrNetlink::new(0, 0))?;
    let mut reply = [0u8; 256];
    let (_, len) = rustix::net::recv(&socket, &mut reply, RecvFlags::empty())?;
    // The acknowledgement is an NLMSG_ERROR message whose first field is 0 or a negated errno.
    let code = reply.get(16..20).filter(|_| len >= 20).map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match code {
        Some(0) => Ok(()),
        Some(errno) => Err(io::Error::from_raw_os_error(-errno)),
        None => Err(io::Error::other("a short netlink reply")),
    }
}
