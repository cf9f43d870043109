//! The commands' egress proxy: the daemon's only door from a sandboxed command to the network.
//! It listens on a unix socket (reachable from a command's own network namespace, where no
//! host address is) behind the helper's forwarder (`forward.rs`), which opens every connection
//! with the daemon's token. It answers `CONNECT host:port` (HTTPS, pip, git over https) and
//! absolute-form `http://` requests, resolves the host itself and refuses a name any of whose
//! addresses is loopback, private, link-local or otherwise special — web_fetch's guard
//! (`net_guard`) — then connects to exactly a checked address. A command therefore reaches
//! public hosts and never a loopback service of the host (the keyless API, signal-cli, a model
//! server) nor the LAN.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use rand::RngCore;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpStream, UnixListener, UnixStream};

use crate::net_guard::AddressPolicy;

/// The request head must arrive within this long, and be at most this big.
const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
const MAX_HEAD: usize = 16 * 1024;

/// What a command's helper needs to reach the proxy: its socket and the token.
#[derive(Clone)]
pub struct EgressProxy {
    socket: PathBuf,
    token: Arc<str>,
}

impl std::fmt::Debug for EgressProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressProxy").field("socket", &self.socket).finish_non_exhaustive()
    }
}

impl EgressProxy {
    /// Listen on `socket` (a stale one is replaced) and serve until the runtime stops, letting
    /// through only targets `guard` accepts. Must run inside a tokio runtime.
    pub fn start(socket: &Path, guard: AddressPolicy) -> io::Result<Self> {
        // Its folder is this user's alone, so nobody else can put a socket in its place.
        if let Some(parent) = socket.parent() {
            super::private_dir::make(parent)?;
        }
        let _ = std::fs::remove_file(socket);
        let listener = UnixListener::bind(socket)?;
        let mut bytes = [0u8; 24];
        rand::rng().fill_bytes(&mut bytes);
        let token: Arc<str> = bytes.iter().map(|b| format!("{b:02x}")).collect::<String>().into();
        let served = token.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else { continue };
                let token = served.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, &token, guard).await {
                        tracing::debug!(error = %e, "egress proxy connection ended");
                    }
                });
            }
        });
        Ok(Self { socket: socket.to_path_buf(), token })
    }

    /// The unix socket the helper's forwarder connects to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The token the forwarder sends first on every connection.
    pub fn token(&self) -> &str {
        &self.token
    }
}

/// Where the proxy of the data dir `home` listens: in this user's folder of private temp dirs
/// (0700, denied to every command), named after the home, and short enough for a socket path.
pub fn socket_path(home: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(home.as_os_str().as_encoded_bytes());
    let name: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    super::private_tmp_root().join(format!("egress-{name}.sock"))
}

async fn serve(stream: UnixStream, token: &str, guard: AddressPolicy) -> io::Result<()> {
    let mut reader = BufReader::new(stream);
    let head = tokio::time::timeout(HEAD_TIMEOUT, read_head(&mut reader))
        .await
        .map_err(|_| io::Error::other("request head timed out"))??;
    let mut lines = head.lines();
    if !constant_time_eq(lines.next().unwrap_or("").as_bytes(), token.as_bytes()) {
        return Err(io::Error::other("a connection without the proxy token"));
    }
    let request = lines.next().unwrap_or("");
    let rest: Vec<&str> = lines.collect();
    let (method, target, version) = match request.split(' ').collect::<Vec<_>>()[..] {
        [method, target, version] => (method, target, version),
        _ => return refuse(reader, "400 Bad Request", "a malformed request line").await,
    };
    let (authority, forward) = if method.eq_ignore_ascii_case("CONNECT") {
        (target.to_string(), None)
    } else if let Some(after) = target.strip_prefix("http://") {
        let (authority, path) = after.split_once('/').map_or((after, ""), |(a, p)| (a, p));
        let authority = if authority.contains(':') { authority.to_string() } else { format!("{authority}:80") };
        let mut head = format!("{method} /{path} {version}\r\n");
        rest.iter().filter(|l| !l.to_ascii_lowercase().starts_with("proxy-")).for_each(|l| {
            head.push_str(l);
            head.push_str("\r\n");
        });
        (authority, Some(head))
    } else {
        return refuse(reader, "405 Method Not Allowed", "only CONNECT and http:// requests are proxied").await;
    };
    let upstream = match connect_guarded(&authority, guard).await {
        Ok(upstream) => upstream,
        Err(why) => return refuse(reader, "403 Forbidden", &why).await,
    };
    let mut upstream = upstream;
    match forward {
        None => reader.get_mut().write_all(b"HTTP/1.1 200 Connection established\r\n\r\n").await?,
        Some(head) => upstream.write_all(head.as_bytes()).await?,
    }
    // Bytes the client sent after its head (buffered by the reader) go first.
    let buffered = reader.buffer().to_vec();
    upstream.write_all(&buffered).await?;
    let mut client = reader.into_inner();
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

/// The token line and the request head, up to the blank line.
async fn read_head(reader: &mut BufReader<UnixStream>) -> io::Result<String> {
    let mut head = String::new();
    loop {
        let before = head.len();
        let read = (&mut *reader).take((MAX_HEAD - before.min(MAX_HEAD)) as u64).read_line(&mut head).await?;
        if read == 0 || head.len() >= MAX_HEAD {
            return Err(io::Error::other("the request head is cut short or too big"));
        }
        // The first line is the token; the head ends with an empty line after the request line.
        let line = &head[before..];
        if (line == "\r\n" || line == "\n") && head.lines().count() > 2 {
            return Ok(head);
        }
    }
}

/// Resolve `authority` (`host:port`), refuse it when any address is special, and connect to a
/// checked one.
async fn connect_guarded(authority: &str, guard: AddressPolicy) -> Result<TcpStream, String> {
    let addresses: Vec<SocketAddr> =
        tokio::net::lookup_host(authority).await.map_err(|e| format!("cannot resolve {authority}: {e}"))?.collect();
    if addresses.is_empty() {
        return Err(format!("{authority} has no address"));
    }
    for address in &addresses {
        if test_target(*address) {
            continue;
        }
        if let Err(special) = guard.check(address.ip()) {
            return Err(format!("{authority} resolves to {} ({special}), which commands may not reach", address.ip()));
        }
    }
    let mut last = String::new();
    for address in addresses {
        match tokio::time::timeout(HEAD_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => return Ok(stream),
            Ok(Err(e)) => last = e.to_string(),
            Err(_) => last = "timed out".into(),
        }
    }
    Err(format!("cannot connect to {authority}: {last}"))
}

/// Test builds: `sandbox.proxy_test_port=value(PORT)` lets the proxy reach 127.0.0.1:PORT (and
/// nothing else on loopback), standing for a public package index in tests of the real daemon.
#[cfg(feature = "failpoints")]
fn test_target(address: SocketAddr) -> bool {
    address.ip().is_loopback()
        && crate::failpoint::value("sandbox.proxy_test_port").is_some_and(|port| port == address.port().to_string())
}

#[cfg(not(feature = "failpoints"))]
fn test_target(_address: SocketAddr) -> bool {
    false
}

async fn refuse(mut reader: BufReader<UnixStream>, status: &str, why: &str) -> io::Result<()> {
    let body = format!("hermesd egress proxy: {why}\n");
    let reply = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
    reader.get_mut().write_all(reply.as_bytes()).await?;
    reader.get_mut().shutdown().await
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
