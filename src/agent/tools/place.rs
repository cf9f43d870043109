//! Whose turn it is, for memory and files: a person (a direct conversation, an API request with
//! `user`) or a chat everyone in it shares (groups, channels, threads, cron runs, webhooks), and
//! the folder beneath the tools' workdir each of them works in. Folder names come from
//! `fs_name`, which is injective and never yields `.`, `..` or a `/`, so no id can reach another
//! person's folder nor leave the tree.
//!
//! `Whose` is `Person` or `Chat`. A person works in `users/<platform>/<user>/`, a chat in
//! `chats/<platform>/<chat>[/<thread>]/`; a cron run works in its creator's or creating chat's
//! folder (never with the creator's memory), a job the operator made in `chats/cron/<job>/`, a
//! webhook route in `chats/webhook/<route>/`. `fs_name` percent-encodes ids. The turn sets
//! `ToolContext::workdir` to the folder, and `MEDIA:` lines resolve beneath it.

use std::path::{Path, PathBuf};

use hermesd_platform::{ChatRef, ChatType, InboundMessage};

use crate::delivery::turns::TurnOrigin;
use crate::store::CronJob;
use crate::vocab::origin::Origin;

/// Folder of the people's workdirs (and memory) beneath the root.
pub const USERS_DIR: &str = "users";
/// Folder of the shared chats' workdirs beneath the root.
pub const CHATS_DIR: &str = "chats";

/// Whose memory and folder a turn uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Whose {
    /// One person: a DM, or an API request that named its `user`.
    Person {
        /// The platform the id belongs to.
        platform: String,
        /// The person's id on it.
        user: String,
        /// Whether the session is this person's alone, so a prompt built in it (and stored
        /// with it) may carry their memory: a DM, or an API session keyed by `user` (an API
        /// session header can be continued by anyone who knows it).
        own_session: bool,
    },
    /// A chat several people (or nobody in particular) share.
    Chat {
        /// The platform.
        platform: String,
        /// The chat's id.
        chat: String,
        /// The thread inside it, when the conversation is one.
        thread: Option<String>,
    },
}

impl Whose {
    /// Who a message of `chat` from `user_id` belongs to. Any chat but a DM is shared, even
    /// when the group's sessions are isolated per user (the whole group reads the replies). An
    /// API request without `user` carries the chat id as its sender id and is nobody's.
    pub fn of(chat: &ChatRef, user_id: &str) -> Self {
        let shared = || Whose::Chat {
            platform: chat.platform.clone(),
            chat: chat.chat_id.clone(),
            thread: chat.thread_id.clone(),
        };
        if Origin::of(&chat.platform).one_shot() {
            // One folder per job or route, shared by its runs (the thread is the run).
            return Whose::Chat { platform: chat.platform.clone(), chat: chat.chat_id.clone(), thread: None };
        }
        if chat.chat_type != ChatType::Dm {
            return shared();
        }
        if Origin::of(&chat.platform) == Origin::Api {
            if user_id == chat.chat_id {
                return shared();
            }
            let own_session = chat.chat_id == format!("user:{user_id}");
            return Whose::Person { platform: Origin::API.into(), user: user_id.into(), own_session };
        }
        Whose::Person { platform: chat.platform.clone(), user: user_id.into(), own_session: true }
    }

    /// Who a turn of `message` works for: `of` its chat and sender, except a cron run, which
    /// works in the folder of the chat its job was created from (the creator's own in a DM);
    /// a job the operator made (CLI) works in the job's own folder.
    pub fn of_turn(message: &InboundMessage, cron_job: Option<&CronJob>) -> Self {
        match cron_job.and_then(|job| job.origin.as_ref().map(|origin| (origin, job.created_by.as_deref()))) {
            Some((origin, Some(creator))) => match Whose::of(origin, creator) {
                // The creator's folder, but never their memory: a run's output may go anywhere.
                Whose::Person { platform, user, .. } => Whose::Person { platform, user, own_session: false },
                chat => chat,
            },
            Some((origin, None)) => Whose::Chat {
                platform: origin.platform.clone(),
                chat: origin.chat_id.clone(),
                thread: origin.thread_id.clone(),
            },
            None => match cron_job {
                Some(job) => {
                    Whose::Chat { platform: message.chat.platform.clone(), chat: job.id.clone(), thread: None }
                }
                None => Whose::of(&message.chat, &message.sender.id),
            },
        }
    }

    /// The person whose memory a prompt of this turn may carry, when there is one.
    pub fn person(&self) -> Option<(&str, &str)> {
        match self {
            Whose::Person { platform, user, own_session: true } => Some((platform, user)),
            _ => None,
        }
    }

    /// The folder beneath the tools' workdir `root` this turn's tools work in:
    /// `users/<platform>/<user>/` for a person, `chats/<platform>/<chat>[/<thread>]/` for a
    /// shared chat.
    pub fn workdir(&self, root: &Path) -> PathBuf {
        match self {
            Whose::Person { platform, user, .. } => person_dir(root, platform, user),
            Whose::Chat { platform, chat, thread } => {
                let dir = root.join(CHATS_DIR).join(fs_name(platform)).join(fs_name(chat));
                match thread {
                    Some(thread) => dir.join(fs_name(thread)),
                    None => dir,
                }
            }
        }
    }
}

/// `Whose::of_turn` for a turn of `message` that `origin` started.
pub fn turn_whose(message: &InboundMessage, origin: &TurnOrigin) -> Whose {
    let job = match origin {
        TurnOrigin::Cron(run) => Some(&run.job),
        _ => None,
    };
    Whose::of_turn(message, job)
}

/// `<base>/users/<platform>/<user>`: a person's folder beneath `base` (the tools' workdir, or
/// the memory folder).
pub fn person_dir(base: &Path, platform: &str, user: &str) -> PathBuf {
    base.join(USERS_DIR).join(fs_name(platform)).join(fs_name(user))
}

/// An id as one path component: ASCII letters, digits, `-` and `_` kept, every other byte as
/// `%XX` (so `%` itself is encoded and the mapping is injective); an empty id is `%`, which no
/// encoding produces. Never `.`, `..`, empty, or containing `/`.
pub fn fs_name(id: &str) -> String {
    if id.is_empty() {
        return "%".into();
    }
    let mut out = String::with_capacity(id.len());
    for byte in id.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'-' || byte == b'_' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_safe_and_injective() {
        assert_eq!(fs_name("12345"), "12345");
        assert_eq!(fs_name(".."), "%2E%2E");
        assert_eq!(fs_name("a/b"), "a%2Fb");
        assert_eq!(fs_name(""), "%");
        assert_eq!(fs_name("%"), "%25");
        assert_eq!(fs_name("é"), "%C3%A9");
        let ids = ["a:b", "a_b", "a%3Ab", "a.b", "a%2Eb", "", "%", "U1", "u1"];
        let names: std::collections::HashSet<String> = ids.iter().map(|id| fs_name(id)).collect();
        assert_eq!(names.len(), ids.len(), "distinct ids, distinct folders");
        for id in ids {
            let name = fs_name(id);
            assert!(!name.is_empty() && name != "." && name != ".." && !name.contains('/'), "{name}");
        }
    }

    #[test]
    fn dms_are_people_and_everything_else_is_a_chat() {
        let root = Path::new("/w");
        let dm = Whose::of(&ChatRef::new("telegram", "42", ChatType::Dm), "42");
        assert_eq!(dm.person(), Some(("telegram", "42")));
        assert_eq!(dm.workdir(root), Path::new("/w/users/telegram/42"));
        let group = Whose::of(&ChatRef::new("telegram", "-100", ChatType::Group), "42");
        assert_eq!(group.person(), None);
        assert_eq!(group.workdir(root), Path::new("/w/chats/telegram/-100"));
        let thread = Whose::of(
            &ChatRef { thread_id: Some("9.1".into()), ..ChatRef::new("slack", "C1", ChatType::Thread) },
            "U1",
        );
        assert_eq!(thread.workdir(root), Path::new("/w/chats/slack/C1/9%2E1"));
        let delivery = Whose::of(
            &ChatRef { thread_id: Some("d-1".into()), ..ChatRef::new("webhook", "github", ChatType::Dm) },
            "x",
        );
        assert_eq!(delivery.person(), None);
        assert_eq!(delivery.workdir(root), Path::new("/w/chats/webhook/github"), "one folder per route");
    }

    #[test]
    fn api_requests_are_a_person_only_with_user() {
        let root = Path::new("/w");
        let keyed = Whose::of(&ChatRef::new("api", "user:ann", ChatType::Dm), "ann");
        assert_eq!(keyed.person(), Some(("api", "ann")));
        assert_eq!(keyed.workdir(root), Path::new("/w/users/api/ann"));
        let header = Whose::of(&ChatRef::new("api", "s-1", ChatType::Dm), "ann");
        assert_eq!(header.person(), None, "a session header can be shared: no personal memory");
        assert_eq!(header.workdir(root), Path::new("/w/users/api/ann"), "files still the person's");
        let anonymous = Whose::of(&ChatRef::new("api", "0190-uuid", ChatType::Dm), "0190-uuid");
        assert_eq!(anonymous.person(), None);
        assert_eq!(anonymous.workdir(root), Path::new("/w/chats/api/0190-uuid"), "its own folder, not the root");
    }

    #[test]
    fn a_cron_run_works_in_its_creators_folder_without_their_memory() {
        use hermesd_platform::Sender;
        let root = Path::new("/w");
        let job = |origin: Option<ChatRef>, created_by: Option<&str>| CronJob {
            id: "j1".into(),
            name: "daily".into(),
            prompt: "check".into(),
            schedule: "every 1d".into(),
            timezone: "UTC".into(),
            next_run_at: None,
            repeat: None,
            state: crate::store::JobState::Active,
            deliver: "origin".into(),
            origin,
            toolsets: None,
            model: None,
            created_by: created_by.map(str::to_owned),
            profile: None,
            created_at: 0,
            last_run_at: None,
            last_status: None,
            last_error: None,
            run_count: 0,
        };
        let run = InboundMessage {
            profile: None,
            message_id: "m".into(),
            chat: ChatRef { thread_id: Some("7".into()), ..ChatRef::new("cron", "j1", ChatType::Dm) },
            sender: Sender { id: "cron".into(), name: None, is_bot: false, roles: Vec::new() },
            text: "check".into(),
            attachments: vec![],
            reply_to: None,
            addressed: true,
            timestamp_ms: 0,
            history: vec![],
            chat_title: None,
            client: None,
        };
        let dm = job(Some(ChatRef::new("telegram", "42", ChatType::Dm)), Some("42"));
        let from_dm = Whose::of_turn(&run, Some(&dm));
        assert_eq!(from_dm.workdir(root), Path::new("/w/users/telegram/42"));
        assert_eq!(from_dm.person(), None, "a run's output may go anywhere: no personal memory");
        let in_group = job(Some(ChatRef::new("telegram", "-100", ChatType::Group)), Some("42"));
        assert_eq!(Whose::of_turn(&run, Some(&in_group)).workdir(root), Path::new("/w/chats/telegram/-100"));
        let operator = job(None, None);
        assert_eq!(Whose::of_turn(&run, Some(&operator)).workdir(root), Path::new("/w/chats/cron/j1"));
        assert_eq!(Whose::of_turn(&run, None).workdir(root), Path::new("/w/chats/cron/j1"), "a removed job's run");
    }
}
