//! The test MCP server over stdio (built by `cargo test` as the example `mcp_fixture`).
//!
//! With `FIXTURE_PIDS=FILE` it first starts a grandchild (`sleep 300`, as launchers like `uvx`
//! do) and writes "<own pid> <grandchild pid>" to FILE, so a test can check neither survives.

#[path = "mcp_server.rs"]
mod mcp_server;

use rmcp::ServiceExt;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let _grandchild = std::env::var_os("FIXTURE_PIDS").map(|file| {
        let child = std::process::Command::new("sleep")
            .arg("300")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("start the grandchild");
        std::fs::write(file, format!("{} {}\n", std::process::id(), child.id())).expect("write the pid file");
        child
    });
    let server = mcp_server::TestServer::from_env();
    match server.serve(rmcp::transport::stdio()).await {
        Ok(service) => {
            let _ = service.waiting().await;
        }
        Err(e) => eprintln!("mcp fixture: {e}"),
    }
}
