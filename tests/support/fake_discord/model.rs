//! The fake Discord's people, channels and records, and the JSON Discord sends for them.

use std::time::Instant;

use serde_json::{Value, json};

/// A Discord user as the fake presents it.
#[derive(Debug, Clone)]
pub struct User {
    /// The user id.
    pub id: u64,
    /// The username.
    pub name: String,
    /// Whether it is a bot account.
    pub bot: bool,
    /// Role ids held in every guild of the fake.
    pub roles: Vec<u64>,
}

impl User {
    /// A person.
    pub fn new(id: u64, name: &str) -> Self {
        Self { id, name: name.to_owned(), bot: false, roles: Vec::new() }
    }

    /// Another bot.
    pub fn bot(id: u64, name: &str) -> Self {
        Self { bot: true, ..Self::new(id, name) }
    }

    /// The same user holding `roles`.
    pub fn with_roles(mut self, roles: &[u64]) -> Self {
        self.roles = roles.to_vec();
        self
    }

    /// Discord's user object.
    pub fn json(&self) -> Value {
        json!({ "id": self.id.to_string(), "username": self.name, "discriminator": "0", "global_name": self.name,
            "avatar": null, "bot": self.bot })
    }

    /// A guild member object for this user.
    pub fn member(&self) -> Value {
        let roles: Vec<String> = self.roles.iter().map(u64::to_string).collect();
        json!({ "roles": roles, "joined_at": "2025-01-01T00:00:00.000000+00:00", "deaf": false, "mute": false,
            "flags": 0, "pending": false })
    }
}

/// Discord's channel types the fake uses.
pub mod kind {
    /// A guild text channel.
    pub const TEXT: u8 = 0;
    /// A direct message.
    pub const DM: u8 = 1;
    /// A public thread.
    pub const THREAD: u8 = 11;
    /// A forum channel.
    pub const FORUM: u8 = 15;
}

/// A channel the fake knows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Channel {
    /// The channel id.
    pub id: u64,
    /// Discord's channel type.
    pub kind: u8,
    /// The guild, for guild channels.
    pub guild_id: Option<u64>,
    /// A thread's parent channel.
    pub parent_id: Option<u64>,
    /// Who opened a thread.
    pub owner_id: Option<u64>,
}

impl Channel {
    /// A DM channel.
    pub fn dm(id: u64) -> Self {
        Self { id, kind: kind::DM, guild_id: None, parent_id: None, owner_id: None }
    }

    /// A guild text channel.
    pub fn text(guild: u64, id: u64) -> Self {
        Self { id, kind: kind::TEXT, guild_id: Some(guild), parent_id: None, owner_id: None }
    }

    /// A forum channel.
    pub fn forum(guild: u64, id: u64) -> Self {
        Self { kind: kind::FORUM, ..Self::text(guild, id) }
    }

    /// A thread (or forum post) under `parent`, opened by `owner`.
    pub fn thread(parent: &Channel, id: u64, owner: u64) -> Self {
        Self { id, kind: kind::THREAD, guild_id: parent.guild_id, parent_id: Some(parent.id), owner_id: Some(owner) }
    }

    /// Discord's channel object.
    pub fn json(&self) -> Value {
        let mut channel = json!({ "id": self.id.to_string(), "type": self.kind, "name": format!("c{}", self.id) });
        if let Some(guild) = self.guild_id {
            channel["guild_id"] = json!(guild.to_string());
        }
        if let Some(parent) = self.parent_id {
            channel["parent_id"] = json!(parent.to_string());
        }
        if let Some(owner) = self.owner_id {
            channel["owner_id"] = json!(owner.to_string());
        }
        channel
    }
}

/// A file attached to an incoming message, served by the fake at its `url`.
#[derive(Debug, Clone)]
pub struct File {
    /// The file name.
    pub name: String,
    /// The MIME type.
    pub mime: String,
    /// The bytes.
    pub bytes: Vec<u8>,
}

/// A message the bot sent.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Where.
    pub channel: u64,
    /// The id the fake gave it.
    pub id: u64,
    /// Its text.
    pub content: String,
    /// The message it replies to.
    pub reference: Option<u64>,
    /// Its action rows.
    pub components: Value,
    /// Its `allowed_mentions`.
    pub allowed_mentions: Value,
    /// When the fake received it.
    pub at: Instant,
}

/// An edit of a message the bot sent.
#[derive(Debug, Clone)]
pub struct Edit {
    /// Where.
    pub channel: u64,
    /// Which message.
    pub message: u64,
    /// The new text.
    pub content: String,
    /// Its `allowed_mentions`.
    pub allowed_mentions: Value,
    /// When the fake received it.
    pub at: Instant,
}

impl Sent {
    /// The `custom_id` of every button.
    pub fn button_data(&self) -> Vec<String> {
        let rows = self.components.as_array().cloned().unwrap_or_default();
        rows.iter()
            .flat_map(|row| row["components"].as_array().cloned().unwrap_or_default())
            .filter_map(|button| button["custom_id"].as_str().map(str::to_owned))
            .collect()
    }
}

/// A thread the bot opened on a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenedThread {
    /// The parent channel.
    pub channel: u64,
    /// The message it was opened on (Discord gives the thread the same id).
    pub message: u64,
    /// Its name.
    pub name: String,
}
