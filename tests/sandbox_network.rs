//! What a sandboxed command reaches on the network, run as an unprivileged user (CI runs as
//! root, and root changes what namespaces and Landlock allow): neither a fake keyless API nor a
//! fake signal-cli on 127.0.0.1 sees a connection, directly or through the egress proxy, which
//! refuses loopback targets; the command is told to use the proxy. Everything stays on loopback.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use hermesd::config::SandboxMode;
use hermesd::net_guard::AddressPolicy;
use hermesd::sandbox::{EgressProxy, Policy, Sandbox};

/// Uid and gid the command runs as when the tests run as root.
const NOBODY: u32 = 65534;

/// A fake loopback service (the API's `/admin/send`, signal-cli's JSON-RPC) that records
/// whether anything connected.
fn fake_service() -> TcpListener {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    listener
}

fn was_contacted(listener: &TcpListener) -> bool {
    listener.accept().is_ok()
}

/// Run `script` through the helper as the sandbox would, as `nobody` when this test is root.
fn run_as_unprivileged(sandbox: &Sandbox, policy: &Policy, script: &str) -> String {
    let helper = sandbox.command(policy, "sh").unwrap();
    let root = rustix::process::geteuid().is_root();
    let mut command = if root {
        let mut setpriv = Command::new("setpriv");
        setpriv.args([format!("--reuid={NOBODY}"), format!("--regid={NOBODY}"), "--clear-groups".into(), "--".into()]);
        setpriv.arg(helper.get_program()).args(helper.get_args());
        setpriv
    } else {
        helper
    };
    command.arg("-c").arg(script).env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command.envs(sandbox.helper_env()).current_dir(policy.workdir.as_ref().unwrap());
    let output = command.output().unwrap();
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// A home the unprivileged user cannot read and a workdir it owns; the proxy's socket open to it.
fn layout(root: &Path) -> (PathBuf, PathBuf) {
    std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (home, workdir) = (root.join("home"), root.join("work"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&workdir).unwrap();
    if rustix::process::geteuid().is_root() {
        std::os::unix::fs::chown(&workdir, Some(NOBODY), Some(NOBODY)).unwrap();
    }
    (home, workdir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_reaches_no_loopback_service_directly_or_through_the_proxy() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (home, workdir) = layout(&root);
    let socket = root.join("egress.sock");
    let proxy = EgressProxy::start(&socket, AddressPolicy::new(false)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sandbox = Sandbox::new(SandboxMode::Landlock, Some(PathBuf::from(env!("CARGO_BIN_EXE_hermesd"))));
    eprintln!("{}", sandbox.describe());
    sandbox.namespaces().expect("this kernel gives an unprivileged user namespaces");
    let sandbox = sandbox.with_proxy(proxy);
    let policy = Policy {
        read: vec![PathBuf::from("/")],
        deny_read: vec![home],
        workdir: Some(workdir),
        network: true,
        ..Policy::default()
    };
    let (api, signal) = (fake_service(), fake_service());
    let (api_port, signal_port) = (api.local_addr().unwrap().port(), signal.local_addr().unwrap().port());
    let script = format!(
        "id -u; curl -sS -m 3 --noproxy '*' -X POST http://127.0.0.1:{api_port}/admin/send; echo \"direct=$?\"; \
         curl -sS -m 3 --noproxy '*' http://localhost:{signal_port}/api/v1/rpc; echo \"direct6=$?\"; \
         curl -sS -m 5 -p http://127.0.0.1:{signal_port}/api/v1/rpc; echo \"proxied=$?\"; \
         curl -sSf -m 5 http://127.0.0.1:{api_port}/admin/send; echo \"plain=$?\"; echo \"proxy=$HTTPS_PROXY\""
    );
    let out = run_as_unprivileged(&sandbox, &policy, &script);
    eprintln!("{out}");
    if rustix::process::geteuid().is_root() {
        assert!(out.starts_with(&format!("{NOBODY}\n")), "ran as the unprivileged user: {out}");
    }
    assert!(out.contains("direct=7") && out.contains("direct6=7"), "direct connects fail: {out}");
    assert!(out.contains("proxy=http://127.0.0.1:"), "the command is told about the proxy: {out}");
    assert!(out.contains("403") && !out.contains("proxied=0") && !out.contains("plain=0"), "{out}");
    std::thread::sleep(Duration::from_millis(200));
    assert!(!was_contacted(&api), "the fake API saw a connection from a command");
    assert!(!was_contacted(&signal), "the fake signal-cli saw a connection from a command");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_network_the_proxy_is_not_offered_and_its_socket_refuses_strangers() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (home, workdir) = layout(&root);
    let socket = root.join("egress.sock");
    let proxy = EgressProxy::start(&socket, AddressPolicy::new(false)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o777)).unwrap();
    let sandbox =
        Sandbox::new(SandboxMode::Landlock, Some(PathBuf::from(env!("CARGO_BIN_EXE_hermesd")))).with_proxy(proxy);
    let policy = Policy {
        read: vec![PathBuf::from("/")],
        deny_read: vec![home],
        workdir: Some(workdir),
        network: false,
        ..Policy::default()
    };
    // Knowing the socket's path is not enough: without the token the proxy says nothing.
    let script = format!(
        "echo \"proxy=${{HTTPS_PROXY:-none}}\"; printf 'x\\nCONNECT example.com:443 HTTP/1.1\\r\\n\\r\\n' \
         | python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(\"{}\"); \
         s.sendall(sys.stdin.buffer.read()); s.settimeout(3); print(\"reply=\" + repr(s.recv(100)))'",
        socket.display()
    );
    let out = run_as_unprivileged(&sandbox, &policy, &script);
    assert!(out.contains("proxy=none") && out.contains("reply=b''"), "{out}");
}
