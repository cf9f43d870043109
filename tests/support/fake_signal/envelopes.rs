//! signal-cli `receive` payloads as its `JsonReceiveMessageHandler` writes them
//! (`{"account": ..., "envelope": {...}}`), for tests to push through the fake's event stream.

use serde_json::{Value, json};

/// A person on Signal: ACI UUID, number and profile name.
#[derive(Debug, Clone, Copy)]
pub struct Person {
    /// ACI UUID (the hermesd user id).
    pub uuid: &'static str,
    /// E.164 number.
    pub number: &'static str,
    /// Profile name.
    pub name: &'static str,
}

/// Alice, allowed in most tests.
pub const ALICE: Person =
    Person { uuid: "a11ce000-0000-4000-8000-00000000000a", number: "+15557654321", name: "Alice" };
/// Bob, allowed in most tests.
pub const BOB: Person = Person { uuid: "b0b00000-0000-4000-8000-00000000000b", number: "+15551234567", name: "Bob" };
/// Mallory, a stranger.
pub const MALLORY: Person =
    Person { uuid: "3a110000-0000-4000-8000-00000000000c", number: "+15559999999", name: "Mallory" };
/// The bot's account.
pub const ACCOUNT: &str = "+15550001111";
/// The bot's ACI UUID.
pub const ACCOUNT_UUID: &str = "00000000-0000-4000-8000-000000000001";

fn envelope(from: Person, timestamp: i64, body: (&str, Value)) -> Value {
    let mut envelope = json!({
        "source": from.number, "sourceNumber": from.number, "sourceUuid": from.uuid, "sourceName": from.name,
        "sourceDevice": 1, "timestamp": timestamp, "serverReceivedTimestamp": timestamp + 5,
        "serverDeliveredTimestamp": timestamp + 9,
    });
    envelope[body.0] = body.1;
    json!({"envelope": envelope, "account": ACCOUNT})
}

/// A direct message.
pub fn dm(from: Person, timestamp: i64, text: &str) -> Value {
    let data = json!({"timestamp": timestamp, "message": text, "expiresInSeconds": 0, "viewOnce": false});
    envelope(from, timestamp, ("dataMessage", data))
}

/// A group message; `mention_bot` adds a mention of the account (U+FFFC in the text).
pub fn group(from: Person, timestamp: i64, group_id: &str, text: &str, mention_bot: bool) -> Value {
    let mut data = json!({"timestamp": timestamp, "message": text, "expiresInSeconds": 0, "viewOnce": false,
        "groupInfo": {"groupId": group_id, "groupName": "Team", "revision": 2, "type": "DELIVER"}});
    if mention_bot {
        data["message"] = json!(format!("\u{FFFC} {text}"));
        data["mentions"] = json!([{"name": ACCOUNT, "number": ACCOUNT, "uuid": ACCOUNT_UUID, "start": 0, "length": 1}]);
    }
    envelope(from, timestamp, ("dataMessage", data))
}

/// A direct message with one attachment the fake serves under `id`.
pub fn dm_with_file(from: Person, timestamp: i64, text: &str, id: &str, mime: &str, size: u64) -> Value {
    let data = json!({"timestamp": timestamp, "message": text,
        "attachments": [{"contentType": mime, "filename": id, "id": id, "size": size}]});
    envelope(from, timestamp, ("dataMessage", data))
}

/// A typing indicator, which must never start a turn.
pub fn typing(from: Person, timestamp: i64) -> Value {
    envelope(from, timestamp, ("typingMessage", json!({"action": "STARTED", "timestamp": timestamp})))
}

/// A delivery receipt, which must never start a turn.
pub fn receipt(from: Person, timestamp: i64) -> Value {
    envelope(from, timestamp, ("receiptMessage", json!({"when": timestamp, "isDelivery": true, "timestamps": [1]})))
}

/// A reaction, which must never start a turn.
pub fn reaction(from: Person, timestamp: i64) -> Value {
    let data = json!({"timestamp": timestamp, "message": null, "reaction": {"emoji": "👍", "targetAuthor": ACCOUNT,
        "targetAuthorNumber": ACCOUNT, "targetAuthorUuid": ACCOUNT_UUID, "targetSentTimestamp": 1, "isRemove": false}});
    envelope(from, timestamp, ("dataMessage", data))
}
