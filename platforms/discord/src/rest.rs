//! The adapter's small REST interface over serenity's routes: every Discord call the adapter makes,
//! and Discord's answers mapped to `PlatformError`.
//!
//! serenity builds each request (route, token header, proxy base URL); this module executes it so
//! a 429 keeps its `retry_after` and `global` flag. No retries here (the host owns them), and no
//! error text may carry the bot token or an interaction token.
//!
//! Requests are built against the configured `api_url`; every call is bounded (`CALL_TIMEOUT`,
//! 30 s). A 429 with `global: true` holds every call
//! until its wait is over, without asking Discord.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use hermesd_platform::PlatformError;
use hermesd_platform::media::CappedBuffer;
use serde_json::Value;
use serenity::builder::CreateAttachment;
use serenity::http::{Http, HttpBuilder, LightMethod, Multipart, MultipartUpload, Request, Route};
use serenity::model::channel::Message;
use serenity::model::id::{ChannelId, GuildId, InteractionId, MessageId, UserId};

/// Each call gives up after this long; the host retries transient failures.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest a connection to Discord may take to open (within `CALL_TIMEOUT`).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// Who the bot is, from `GET /users/@me`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BotUser {
    pub(crate) id: u64,
    pub(crate) name: String,
}

/// What the adapter needs to know about a channel to normalise its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChannelInfo {
    pub(crate) kind: ChannelKind,
    /// The parent channel of a thread (a text or forum channel).
    pub(crate) parent_id: Option<u64>,
    /// Who opened a thread.
    pub(crate) owner_id: Option<u64>,
}

/// Discord channel types, reduced to what changes normalisation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChannelKind {
    /// A direct message (types 1 and 3).
    Dm,
    /// A guild text or announcement channel (types 0 and 5).
    Text,
    /// A thread (types 10, 11, 12); forum posts are threads of a forum channel.
    Thread,
    /// A forum or media channel (types 15, 16): only its posts (threads) carry messages.
    Forum,
    /// Voice, stage, category and anything newer.
    Other,
}

impl ChannelKind {
    pub(crate) fn from_type(kind: u64) -> Self {
        match kind {
            1 | 3 => Self::Dm,
            0 | 5 => Self::Text,
            10..=12 => Self::Thread,
            15 | 16 => Self::Forum,
            _ => Self::Other,
        }
    }
}

/// Discord's REST API as the adapter uses it.
pub(crate) struct Rest {
    http: Arc<Http>,
    client: reqwest::Client,
    token: String,
    /// Set by a 429 with `global: true`: until then every call is refused without asking Discord.
    global_block: Mutex<Option<Instant>>,
}

impl Rest {
    /// A client for `api_url` (serenity's proxy option: it replaces `https://discord.com`).
    pub(crate) fn new(token: &str, api_url: &str) -> Result<Self, String> {
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(CALL_TIMEOUT)
            .pool_idle_timeout(hermesd_platform::HTTP_POOL_IDLE_TIMEOUT)
            .pool_max_idle_per_host(hermesd_platform::HTTP_POOL_MAX_IDLE_PER_HOST)
            .build()
            .map_err(|error| format!("build the discord http client: {}", error.without_url()))?;
        let http = build_http(token, api_url, &client);
        Ok(Self { http: Arc::new(http), client, token: token.to_owned(), global_block: Mutex::new(None) })
    }

    /// A serenity client on the same base URL for the gateway (serenity takes it by value; the
    /// gateway only uses it to ask for the websocket URL).
    pub(crate) fn gateway_http(&self) -> Http {
        build_http(&self.token, self.http.proxy.as_deref().unwrap_or("https://discord.com"), &self.client)
    }

    /// The role ids `user` holds in `guild`.
    pub(crate) async fn member_roles(&self, guild: u64, user: u64) -> Result<Vec<u64>, PlatformError> {
        let route = Route::GuildMember { guild_id: GuildId::new(guild), user_id: UserId::new(user) };
        let member =
            self.call(&format!("get member {user} of guild {guild}"), Request::new(route, LightMethod::Get)).await?;
        Ok(member["roles"].as_array().map(|roles| roles.iter().filter_map(snowflake).collect()).unwrap_or_default())
    }

    pub(crate) async fn current_user(&self) -> Result<BotUser, PlatformError> {
        let user = self.call("get the bot user", Request::new(Route::UserMe, LightMethod::Get)).await?;
        let id = snowflake(&user["id"]).ok_or_else(|| PlatformError::Transient("bot user without an id".into()))?;
        let name = user["username"].as_str().unwrap_or_default().to_owned();
        Ok(BotUser { id, name })
    }

    /// The websocket URL from `GET /gateway`.
    pub(crate) async fn gateway_url(&self) -> Result<String, PlatformError> {
        let gateway = self.call("get the gateway url", Request::new(Route::Gateway, LightMethod::Get)).await?;
        gateway["url"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| PlatformError::Transient("gateway answer without a url".into()))
    }

    pub(crate) async fn channel(&self, channel: u64) -> Result<ChannelInfo, PlatformError> {
        let route = Route::Channel { channel_id: ChannelId::new(channel) };
        let found = self.call(&format!("get channel {channel}"), Request::new(route, LightMethod::Get)).await?;
        Ok(ChannelInfo {
            kind: ChannelKind::from_type(found["type"].as_u64().unwrap_or(u64::MAX)),
            parent_id: snowflake(&found["parent_id"]),
            owner_id: snowflake(&found["owner_id"]),
        })
    }

    /// Up to 100 messages of `channel` newer than message `after`, oldest first. Messages that do
    /// not parse are skipped.
    pub(crate) async fn messages_after(&self, channel: u64, after: u64) -> Result<Vec<Message>, PlatformError> {
        let route = Route::ChannelMessages { channel_id: ChannelId::new(channel) };
        let params = vec![("after", after.to_string()), ("limit", "100".to_owned())];
        let request = Request::new(route, LightMethod::Get).params(Some(params));
        let found = self.call(&format!("read channel {channel} after {after}"), request).await?;
        let mut messages: Vec<Message> = match found {
            Value::Array(items) => items.into_iter().filter_map(|item| serde_json::from_value(item).ok()).collect(),
            _ => Vec::new(),
        };
        messages.sort_by_key(|message| message.id.get());
        Ok(messages)
    }

    /// `POST /channels/{id}/messages`; returns the new message's id.
    pub(crate) async fn create_message(&self, channel: u64, body: &Value) -> Result<u64, PlatformError> {
        let route = Route::ChannelMessages { channel_id: ChannelId::new(channel) };
        let request = Request::new(route, LightMethod::Post).body(Some(body.to_string().into_bytes()));
        let sent = self.call(&format!("send to channel {channel}"), request).await?;
        snowflake(&sent["id"]).ok_or_else(|| PlatformError::Transient("sent message without an id".into()))
    }

    /// `POST /channels/{id}/messages` as multipart: `payload` as `payload_json`, the file as
    /// `files[0]`; returns the new message's id.
    pub(crate) async fn create_message_with_file(
        &self,
        channel: u64,
        payload: &Value,
        name: &str,
        bytes: &[u8],
    ) -> Result<u64, PlatformError> {
        let route = Route::ChannelMessages { channel_id: ChannelId::new(channel) };
        let multipart = Multipart {
            upload: MultipartUpload::Attachments(vec![CreateAttachment::bytes(bytes.to_vec(), name)]),
            fields: Vec::new(),
            payload_json: Some(payload.to_string()),
        };
        let request = Request::new(route, LightMethod::Post).multipart(Some(multipart));
        let sent = self.call(&format!("send {name} to channel {channel}"), request).await?;
        snowflake(&sent["id"]).ok_or_else(|| PlatformError::Transient("sent message without an id".into()))
    }

    /// `PATCH /channels/{id}/messages/{id}`.
    pub(crate) async fn edit_message(&self, channel: u64, message: u64, body: &Value) -> Result<(), PlatformError> {
        let route = Route::ChannelMessage { channel_id: ChannelId::new(channel), message_id: MessageId::new(message) };
        let request = Request::new(route, LightMethod::Patch).body(Some(body.to_string().into_bytes()));
        self.call(&format!("edit message {message} in channel {channel}"), request).await.map(drop)
    }

    /// `POST /channels/{id}/typing`.
    pub(crate) async fn typing(&self, channel: u64) -> Result<(), PlatformError> {
        let route = Route::ChannelTyping { channel_id: ChannelId::new(channel) };
        self.call(&format!("typing in channel {channel}"), Request::new(route, LightMethod::Post)).await.map(drop)
    }

    /// `POST /channels/{id}/messages/{id}/threads`; returns the thread's id.
    pub(crate) async fn start_thread(&self, channel: u64, message: u64, name: &str) -> Result<u64, PlatformError> {
        let route =
            Route::ChannelMessageThreads { channel_id: ChannelId::new(channel), message_id: MessageId::new(message) };
        // One day of inactivity before Discord archives it; a message re-opens it.
        let body = serde_json::json!({ "name": name, "auto_archive_duration": 1440 });
        let request = Request::new(route, LightMethod::Post).body(Some(body.to_string().into_bytes()));
        let thread = self.call(&format!("open a thread on message {message}"), request).await?;
        snowflake(&thread["id"]).ok_or_else(|| PlatformError::Transient("thread without an id".into()))
    }

    /// `PUT /channels/{id}/messages/{id}/reactions/{emoji}/@me`.
    pub(crate) async fn react(&self, channel: u64, message: u64, emoji: &str) -> Result<(), PlatformError> {
        let route = Route::ChannelMessageReactionMe {
            channel_id: ChannelId::new(channel),
            message_id: MessageId::new(message),
            reaction: emoji,
        };
        self.call(&format!("react to message {message}"), Request::new(route, LightMethod::Put)).await.map(drop)
    }

    /// Acknowledges a button press without changing its message (callback type 6).
    pub(crate) async fn ack_interaction(&self, id: u64, token: &str) -> Result<(), PlatformError> {
        let route = Route::InteractionResponse { interaction_id: InteractionId::new(id), token };
        let body = serde_json::json!({ "type": 6 }).to_string().into_bytes();
        self.call(&format!("acknowledge interaction {id}"), Request::new(route, LightMethod::Post).body(Some(body)))
            .await
            .map(drop)
    }

    /// Downloads an attachment, refusing more than `cap` bytes.
    pub(crate) async fn download(&self, url: &str, cap: u64) -> Result<Vec<u8>, String> {
        let mut response = self.client.get(url).send().await.map_err(|e| format!("download: {}", e.without_url()))?;
        if !response.status().is_success() {
            return Err(format!("download: status {}", response.status().as_u16()));
        }
        let mut body = CappedBuffer::new(usize::try_from(cap).unwrap_or(usize::MAX));
        while let Some(piece) = response.chunk().await.map_err(|e| format!("download: {}", e.without_url()))? {
            if !body.push(&piece) {
                return Err(format!("file exceeds the {cap} byte cap"));
            }
        }
        Ok(body.into_inner())
    }

    /// Executes one request and returns its JSON body (`Null` for an empty one).
    async fn call(&self, what: &str, request: Request<'_>) -> Result<Value, PlatformError> {
        if let Some(wait) = self.globally_blocked() {
            return Err(PlatformError::RateLimited { retry_after: wait });
        }
        let built = request.build(&self.client, self.http.token(), self.http.proxy.as_deref()).map_err(|error| {
            PlatformError::Permanent(format!("{what}: cannot build the request: {}", kind_of(&error)))
        })?;
        let response =
            built.send().await.map_err(|error| PlatformError::Transient(format!("{what}: {}", error.without_url())))?;
        let status = response.status().as_u16();
        let retry_header = response
            .headers()
            .get("retry-after")
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse::<f64>().ok());
        let bytes = response
            .bytes()
            .await
            .map_err(|error| PlatformError::Transient(format!("{what}: {}", error.without_url())))?;
        let body: Value =
            if bytes.is_empty() { Value::Null } else { serde_json::from_slice(&bytes).unwrap_or(Value::Null) };
        let outcome = classify(status, &body, retry_header);
        if let Err(PlatformError::RateLimited { retry_after }) = &outcome
            && body["global"].as_bool() == Some(true)
        {
            *self.global_block.lock().unwrap_or_else(PoisonError::into_inner) = Some(Instant::now() + *retry_after);
        }
        outcome.map(|()| body).map_err(|error| with_context(error, what))
    }

    fn globally_blocked(&self) -> Option<Duration> {
        let mut block = self.global_block.lock().unwrap_or_else(PoisonError::into_inner);
        let until = (*block)?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            *block = None;
            None
        } else {
            Some(left)
        }
    }
}

/// serenity's REST client for `api_url`: the proxy option replaces `https://discord.com`.
fn build_http(token: &str, api_url: &str, client: &reqwest::Client) -> Http {
    let mut builder = HttpBuilder::new(token).client(client.clone()).ratelimiter_disabled(true);
    let base = api_url.trim_end_matches('/');
    if base != "https://discord.com" {
        builder = builder.proxy(base);
    }
    builder.build()
}

/// Maps an answer's status to what the host acts on. Discord's JSON error message is kept: it
/// never carries tokens.
pub(crate) fn classify(status: u16, body: &Value, retry_header: Option<f64>) -> Result<(), PlatformError> {
    let message = || body["message"].as_str().unwrap_or("no message").to_owned();
    match status {
        200..=299 => Ok(()),
        429 => {
            let secs = body["retry_after"].as_f64().or(retry_header).unwrap_or(1.0);
            let secs = if secs.is_finite() { secs.clamp(0.0, 3600.0) } else { 1.0 };
            Err(PlatformError::RateLimited { retry_after: Duration::from_secs_f64(secs) })
        }
        401 => Err(PlatformError::Unauthorized(format!("status 401: {}", message()))),
        408 | 500..=599 => Err(PlatformError::Transient(format!("status {status}: {}", message()))),
        _ => Err(PlatformError::Permanent(format!("status {status}: {}", message()))),
    }
}

fn with_context(error: PlatformError, what: &str) -> PlatformError {
    match error {
        PlatformError::Unauthorized(detail) => PlatformError::Unauthorized(format!("{what}: {detail}")),
        PlatformError::Transient(detail) => PlatformError::Transient(format!("{what}: {detail}")),
        PlatformError::Permanent(detail) => PlatformError::Permanent(format!("{what}: {detail}")),
        limited @ PlatformError::RateLimited { .. } => limited,
    }
}

/// Names a serenity error without its contents (a header error could echo the token).
fn kind_of(error: &serenity::Error) -> &'static str {
    match error {
        serenity::Error::Http(_) => "bad url or header",
        _ => "unexpected error",
    }
}

/// A snowflake, which Discord sends as a string (numbers are accepted too).
pub(crate) fn snowflake(value: &Value) -> Option<u64> {
    match value {
        Value::String(text) => text.parse().ok(),
        Value::Number(number) => number.as_u64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn kind(outcome: Result<(), PlatformError>) -> String {
        match outcome {
            Ok(()) => "ok".into(),
            Err(PlatformError::RateLimited { retry_after }) => format!("rate {}ms", retry_after.as_millis()),
            Err(PlatformError::Unauthorized(_)) => "unauthorized".into(),
            Err(PlatformError::Transient(_)) => "transient".into(),
            Err(PlatformError::Permanent(_)) => "permanent".into(),
        }
    }

    #[test]
    fn statuses_map_to_what_the_host_acts_on() {
        let limited = json!({ "message": "You are being rate limited.", "retry_after": 1.5, "global": false });
        let table = [
            (200, json!({}), None, "ok"),
            (204, Value::Null, None, "ok"),
            (429, limited, None, "rate 1500ms"),
            (429, Value::Null, Some(2.0), "rate 2000ms"),
            (429, json!({ "retry_after": -3 }), None, "rate 0ms"),
            (401, json!({ "message": "401: Unauthorized", "code": 0 }), None, "unauthorized"),
            (403, json!({ "message": "Missing Access", "code": 50001 }), None, "permanent"),
            (404, json!({ "message": "Unknown Channel", "code": 10003 }), None, "permanent"),
            (502, Value::Null, None, "transient"),
            (408, Value::Null, None, "transient"),
        ];
        for (status, body, header, want) in table {
            assert_eq!(kind(classify(status, &body, header)), want, "{status} {body}");
        }
    }

    #[test]
    fn channel_types_reduce_to_what_normalisation_needs() {
        let table = [
            (0, ChannelKind::Text),
            (1, ChannelKind::Dm),
            (5, ChannelKind::Text),
            (11, ChannelKind::Thread),
            (15, ChannelKind::Forum),
            (2, ChannelKind::Other),
        ];
        for (kind, want) in table {
            assert_eq!(ChannelKind::from_type(kind), want, "type {kind}");
        }
    }

    #[test]
    fn snowflakes_come_as_strings_or_numbers() {
        assert_eq!(snowflake(&json!("81384788765712384")), Some(81_384_788_765_712_384));
        assert_eq!(snowflake(&json!(42)), Some(42));
        assert_eq!(snowflake(&json!(null)), None);
        assert_eq!(snowflake(&json!("x")), None);
    }
}
