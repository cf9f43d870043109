//! Hermes' conversations (`state.db`) as hermesd sessions, keyed as hermesd's adapters key
//! their chats so that a routed chat continues where it was.

use std::collections::BTreeMap;

use hermesd_platform::{ChatRef, ChatType, Sender};
use toml::Value as Toml;

use super::Home;
use super::state::{HermesSession, State};
use crate::cli::import::{Note, Plan};
use crate::store::SessionKey;
use crate::store::import::ImportedSession;
use crate::turn::session_key::session_key;

/// The sessions of one home's `state.db`.
pub(super) fn sessions(
    plan: &mut Plan,
    home: &Home,
    state: State,
    adapters: &BTreeMap<(String, String), String>,
    chat_types: &mut BTreeMap<(String, String), ChatType>,
) {
    let profile_part = home.profile.as_str();
    let group_per_user =
        plan.config.get("sessions").and_then(|s| s.get("group_per_user")).and_then(Toml::as_bool).unwrap_or(true);
    let mut left_out: BTreeMap<String, usize> = BTreeMap::new();
    for session in state.sessions {
        let HermesSession {
            id,
            source,
            key,
            chat_id,
            chat_type,
            thread_id,
            user_id,
            title,
            started_at,
            messages,
            left_out: dropped,
        } = session;
        for line in dropped {
            *left_out.entry(line).or_default() += 1;
        }
        if messages.is_empty() {
            continue;
        }
        let updated_at = messages.last().map_or(started_at, |(_, at)| *at);
        let routed = key.as_ref().is_some_and(|k| state.routes.get(k) == Some(&id));
        let adapter = adapters.get(&(home.profile.clone(), source.clone())).cloned().unwrap_or_else(|| source.clone());
        let chat_type = chat_type.as_deref().and_then(parse_chat_type);
        let (key, person) = match (key, chat_id, chat_type) {
            (Some(_), Some(chat_id), Some(chat_type)) if source != "cli" => {
                let (chat_type, chat_id, thread_id) = as_hermesd_sees(&adapter, chat_type, chat_id, thread_id);
                chat_types.insert((adapter.clone(), chat_id.clone()), chat_type);
                // The key hermesd forms for the chat's next message, so the chat continues here.
                let mut chat = ChatRef::new(adapter.clone(), chat_id.clone(), chat_type);
                chat.thread_id = thread_id;
                let sender =
                    Sender { id: user_id.clone().unwrap_or_default(), name: None, is_bot: false, roles: Vec::new() };
                // A group session Hermes kept for no one in particular stays shared.
                let per_user = group_per_user && user_id.is_some();
                let key = session_key(home.hermesd_profile(), &chat, &sender, per_user);
                let person = match chat_type {
                    ChatType::Dm => user_id.or(Some(chat_id)),
                    _ => key.user_id.clone(),
                };
                (key, person)
            }
            _ => {
                // A terminal session (or one Hermes kept no chat for): history only.
                let key = SessionKey {
                    key: format!("agent:{profile_part}:local:dm:hermes-{id}"),
                    platform: "local".into(),
                    chat_id: format!("hermes-{id}"),
                    chat_type: ChatType::Dm,
                    thread_id: None,
                    user_id: None,
                };
                (key, None)
            }
        };
        plan.sessions.push(ImportedSession {
            source: format!("hermes:{profile_part}:session:{id}"),
            key,
            title,
            person,
            messages,
            created_at: started_at,
            updated_at,
            route: routed,
        });
    }
    for (line, sessions) in left_out {
        plan.notes.push(Note {
            what: format!("state.db of {}: {line}", home.hermesd_profile()),
            why: format!("in {sessions} session(s)"),
        });
    }
}

/// The chat hermesd's adapter makes of a chat Hermes recorded so (type, chat id, thread): a
/// Discord server channel is a group, a Discord thread is a chat of its own, any Slack message
/// outside a DM is in a thread, and a Telegram forum topic is a thread.
fn as_hermesd_sees(
    adapter: &str,
    chat_type: ChatType,
    chat_id: String,
    thread: Option<String>,
) -> (ChatType, String, Option<String>) {
    match (adapter.split('@').next().unwrap_or(adapter), chat_type, thread) {
        ("discord", ChatType::Thread | ChatType::Group | ChatType::Channel, Some(thread)) => {
            (ChatType::Thread, thread, None)
        }
        ("discord", ChatType::Channel, None) => (ChatType::Group, chat_id, None),
        ("slack", ChatType::Dm, thread) => (ChatType::Dm, chat_id, thread),
        ("slack", _, thread) => (ChatType::Thread, chat_id, thread),
        ("telegram", ChatType::Group | ChatType::Channel, Some(thread)) => (ChatType::Thread, chat_id, Some(thread)),
        (_, other, thread) => (other, chat_id, thread),
    }
}

pub(super) fn parse_chat_type(text: &str) -> Option<ChatType> {
    Some(match text {
        "dm" | "private" => ChatType::Dm,
        "group" | "supergroup" => ChatType::Group,
        "channel" => ChatType::Channel,
        "thread" | "forum" => ChatType::Thread,
        _ => return None,
    })
}

/// A bare chat id's type where the sessions did not show it, by the platform's id shapes.
pub(super) fn guess_chat_type(platform: &str, chat: &str) -> ChatType {
    match platform.split('@').next().unwrap_or(platform) {
        "telegram" if chat.starts_with('-') => ChatType::Group,
        "discord" => ChatType::Channel,
        "slack" if !chat.starts_with('D') => ChatType::Channel,
        "signal" if chat.starts_with("group") => ChatType::Group,
        _ => ChatType::Dm,
    }
}
