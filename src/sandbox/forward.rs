//! The helper's forwarder: a TCP listener on 127.0.0.1 (inside the command's network namespace
//! when it has one) whose every connection is relayed to the daemon's egress proxy on its unix
//! socket (`proxy.rs`), preceded by the daemon's proxy token. The command is told to use it as
//! `HTTPS_PROXY`/`HTTP_PROXY`; it never sees the token (the helper takes it out of the
//! environment and is non-dumpable), so a command without network cannot use the proxy by
//! connecting to its socket itself.

use std::io::{self, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;

/// A bound forwarder, not yet serving.
pub(super) struct Forwarder {
    listener: TcpListener,
    socket: PathBuf,
    token: String,
}

impl Forwarder {
    /// Bind 127.0.0.1 on a free port, to relay to the proxy at `socket` with `token`.
    pub(super) fn bind(socket: PathBuf, token: String) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0))?;
        Ok(Self { listener, socket, token })
    }

    /// The port the command must use.
    pub(super) fn port(&self) -> io::Result<u16> {
        Ok(self.listener.local_addr()?.port())
    }

    /// Serve on a thread of its own until the helper exits.
    pub(super) fn serve(self) {
        std::thread::spawn(move || {
            for stream in self.listener.incoming().flatten() {
                let (socket, token) = (self.socket.clone(), self.token.clone());
                std::thread::spawn(move || {
                    let _ = relay(stream, &socket, &token);
                });
            }
        });
    }
}

/// Copy bytes both ways between the command's connection and a new one to the proxy.
fn relay(client: TcpStream, socket: &PathBuf, token: &str) -> io::Result<()> {
    let mut upstream = UnixStream::connect(socket)?;
    upstream.write_all(format!("{token}\n").as_bytes())?;
    let (mut client_read, mut upstream_write) = (client.try_clone()?, upstream.try_clone()?);
    let outbound = std::thread::spawn(move || {
        let _ = io::copy(&mut client_read, &mut upstream_write);
        let _ = upstream_write.shutdown(Shutdown::Write);
    });
    let (mut upstream_read, mut client_write) = (upstream, client);
    let _ = io::copy(&mut upstream_read, &mut client_write);
    let _ = client_write.shutdown(Shutdown::Write);
    let _ = outbound.join();
    Ok(())
}
