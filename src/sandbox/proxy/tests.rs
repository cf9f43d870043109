//! The egress proxy against fakes on 127.0.0.1: loopback refused by the real guard, tunnelled
//! when a test-only guard allows it, nothing served without the token.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use super::*;

/// A fake service on 127.0.0.1 that answers `pong` to anything and counts its connections.
async fn fake_service() -> (u16, Arc<std::sync::atomic::AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut buf = [0u8; 64];
            let _ = stream.read(&mut buf).await;
            let _ = stream.write_all(b"pong").await;
        }
    });
    (port, seen)
}

async fn ask(proxy: &EgressProxy, token: &str, request: &str) -> String {
    let mut stream = UnixStream::connect(proxy.socket()).await.unwrap();
    stream.write_all(format!("{token}\n{request}").as_bytes()).await.unwrap();
    let mut reply = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut reply)).await;
    String::from_utf8_lossy(&reply).into_owned()
}

#[tokio::test]
async fn loopback_targets_are_refused_and_never_contacted() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = EgressProxy::start(&dir.path().join("p.sock"), AddressPolicy::new(false)).unwrap();
    let (port, seen) = fake_service().await;
    for target in [format!("127.0.0.1:{port}"), format!("localhost:{port}"), format!("[::1]:{port}")] {
        let reply = ask(&proxy, proxy.token(), &format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n")).await;
        assert!(reply.starts_with("HTTP/1.1 403"), "{target}: {reply}");
    }
    let plain = ask(&proxy, proxy.token(), &format!("GET http://127.0.0.1:{port}/admin/send HTTP/1.1\r\n\r\n")).await;
    assert!(plain.starts_with("HTTP/1.1 403"), "{plain}");
    for special in ["169.254.169.254:80", "10.0.0.1:443", "[fe80::1]:443"] {
        let reply = ask(&proxy, proxy.token(), &format!("CONNECT {special} HTTP/1.1\r\n\r\n")).await;
        assert!(reply.starts_with("HTTP/1.1 403"), "{special}: {reply}");
    }
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 0, "the fake service saw a connection");
}

#[tokio::test]
async fn an_allowed_target_is_tunnelled_and_the_token_is_required() {
    let dir = tempfile::tempdir().unwrap();
    let proxy = EgressProxy::start(&dir.path().join("p.sock"), AddressPolicy::allow_loopback_for_tests()).unwrap();
    let (port, seen) = fake_service().await;
    let reply = ask(&proxy, proxy.token(), &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nping")).await;
    assert!(reply.starts_with("HTTP/1.1 200") && reply.ends_with("pong"), "{reply}");
    let plain = ask(&proxy, proxy.token(), &format!("GET http://127.0.0.1:{port}/x HTTP/1.1\r\nHost: h\r\n\r\n")).await;
    assert_eq!(plain, "pong");
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2);
    let stolen = ask(&proxy, "not-the-token", &format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n")).await;
    assert_eq!(stolen, "", "no answer without the token");
    assert_eq!(seen.load(std::sync::atomic::Ordering::SeqCst), 2);
}
