//! An outage gate: a loopback TCP forwarder in front of a fake server, so the soak can make the
//! fake "go away" (its port refuses connections, open connections are cut) and come back on
//! the same port while the fake's own state (updates, sent messages) survives.
//!
//! Going down stops forwarding requests at once but lets answers already asked for drain for
//! a moment before connections are cut: a request the fake fully received gets its answer, so
//! an outage never makes the daemon resend something the fake already recorded.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// How long answers may still flow back once the gate starts going down.
const DRAIN: Duration = Duration::from_millis(300);
/// How long rebinding the port is retried when coming back.
const REBIND_TIMEOUT: Duration = Duration::from_secs(10);

/// A gate in front of `upstream`, listening on a fixed loopback port.
pub struct Gate {
    port: u16,
    upstream: SocketAddr,
    /// `true` while the gate is down; connection tasks watch it.
    down: watch::Sender<bool>,
    /// The accept loop and its connections while up.
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl Gate {
    /// Open a gate on a free loopback port in front of `upstream`.
    pub async fn open(upstream: SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind a gate");
        let port = listener.local_addr().expect("gate address").port();
        let (down, _) = watch::channel(false);
        let mut gate = Self { port, upstream, down, serving: None };
        gate.serve(listener);
        gate
    }

    /// `http://127.0.0.1:PORT`, the address the daemon is given instead of the fake's.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Whether the gate is down now.
    pub fn is_down(&self) -> bool {
        *self.down.borrow()
    }

    /// Refuse new connections and cut the open ones (after a short drain of answers).
    pub async fn go_down(&mut self) {
        let Some(serving) = self.serving.take() else { return };
        self.down.send_replace(true);
        // The accept loop owns the connections: it drains them, then ends, taking the listener.
        let _ = serving.await;
    }

    /// Listen on the same port again.
    pub async fn come_back(&mut self) {
        if self.serving.is_some() {
            return;
        }
        let deadline = tokio::time::Instant::now() + REBIND_TIMEOUT;
        let listener = loop {
            match TcpListener::bind(("127.0.0.1", self.port)).await {
                Ok(listener) => break listener,
                Err(e) if tokio::time::Instant::now() < deadline => {
                    eprintln!("soak: rebinding gate port {}: {e}; retrying", self.port);
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("gate port {} could not be bound again: {e}", self.port),
            }
        };
        self.down.send_replace(false);
        self.serve(listener);
    }

    fn serve(&mut self, listener: TcpListener) {
        let upstream = self.upstream;
        let down = self.down.subscribe();
        let mut stop = self.down.subscribe();
        self.serving = Some(tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        if let Ok((client, _)) = accepted {
                            connections.spawn(forward(client, upstream, down.clone()));
                        }
                    }
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                    _ = stop.wait_for(|d| *d) => break,
                }
            }
            drop(listener);
            // Each connection drains its answers for `DRAIN`, then ends; the rest are cut.
            let _ = tokio::time::timeout(DRAIN * 2, async { while connections.join_next().await.is_some() {} }).await;
            connections.shutdown().await;
        }));
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }
}

/// Copy bytes both ways until either side closes or the gate goes down; then stop reading
/// requests, let answers flow for `DRAIN`, and close.
async fn forward(client: TcpStream, upstream: SocketAddr, mut down: watch::Receiver<bool>) {
    let Ok(server) = TcpStream::connect(upstream).await else { return };
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let requests = async {
        let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
        let _ = server_write.shutdown().await;
        // A client that closed its side may still be reading the answer.
        std::future::pending::<()>().await
    };
    let answers = async {
        let _ = tokio::io::copy(&mut server_read, &mut client_write).await;
        let _ = client_write.shutdown().await;
    };
    tokio::pin!(answers);
    tokio::select! {
        () = requests => {}
        () = &mut answers => return,
        _ = down.wait_for(|d| *d) => {}
    }
    // Down: requests are no longer read; answers already asked for get a moment to arrive.
    let _ = tokio::time::timeout(DRAIN, &mut answers).await;
}
