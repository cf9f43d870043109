//! `send_file`'s downloads: through `web_fetch`'s checked client (a "public" name served from
//! 127.0.0.1 by a stand-in address), streamed into one stored copy, capped, redirects checked.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use axum::Router;
use axum::routing::get;
use hermesd_platform::FileLimits;

use super::SendFileTool;
use super::stage::OUTBOUND_DIR;
use crate::agent::tools::ToolError;
use crate::agent::tools::web_fetch::{Lookup, WebFetchTool};
use crate::outbox::{Outbox, PlatformRegistry};

const PUBLIC: &str = "93.184.216.34";

struct Public;

#[async_trait]
impl Lookup for Public {
    async fn lookup(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(vec![PUBLIC.parse().unwrap()])
    }
}

async fn tool(dir: &std::path::Path, bytes: Vec<u8>) -> SendFileTool {
    let app = Router::new()
        .route("/files/plot.png", get(move || async move { bytes.clone() }))
        .route("/go", get(|| async { axum::response::Redirect::temporary("/files/plot.png") }))
        .route("/inside", get(|| async { axum::response::Redirect::temporary("http://127.0.0.1:9/x") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    let _ = rustls::crypto::ring::default_provider().install_default();
    let fetch =
        WebFetchTool::with_stand_ins(Arc::new(Public), HashMap::from([(PUBLIC.parse().unwrap(), addr)])).unwrap();
    let store = crate::store::SqliteStore::open(&dir.join("s.db"), std::time::Duration::from_secs(1), 1).await.unwrap();
    let outbox = Outbox::new(
        Arc::new(store),
        PlatformRegistry::default(),
        Arc::default(),
        tokio_util::task::TaskTracker::new(),
        tokio_util::sync::CancellationToken::new(),
    );
    SendFileTool::new(outbox, fetch)
}

fn left_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir.join(OUTBOUND_DIR)).map(|d| d.count()).unwrap_or(0)
}

#[tokio::test]
async fn a_url_is_downloaded_through_checked_redirects_into_one_stored_copy() {
    let dir = tempfile::tempdir().unwrap();
    let png: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
    let tool = tool(dir.path(), png.clone()).await;
    let limits = FileLimits { max_document_bytes: 100_000, max_photo_bytes: 100_000 };
    let file = tool.download("http://files.example/go", dir.path(), limits).await.unwrap();
    assert_eq!((file.name.as_str(), file.mime.as_str(), file.size), ("plot.png", "image/png", 50_000));
    assert_eq!(std::fs::read(dir.path().join(&file.path)).unwrap(), png);
    assert_eq!(left_in(dir.path()), 1);

    // Over the platform's cap: refused while streaming, nothing left behind.
    let small = FileLimits { max_document_bytes: 10_000, max_photo_bytes: 10_000 };
    let err = tool.download("http://files.example/go", dir.path(), small).await.unwrap_err();
    assert!(matches!(&err, ToolError::Failed(m) if m.contains("over this platform's")), "{err}");
    assert_eq!(left_in(dir.path()), 1, "the refused download left nothing");

    // A redirect to a special address is refused like web_fetch refuses it.
    let err = tool.download("http://files.example/inside", dir.path(), limits).await.unwrap_err();
    assert!(matches!(&err, ToolError::Denied(m) if m.contains("loopback")), "{err}");
    let err = tool.download("http://user:pw@files.example/go", dir.path(), limits).await.unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments(_)));
    assert_eq!(left_in(dir.path()), 1);
}
