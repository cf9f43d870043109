//! The whole daemon as an unprivileged user (CI runs as root, and root changes what namespaces
//! and Landlock allow): the real binary, a fake model that calls `terminal`, and the command
//! aiming at what it must not reach — the daemon's own keyless API (`/admin/send`,
//! `/v1/chat/completions` as another user) and a fake signal-cli JSON-RPC on 127.0.0.1 — and at
//! what it may: a download through the egress proxy (the CONNECT tunnel `pip download` uses).
//! Run with namespaces (the normal case), with Landlock alone (namespaces switched off by a
//! test-build failpoint: connects held to the proxy's port), and on a kernel that offers
//! neither (a failpoint lowers the reported Landlock ABI to 3): then a keyless API is refused at
//! start with exit 78, and `hermesd check` warns. Everything stays on 127.0.0.1.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;
use support::FakeLlm;

/// Uid and gid the daemon runs as when the tests run as root.
const NOBODY: u32 = 65534;

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A directory the unprivileged user can use: the binary (linked in, since the build's own
/// target dir may sit under a home it cannot enter) and a home it owns.
struct Layout {
    _dir: tempfile::TempDir,
    bin: PathBuf,
    home: PathBuf,
}

impl Layout {
    fn new(config: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        // `HERMESD_TEST_BIN` runs another build (e.g. an older one, to see these tests fail).
        let source = std::env::var("HERMESD_TEST_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_hermesd").to_owned());
        let bin = root.join("hermesd");
        if std::fs::hard_link(&source, &bin).is_err() {
            std::fs::copy(&source, &bin).unwrap();
        }
        let home = root.join("home");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::write(home.join("config.toml"), config).unwrap();
        if is_root() {
            for path in [&home, &home.join("config.toml")] {
                std::os::unix::fs::chown(path, Some(NOBODY), Some(NOBODY)).unwrap();
            }
        }
        Self { _dir: dir, bin, home }
    }

    /// `hermesd <args>` as the unprivileged user, with `failpoints` armed.
    fn command(&self, failpoints: &str, args: &[&str]) -> Command {
        let mut command = if is_root() {
            let mut setpriv = Command::new("setpriv");
            setpriv.args([
                format!("--reuid={NOBODY}"),
                format!("--regid={NOBODY}"),
                "--clear-groups".into(),
                "--".into(),
            ]);
            setpriv.arg(&self.bin);
            setpriv
        } else {
            Command::new(&self.bin)
        };
        command.arg("--home").arg(&self.home).args(args);
        command.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
        command.env("HOME", &self.home).env("HERMESD_LOG", "info").env("HERMESD_FAILPOINTS", failpoints);
        command.stdin(Stdio::null());
        command
    }

    fn log(&self) -> PathBuf {
        self.home.parent().unwrap().join("daemon.log")
    }
}

/// An unused port on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A fake loopback service that records whether anything connected.
fn fake_service() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

/// A one-file package index on 127.0.0.1, standing for a public one: answers every request with
/// `PACKAGE`, on a thread of its own.
const PACKAGE: &str = "hermesd-test-package-1.0";

fn package_index() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let mut head = [0u8; 1024];
            let _ = stream.read(&mut head);
            let reply =
                format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{PACKAGE}", PACKAGE.len());
            let _ = stream.write_all(reply.as_bytes());
        }
    });
    port
}

fn config(llm: &FakeLlm, port: u16) -> String {
    format!(
        "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\n\
         name = \"fake-model\"\ntimeout = \"30s\"\n",
        llm.base_url()
    )
}

struct Running {
    child: Child,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start the daemon as the unprivileged user and wait until it is ready on `port`.
async fn start(layout: &Layout, failpoints: &str, port: u16) -> Running {
    let log = std::fs::File::create(layout.log()).unwrap();
    let child = layout.command(failpoints, &["run"]).stdout(Stdio::null()).stderr(log).spawn().unwrap();
    let running = Running { child };
    let url = format!("http://127.0.0.1:{port}/readyz");
    let ready = support::eventually_async(Duration::from_secs(20), || async {
        support::client().get(&url).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;
    assert!(ready, "the daemon did not become ready; its log:\n{}", std::fs::read_to_string(layout.log()).unwrap());
    running
}

/// What the terminal command printed, as the model saw it in its tool result.
fn tool_output(llm: &FakeLlm) -> String {
    llm.requests()
        .iter()
        .flat_map(|request| request["messages"].as_array().cloned().unwrap_or_default())
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// One turn in which the model runs the probe command; returns what the command printed and
/// the sandbox line of `/readyz`.
async fn probe(failpoints_extra: &str) -> (String, String) {
    let (api_port, signal, index) = (free_port(), fake_service(), package_index());
    let signal_port = signal.local_addr().unwrap().port();
    let script = format!(
        "id -u; \
         curl -sS -m 3 --noproxy '*' -X POST http://127.0.0.1:{api_port}/admin/send -d '{{}}'; echo \"admin=$?\"; \
         curl -sS -m 3 --noproxy '*' http://127.0.0.1:{api_port}/v1/chat/completions -H 'content-type: application/json' \
           -d '{{\"model\":\"m\",\"user\":\"victim\",\"messages\":[{{\"role\":\"user\",\"content\":\"hi\"}}]}}'; echo \"v1=$?\"; \
         curl -sS -m 3 --noproxy '*' http://127.0.0.1:{signal_port}/api/v1/rpc; echo \"signal=$?\"; \
         curl -sS -m 5 -p http://127.0.0.1:{api_port}/healthz; echo \"proxied_api=$?\"; \
         curl -sSf -m 10 -p -o pkg http://127.0.0.1:{index}/simple/pkg; echo \"download=$?\"; cat pkg; echo"
    );
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", &json!({ "command": script }).to_string())])
        .reply("done")
        .start()
        .await;
    let layout = Layout::new(&config(&llm, api_port));
    let failpoints = format!("sandbox.proxy_test_port=value({index}){failpoints_extra}");
    let daemon = start(&layout, &failpoints, api_port).await;
    let ready: serde_json::Value = support::client()
        .get(format!("http://127.0.0.1:{api_port}/readyz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sandbox = ready["sandbox"].as_str().unwrap_or_default().to_owned();
    let (status, body) = support::ask(&format!("http://127.0.0.1:{api_port}"), Some("probe"), "run the probe").await;
    let log = std::fs::read_to_string(layout.log()).unwrap_or_default();
    assert_eq!(status, 200, "{body}\n{log}");
    assert_eq!(support::answer(&body), "done", "{body}");
    drop(daemon);
    std::thread::sleep(Duration::from_millis(100));
    assert!(signal.accept().is_err(), "the fake signal-cli saw a connection from a command");
    let out = tool_output(&llm);
    eprintln!("{out}");
    if is_root() {
        assert!(out.contains(&format!("\n{NOBODY}\n")), "the command ran as the unprivileged user: {out}");
    }
    (out, sandbox)
}

/// What must hold whichever way the command is held in.
fn assert_contained(out: &str) {
    for refused in ["admin=7", "v1=7", "signal=7"] {
        assert!(out.contains(refused), "{refused}: the command connected to a loopback service:\n{out}");
    }
    assert!(!out.contains("proxied_api=0") && out.contains("403"), "the proxy let a loopback target through:\n{out}");
    assert!(out.contains("download=0") && out.contains(PACKAGE), "a download through the proxy failed:\n{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unprivileged_daemons_commands_reach_only_the_proxy() {
    let (out, sandbox) = probe("").await;
    assert!(sandbox.contains("namespaces of their own"), "{sandbox}");
    assert_contained(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_landlock_alone_commands_reach_only_the_proxy() {
    let (out, sandbox) = probe(";sandbox.namespaces=error").await;
    assert!(sandbox.contains("no namespaces for commands"), "{sandbox}");
    assert_contained(&out);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_namespaces_or_landlock_tcp_a_keyless_api_is_refused_and_check_warns() {
    let llm = FakeLlm::builder().start().await;
    let port = free_port();
    let layout = Layout::new(&config(&llm, port));
    let lesser = "sandbox.namespaces=error;sandbox.landlock_abi=value(3)";

    let out = layout.command(lesser, &["check"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: commands get no user, network and pid namespaces"), "{stderr}");
    assert!(stderr.contains("Landlock ABI 3 here: commands' TCP bind and connect are not restricted"), "{stderr}");

    let out = layout.command(lesser, &["run"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(78), "{stderr}");
    assert!(stderr.contains("terminal commands could reach the keyless API on loopback"), "{stderr}");

    // The same kernel with a key: the API no longer trusts loopback, so the daemon starts.
    let key = "sk-test-0123456789abcdef";
    let mut keyed = layout.command(lesser, &["run"]);
    keyed.env("API_SERVER_KEY", key);
    let log = std::fs::File::create(layout.log()).unwrap();
    let running = Running { child: keyed.stdout(Stdio::null()).stderr(log).spawn().unwrap() };
    let url = format!("http://127.0.0.1:{port}/readyz");
    let ready = support::eventually_async(Duration::from_secs(20), || async {
        support::client().get(&url).send().await.is_ok_and(|r| r.status() == 200)
    })
    .await;
    assert!(ready, "{}", std::fs::read_to_string(layout.log()).unwrap());
    drop(running);
}

/// An upgrade replaces the binary under a running daemon (`install`, a package manager: a new
/// file renamed over the old path). The daemon's commands still run through the sandbox helper,
/// which is the binary the daemon was started from, not whatever the path now holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commands_still_run_after_the_binary_is_replaced_under_the_daemon() {
    let port = free_port();
    let llm = FakeLlm::builder()
        .tool_calls(&[("terminal", &json!({ "command": "echo still-sandboxed; id -u" }).to_string())])
        .reply("done")
        .start()
        .await;
    let layout = Layout::new(&config(&llm, port));
    let daemon = start(&layout, "", port).await;
    // The new "version": a program that fails whatever it is asked, renamed over the old path.
    let next = layout.bin.with_file_name("hermesd.new");
    std::fs::write(&next, "#!/bin/sh\necho 'not the running daemon' >&2\nexit 97\n").unwrap();
    std::fs::set_permissions(&next, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::rename(&next, &layout.bin).unwrap();

    let (status, body) = support::ask(&format!("http://127.0.0.1:{port}"), Some("upgrade"), "run it").await;
    let log = std::fs::read_to_string(layout.log()).unwrap_or_default();
    assert_eq!(status, 200, "{body}\n{log}");
    assert_eq!(support::answer(&body), "done", "{body}");
    let out = tool_output(&llm);
    assert!(out.contains("still-sandboxed"), "the command did not run after the upgrade:\n{out}\n{log}");
    assert!(!out.contains("not the running daemon"), "the replaced file ran as the helper:\n{out}");
    drop(daemon);
}
