//! In-chat commands, one clap-derived enum parsed from message text. The doc comment of each
//! variant is its `/help` line. Control commands run on the control lane: never behind a turn.
//!
//! The enum is `ChatCommand`.

use clap::{CommandFactory, Parser, Subcommand};

/// A command typed in a chat.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
#[command(disable_help_subcommand = true)]
pub enum ChatCommand {
    /// Start a fresh session (stops a running turn; the old one stays in /sessions)
    #[command(alias = "reset")]
    New,
    /// List this chat's recent sessions
    Sessions,
    /// Return to an earlier session: its number in /sessions or words of its title (default: the previous one)
    Resume {
        /// A number from /sessions, or words of the title.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Stop the running turn
    Stop,
    /// Show this session, its queue and the model
    Status,
    /// Show who you are here, the profile and route answering this chat, and the model
    Whoami,
    /// Summarise older history now to free context
    Compress,
    /// Approve the pending action: once, for this session, or always (the same command)
    Approve {
        /// `once` (the default), `session` or `always`.
        scope: Option<String>,
    },
    /// List the commands you approved for good, or revoke them (`revoke N` or `revoke all`)
    Approvals {
        /// Nothing, or `revoke N|all`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Deny the pending action
    Deny,
    /// Run your last message again (its old answer is removed)
    Retry,
    /// Remove the last exchange from the conversation
    Undo,
    /// Show the model, or switch this session to another configured one
    Model {
        /// A configured model name; `default` goes back to the primary.
        name: Option<String>,
    },
    /// Show this session's title, or set it
    Title {
        /// The new title.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Make this chat the platform's home channel for deliveries
    Sethome,
    /// Queue a message behind the running turn, whatever the busy policy
    Queue {
        /// The message.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Add a message to the running turn (or start one)
    Steer {
        /// The message.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
    /// Show this session's context and message usage
    Usage,
    /// Show the model's reasoning before its answers in this session, or stop showing it
    Reasoning {
        /// `on` or `off`; without it, the current setting.
        #[arg(value_enum)]
        mode: Option<Toggle>,
    },
    /// List the skills available here (run one with /<name> [args])
    Skills,
    /// List the commands
    Help,
}

/// An on/off argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Toggle {
    /// Turn it on.
    On,
    /// Turn it off.
    Off,
}

#[derive(Debug, Parser)]
#[command(no_binary_name = true, disable_help_flag = true, disable_version_flag = true)]
struct CommandLine {
    #[command(subcommand)]
    command: ChatCommand,
}

/// What the text of a message means to the command parser.
#[derive(Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Not a command of ours: the agent gets the text.
    NotACommand,
    /// A known command.
    Command(ChatCommand),
    /// A known command with bad arguments: tell the user.
    Invalid(String),
}

/// Parse `text` when it starts with `prefix` (`/`, or `!` on Slack). `/cmd@botname` is accepted.
pub fn parse(text: &str, prefix: char) -> Parsed {
    let Some(rest) = text.trim().strip_prefix(prefix) else { return Parsed::NotACommand };
    let mut words = rest.split_whitespace();
    let Some(first) = words.next() else { return Parsed::NotACommand };
    let name = first.split('@').next().unwrap_or(first).to_ascii_lowercase();
    let known = CommandLine::command()
        .get_subcommands()
        .any(|c| c.get_name() == name || c.get_all_aliases().any(|a| a == name));
    if !known {
        return Parsed::NotACommand;
    }
    let args = std::iter::once(name.as_str()).chain(words);
    match CommandLine::try_parse_from(args) {
        Ok(line) => Parsed::Command(line.command),
        Err(e) => Parsed::Invalid(e.render().to_string().lines().next().unwrap_or("invalid command").to_owned()),
    }
}

/// The text after the command word, as typed (`/queue  a  b` → `a  b`).
pub fn rest(text: &str) -> &str {
    let text = text.trim();
    text.find(char::is_whitespace).map_or("", |at| text[at..].trim())
}

/// Every built-in command name and alias (skills may not take them: the command would win).
pub fn names() -> Vec<String> {
    let command = CommandLine::command();
    let mut names = Vec::new();
    for sub in command.get_subcommands() {
        names.push(sub.get_name().to_owned());
        names.extend(sub.get_all_aliases().map(str::to_owned));
    }
    names
}

/// The `/help` text, from the variants' doc comments.
pub fn help(prefix: char) -> String {
    let mut out = String::from("Commands:\n");
    for command in CommandLine::command().get_subcommands() {
        let about = command.get_about().map(|a| a.to_string()).unwrap_or_default();
        out.push_str(&format!("{prefix}{} — {about}\n", command.get_name()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_commands() {
        assert_eq!(parse("/stop", '/'), Parsed::Command(ChatCommand::Stop));
        assert_eq!(parse("  /status@hermes_bot ", '/'), Parsed::Command(ChatCommand::Status));
        assert_eq!(parse("/reset", '/'), Parsed::Command(ChatCommand::New));
        assert_eq!(parse("!new", '!'), Parsed::Command(ChatCommand::New));
        assert_eq!(parse("/new", '!'), Parsed::NotACommand);
        assert_eq!(parse("/unknown thing", '/'), Parsed::NotACommand);
        assert_eq!(parse("hello /stop", '/'), Parsed::NotACommand);
        assert!(matches!(parse("/stop now please", '/'), Parsed::Invalid(_)));
        assert_eq!(parse("/model", '/'), Parsed::Command(ChatCommand::Model { name: None }));
        assert_eq!(
            parse("/model qwen3:8b", '/'),
            Parsed::Command(ChatCommand::Model { name: Some("qwen3:8b".into()) })
        );
        assert!(matches!(parse("/queue -v do it", '/'), Parsed::Command(ChatCommand::Queue { .. })));
        assert!(matches!(parse("!steer also check x", '!'), Parsed::Command(ChatCommand::Steer { .. })));
        assert_eq!(parse("/sethome", '/'), Parsed::Command(ChatCommand::Sethome));
        assert_eq!(rest("/queue   look  at this "), "look  at this");
        assert_eq!(rest("/usage"), "");
        assert_eq!(parse("/skills", '/'), Parsed::Command(ChatCommand::Skills));
        assert_eq!(parse("/reasoning on", '/'), Parsed::Command(ChatCommand::Reasoning { mode: Some(Toggle::On) }));
        assert_eq!(parse("!reasoning off", '!'), Parsed::Command(ChatCommand::Reasoning { mode: Some(Toggle::Off) }));
        assert_eq!(parse("/reasoning", '/'), Parsed::Command(ChatCommand::Reasoning { mode: None }));
        assert!(matches!(parse("/reasoning maybe", '/'), Parsed::Invalid(_)));
        assert_eq!(parse("/standup tomorrow", '/'), Parsed::NotACommand);
        assert_eq!(parse("/sessions", '/'), Parsed::Command(ChatCommand::Sessions));
        assert_eq!(parse("/resume", '/'), Parsed::Command(ChatCommand::Resume { words: vec![] }));
        assert_eq!(
            parse("!resume rocket plans", '!'),
            Parsed::Command(ChatCommand::Resume { words: vec!["rocket".into(), "plans".into()] })
        );
        assert_eq!(parse("/resume 2", '/'), Parsed::Command(ChatCommand::Resume { words: vec!["2".into()] }));
        let names = names();
        assert!(names.iter().any(|n| n == "reset") && names.iter().any(|n| n == "skills"), "{names:?}");
    }

    #[test]
    fn help_lists_every_command() {
        let text = help('/');
        for name in [
            "/new",
            "/stop",
            "/status",
            "/compress",
            "/retry",
            "/undo",
            "/model",
            "/title",
            "/sethome",
            "/approve",
            "/deny",
            "/queue",
            "/steer",
            "/usage",
            "/reasoning",
            "/skills",
            "/sessions",
            "/resume",
            "/help",
        ] {
            assert!(text.contains(name), "{text}");
        }
    }
}
