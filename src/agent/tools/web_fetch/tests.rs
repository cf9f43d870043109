//! Web fetch tests against a local axum server on 127.0.0.1:0 and `html_to_text` as unit tests;
//! DNS rebinding and redirect checks with a scripted resolver are in `rebinding.rs`.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::response::{Html, IntoResponse, Redirect};
use axum::routing::get;

use super::*;
use crate::agent::tools::Nobody;
use crate::agent::tools::test_support;

const PAGE: &str = "<!DOCTYPE html><html><head><title>Test &amp; Page</title>\
    <style>body { color: red }</style><script>alert('x < y')</script></head>\
    <body><h1>Hello</h1><p>First&nbsp;para with <b>bold</b> and &lt;tags&gt;.</p>\
    <!-- hidden comment --><ul><li>one</li><li>two</li></ul><noscript>enable js</noscript></body></html>";

async fn server() -> SocketAddr {
    let app = Router::new()
        .route("/page", get(|| async { Html(PAGE) }))
        .route("/data", get(|| async { axum::Json(json!({"a": [1, 2], "b": "x"})) }))
        .route("/text", get(|| async { "plain <b>text</b>" }))
        .route("/redirect", get(|| async { Redirect::to("/page") }))
        .route("/loop", get(|| async { Redirect::to("/loop") }))
        .route("/huge", get(|| async { "a".repeat(5 * 1024 * 1024) }))
        .route("/missing", get(|| async { (axum::http::StatusCode::NOT_FOUND, "no such page") }))
        .route("/image", get(|| async { ([(header::CONTENT_TYPE, "image/png")], vec![0u8, 1, 2]).into_response() }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

/// A tool for fakes on 127.0.0.1: the test-only loopback allowance, nothing else opened.
fn loopback_tool() -> WebFetchTool {
    let _ = rustls::crypto::ring::default_provider().install_default();
    WebFetchTool::with_lookup(AddressPolicy::allow_loopback_for_tests(), Arc::new(SystemLookup)).unwrap()
}

/// The tool as the daemon builds it: public addresses only.
fn strict_tool() -> WebFetchTool {
    let _ = rustls::crypto::ring::default_provider().install_default();
    WebFetchTool::new(AddressPolicy::default()).unwrap()
}

async fn context(dir: &tempfile::TempDir) -> ToolContext {
    test_support::context(dir.path(), dir.path().into(), dir.path().into(), Arc::new(Nobody)).await
}

#[tokio::test]
async fn fetches_html_json_text_and_follows_redirects() {
    let (addr, dir) = (server().await, tempfile::tempdir().unwrap());
    let ctx = context(&dir).await;
    let tool = loopback_tool();
    let page = tool.call(&ctx, json!({"url": format!("http://{addr}/redirect")})).await.unwrap();
    let expected =
        format!("URL: http://{addr}/page\n\nTest & Page\n\nHello\n\nFirst para with bold and <tags>.\n\n- one\n- two");
    assert_eq!(page, expected);
    let data = tool.call(&ctx, json!({"url": format!("http://{addr}/data")})).await.unwrap();
    assert_eq!(data, format!("URL: http://{addr}/data\n\n{{\"a\":[1,2],\"b\":\"x\"}}"));
    let text = tool.call(&ctx, json!({"url": format!("http://{addr}/text"), "max_chars": 5})).await.unwrap();
    assert!(text.starts_with(&format!("URL: http://{addr}/text\n\nplain\n[… truncated: showing 5 of 17")), "{text}");
}

#[tokio::test]
async fn refuses_loops_errors_binary_and_bounds_huge_bodies() {
    let (addr, dir) = (server().await, tempfile::tempdir().unwrap());
    let ctx = context(&dir).await;
    let tool = loopback_tool();
    let cases = [
        ("loop", "more than 5 redirects"),
        ("missing", "returned HTTP 404 Not Found\nno such page"),
        ("image", "is image/png, not text"),
    ];
    for (path, needle) in cases {
        let err = tool.call(&ctx, json!({"url": format!("http://{addr}/{path}")})).await.unwrap_err();
        assert!(err.to_string().contains(needle), "{path}: {err}");
    }
    let huge = tool.call(&ctx, json!({"url": format!("http://{addr}/huge"), "max_chars": 100_000})).await.unwrap();
    assert!(huge.contains("showing 100000 of 2097152 characters"), "{}", &huge[huge.len() - 300..]);
    assert!(huge.ends_with("[the body was longer than 2 MB and was cut there]"));
}

#[tokio::test]
async fn private_addresses_are_refused_by_default() {
    let (addr, dir) = (server().await, tempfile::tempdir().unwrap());
    let ctx = context(&dir).await;
    let tool = strict_tool();
    for url in [
        format!("http://{addr}/page"),
        format!("http://localhost:{}/page", addr.port()),
        "http://[::1]/".to_string(),
        "http://169.254.169.254/latest/meta-data/".to_string(),
        "http://10.1.2.3/".to_string(),
        "http://[::ffff:192.168.0.1]/".to_string(),
        format!("http://2130706433:{}/page", addr.port()),
        format!("http://0x7f.1:{}/page", addr.port()),
        "http://0.0.0.0/".to_string(),
        "http://[64:ff9b::7f00:1]/".to_string(),
        "http://[2002:7f00:1::1]/".to_string(),
        "http://[2001:0:4136:e378:8000:63bf:80ff:fffe]/".to_string(),
        "http://[fd00::1]/".to_string(),
    ] {
        let err = tool.call(&ctx, json!({"url": url})).await.unwrap_err();
        assert!(matches!(err, ToolError::Denied(_)) && err.to_string().contains("public internet"), "{url}: {err}");
    }
    for (url, needle) in [
        ("file:///etc/passwd", "only http and https"),
        ("not a url", "not a valid URL"),
        ("https://user:pw@example.com/", "user name or password"),
    ] {
        let err = tool.call(&ctx, json!({"url": url})).await.unwrap_err();
        assert!(matches!(err, ToolError::InvalidArguments(_)) && err.to_string().contains(needle), "{url}: {err}");
    }
}

#[test]
fn html_becomes_readable_text() {
    let cases = [
        ("<p>a</p><p>b</p>", "a\n\nb"),
        ("<div>x<br>y<br/>z</div>", "x\ny\nz"),
        ("a &amp; b &lt;c&gt; &quot;d&quot; &#39;e&#39; &#x41;&#66; &bogus; & f", "a & b <c> \"d\" 'e' AB &bogus; & f"),
        ("  lots   of\n\n   space\t here ", "lots of space here"),
        ("<a href=\"x>y\" title='>'>link</a> text", "link text"),
        ("1 < 2 and 3 > 2", "1 < 2 and 3 > 2"),
        ("<SCRIPT type=x>var a = '<p>';</SCRIPT>kept<style>p{}</style>", "kept"),
        ("<table><tr><td>a</td><td>b</td></tr><tr><td>c</td></tr></table>", "a b\nc"),
        ("<html><head><title> The  Title </title></head><body>Body</body></html>", "The Title\n\nBody"),
        ("<title>Only a title</title>", "Only a title"),
        ("<p>unterminated <!-- comment", "unterminated"),
        ("héllo <i>wörld</i> ✓", "héllo wörld ✓"),
    ];
    for (html, text) in cases {
        assert_eq!(html_to_text(html), text, "{html}");
    }
}
