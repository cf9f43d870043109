//! A delivery target as written (DESIGN.md §8): `origin`, `local`, `<platform>` (its home channel)
//! or `<platform>:<chat_id>[:<thread_id>]`. Parsing and printing only; resolving one against the
//! running platforms is the delivery floor's (`delivery::Targets`). `Target` parses and prints;
//! `TargetError` says why a text is none. Config validation checks a target with it, without
//! reaching up to the delivery floor.

use std::fmt;

/// A delivery target as written in config, a tool call or the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The chat a job or message came from.
    Origin,
    /// A file under the data dir (`deliveries/inbox.md`).
    Local,
    /// A platform's home channel (`/sethome`, or `<PLATFORM>_HOME_CHANNEL`).
    Home(String),
    /// An explicit chat, optionally a thread in it.
    Chat {
        /// Platform name.
        platform: String,
        /// Chat id on that platform.
        chat_id: String,
        /// Thread id.
        thread_id: Option<String>,
    },
}

/// Why a target cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetError {
    /// Not in any accepted form.
    #[error("invalid delivery target {0:?}: use origin, local, <platform> or <platform>:<chat_id>[:<thread_id>]")]
    Invalid(String),
    /// `origin` where there is no originating chat.
    #[error("delivery target origin: there is no originating chat here")]
    NoOrigin,
    /// A platform that is not running in this daemon.
    #[error("delivery target {target}: platform {platform:?} is not enabled (running: {running})")]
    UnknownPlatform {
        /// The target as written.
        target: String,
        /// The platform named.
        platform: String,
        /// The platforms that are running.
        running: String,
    },
    /// `<platform>` without a home channel.
    #[error(
        "delivery target {0}: no home channel; send /sethome in the chat that should get deliveries, or set {upper}_HOME_CHANNEL",
        upper = .0.to_ascii_uppercase()
    )]
    NoHome(String),
    /// The store could not be read.
    #[error("delivery target: {0}")]
    Store(String),
}

impl Target {
    /// Parse a target.
    pub fn parse(text: &str) -> Result<Self, TargetError> {
        let text = text.trim();
        let invalid = || TargetError::Invalid(text.to_owned());
        let valid_part = |part: &str| !part.is_empty() && !part.chars().any(char::is_whitespace);
        match text {
            "origin" => return Ok(Target::Origin),
            "local" => return Ok(Target::Local),
            _ => {}
        }
        let mut parts = text.splitn(3, ':');
        let platform = parts.next().filter(|p| valid_part(p)).ok_or_else(invalid)?;
        // `telegram`, or an account of it: `telegram@work`.
        let (name, account) = platform.split_once('@').map_or((platform, None), |(p, a)| (p, Some(a)));
        let name_ok = name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        let account_ok = account.is_none_or(|a| {
            !a.is_empty() && a.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
        });
        if name.is_empty() || !name_ok || !account_ok {
            return Err(invalid());
        }
        match (parts.next(), parts.next()) {
            (None, _) => Ok(Target::Home(platform.to_owned())),
            (Some(chat), thread) if valid_part(chat) && thread.is_none_or(valid_part) => Ok(Target::Chat {
                platform: platform.to_owned(),
                chat_id: chat.to_owned(),
                thread_id: thread.map(str::to_owned),
            }),
            _ => Err(invalid()),
        }
    }
}

/// `target` (as written) sent from the platform's account `account` (`hermesd send --account`):
/// `telegram:42` becomes `telegram@work:42`. A target that names an account or no platform is an
/// error.
pub fn on_account(target: &str, account: &str) -> Result<String, String> {
    let with = |platform: &str| {
        if platform.contains('@') {
            return Err(format!("{target}: names an account already; leave out --account"));
        }
        Ok(format!("{platform}@{account}"))
    };
    let moved = match Target::parse(target).map_err(|e| e.to_string())? {
        Target::Home(platform) => Target::Home(with(&platform)?),
        Target::Chat { platform, chat_id, thread_id } => {
            Target::Chat { platform: with(&platform)?, chat_id, thread_id }
        }
        Target::Origin | Target::Local => return Err(format!("{target}: --account needs a platform target")),
    };
    // The account must be a name the target form accepts.
    Target::parse(&moved.to_string()).map(|t| t.to_string()).map_err(|_| format!("{account:?} is not an account name"))
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Origin => f.write_str("origin"),
            Target::Local => f.write_str("local"),
            Target::Home(platform) => f.write_str(platform),
            Target::Chat { platform, chat_id, thread_id: None } => write!(f, "{platform}:{chat_id}"),
            Target::Chat { platform, chat_id, thread_id: Some(thread) } => write!(f, "{platform}:{chat_id}:{thread}"),
        }
    }
}
