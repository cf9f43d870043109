//! A fake SMTP submission server on 127.0.0.1:0 speaking real SMTP (RFC 5321 + AUTH PLAIN/LOGIN,
//! RFC 4954): greeting, EHLO, AUTH, MAIL FROM, RCPT TO, DATA with dot-unstuffing, RSET, NOOP,
//! QUIT. Scripted replies let a test answer the end of DATA with a 4xx or 5xx; every submission
//! attempt is recorded with the code it got.

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use base64::Engine as _;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// One submission attempt.
#[derive(Debug, Clone)]
pub struct Submission {
    /// The authenticated user.
    pub user: String,
    /// MAIL FROM address.
    pub from: String,
    /// RCPT TO addresses.
    pub to: Vec<String>,
    /// The message as received (dot-unstuffed, CRLF line ends).
    pub data: String,
    /// The reply code given to DATA.
    pub code: u16,
}

impl Submission {
    /// The first value of header `name` (case-insensitive), unfolded.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.data.split("\r\n\r\n").next().unwrap_or_default();
        let mut lines = head.split("\r\n").peekable();
        while let Some(line) = lines.next() {
            let Some((n, v)) = line.split_once(':') else { continue };
            if n.eq_ignore_ascii_case(name) {
                let mut value = v.trim().to_owned();
                while let Some(next) = lines.peek().filter(|l| l.starts_with([' ', '\t'])) {
                    value.push(' ');
                    value.push_str(next.trim());
                    lines.next();
                }
                return Some(value);
            }
        }
        None
    }
}

#[derive(Default)]
struct Shared {
    submissions: Vec<Submission>,
    /// Replies for the next ends of DATA, e.g. "451 4.3.0 try again later".
    scripted: VecDeque<String>,
    logins: usize,
}

/// A running fake SMTP server.
#[derive(Clone)]
pub struct FakeSmtp {
    addr: SocketAddr,
    user: String,
    password: String,
    shared: Arc<Mutex<Shared>>,
}

impl FakeSmtp {
    /// Starts a server accepting `user` / `password`.
    pub async fn start(user: &str, password: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind fake smtp");
        let fake = Self {
            addr: listener.local_addr().expect("addr"),
            user: user.to_owned(),
            password: password.to_owned(),
            shared: Arc::default(),
        };
        let server = fake.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move {
                    let _ = server.serve(stream).await;
                });
            }
        });
        fake
    }

    /// `smtp://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("smtp://{}", self.addr)
    }

    /// Answer the next `n` ends of DATA with `reply` (a full line such as "550 5.7.1 no").
    pub fn answer_next(&self, n: usize, reply: &str) {
        let mut shared = self.lock();
        for _ in 0..n {
            shared.scripted.push_back(reply.to_owned());
        }
    }

    /// Every submission attempt, in order.
    pub fn attempts(&self) -> Vec<Submission> {
        self.lock().submissions.clone()
    }

    /// Submissions the server accepted (250).
    pub fn accepted(&self) -> Vec<Submission> {
        self.attempts().into_iter().filter(|s| s.code == 250).collect()
    }

    /// Successful logins.
    pub fn logins(&self) -> usize {
        self.lock().logins
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn serve(&self, stream: TcpStream) -> std::io::Result<()> {
        let (read, mut write) = stream.into_split();
        let mut lines = BufReader::new(read);
        write.write_all(b"220 fake.smtp.test ESMTP ready\r\n").await?;
        let mut user: Option<String> = None;
        let mut from = String::new();
        let mut to = Vec::new();
        loop {
            let mut line = String::new();
            if lines.read_line(&mut line).await? == 0 {
                return Ok(());
            }
            let line = line.trim_end().to_owned();
            let upper = line.to_ascii_uppercase();
            let reply: String = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
                "250-fake.smtp.test\r\n250-AUTH PLAIN LOGIN\r\n250-8BITMIME\r\n250 SIZE 52428800".into()
            } else if upper.starts_with("AUTH PLAIN") {
                let encoded = match line.split_whitespace().nth(2) {
                    Some(inline) => inline.to_owned(),
                    None => {
                        write.write_all(b"334 \r\n").await?;
                        read_line(&mut lines).await?
                    }
                };
                let decoded = decode(&encoded);
                let parts: Vec<&str> = decoded.split('\0').collect();
                self.login(
                    parts.get(1).copied().unwrap_or_default(),
                    parts.get(2).copied().unwrap_or_default(),
                    &mut user,
                )
            } else if upper.starts_with("AUTH LOGIN") {
                write.write_all(b"334 VXNlcm5hbWU6\r\n").await?;
                let name = decode(&read_line(&mut lines).await?);
                write.write_all(b"334 UGFzc3dvcmQ6\r\n").await?;
                let password = decode(&read_line(&mut lines).await?);
                self.login(&name, &password, &mut user)
            } else if upper.starts_with("MAIL FROM:") {
                if user.is_none() {
                    "530 5.7.0 authentication required".into()
                } else {
                    from = address(&line[10..]);
                    to.clear();
                    "250 2.1.0 ok".into()
                }
            } else if upper.starts_with("RCPT TO:") {
                to.push(address(&line[8..]));
                "250 2.1.5 ok".into()
            } else if upper == "DATA" {
                write.write_all(b"354 end data with <CR><LF>.<CR><LF>\r\n").await?;
                let mut data = String::new();
                loop {
                    let mut raw = String::new();
                    if lines.read_line(&mut raw).await? == 0 {
                        return Ok(());
                    }
                    let piece = raw.trim_end_matches(['\r', '\n']);
                    if piece == "." {
                        break;
                    }
                    data.push_str(piece.strip_prefix('.').unwrap_or(piece));
                    data.push_str("\r\n");
                }
                let reply = self.lock().scripted.pop_front().unwrap_or_else(|| "250 2.0.0 queued".into());
                let code = reply.get(..3).and_then(|c| c.parse().ok()).unwrap_or(250);
                let submission = Submission {
                    user: user.clone().unwrap_or_default(),
                    from: from.clone(),
                    to: to.clone(),
                    data,
                    code,
                };
                self.lock().submissions.push(submission);
                reply
            } else if upper == "RSET" {
                from.clear();
                to.clear();
                "250 2.0.0 ok".into()
            } else if upper == "NOOP" {
                "250 2.0.0 ok".into()
            } else if upper == "QUIT" {
                write.write_all(b"221 2.0.0 bye\r\n").await?;
                return Ok(());
            } else {
                "502 5.5.2 command not recognized".into()
            };
            write.write_all(format!("{reply}\r\n").as_bytes()).await?;
        }
    }

    fn login(&self, name: &str, password: &str, user: &mut Option<String>) -> String {
        if name == self.user && password == self.password {
            *user = Some(name.to_owned());
            self.lock().logins += 1;
            "235 2.7.0 authentication successful".into()
        } else {
            "535 5.7.8 authentication credentials invalid".into()
        }
    }
}

async fn read_line(lines: &mut BufReader<tokio::net::tcp::OwnedReadHalf>) -> std::io::Result<String> {
    let mut line = String::new();
    lines.read_line(&mut line).await?;
    Ok(line.trim_end().to_owned())
}

fn decode(text: &str) -> String {
    let bytes = base64::engine::general_purpose::STANDARD.decode(text.trim()).unwrap_or_default();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn address(text: &str) -> String {
    let text = text.trim();
    let inner = text.split_once('<').and_then(|(_, rest)| rest.split_once('>')).map_or(text, |(a, _)| a);
    inner.to_owned()
}
