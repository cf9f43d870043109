//! The dangerous-command heuristic: why a command needs a human's approval before it runs. It is
//! the approval UX, not the boundary (the sandbox is): it reads a command roughly as sh would and
//! must never be trusted to catch every way of doing harm.

use std::path::Path;

use super::super::files::normalise;

const RECURSIVE_DELETE: &str = "recursively deletes a root, home, wildcard, parent or absolute path";
const DEVICE_WRITE: &str = "writes to a device";
pub(super) const OUTSIDE_WRITE: &str = "writes to a path outside the workdir";
const PIPE_TO_SHELL: &str = "pipes a download straight into a shell";
const POWER: &str = "shuts down or reboots the machine";
/// Device files a command may write to freely.
const SAFE_DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "stdout", "stderr", "tty"];
/// Programs that, given no script, run what arrives on stdin.
const INTERPRETERS: &[&str] =
    &["sh", "bash", "zsh", "dash", "ksh", "fish", "python", "python3", "perl", "ruby", "node"];
/// Words that run the next word as the command.
const WRAPPERS: &[&str] = &[
    "nohup", "exec", "time", "command", "builtin", "nice", "env", "timeout", "xargs", "{", "!", "if", "then", "do",
    "else", "while", "until",
];

/// Why `command` needs a human's approval, or `None` when it looks harmless: recursive deletes of
/// roots, home, wildcards or absolute paths; sudo/su; formatting disks and writing devices;
/// `chmod -R 777`, `chown -R`; fork bombs; downloads piped into a shell; shutdown and reboot;
/// mass kills; force pushes, hard resets, `git clean -f`; SQL `DROP TABLE`/`DROP DATABASE`;
/// writes and redirects to absolute paths other than `/tmp`. A heuristic that reads the command
/// roughly as the shell would (quotes, pipes, `;`, `&&`, redirects, `sh -c` scripts).
pub fn dangerous_reason(command: &str) -> Option<&'static str> {
    dangerous_reason_in(command, None)
}

/// As `dangerous_reason`, with writes under `workdir` counted as harmless.
pub(super) fn dangerous_reason_in(command: &str, workdir: Option<&Path>) -> Option<&'static str> {
    let squashed = command.to_ascii_lowercase().split_whitespace().collect::<Vec<_>>().join(" ");
    if squashed.contains("drop table") || squashed.contains("drop database") {
        return Some("drops a database table or a database");
    }
    if is_fork_bomb(&squashed.replace(' ', "")) {
        return Some("is a fork bomb");
    }
    let parsed = parse(command);
    let commands: Vec<Cmd<'_>> = parsed.segments.iter().map(|s| command_of(&s.words)).collect();
    for (i, cmd) in commands.iter().enumerate() {
        if let Some(reason) = command_reason(cmd, workdir) {
            return Some(reason);
        }
        let piped_into_interpreter = || {
            parsed.segments[i + 1..]
                .iter()
                .zip(&commands[i + 1..])
                .take_while(|(s, _)| s.piped)
                .any(|(_, c)| c.reads_stdin())
        };
        if matches!(cmd.name, "curl" | "wget") && piped_into_interpreter() {
            return Some(PIPE_TO_SHELL);
        }
    }
    let substituted = ["$(curl", "<(curl", "`curl", "$(wget", "<(wget", "`wget"].iter().any(|s| squashed.contains(s));
    if substituted && commands.iter().any(|c| INTERPRETERS.contains(&c.name)) {
        return Some(PIPE_TO_SHELL);
    }
    parsed.redirects.iter().find_map(|target| write_reason(target, workdir))
}

fn command_reason(cmd: &Cmd<'_>, workdir: Option<&Path>) -> Option<&'static str> {
    if cmd.elevated {
        return Some("runs a command as root (sudo)");
    }
    let args = cmd.args;
    let short_flag = |c: char| args.iter().any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(c));
    let has = |word: &str| args.iter().any(|a| a == word);
    let mut operands = args.iter().filter(|a| !a.starts_with('-'));
    let recursive = short_flag('r') || short_flag('R') || has("--recursive");
    match cmd.name {
        "rm" if recursive && operands.any(|t| risky_delete(t)) => Some(RECURSIVE_DELETE),
        "find" if has("-delete") && args.first().is_some_and(|t| risky_delete(t)) => Some(RECURSIVE_DELETE),
        "su" => Some("switches to another user (su)"),
        name if name.starts_with("mkfs") || name == "wipefs" => Some("formats or wipes a disk"),
        "dd" if args.iter().any(|a| a.strip_prefix("of=/dev/").is_some_and(|d| !SAFE_DEVICES.contains(&d))) => {
            Some(DEVICE_WRITE)
        }
        "chmod" if recursive && (has("777") || has("a+rwx")) => Some("makes files world-writable recursively"),
        "chown" | "chgrp" if recursive => Some("changes file ownership recursively"),
        "shutdown" | "reboot" | "halt" | "poweroff" => Some(POWER),
        "systemctl" | "init" | "telinit" if ["reboot", "poweroff", "halt", "0", "6"].iter().any(|w| has(w)) => {
            Some(POWER)
        }
        "kill" if args.iter().skip(1).any(|a| a == "-1") => Some("kills every process (kill -1)"),
        "killall" | "pkill" => Some("kills processes by name"),
        "git" => git_reason(args),
        "tee" => operands.find_map(|t| write_reason(t, workdir)),
        "eval" => dangerous_reason_in(&args.join(" "), workdir),
        name if INTERPRETERS.contains(&name) => {
            let script = args.iter().position(|a| a == "-c").and_then(|at| args.get(at + 1));
            script.and_then(|script| dangerous_reason_in(script, workdir))
        }
        _ => None,
    }
}

fn risky_delete(target: &str) -> bool {
    target.starts_with(['/', '~', '*', '$']) || target.starts_with("../") || matches!(target, "." | ".." | "./" | "./*")
}

fn git_reason(args: &[String]) -> Option<&'static str> {
    let mut words = args.iter().map(String::as_str);
    let sub = loop {
        match words.next()? {
            "-C" | "-c" => {
                words.next();
            }
            flag if flag.starts_with('-') => {}
            sub => break sub,
        }
    };
    let rest: Vec<&str> = words.collect();
    let force = rest.iter().any(|a| {
        *a == "--force" || a.starts_with("--force-") || (a.starts_with('-') && !a.starts_with("--") && a.contains('f'))
    });
    match sub {
        "push" if force || rest.iter().any(|a| a.starts_with('+')) => {
            Some("force-pushes, rewriting the remote's history")
        }
        "reset" if rest.contains(&"--hard") => Some("discards uncommitted work (git reset --hard)"),
        "clean" if force => Some("deletes untracked files (git clean -f)"),
        _ => None,
    }
}

/// Writing to `target` is risky when it is a device, or an absolute or home path outside `/tmp`
/// and the workdir.
fn write_reason(target: &str, workdir: Option<&Path>) -> Option<&'static str> {
    if let Some(device) = target.strip_prefix("/dev/") {
        return (!SAFE_DEVICES.contains(&device) && !device.starts_with("fd/")).then_some(DEVICE_WRITE);
    }
    if target.starts_with('~') || target.starts_with("$HOME") || target.starts_with("../") {
        return Some(OUTSIDE_WRITE);
    }
    if !target.starts_with('/') {
        return None;
    }
    let path = normalise(Path::new(target));
    let harmless = path.starts_with("/tmp") || workdir.is_some_and(|w| path.starts_with(normalise(w)));
    (!harmless).then_some(OUTSIDE_WRITE)
}

/// `name(){ name|name& }` with whitespace removed, for any function name (`:` classically).
fn is_fork_bomb(compact: &str) -> bool {
    compact.match_indices("(){").any(|(at, _)| {
        let name = compact[..at].rsplit([';', '&', '|', '{', '}', '(', ')']).next().unwrap_or_default();
        !name.is_empty() && compact[at..].contains(&format!("{name}|{name}&"))
    })
}

/// A command line split into simple commands, plus every redirect target.
#[derive(Default)]
struct Parsed {
    segments: Vec<Segment>,
    redirects: Vec<String>,
}

#[derive(Default)]
struct Segment {
    words: Vec<String>,
    /// Its stdin is the previous segment's stdout.
    piped: bool,
}

/// A segment's command word (its base name), the words after it, and whether sudo runs it.
struct Cmd<'a> {
    name: &'a str,
    args: &'a [String],
    elevated: bool,
}

impl Cmd<'_> {
    /// An interpreter given no script, so it runs its stdin.
    fn reads_stdin(&self) -> bool {
        INTERPRETERS.contains(&self.name)
            && self.args.first().is_none_or(|a| a.starts_with('-') && a != "-c" && a != "-m")
    }
}

fn command_of(words: &[String]) -> Cmd<'_> {
    let mut elevated = false;
    for (i, word) in words.iter().enumerate() {
        let name = word.rsplit('/').next().unwrap_or(word);
        let prefix_noise = i > 0 && (word.starts_with('-') || word.parse::<u32>().is_ok());
        if is_assignment(word) || prefix_noise || WRAPPERS.contains(&name) {
            continue;
        }
        if matches!(name, "sudo" | "doas") {
            elevated = true;
            continue;
        }
        return Cmd { name, args: &words[i + 1..], elevated };
    }
    Cmd { name: "", args: &[], elevated }
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// Builds a `Parsed` one character at a time.
#[derive(Default)]
struct Parser {
    parsed: Parsed,
    segment: Segment,
    word: String,
    in_word: bool,
    redirect: bool,
}

impl Parser {
    fn end_word(&mut self) {
        if std::mem::take(&mut self.in_word) {
            let word = std::mem::take(&mut self.word);
            if std::mem::take(&mut self.redirect) {
                self.parsed.redirects.push(word);
            } else {
                self.segment.words.push(word);
            }
        }
    }

    fn end_segment(&mut self, piped_next: bool) {
        self.end_word();
        let segment = std::mem::replace(&mut self.segment, Segment { words: Vec::new(), piped: piped_next });
        if !segment.words.is_empty() {
            self.parsed.segments.push(segment);
        }
    }
}

/// Split `command` roughly as sh would: quotes and backslashes, `|`, `||`, `&&`, `&`, `;`,
/// newlines, subshells and substitutions as separators, and `>`/`>>`/`&>` redirects.
fn parse(command: &str) -> Parsed {
    let mut p = Parser::default();
    let mut chars = command.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                p.in_word = true;
                p.word.extend(chars.by_ref().take_while(|&q| q != '\''));
            }
            '"' => {
                p.in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => p.word.extend(chars.next()),
                        q => p.word.push(q),
                    }
                }
            }
            '\\' => {
                p.in_word = true;
                p.word.extend(chars.next());
            }
            '|' => {
                let or = chars.next_if_eq(&'|').is_some();
                chars.next_if_eq(&'&');
                p.end_segment(!or);
            }
            '&' if chars.next_if_eq(&'>').is_some() => {
                chars.next_if_eq(&'>');
                p.end_word();
                p.redirect = true;
            }
            '&' => {
                chars.next_if_eq(&'&');
                p.end_segment(false);
            }
            ';' | '\n' | '(' | ')' | '`' => p.end_segment(false),
            '$' if chars.next_if_eq(&'(').is_some() => p.end_segment(false),
            '>' => {
                // A number right before `>` names a descriptor, not a word.
                if p.word.chars().all(|d| d.is_ascii_digit()) {
                    p.word.clear();
                    p.in_word = false;
                }
                p.end_word();
                chars.next_if_eq(&'>');
                chars.next_if_eq(&'|');
                if chars.next_if_eq(&'&').is_some() {
                    while chars.next_if(|d| d.is_ascii_digit() || *d == '-').is_some() {}
                } else {
                    p.redirect = true;
                }
            }
            '<' if chars.next_if_eq(&'(').is_some() => p.end_segment(false),
            c if c.is_whitespace() || c == '<' => p.end_word(),
            c => {
                p.in_word = true;
                p.word.push(c);
            }
        }
    }
    p.end_segment(false);
    p.parsed
}
