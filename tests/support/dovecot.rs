//! A real Dovecot IMAP server for the e-mail tests, started directly (`dovecot -F -c <config>`,
//! no systemd) in a temp dir: plain IMAP on 127.0.0.1:<free port>, one passwd-file user, maildir
//! storage. `scripts/test-deps.sh` installs Dovecot; a missing Dovecot fails the test with a
//! clear message rather than skipping it.
//!
//! A small raw IMAP client (LOGIN, APPEND, CREATE, DELETE, UID FETCH FLAGS) plays the outside
//! world: it delivers mail by APPEND and looks at flags.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::process::{Child, Command};

/// A running Dovecot.
pub struct Dovecot {
    port: u16,
    user: String,
    password: String,
    dir: tempfile::TempDir,
    child: Child,
}

fn dovecot_binary() -> PathBuf {
    for candidate in ["/usr/sbin/dovecot", "/usr/local/sbin/dovecot"] {
        if std::path::Path::new(candidate).exists() {
            return candidate.into();
        }
    }
    panic!("dovecot is not installed: run scripts/test-deps.sh (it installs Debian's dovecot-imapd), then the tests")
}

impl Dovecot {
    /// Starts Dovecot with one user.
    pub async fn start(user: &str, password: &str) -> Self {
        Self::start_with(user, password, "").await
    }

    /// Starts Dovecot advertising no IDLE, so clients must poll.
    pub async fn start_without_idle(user: &str, password: &str) -> Self {
        Self::start_with(
            user,
            password,
            "imap_capability = IMAP4rev1 LITERAL+ SASL-IR LOGIN-REFERRALS ID ENABLE UIDPLUS\n",
        )
        .await
    }

    async fn start_with(user: &str, password: &str, extra: &str) -> Self {
        let binary = dovecot_binary();
        let dir = tempfile::tempdir().expect("dovecot dir");
        let root = dir.path();
        for sub in ["run", "state", "mail"] {
            std::fs::create_dir_all(root.join(sub)).expect("dovecot subdir");
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).expect("free port").port();
        let (mut uid, mut gid) = (rustix::process::getuid().as_raw(), rustix::process::getgid().as_raw());
        // Dovecot refuses to run its login and internal processes as root; Debian's package
        // creates `dovenull` and `dovecot` for that. As any other user, everything runs as them.
        let (login_user, internal_user) =
            if uid == 0 { ("dovenull".to_owned(), "dovecot".to_owned()) } else { (users_name(uid), users_name(uid)) };
        // The unprivileged login processes must reach the sockets under base_dir.
        use std::os::unix::fs::PermissionsExt;
        for path in [root.to_path_buf(), root.join("run")] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod dovecot dir");
        }
        if uid == 0 {
            // Mail processes may not run as root either: the mail belongs to `dovecot`.
            (uid, gid) = ids_of("dovecot").expect("the dovecot user (created by the dovecot-core package)");
            let owner = (Some(rustix::fs::Uid::from_raw(uid)), Some(rustix::fs::Gid::from_raw(gid)));
            rustix::fs::chown(root.join("mail"), owner.0, owner.1).expect("chown the mail dir");
        }
        std::fs::write(
            root.join("passwd"),
            format!("{user}:{{PLAIN}}{password}:{uid}:{gid}::{}::\n", root.join("mail").display()),
        )
        .expect("passwd file");
        let config = format!(
            "base_dir = {root}/run\nstate_dir = {root}/state\nlog_path = {root}/dovecot.log\n\
             protocols = imap\nlisten = 127.0.0.1\nssl = no\ndisable_plaintext_auth = no\n\
             auth_mechanisms = plain login\nfirst_valid_uid = 0\nfirst_valid_gid = 0\n\
             default_internal_user = {internal_user}\ndefault_login_user = {login_user}\n\
             mail_location = maildir:{root}/mail/%u\n\
             passdb {{\n  driver = passwd-file\n  args = scheme=PLAIN {root}/passwd\n}}\n\
             userdb {{\n  driver = static\n  args = uid={uid} gid={gid} home={root}/mail/%u\n}}\n\
             service imap-login {{\n  inet_listener imap {{\n    address = 127.0.0.1\n    port = {port}\n  }}\n  \
             inet_listener imaps {{\n    port = 0\n  }}\n}}\n\
             service anvil {{\n  chroot =\n}}\nservice imap-login {{\n  chroot =\n}}\n\
             service pop3-login {{\n  chroot =\n}}\nservice submission-login {{\n  chroot =\n}}\n",
            root = root.display(),
        );
        let config_path = root.join("dovecot.conf");
        std::fs::write(&config_path, format!("{config}{extra}")).expect("dovecot config");
        let child = Command::new(&binary)
            .arg("-F")
            .arg("-c")
            .arg(&config_path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        let dovecot = Self { port, user: user.to_owned(), password: password.to_owned(), dir, child };
        dovecot.wait_ready().await;
        dovecot
    }

    async fn wait_ready(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while tokio::time::Instant::now() < deadline {
            if let Ok(stream) = TcpStream::connect(("127.0.0.1", self.port)).await {
                let mut reader = BufReader::new(stream);
                let mut line = String::new();
                if reader.read_line(&mut line).await.is_ok() && line.starts_with("* OK") {
                    return;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("dovecot did not answer on 127.0.0.1:{}; its log:\n{}", self.port, self.log());
    }

    /// Dovecot's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("dovecot.log")).unwrap_or_default()
    }

    /// `imap://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("imap://127.0.0.1:{}", self.port)
    }

    /// A logged-in raw client.
    pub async fn client(&self) -> RawImap {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).await.expect("connect dovecot");
        let mut client = RawImap { stream: BufReader::new(stream), tag: 0 };
        client.line().await;
        client.command(&format!("LOGIN \"{}\" \"{}\"", self.user, self.password)).await;
        client
    }

    /// Delivers `raw` into `folder`.
    pub async fn append(&self, folder: &str, raw: &str) {
        self.client().await.append(folder, raw).await;
    }

    /// Deletes and recreates `folder` (a new UIDVALIDITY), putting `keep` back into it.
    pub async fn recreate(&self, folder: &str, keep: &[String]) {
        let mut client = self.client().await;
        client.command(&format!("DELETE \"{folder}\"")).await;
        client.command(&format!("CREATE \"{folder}\"")).await;
        for raw in keep {
            client.append(folder, raw).await;
        }
    }

    /// Creates `folder`.
    pub async fn create(&self, folder: &str) {
        self.client().await.command(&format!("CREATE \"{folder}\"")).await;
    }

    /// (UID, seen) of every message in `folder`.
    pub async fn seen(&self, folder: &str) -> Vec<(u32, bool)> {
        let mut client = self.client().await;
        client.command(&format!("EXAMINE \"{folder}\"")).await;
        let lines = client.command("UID FETCH 1:* (UID FLAGS)").await;
        lines
            .iter()
            .filter(|l| l.contains("FETCH"))
            .filter_map(|l| {
                let uid = l.split("UID ").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()?;
                Some((uid, l.contains("\\Seen")))
            })
            .collect()
    }

    /// The folder's UIDVALIDITY.
    pub async fn uid_validity(&self, folder: &str) -> u32 {
        let mut client = self.client().await;
        let lines = client.command(&format!("STATUS \"{folder}\" (UIDVALIDITY)")).await;
        lines
            .iter()
            .find_map(|l| l.split("UIDVALIDITY ").nth(1)?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
            .expect("uidvalidity")
    }
}

impl Drop for Dovecot {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A minimal IMAP client for the tests' own use.
pub struct RawImap {
    stream: BufReader<TcpStream>,
    tag: u32,
}

impl RawImap {
    async fn line(&mut self) -> String {
        let mut line = String::new();
        self.stream.read_line(&mut line).await.expect("imap read");
        line
    }

    /// Runs `command`, returning the untagged lines; panics on NO/BAD.
    pub async fn command(&mut self, command: &str) -> Vec<String> {
        self.tag += 1;
        let tag = format!("t{}", self.tag);
        self.stream.get_mut().write_all(format!("{tag} {command}\r\n").as_bytes()).await.expect("imap write");
        self.finish(&tag, command).await
    }

    async fn finish(&mut self, tag: &str, command: &str) -> Vec<String> {
        let mut lines = Vec::new();
        loop {
            let line = self.line().await;
            assert!(!line.is_empty(), "imap connection closed during {command}");
            if let Some(status) = line.strip_prefix(&format!("{tag} ")) {
                assert!(status.starts_with("OK"), "{command}: {status}");
                return lines;
            }
            lines.push(line);
        }
    }

    /// APPENDs `raw` (CRLF line ends expected) to `folder`.
    pub async fn append(&mut self, folder: &str, raw: &str) {
        self.tag += 1;
        let tag = format!("t{}", self.tag);
        let head = format!("{tag} APPEND \"{folder}\" {{{}}}\r\n", raw.len());
        self.stream.get_mut().write_all(head.as_bytes()).await.expect("imap write");
        let go = self.line().await;
        assert!(go.starts_with('+'), "APPEND continuation: {go}");
        self.stream.get_mut().write_all(raw.as_bytes()).await.expect("imap write");
        self.stream.get_mut().write_all(b"\r\n").await.expect("imap write");
        self.finish(&tag, "APPEND").await;
    }
}

fn users_name(uid: u32) -> String {
    name_in("/etc/passwd", uid).unwrap_or_else(|| "root".into())
}

fn ids_of(name: &str) -> Option<(u32, u32)> {
    let text = std::fs::read_to_string("/etc/passwd").ok()?;
    text.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(':').collect();
        (fields.first()? == &name).then(|| Some((fields.get(2)?.parse().ok()?, fields.get(3)?.parse().ok()?)))?
    })
}

fn name_in(file: &str, id: u32) -> Option<String> {
    let text = std::fs::read_to_string(file).ok()?;
    text.lines().find_map(|l| {
        let fields: Vec<&str> = l.split(':').collect();
        (fields.get(2)?.parse::<u32>().ok()? == id).then(|| fields[0].to_owned())
    })
}
