//! `/approvals`: the commands the sender approved for good (`/approve always`) on this adapter,
//! numbered; `/approvals revoke N` or `revoke all` takes them back.

use hermesd_platform::InboundMessage;

use super::Router;

impl Router {
    pub(super) async fn approvals_command(&self, message: &InboundMessage, words: &[String], prefix: char) -> String {
        let store = self.inner.runner.store();
        let (platform, user) = (message.chat.platform.as_str(), message.sender.id.as_str());
        let grants = match store.grants(Some((platform, user))).await {
            Ok(grants) => grants,
            Err(e) => return format!("Could not read your approvals: {e}"),
        };
        let usage = format!("{prefix}approvals lists them; {prefix}approvals revoke N or {prefix}approvals revoke all");
        match (words.first().map(String::as_str), words.get(1).map(String::as_str)) {
            (None, _) if grants.is_empty() => {
                format!("You have approved no command for good. ({prefix}approve always does, when one is asked.)")
            }
            (None, _) => {
                let lines: Vec<String> =
                    grants.iter().enumerate().map(|(i, g)| format!("{}. `{}`", i + 1, g.pattern)).collect();
                format!("Commands you approved for good:\n{}\n{usage}", lines.join("\n"))
            }
            (Some("revoke"), Some("all")) => match store.revoke_grants(platform, user, None).await {
                Ok(n) => format!("Revoked {n} approvals: every command asks again."),
                Err(e) => format!("Could not revoke: {e}"),
            },
            (Some("revoke"), Some(n)) => match n.parse::<usize>().ok().and_then(|n| grants.get(n.checked_sub(1)?)) {
                Some(grant) => match store.revoke_grants(platform, user, Some(&grant.pattern)).await {
                    Ok(_) => format!("Revoked: `{}` asks again.", grant.pattern),
                    Err(e) => format!("Could not revoke: {e}"),
                },
                None => format!("There is no approval {n}. {usage}"),
            },
            _ => usage,
        }
    }
}
