//! Skills in chat: `/skills` lists the ones enabled on this platform, and `/<skill-name> [args]`
//! (a word no built-in command uses) becomes an ordinary user turn whose text is the skill's
//! instructions in a clear wrapper. The system prompt is never touched, so the cached prefix
//! stays byte-identical.

use hermesd_platform::InboundMessage;

use super::Router;
use super::commands;
use crate::store::SessionKey;

impl Router {
    /// `/skills`: the skills enabled on `platform`, one line each.
    pub(super) fn skills_text(&self, key: &SessionKey, platform: &str, prefix: char) -> String {
        let Some(skills) = self.inner.runner.skills(key) else {
            return "Skills are not enabled in this hermesd.".to_owned();
        };
        let available = skills.available(Some(platform));
        if available.is_empty() {
            return format!("No skills are available here. The operator adds them under {}.", skills.root().display());
        }
        let mut out = format!("Skills (send {prefix}<name> [what you want]):\n");
        for meta in available {
            out.push_str(&format!("{prefix}{} — {}\n", meta.name, shorten(&meta.description, 120)));
        }
        out.trim_end().to_owned()
    }

    /// `message` with its text replaced by the skill it invokes (`/<skill-name> [args]`), or
    /// unchanged when it names no skill enabled on its platform.
    pub(super) fn expand_skill(&self, key: &SessionKey, message: InboundMessage, prefix: char) -> InboundMessage {
        let Some(skills) = self.inner.runner.skills(key) else { return message };
        let Some(word) = message.text.trim().strip_prefix(prefix).and_then(|r| r.split_whitespace().next()) else {
            return message;
        };
        let name = word.split('@').next().unwrap_or(word).to_ascii_lowercase();
        if crate::agent::skills::validate_name(&name).is_err() {
            return message;
        }
        let skill = match skills.load(&name, Some(&message.chat.platform)) {
            Ok(skill) => skill,
            Err(e) => {
                tracing::debug!(skill = %name, error = %e, "not a usable skill; the text goes to the agent as it is");
                return message;
            }
        };
        let args = commands::rest(&message.text);
        let arguments =
            if args.is_empty() { "[No arguments were given.]".to_owned() } else { format!("[Arguments: {args}]") };
        let text = format!(
            "[The user invoked the skill \"{name}\" with {prefix}{name}. Follow its instructions below. \
             The skill's folder (its other files) is {}.]\n\n{}\n\n{arguments}",
            skill.meta.dir.display(),
            skill.body
        );
        InboundMessage { text, ..message }
    }
}

fn shorten(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= max {
        return line;
    }
    let mut cut: String = line.chars().take(max - 1).collect();
    cut.push('…');
    cut
}
