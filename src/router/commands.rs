//! In-chat commands, one clap-derived enum parsed from message text. The doc comment of each
//! variant is its `/help` line. Control commands run on the control lane: never behind a turn.

use clap::{CommandFactory, Parser, Subcommand};

/// A command typed in a chat.
#[derive(Debug, Clone, PartialEq, Eq, Subcommand)]
#[command(disable_help_subcommand = true)]
pub enum ChatCommand {
    /// Start a fresh session (the old one stays searchable)
    #[command(alias = "reset")]
    New,
    /// Stop the running turn
    Stop,
    /// Show this session, its queue and the model
    Status,
    /// Summarise older history now to free context
    Compress,
    /// Approve the pending action
    Approve,
    /// Deny the pending action
    Deny,
    /// List the commands
    Help,
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
    }

    #[test]
    fn help_lists_every_command() {
        let text = help('/');
        for name in ["/new", "/stop", "/status", "/help"] {
            assert!(text.contains(name), "{text}");
        }
    }
}
