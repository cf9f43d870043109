//! Prompt scanner (`scan_prompt`, refusing with a `ScanRefusal`), first for cron jobs (DESIGN.md
//! §8): refuses prompts that try to override the agent's instructions, read credential files,
//! send secrets out, or hide text in invisible characters. Cron prompts pass it at create time
//! and again at run time; skills pass it when changed, and `SOUL.md` and the workdir's context
//! files before they enter a prompt. A tripwire for the obvious, not a sandbox; pure.

/// Why a prompt was refused. Each variant names the offending text so the user can fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScanRefusal {
    /// A phrase that tries to replace or reveal the agent's instructions.
    #[error("prompt tries to override the agent's instructions: '{phrase}'")]
    InstructionOverride {
        /// The phrase as written, whitespace collapsed.
        phrase: String,
    },
    /// A reference to a file that holds credentials.
    #[error("prompt reads a credential file: '{path}'")]
    CredentialFile {
        /// The path as written.
        path: String,
    },
    /// A network tool combined with secrets, or output piped into one.
    #[error("prompt may send secrets out: {detail}")]
    Exfiltration {
        /// What was found, e.g. "curl with $OPENAI_API_KEY".
        detail: String,
    },
    /// An invisible or bidirectional-control character, which can hide text from a reviewer.
    #[error("prompt contains the invisible or bidirectional control character U+{codepoint:04X} at character {index}")]
    HiddenCharacter {
        /// The character's code point.
        codepoint: u32,
        /// Its position, counted in characters from 0.
        index: usize,
    },
}

/// Checks a job prompt; `Ok(())` means nothing suspicious was found.
pub fn scan_prompt(text: &str) -> Result<(), ScanRefusal> {
    hidden_characters(text)?;
    let words = words(text);
    instruction_override(&words)?;
    exfiltration(text, &words)?;
    if let Some(path) = credential_path(text) {
        return Err(ScanRefusal::CredentialFile { path: path.to_owned() });
    }
    Ok(())
}

fn hidden_characters(text: &str) -> Result<(), ScanRefusal> {
    let hidden = |c: char| {
        matches!(c as u32,
            0x061C // Arabic letter mark, a bidi control
            | 0x200B..=0x200F // zero-width space/joiners, LRM/RLM
            | 0x202A..=0x202E // bidi embeddings and overrides
            | 0x2060..=0x2064 // word joiner, invisible operators
            | 0x2066..=0x2069 // bidi isolates
            | 0xFEFF // zero-width no-break space
            | 0xE0000..=0xE007F) // tag characters, which can spell hidden ASCII
    };
    match text.chars().enumerate().find(|(_, c)| hidden(*c)) {
        Some((index, c)) => Err(ScanRefusal::HiddenCharacter { codepoint: c as u32, index }),
        None => Ok(()),
    }
}

/// Words for phrase matching: runs of letters, digits, `_` and `'`, so extra spaces, line
/// breaks and punctuation between words do not matter.
fn words(text: &str) -> Vec<&str> {
    text.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == '\'')).filter(|w| !w.is_empty()).collect()
}

/// One position in an override phrase.
enum Slot {
    /// Exactly one of these words.
    One(&'static [&'static str]),
    /// Up to four words from this set (fillers such as "all of the").
    Any(&'static [&'static str]),
}

const OVERRIDE_VERBS: &[&str] = &["ignore", "disregard", "forget", "override", "bypass"];
const FILLERS: &[&str] = &["all", "any", "the", "of", "your", "my", "these", "those", "every", "me", "us"];
const EARLIER: &[&str] = &["previous", "prior", "above", "earlier", "preceding", "former", "system", "original"];
const RULES: &[&str] = &["instructions", "instruction", "prompt", "prompts", "rules", "directions", "guidelines"];
const REVEAL_VERBS: &[&str] = &["reveal", "print", "show", "repeat", "output", "leak", "dump", "display", "disclose"];
const HIDDEN: &[&str] = &["system", "hidden", "secret", "initial"];
const PROMPT: &[&str] = &["prompt", "prompts", "instructions"];

const OVERRIDES: &[&[Slot]] = &[
    // "ignore all previous instructions", "disregard your system prompt"
    &[Slot::One(OVERRIDE_VERBS), Slot::Any(FILLERS), Slot::One(EARLIER), Slot::One(RULES)],
    // "reveal your system prompt", "print the hidden instructions"
    &[Slot::One(REVEAL_VERBS), Slot::Any(FILLERS), Slot::One(HIDDEN), Slot::One(PROMPT)],
];

/// Persona words that follow "you are now" in jailbreaks. "DAN" only counts in capitals, so that
/// "you are now talking to Dan" passes.
const PERSONAS: &[&str] = &["unrestricted", "jailbroken", "unfiltered", "uncensored"];

fn instruction_override(words: &[&str]) -> Result<(), ScanRefusal> {
    let refuse = |phrase: &[&str]| Err(ScanRefusal::InstructionOverride { phrase: phrase.join(" ") });
    for start in 0..words.len() {
        let rest = &words[start..];
        if let Some(len) = OVERRIDES.iter().find_map(|slots| match_slots(rest, slots)) {
            return refuse(&rest[..len]);
        }
        let lead = match rest {
            [you, are, now, ..] if eq(you, "you") && eq(are, "are") && eq(now, "now") => 3,
            [youre, now, ..] if eq(youre, "you're") && eq(now, "now") => 2,
            _ => continue,
        };
        let window = &rest[lead..rest.len().min(lead + 6)];
        if let Some(at) = window.iter().position(|w| *w == "DAN" || PERSONAS.iter().any(|p| eq(w, p))) {
            return refuse(&rest[..lead + at + 1]);
        }
    }
    Ok(())
}

/// How many words from the start of `words` match `slots`, if they do.
fn match_slots(words: &[&str], slots: &[Slot]) -> Option<usize> {
    let Some((slot, rest)) = slots.split_first() else { return Some(0) };
    let in_set = |w: &&str, set: &[&str]| set.iter().any(|s| eq(w, s));
    match slot {
        Slot::One(set) => {
            if !words.first().is_some_and(|w| in_set(w, set)) {
                return None;
            }
            match_slots(&words[1..], rest).map(|n| n + 1)
        }
        Slot::Any(set) => {
            let available = words.iter().take(4).take_while(|w| in_set(w, set)).count();
            (0..=available).rev().find_map(|k| match_slots(&words[k..], rest).map(|n| n + k))
        }
    }
}

fn eq(word: &str, expected: &str) -> bool {
    word.eq_ignore_ascii_case(expected)
}

const NET_TOOLS: &[&str] = &["curl", "wget", "nc", "ncat", "netcat", "socat"];
const SECRET_MARKERS: &[&str] = &["KEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL"];

fn exfiltration(text: &str, words: &[&str]) -> Result<(), ScanRefusal> {
    let refuse = |detail: String| Err(ScanRefusal::Exfiltration { detail });
    if let Some(tool) = piped_into_net_tool(text) {
        return refuse(format!("output piped into {tool}"));
    }
    let Some(tool) = words.iter().find(|w| NET_TOOLS.iter().any(|t| eq(w, t))) else {
        return Ok(());
    };
    if let Some(var) = secret_variable(text) {
        return refuse(format!("{tool} with {var}"));
    }
    if let Some(dump) = environment_dump(text, words) {
        return refuse(format!("{tool} with {dump}"));
    }
    if let Some(path) = credential_path(text) {
        return refuse(format!("{tool} with {path}"));
    }
    Ok(())
}

/// `| curl`, `|nc` and the like: anything on the left ends up on the network.
fn piped_into_net_tool(text: &str) -> Option<&'static str> {
    text.match_indices('|').find_map(|(at, _)| {
        let after = text[at + 1..].trim_start();
        let word = after.split(|c: char| !c.is_ascii_alphanumeric()).next()?;
        NET_TOOLS.iter().copied().find(|tool| eq(word, tool))
    })
}

/// `$OPENAI_API_KEY`, `${GITHUB_TOKEN}`: a shell variable whose name suggests a secret.
fn secret_variable(text: &str) -> Option<&str> {
    text.match_indices('$').find_map(|(at, _)| {
        let rest = &text[at + 1..];
        let name_start = usize::from(rest.starts_with('{'));
        let name = &rest[name_start..];
        let len = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(name.len());
        let upper = name[..len].to_ascii_uppercase();
        let closing = usize::from(name_start == 1 && name[len..].starts_with('}'));
        SECRET_MARKERS.iter().any(|m| upper.contains(m)).then(|| &text[at..at + 1 + name_start + len + closing])
    })
}

/// `printenv`, `/proc/self/environ`, or `env` used as a command (`$(env)`, `` `env` ``,
/// `env | …`, "run env") rather than as a word ("the staging env").
fn environment_dump(text: &str, words: &[&str]) -> Option<&'static str> {
    if words.iter().any(|w| eq(w, "printenv")) {
        return Some("printenv");
    }
    let lower = text.to_ascii_lowercase();
    if lower.contains("/proc/self/environ") {
        return Some("/proc/self/environ");
    }
    let is_command = lower.match_indices("env").any(|(at, _)| {
        let before = lower[..at].trim_end();
        let after = lower[at + 3..].trim_start();
        let word_start = !lower[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == '$');
        let word_end = !lower[at + 3..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
        let verb = before.rsplit(char::is_whitespace).next().is_some_and(|w| ["run", "execute", "exec"].contains(&w));
        let command_before = before.is_empty() || before.ends_with(['(', '`', '|', ';', '&']) || verb;
        let command_after = after.is_empty() || after.starts_with(['|', ')', '`', '>', ';', '&']);
        word_start && word_end && (command_before || command_after)
    });
    is_command.then_some("env")
}

/// Substrings that name a credential file wherever they appear.
const CREDENTIAL_PATHS: &[&str] = &[
    ".ssh/",
    "/.ssh",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "/etc/shadow",
    "/etc/gshadow",
    ".aws/credentials",
    "credentials.json",
    ".netrc",
    ".git-credentials",
    ".pgpass",
    ".kube/config",
    ".docker/config.json",
];

/// The first credential path in `text`, as written (the whitespace-delimited word holding it).
fn credential_path(text: &str) -> Option<&str> {
    let lower = text.to_ascii_lowercase();
    let fixed = CREDENTIAL_PATHS.iter().filter_map(|needle| lower.find(needle).map(|at| (at, needle.len())));
    // `.env` only as a file name (`.env`, `~/app/.env.local`), not inside `.environment`.
    let dotenv = lower
        .match_indices(".env")
        .find(|(at, _)| {
            let name_start = !lower[..*at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
            let name_end = !lower[at + 4..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
            name_start && name_end
        })
        .map(|(at, m)| (at, m.len()));
    // `*.pem`, `server.pem`: a file name ending in `.pem`.
    let pem = lower
        .match_indices(".pem")
        .find(|(at, _)| {
            let has_name = lower[..*at].ends_with(|c: char| c.is_alphanumeric() || "_-*".contains(c));
            let name_end = !lower[at + 4..].starts_with(|c: char| c.is_alphanumeric() || c == '_');
            has_name && name_end
        })
        .map(|(at, m)| (at, m.len()));
    let (at, len) = fixed.chain(dotenv).chain(pem).min_by_key(|(at, _)| *at)?;
    Some(word_around(text, at, at + len))
}

/// The whitespace-delimited word holding `text[start..end]`, without surrounding quotes or
/// punctuation. `to_ascii_lowercase` keeps byte offsets, so offsets into the lowercase copy hold.
fn word_around(text: &str, start: usize, end: usize) -> &str {
    let from = text[..start].char_indices().rfind(|(_, c)| c.is_whitespace()).map_or(0, |(i, c)| i + c.len_utf8());
    let to = text[end..].find(char::is_whitespace).map_or(text.len(), |i| end + i);
    // A leading `.` or `~` belongs to the path; a trailing `.` or `,` ends the sentence.
    text[from..to]
        .trim_start_matches(|c: char| "\"'`([{<@".contains(c))
        .trim_end_matches(|c: char| "\"'`)]}>,;:.!?".contains(c))
}

#[cfg(test)]
mod tests;
