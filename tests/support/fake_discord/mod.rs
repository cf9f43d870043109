//! A fake Discord on 127.0.0.1:0: the REST API under `/api/v10` (gateway URL, `users/@me`,
//! channels, guild members, messages create/edit, typing, threads, reactions, interaction
//! callbacks) and a gateway websocket at `/gateway` speaking HELLO, IDENTIFY, READY, heartbeats,
//! RESUME (replaying what the client missed), RESUMED and INVALID_SESSION, dispatching
//! MESSAGE_CREATE and INTERACTION_CREATE. It can drop the socket on command, fail chosen REST
//! calls, and records everything it receives. It never calls anything beyond loopback.

mod gateway;
mod model;
mod rest;
mod upload;

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::routing::{any, get};
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use model::*;

/// What the test tells a live socket to do.
enum Control {
    Send(String),
    Drop,
}

#[derive(Default)]
struct Session {
    id: String,
    seq: u64,
    /// Every dispatch of this session, for replay on RESUME.
    log: Vec<(u64, Value)>,
}

#[derive(Default)]
struct Store {
    next_id: u64,
    channels: HashMap<u64, Channel>,
    /// Everyone who posted, for `GET /guilds/{id}/members/{id}`.
    users: HashMap<u64, User>,
    messages: HashMap<u64, Value>,
    /// The nonce of every `create_message` call, in order (resends included).
    nonces: Vec<String>,
    /// The message each nonce created, and when.
    created_by_nonce: HashMap<String, (u64, std::time::Instant)>,
    files: HashMap<String, Vec<u8>>,
    session: Option<Session>,
    /// Dispatches made before the first IDENTIFY, delivered after the first READY.
    waiting: Vec<(String, Value)>,
    /// The socket that receives dispatches (after READY or RESUMED) and its id.
    live: Option<(u64, mpsc::UnboundedSender<Control>)>,
    next_socket: u64,
    /// Sockets open (not yet closed by either side).
    open: std::collections::HashSet<u64>,
    max_open_sockets: usize,
    /// Open sockets that completed IDENTIFY or RESUME and were not invalidated since.
    sessions_open: std::collections::HashSet<u64>,
    max_sessions_open: usize,
    identifies: Vec<Value>,
    resumes: Vec<Value>,
    heartbeats: usize,
    invalidate_next_resume: bool,
    /// Heartbeats on these sockets go unanswered: a zombie connection.
    silent_sockets: std::collections::HashSet<u64>,
    calls: Vec<String>,
    sent: Vec<Sent>,
    /// Messages with files.
    uploads: Vec<upload::Upload>,
    edits: Vec<Edit>,
    typing: Vec<u64>,
    threads: Vec<OpenedThread>,
    reactions: Vec<(u64, u64, String)>,
    callbacks: Vec<(u64, Value)>,
    /// Canned (status, body) answers served before the normal behaviour, per operation name.
    failures: HashMap<&'static str, VecDeque<(u16, Value)>>,
}

struct Shared {
    token: String,
    bot: User,
    heartbeat_ms: u64,
    replay_all: bool,
    addr: Mutex<Option<SocketAddr>>,
    store: Mutex<Store>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn base(&self) -> String {
        let addr = self.addr.lock().unwrap_or_else(PoisonError::into_inner);
        format!("http://{}", addr.expect("the fake is bound before it serves"))
    }
}

impl Store {
    fn session_opened(&mut self, socket: u64) {
        self.sessions_open.insert(socket);
        self.max_sessions_open = self.max_sessions_open.max(self.sessions_open.len());
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Logs a dispatch in the session and sends it to the live socket, if any.
    fn dispatch(&mut self, event: &str, data: Value) {
        let Some(session) = &mut self.session else {
            // Before the first IDENTIFY the fake holds dispatches for the bot; between sessions
            // they are gone from the gateway, as on Discord (REST still has the messages).
            if self.identifies.is_empty() {
                self.waiting.push((event.to_owned(), data));
            }
            return;
        };
        session.seq += 1;
        let frame = json!({ "op": 0, "t": event, "s": session.seq, "d": data });
        session.log.push((session.seq, frame.clone()));
        if let Some((_, live)) = &self.live {
            let _ = live.send(Control::Send(frame.to_string()));
        }
    }
}

/// Builds a fake Discord.
pub struct FakeDiscordBuilder {
    token: String,
    bot: User,
    heartbeat_ms: u64,
    replay_all: bool,
}

impl FakeDiscordBuilder {
    /// The only bot token the fake accepts.
    pub fn token(mut self, token: &str) -> Self {
        token.clone_into(&mut self.token);
        self
    }

    /// The bot's user (and the roles it holds in every guild).
    pub fn bot(mut self, bot: User) -> Self {
        self.bot = User { bot: true, ..bot };
        self
    }

    /// The heartbeat interval HELLO announces.
    pub fn heartbeat_ms(mut self, ms: u64) -> Self {
        self.heartbeat_ms = ms;
        self
    }

    /// On RESUME, replay the whole session instead of only what the client missed: Discord
    /// delivering some events twice.
    pub fn replay_everything_on_resume(mut self) -> Self {
        self.replay_all = true;
        self
    }

    /// Bind 127.0.0.1:0 and serve.
    pub async fn start(self) -> FakeDiscord {
        let shared = Arc::new(Shared {
            token: self.token,
            bot: self.bot,
            heartbeat_ms: self.heartbeat_ms,
            replay_all: self.replay_all,
            addr: Mutex::new(None),
            store: Mutex::new(Store { next_id: 1_300_000_000_000_000_000, ..Store::default() }),
        });
        let app = Router::new()
            .route("/gateway", get(gateway::upgrade))
            .route("/attachments/{name}", get(rest::attachment))
            .route("/api/v10/{*path}", any(rest::api))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind fake discord");
        let addr = listener.local_addr().expect("fake discord addr");
        *shared.addr.lock().unwrap_or_else(PoisonError::into_inner) = Some(addr);
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeDiscord { addr, shared }
    }
}

/// A running fake Discord; clones share it.
#[derive(Clone)]
pub struct FakeDiscord {
    addr: SocketAddr,
    shared: Arc<Shared>,
}

impl FakeDiscord {
    /// A builder with token `TOKEN` and a bot named `hermes`.
    pub fn builder() -> FakeDiscordBuilder {
        FakeDiscordBuilder {
            token: "TOKEN".into(),
            bot: User::bot(900, "hermes"),
            heartbeat_ms: 1000,
            replay_all: false,
        }
    }

    /// `http://127.0.0.1:PORT`, the `api_url` for the adapter.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bot's user.
    pub fn bot(&self) -> &User {
        &self.shared.bot
    }

    /// Makes `channel` known to the fake (answered by `GET /channels/{id}`).
    pub fn add_channel(&self, channel: &Channel) {
        self.shared.lock().channels.insert(channel.id, channel.clone());
    }

    /// Dispatches a MESSAGE_CREATE from `author` in `channel`; `<@BOT>` in the text mentions the
    /// bot and `<@&ROLE>` a role. Returns the message id.
    pub fn post(&self, channel: &Channel, author: &User, text: &str) -> u64 {
        self.post_full(channel, author, text, None, &[])
    }

    /// Like `post`, replying to message `to`.
    pub fn reply(&self, channel: &Channel, author: &User, text: &str, to: u64) -> u64 {
        self.post_full(channel, author, text, Some(to), &[])
    }

    /// Like `post`, with files the fake serves for download.
    pub fn post_files(&self, channel: &Channel, author: &User, text: &str, files: &[File]) -> u64 {
        self.post_full(channel, author, text, None, files)
    }

    fn post_full(&self, channel: &Channel, author: &User, text: &str, to: Option<u64>, files: &[File]) -> u64 {
        let base = self.shared.base();
        let mut store = self.shared.lock();
        store.channels.entry(channel.id).or_insert_with(|| channel.clone());
        store.users.insert(author.id, author.clone());
        let id = store.id();
        let mut attachments = Vec::new();
        for file in files {
            let attachment = store.id();
            let name = format!("{attachment}-{}", file.name);
            store.files.insert(name.clone(), file.bytes.clone());
            attachments.push(json!({ "id": attachment.to_string(), "filename": file.name, "size": file.bytes.len(),
                "url": format!("{base}/attachments/{name}"), "proxy_url": format!("{base}/attachments/{name}"),
                "content_type": file.mime }));
        }
        let referenced = to.and_then(|to| store.messages.get(&to).cloned());
        let mut message = message_json(id, channel, author, text, &self.shared.bot, referenced);
        message["attachments"] = Value::Array(attachments);
        store.messages.insert(id, message.clone());
        store.dispatch("MESSAGE_CREATE", message);
        id
    }

    /// Dispatches the MESSAGE_CREATE of message `id` once more, as Discord may.
    pub fn redispatch(&self, id: u64) {
        let mut store = self.shared.lock();
        let message = store.messages.get(&id).cloned().expect("a message the fake dispatched");
        store.dispatch("MESSAGE_CREATE", message);
    }

    /// Dispatches a button press (INTERACTION_CREATE) by `user` on the bot's message `message` in
    /// `channel`. Returns the interaction id.
    pub fn press(&self, channel: &Channel, user: &User, message: u64, custom_id: &str) -> u64 {
        let mut store = self.shared.lock();
        let id = store.id();
        let pressed = store.messages.get(&message).cloned().expect("a message the bot sent");
        let mut interaction = json!({ "id": id.to_string(), "application_id": self.shared.bot.id.to_string(),
            "type": 3, "data": { "custom_id": custom_id, "component_type": 2 },
            "channel_id": channel.id.to_string(), "channel": channel.json(), "token": format!("itoken-{id}"),
            "version": 1, "message": pressed, "app_permissions": "0", "locale": "en-US", "entitlements": [],
            "authorizing_integration_owners": {}, "context": 0, "attachment_size_limit": 26_214_400 });
        match channel.guild_id {
            Some(guild) => {
                interaction["guild_id"] = json!(guild.to_string());
                interaction["guild_locale"] = json!("en-US");
                let mut member = user.member();
                member["user"] = user.json();
                member["permissions"] = json!("0");
                interaction["member"] = member;
            }
            None => interaction["user"] = user.json(),
        }
        store.dispatch("INTERACTION_CREATE", interaction);
        id
    }

    /// Closes the live gateway socket (code 4000, resumable), as a network blip would.
    pub fn drop_socket(&self) {
        let mut store = self.shared.lock();
        if let Some((_, live)) = store.live.take() {
            let _ = live.send(Control::Drop);
        }
    }

    /// Stops acknowledging heartbeats on the live socket and delivering dispatches to it, leaving
    /// it open: a zombie connection the client must detect and replace.
    pub fn go_silent(&self) {
        let mut store = self.shared.lock();
        if let Some((socket, _)) = store.live.take() {
            store.silent_sockets.insert(socket);
        }
    }

    /// Answers the next RESUME with INVALID_SESSION (not resumable).
    pub fn invalidate_next_resume(&self) {
        self.shared.lock().invalidate_next_resume = true;
    }

    /// Whether a socket is receiving dispatches.
    pub fn connected(&self) -> bool {
        self.shared.lock().live.is_some()
    }

    /// Serves (status, body) for the next `times` calls of `operation` (`create_message`,
    /// `edit_message`, `typing`, `start_thread`, `channel`).
    pub fn fail_next(&self, operation: &'static str, times: usize, status: u16, body: Value) {
        let mut store = self.shared.lock();
        let queue = store.failures.entry(operation).or_default();
        queue.extend(std::iter::repeat_n((status, body), times));
    }

    /// Every REST call, as `METHOD /path`.
    pub fn calls(&self) -> Vec<String> {
        self.shared.lock().calls.clone()
    }

    /// The nonce of every message-create call that carried one, resends included.
    pub fn nonces(&self) -> Vec<String> {
        self.shared.lock().nonces.clone()
    }

    /// Every message the bot sent.
    pub fn sent(&self) -> Vec<Sent> {
        self.shared.lock().sent.clone()
    }

    /// The messages the bot sent to `channel`.
    pub fn sent_to(&self, channel: u64) -> Vec<Sent> {
        self.sent().into_iter().filter(|s| s.channel == channel).collect()
    }

    /// The texts the bot sent to `channel`.
    pub fn texts(&self, channel: u64) -> Vec<String> {
        self.sent_to(channel).into_iter().map(|s| s.content).collect()
    }

    /// Every edit.
    pub fn edits(&self) -> Vec<Edit> {
        self.shared.lock().edits.clone()
    }

    /// The channel of every typing call.
    pub fn typing(&self) -> Vec<u64> {
        self.shared.lock().typing.clone()
    }

    /// Every thread the bot opened.
    pub fn threads(&self) -> Vec<OpenedThread> {
        self.shared.lock().threads.clone()
    }

    /// Every reaction: (channel, message, emoji).
    pub fn reactions(&self) -> Vec<(u64, u64, String)> {
        self.shared.lock().reactions.clone()
    }

    /// Every interaction callback: (interaction id, body).
    pub fn callbacks(&self) -> Vec<(u64, Value)> {
        self.shared.lock().callbacks.clone()
    }

    /// Every IDENTIFY payload.
    pub fn identifies(&self) -> Vec<Value> {
        self.shared.lock().identifies.clone()
    }

    /// Every RESUME payload.
    pub fn resumes(&self) -> Vec<Value> {
        self.shared.lock().resumes.clone()
    }

    /// How many heartbeats were acknowledged.
    pub fn heartbeats(&self) -> usize {
        self.shared.lock().heartbeats
    }

    /// The most gateway sockets ever open at once.
    pub fn max_open_sockets(&self) -> usize {
        self.shared.lock().max_open_sockets
    }

    /// The most authenticated sockets (identified or resumed, not invalidated) ever open at once:
    /// more than one is two live shards for one token.
    pub fn max_live_sessions(&self) -> usize {
        self.shared.lock().max_sessions_open
    }
}

/// Discord's message object for a user's message.
fn message_json(id: u64, channel: &Channel, author: &User, text: &str, bot: &User, referenced: Option<Value>) -> Value {
    let mut mentions = Vec::new();
    if text.contains(&format!("<@{}>", bot.id)) {
        mentions.push(bot.json());
    }
    if referenced
        .as_ref()
        .is_some_and(|r| r["author"]["id"].as_str().and_then(|id| id.parse::<u64>().ok()) == Some(bot.id))
    {
        mentions.push(bot.json());
    }
    let roles: Vec<String> =
        text.split("<@&").skip(1).filter_map(|rest| rest.split_once('>').map(|(role, _)| role.to_owned())).collect();
    let mut message = json!({ "id": id.to_string(), "channel_id": channel.id.to_string(), "author": author.json(),
        "content": text, "timestamp": chrono::Utc::now().to_rfc3339(), "edited_timestamp": null, "tts": false,
        "mention_everyone": false, "mentions": mentions, "mention_roles": roles, "attachments": [], "embeds": [],
        "pinned": false, "type": if referenced.is_some() { 19 } else { 0 } });
    if let Some(guild) = channel.guild_id {
        message["guild_id"] = json!(guild.to_string());
        message["member"] = author.member();
    }
    if let Some(referenced) = referenced {
        message["message_reference"] = json!({ "message_id": referenced["id"], "channel_id": channel.id.to_string() });
        message["referenced_message"] = referenced;
    }
    message
}
