//! Access control, default deny: who may talk to the agent on each chat platform.
//!
//! Allowed: users in `<PLATFORM>_ALLOWED_USERS` or `GATEWAY_ALLOWED_USERS` (comma-separated ids),
//! holders of a role in `<PLATFORM>_ALLOWED_ROLES` (Discord),
//! everyone when `<PLATFORM>_ALLOW_ALL_USERS` or `GATEWAY_ALLOW_ALL_USERS` is true, and users an
//! operator approved with `hermesd pairing approve`. An unknown user in a DM gets a pairing code;
//! in a group they are ignored without a reply. The HTTP API (bearer key) and the terminal (the
//! operator's own shell) authenticate otherwise and are always allowed here.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use hermesd_platform::{ChatType, Sender};
use rand::Rng;
use sha2::{Digest, Sha256};

use crate::clock::now_ms;
use crate::config::Env;
use crate::store::{PairingApproval, PairingLimits, PairingRequest, PairingSubject, Store, StoreError};

/// Letters and digits that cannot be confused with each other (no 0/O, 1/I/L).
const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Length of a pairing code.
pub const CODE_LEN: usize = 8;

/// Pairing limits: codes live an hour, three may wait per platform, one request per user per ten
/// minutes, and five wrong approvals lock the platform's approvals for fifteen minutes.
pub const LIMITS: PairingLimits =
    PairingLimits { ttl_ms: 3_600_000, max_pending: 3, min_interval_ms: 600_000, max_failures: 5, lockout_ms: 900_000 };

#[derive(Debug, Default, Clone)]
struct Rule {
    users: HashSet<String>,
    /// Role ids whose holders are allowed (`<PLATFORM>_ALLOWED_ROLES`; Discord).
    roles: HashSet<String>,
    all: bool,
}

/// What to do with a message from a sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let it through.
    Allow,
    /// Unknown DM sender: answer with this text (a pairing code or why there is none).
    Pair(String),
    /// Unknown sender in a group: drop without reply.
    Ignore,
}

/// The access policy.
pub struct Access {
    rules: HashMap<String, Rule>,
    gateway: Rule,
    store: Arc<dyn Store>,
}

fn parse_users(value: Option<String>) -> HashSet<String> {
    value.unwrap_or_default().split(',').map(str::trim).filter(|u| !u.is_empty()).map(str::to_owned).collect()
}

fn parse_bool(value: Option<String>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

/// Platforms that authenticate their own way.
fn trusted(platform: &str) -> bool {
    // Cron runs come from the operator's own jobs; webhook deliveries passed their signature.
    matches!(platform, "api" | "terminal" | "cron" | "webhook")
}

impl Access {
    /// Read the allowlists for `platforms` from `env`.
    pub fn from_env<'a>(env: &Env, platforms: impl IntoIterator<Item = &'a str>, store: Arc<dyn Store>) -> Self {
        let rule = |prefix: &str| Rule {
            users: parse_users(env.var(&format!("{prefix}_ALLOWED_USERS"))),
            roles: parse_users(env.var(&format!("{prefix}_ALLOWED_ROLES"))),
            all: parse_bool(env.var(&format!("{prefix}_ALLOW_ALL_USERS"))),
        };
        let rules = platforms.into_iter().map(|p| (p.to_owned(), rule(&p.to_ascii_uppercase()))).collect();
        Self { rules, gateway: rule("GATEWAY"), store }
    }

    /// Decide for a message from `sender` in a chat of `chat_type` on `platform`.
    pub async fn check(
        &self,
        platform: &str,
        chat_id: &str,
        chat_type: ChatType,
        sender: &Sender,
    ) -> Result<Decision, StoreError> {
        if trusted(platform) || self.listed(platform, sender) || self.store.is_approved(platform, &sender.id).await? {
            return Ok(Decision::Allow);
        }
        if chat_type != ChatType::Dm {
            return Ok(Decision::Ignore);
        }
        let code = new_code();
        let who = PairingSubject { platform, user_id: &sender.id, user_name: sender.name.as_deref(), chat_id };
        let outcome = self.store.request_pairing(&who, &hash_code(&code), &LIMITS, now_ms()).await?;
        tracing::info!(platform, ?outcome, "pairing requested by an unknown user");
        Ok(Decision::Pair(match outcome {
            PairingRequest::Created => format!(
                "Hi! I don't know you yet. Your pairing code is {code} (valid for 1 hour).\n\
                 Ask the operator to run: hermesd pairing approve {platform} {code}"
            ),
            PairingRequest::TooSoon => "A pairing code was sent to you less than 10 minutes ago; ask the operator to \
                                        approve it, or try again later."
                .to_owned(),
            PairingRequest::TooManyPending => {
                "Too many pairing requests are waiting for the operator right now; please try again later.".to_owned()
            }
        }))
    }

    /// Whether allowlists (not approvals) admit the user, by id or by a role they hold.
    fn listed(&self, platform: &str, sender: &Sender) -> bool {
        let admits = |rule: &Rule| {
            rule.all || rule.users.contains(&sender.id) || sender.roles.iter().any(|r| rule.roles.contains(r))
        };
        admits(&self.gateway) || self.rules.get(platform).is_some_and(admits)
    }
}

/// Approve a code typed by the operator.
pub async fn approve(store: &dyn Store, platform: &str, code: &str) -> Result<PairingApproval, StoreError> {
    store.approve_pairing(platform, &hash_code(&normalise(code)), &LIMITS, now_ms()).await
}

fn new_code() -> String {
    let mut rng = rand::rng();
    (0..CODE_LEN).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// Codes are compared case-insensitively and without separators an operator may type.
fn normalise(code: &str) -> String {
    code.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_uppercase()).collect()
}

fn hash_code(code: &str) -> String {
    Sha256::digest(code.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::store::SqliteStore;

    fn sender(id: &str) -> Sender {
        Sender { id: id.into(), name: Some("Ann".into()), is_bot: false, roles: Vec::new() }
    }

    async fn access(vars: &[(&str, &str)]) -> (Access, Arc<dyn Store>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(1), 1).await.unwrap());
        let env = Env::from_map(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>());
        (Access::from_env(&env, ["telegram", "slack"], store.clone()), store, dir)
    }

    fn code_in(text: &str) -> String {
        text.split_whitespace()
            .find(|w| w.len() == CODE_LEN && w.chars().all(|c| ALPHABET.contains(&(c as u8))))
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn allowlists_and_default_deny() {
        let (access, _, _dir) = access(&[
            ("TELEGRAM_ALLOWED_USERS", "1, 2"),
            ("GATEWAY_ALLOWED_USERS", "9"),
            ("SLACK_ALLOW_ALL_USERS", "true"),
            ("TELEGRAM_ALLOWED_ROLES", "mods"),
        ])
        .await;
        let check = |p: &'static str, t, id: &'static str| {
            let access = &access;
            async move { access.check(p, "c", t, &sender(id)).await.unwrap() }
        };
        assert_eq!(check("telegram", ChatType::Dm, "2").await, Decision::Allow);
        assert_eq!(check("telegram", ChatType::Group, "9").await, Decision::Allow);
        assert_eq!(check("slack", ChatType::Channel, "anyone").await, Decision::Allow);
        assert_eq!(check("api", ChatType::Dm, "anyone").await, Decision::Allow);
        assert_eq!(check("telegram", ChatType::Group, "7").await, Decision::Ignore);
        assert!(matches!(check("telegram", ChatType::Dm, "7").await, Decision::Pair(_)));
        let moderator = Sender { roles: vec!["mods".into()], ..sender("8") };
        assert_eq!(access.check("telegram", "c", ChatType::Group, &moderator).await.unwrap(), Decision::Allow);
        let other = Sender { roles: vec!["guests".into()], ..sender("8") };
        assert_eq!(access.check("telegram", "c", ChatType::Group, &other).await.unwrap(), Decision::Ignore);
    }

    #[tokio::test]
    async fn pairing_flow_with_limits() {
        let (access, store, _dir) = access(&[]).await;
        let Decision::Pair(text) = access.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap() else {
            panic!()
        };
        let code = code_in(&text);
        // Asking again at once gives no second code.
        let Decision::Pair(again) = access.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap() else {
            panic!()
        };
        assert!(again.contains("less than 10 minutes"), "{again}");
        // Wrong code, then the right one (typed in lower case with a dash).
        assert_eq!(approve(store.as_ref(), "telegram", "AAAA2222").await.unwrap(), PairingApproval::NoSuchCode);
        let typed = format!("{}-{}", &code[..4], &code[4..]).to_lowercase();
        let approved = approve(store.as_ref(), "telegram", &typed).await.unwrap();
        assert_eq!(approved, PairingApproval::Approved { user_id: "7".into(), user_name: Some("Ann".into()) });
        assert_eq!(access.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap(), Decision::Allow);
        // At most three waiting codes per platform.
        for id in ["a", "b", "c"] {
            access.check("telegram", id, ChatType::Dm, &sender(id)).await.unwrap();
        }
        let Decision::Pair(full) = access.check("telegram", "d", ChatType::Dm, &sender("d")).await.unwrap() else {
            panic!()
        };
        assert!(full.contains("Too many"), "{full}");
        // Revoking removes the approval.
        assert!(store.revoke_user("telegram", "7").await.unwrap());
        assert!(!store.is_approved("telegram", "7").await.unwrap());
        // Codes are stored hashed.
        let entries = store.access_entries(now_ms()).await.unwrap();
        assert!(entries.iter().all(|e| e.user_id != code));
    }

    #[tokio::test]
    async fn repeated_wrong_codes_lock_approvals() {
        let (_, store, _dir) = access(&[]).await;
        for _ in 0..LIMITS.max_failures {
            assert_eq!(approve(store.as_ref(), "telegram", "WRONG234").await.unwrap(), PairingApproval::NoSuchCode);
        }
        assert!(matches!(
            approve(store.as_ref(), "telegram", "WRONG234").await.unwrap(),
            PairingApproval::Locked { .. }
        ));
    }
}
