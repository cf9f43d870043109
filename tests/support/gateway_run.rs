//! The real binary as a Telegram gateway for the crash and store-fault suites: started with
//! failpoints armed through `HERMESD_FAILPOINTS` (or re-armed at run time), fed several chats,
//! and read back for the exactly-once checker: what the fake Telegram got, what the store
//! recorded as receipts.
#![allow(dead_code, unreachable_pub)]

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

use crate::checker::Delivered;
use crate::support::fake_telegram::{Chat, FakeTelegram, User};
use crate::support::{FakeLlm, client, daemon_log};

pub const BIN: &str = env!("CARGO_BIN_EXE_hermesd");
pub const TOKEN: &str = "123:ABC";

/// One gateway home with its fakes and chats.
pub struct Gateway {
    pub home: tempfile::TempDir,
    pub port: u16,
    pub llm: FakeLlm,
    pub tg: FakeTelegram,
    pub users: Vec<User>,
    /// Per chat, the tokens sent in, in order.
    pub sent: BTreeMap<String, Vec<String>>,
}

impl Gateway {
    /// Fakes, `chats` private chats and a config with batching off (one turn per message).
    pub async fn new(chats: i64) -> Self {
        Self::with(chats, Duration::from_millis(150), "batch_window = \"0s\"\n").await
    }

    /// Fakes, `chats` private chats, a model taking `latency` per call, and `agent` as the
    /// config's `[agent]` lines beside the drain timeout; `[recovery]` lets an event run up to
    /// ten times, so a run with many kills tests loss, not the give-up policy.
    pub async fn with(chats: i64, latency: Duration, agent: &str) -> Self {
        let llm = FakeLlm::builder().latency(latency).start().await;
        let tg = FakeTelegram::builder().token(TOKEN).bot("hermes_bot", 42).start().await;
        let home = tempfile::tempdir().unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let config = format!(
            "[http]\nlisten = \"127.0.0.1:{port}\"\n\n[agent]\ndrain_timeout = \"2s\"\n{agent}\n\
             [recovery]\nmax_attempts = 10\nmax_session_restarts = 10\n\n\
             [model]\nprovider = \"chat_completions\"\nbase_url = \"{}\"\nname = \"fake\"\n\n\
             [platforms.telegram]\nenabled = true\napi_url = \"{}\"\npoll_timeout = \"1s\"\n",
            llm.base_url(),
            tg.base_url()
        );
        std::fs::write(home.path().join("config.toml"), config).unwrap();
        let users = (0..chats).map(|i| User::new(5001 + i, &format!("user{i}"))).collect();
        Self { home, port, llm, tg, users, sent: BTreeMap::new() }
    }

    pub fn path(&self) -> &Path {
        self.home.path()
    }

    pub fn db(&self) -> PathBuf {
        self.path().join("state.db")
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Start the binary with `failpoints` armed.
    pub fn spawn(&self, failpoints: &str) -> Child {
        let log = std::fs::OpenOptions::new().create(true).append(true).open(self.path().join("hermesd.log")).unwrap();
        let allowed: Vec<String> = self.users.iter().map(|u| u.id.to_string()).collect();
        Command::new(BIN)
            .args(["--home", self.path().to_str().unwrap(), "run"])
            .env("HERMESD_LOG", "info")
            .env("HERMESD_FAILPOINTS", failpoints)
            .env("TELEGRAM_BOT_TOKEN", TOKEN)
            .env("TELEGRAM_ALLOWED_USERS", allowed.join(","))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn hermesd")
    }

    /// Queue `per_chat` messages for every chat, round by round; each text starts with its
    /// token and is padded to `len` characters.
    pub fn push_round(&mut self, round: usize, len: usize) {
        for user in &self.users {
            let token = format!("m{}-{round}", user.id);
            let text = format!("{token} {}", "x".repeat(len.saturating_sub(token.len() + 1)));
            self.tg.push_message(&Chat::private(user), user, text.trim_end());
            self.sent.entry(user.id.to_string()).or_default().push(token);
        }
    }

    /// Send one message from the user at `index` now; its text is its token.
    pub fn push_one(&mut self, index: usize, round: usize) {
        let user = self.users[index].clone();
        let token = format!("m{}-{round}", user.id);
        self.tg.push_message(&Chat::private(&user), &user, &token);
        self.sent.entry(user.id.to_string()).or_default().push(token);
    }

    /// What each chat was sent, in order, one entry per message token an answer names (an
    /// answer to quick messages batched into one turn names each of them): the token and
    /// `chat:message id`. Notices (busy acknowledgements, the note on an interrupted preview)
    /// name no token and are left out.
    pub fn delivered_tokens(&self) -> BTreeMap<String, Vec<Delivered>> {
        self.answers(tokens)
    }

    /// Per chat, in order, a `Delivered` for each token `read` finds in a message sent to it.
    fn answers(&self, read: impl Fn(&str) -> Vec<String>) -> BTreeMap<String, Vec<Delivered>> {
        self.users
            .iter()
            .map(|u| {
                let mut answers = Vec::new();
                for sent in self.tg.sent_to(u.id) {
                    let message_id = format!("{}:{}", u.id, sent.message_id);
                    for token in read(&sent.visible()) {
                        answers.push(Delivered { token, message_id: message_id.clone() });
                    }
                }
                (u.id.to_string(), answers)
            })
            .collect()
    }

    /// The text of every user message in the store's transcripts (archived included), oldest
    /// first, per Telegram chat id: what the model was given as each person's words.
    pub async fn transcript_words(&self) -> BTreeMap<String, Vec<String>> {
        use sqlx::sqlite::SqliteConnectOptions;
        let options = SqliteConnectOptions::new().filename(self.db()).read_only(true);
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT s.session_key, m.content FROM messages m JOIN sessions s ON s.id = m.session_id \
             WHERE m.role = 'user' ORDER BY COALESCE(m.sort_key, m.id)",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        pool.close().await;
        let mut words: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (key, content) in rows {
            // `agent:main:telegram:dm:<chat id>`
            let chat = key.rsplit(':').next().unwrap_or_default().to_owned();
            words.entry(chat).or_default().extend(tokens(&content));
        }
        words
    }

    /// Inbound events not closed as answered (`done`), as `seq state`.
    pub async fn unanswered_events(&self) -> Vec<String> {
        use sqlx::sqlite::SqliteConnectOptions;
        let options = SqliteConnectOptions::new().filename(self.db()).read_only(true);
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        let rows: Vec<(i64, String)> =
            sqlx::query_as("SELECT seq, state FROM inbound_events WHERE state != 'done' ORDER BY seq")
                .fetch_all(&pool)
                .await
                .unwrap();
        pool.close().await;
        rows.into_iter().map(|(seq, state)| format!("{seq} {state}")).collect()
    }

    /// What each chat was sent, in order: the echoed token and `chat:message id`. "queued (n)"
    /// acknowledgements of the busy policy are notices, not answers.
    pub fn delivered(&self) -> BTreeMap<String, Vec<Delivered>> {
        self.answers(|text| {
            if text.starts_with("queued (") {
                return Vec::new();
            }
            let text = text.strip_prefix("echo: ").unwrap_or(text);
            vec![text.split_whitespace().next().unwrap_or_default().to_owned()]
        })
    }

    /// Whether every token sent in has an answer.
    pub fn all_answered(&self) -> bool {
        let got: HashSet<String> = self.delivered().into_values().flatten().map(|d| d.token).collect();
        self.sent.values().flatten().all(|t| got.contains(t))
    }

    /// The receipts the store recorded, as `chat:message id` (Telegram's ids count per chat).
    pub async fn receipts(&self) -> HashSet<String> {
        use sqlx::sqlite::SqliteConnectOptions;
        let options = SqliteConnectOptions::new().filename(self.db()).read_only(true);
        let pool = sqlx::SqlitePool::connect_with(options).await.unwrap();
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT json_extract(payload, '$.chat.chat_id') || ':' || platform_message_id FROM outbound_messages \
             WHERE platform_message_id IS NOT NULL",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        pool.close().await;
        rows.into_iter().map(|r| r.0).collect()
    }

    /// The checker's verdict on this run so far.
    pub async fn check(&self) -> crate::checker::Report {
        crate::checker::check(&self.sent, &self.delivered(), &self.receipts().await)
    }

    /// `/readyz`: status and body.
    pub async fn readyz(&self) -> (u16, String) {
        match client().get(format!("{}/readyz", self.base())).send().await {
            Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
            Err(e) => (0, e.to_string()),
        }
    }

    /// Arm (or with `off`, disarm) a failpoint of the running daemon.
    pub async fn arm(&self, name: &str, action: &str) {
        let response = client()
            .post(format!("{}/admin/failpoints", self.base()))
            .json(&json!({ "name": name, "action": action }))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{}", response.text().await.unwrap_or_default());
    }

    pub fn log(&self) -> String {
        daemon_log(self.path())
    }
}

/// The message tokens (`m<user>-<n>`) in `text`, in order.
pub fn tokens(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || c == ',' || c == ';')
        .map(|w| w.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '-'))
        .filter(|w| {
            w.strip_prefix('m').and_then(|rest| rest.split_once('-')).is_some_and(|(user, n)| {
                !user.is_empty() && !n.is_empty() && user.bytes().chain(n.bytes()).all(|b| b.is_ascii_digit())
            })
        })
        .map(str::to_owned)
        .collect()
}

/// SIGTERM and wait for the exit.
pub async fn stop(mut child: Child) {
    let term = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(term.success());
    let _ = tokio::task::spawn_blocking(move || child.wait()).await;
}
