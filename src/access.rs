//! Access control, default deny: who may talk to the agent on each chat platform, and who may
//! change what everyone shares (admins).
//!
//! Allowed: users in `<PLATFORM>_ALLOWED_USERS` or `GATEWAY_ALLOWED_USERS` (comma-separated ids),
//! holders of a role in `<PLATFORM>_ALLOWED_ROLES` (Discord),
//! everyone when `<PLATFORM>_ALLOW_ALL_USERS` or `GATEWAY_ALLOW_ALL_USERS` is true, and users an
//! operator approved with `hermesd pairing approve`. An unknown user in a DM gets a pairing code
//! (one reply per window, whatever they send); in a group they are ignored without a reply. The
//! HTTP API (bearer key) and the terminal (the operator's own shell) authenticate otherwise and
//! are always allowed here.
//!
//! Admins: `<PLATFORM>_ADMIN_USERS` and `GATEWAY_ADMIN_USERS`; when neither is set for a
//! platform, the users listed by id in its allowlists (never `*_ALLOW_ALL_USERS`, roles or
//! paired users). The terminal user is always an admin; cron and webhook turns never are.
//!
//! `Access` holds the policy. Pairing codes are stored as HMACs under the per-home key (`key.rs`);
//! a stranger gets one code and one request per ten minutes, at most 64 codes wait per platform (so
//! a few accounts cannot use up pairing for everyone: `LIMITS`), wrong approvals lock the
//! platform's approvals for a while, and a bounded memo remembers strangers answered this window. A
//! `+`-number among a sender's `roles` (Signal's way of giving a UUID-identified person's number)
//! matches the user allowlists too; e-mail addresses in the lists are lowercased. A platform whose
//! `AccessRules` say it pairs no strangers has them ignored instead (e-mail, unless
//! `platforms.email.pairing`; Home Assistant never pairs). `is_admin` answers the admin rule above;
//! `is_named_admin` only the explicit lists (which `[limits]` exempts); `admin_report` is what
//! `hermesd check` prints. Adapters ask through `Ingress::admit`; the router asks again before
//! commands and turns.

pub mod reload;

mod key;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use hermesd_platform::{AccessRules, ChatType, Sender};
use rand::Rng;

use crate::clock::now_ms;
use crate::config::Env;
use crate::store::{PairingApproval, PairingLimits, PairingRequest, PairingSubject, Store, StoreError};
use crate::vocab::origin::Origin;
pub use key::{KeyError, PairingKey};

/// Letters and digits that cannot be confused with each other (no 0/O, 1/I/L).
const ALPHABET: &[u8] = b"ABCDEFGHJKMNPQRSTUVWXYZ23456789";
/// Length of a pairing code.
pub const CODE_LEN: usize = 8;

/// Pairing limits: codes live an hour, one request per user per ten minutes and one code per user
/// (a new one replaces the old), 64 codes may wait per platform, and five wrong approvals lock the
/// platform's approvals for fifteen minutes. The per-platform cap only bounds the table: since a
/// stranger holds one code at most, it takes 64 accounts asking within the hour, not a handful,
/// before a newcomer hears "too many requests".
pub const LIMITS: PairingLimits = PairingLimits {
    ttl_ms: 3_600_000,
    max_pending: 64,
    min_interval_ms: 600_000,
    max_failures: 5,
    lockout_ms: 900_000,
};

/// Most strangers remembered as answered within the window; past it, strangers get no reply
/// (quiet is the safe side of a flood).
const MAX_ANSWERED: usize = 10_000;

#[derive(Debug, Default, Clone)]
struct Rule {
    users: HashSet<String>,
    /// Role ids whose holders are allowed (`<PLATFORM>_ALLOWED_ROLES`; Discord).
    roles: HashSet<String>,
    all: bool,
    /// `<PLATFORM>_ADMIN_USERS`.
    admins: HashSet<String>,
}

/// What to do with a message from a sender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Let it through.
    Allow,
    /// Unknown DM sender: answer with this text (a pairing code or why there is none).
    Pair(String),
    /// Unknown sender in a group, or a stranger already answered in this window: drop without
    /// reply.
    Ignore,
}

/// The access policy.
pub struct Access {
    /// The allowlists and admins in force; replaced whole by `reload`.
    lists: std::sync::RwLock<Arc<Lists>>,
    /// Each adapter's `AccessRules`, to read its lists again on reload.
    adapters: Vec<(String, AccessRules)>,
    store: Arc<dyn Store>,
    key: PairingKey,
    /// Strangers given a pairing reply, by (platform, user id), with when (Unix ms).
    answered: Mutex<HashMap<(String, String), i64>>,
    /// Platforms whose unknown senders are ignored instead of paired (those whose adapter says
    /// so, and e-mail by default: a pairing reply to a forged sender address is backscatter).
    no_pairing: HashSet<String>,
    /// Platforms whose user ids are phone numbers without the `+` (`AccessRules`).
    phone_ids: HashSet<String>,
}

/// Comma-separated ids; e-mail addresses (`local@domain`) are lowercased, as the e-mail adapter
/// lowercases senders: addresses are compared case-insensitively.
fn parse_users(value: Option<String>) -> HashSet<String> {
    let normalise =
        |u: &str| if u.contains('@') && !u.starts_with('@') { u.to_ascii_lowercase() } else { u.to_owned() };
    value.unwrap_or_default().split(',').map(str::trim).filter(|u| !u.is_empty()).map(normalise).collect()
}

fn parse_bool(value: Option<String>) -> bool {
    value.is_some_and(|v| matches!(v.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on"))
}

/// Whether `ids` (an allowlist or admin list) names `user_id`; where ids are phone numbers
/// without the `+` (`phone_ids`), operators write them either way.
fn holds(ids: &HashSet<String>, phone_ids: bool, user_id: &str) -> bool {
    ids.contains(user_id) || (phone_ids && ids.contains(&format!("+{user_id}")))
}

/// A phone number (`+` and digits) a platform reports among a sender's `roles` (Signal, whose
/// users are UUIDs): an allowlist may name the person by it. Role ids never start with `+`.
fn is_number(id: &str) -> bool {
    id.len() > 1 && id.starts_with('+') && id[1..].chars().all(|c| c.is_ascii_digit())
}

/// Platforms that authenticate their own way: the API's key, the operator's shell, cron runs
/// (the operator's own jobs), webhook deliveries (their signature passed), Home Assistant's
/// watched changes (the operator's own rules).
fn trusted(platform: &str) -> bool {
    Origin::of(platform).authenticates_itself()
}

/// The prefix of a platform's access variables: the adapter's (`HASS` for Home Assistant,
/// Hermes' names), else the platform's name in capitals.
fn env_prefix(platform: &str, rules: AccessRules) -> String {
    rules.env_prefix.map_or_else(|| platform.to_ascii_uppercase(), str::to_owned)
}

/// The access rule of adapter `platform`. An account (`telegram@work`) has its own lists when
/// any of its variables is set (`TELEGRAM_WORK_ALLOWED_USERS`, …); otherwise the platform's
/// lists admit people on every account.
fn adapter_rule(env: &Env, platform: &str, rules: AccessRules) -> Rule {
    let Some((base, account)) = platform.split_once('@') else { return rule(env, &env_prefix(platform, rules)) };
    let base_prefix = env_prefix(base, rules);
    let own = rule(env, &format!("{base_prefix}_{}", account.to_ascii_uppercase().replace('-', "_")));
    let set = !own.users.is_empty() || !own.roles.is_empty() || own.all || !own.admins.is_empty();
    if set { own } else { rule(env, &base_prefix) }
}

fn rule(env: &Env, prefix: &str) -> Rule {
    Rule {
        users: parse_users(env.var(&format!("{prefix}_ALLOWED_USERS"))),
        roles: parse_users(env.var(&format!("{prefix}_ALLOWED_ROLES"))),
        all: parse_bool(env.var(&format!("{prefix}_ALLOW_ALL_USERS"))),
        admins: parse_users(env.var(&format!("{prefix}_ADMIN_USERS"))),
    }
}

/// Who the admins of `platform` are, as `hermesd check` prints it.
fn describe_admins(gateway: &Rule, platform_rule: Option<&Rule>, platform: &str) -> String {
    let sorted = |set: HashSet<&String>| {
        let mut ids: Vec<&str> = set.into_iter().map(String::as_str).collect();
        ids.sort_unstable();
        ids.join(", ")
    };
    match Origin::of(platform).fixed_admin() {
        Some(true) => return "the terminal user (the operator's own shell)".to_owned(),
        Some(false) => return "nobody (no person behind these turns)".to_owned(),
        None => {}
    }
    let explicit: HashSet<&String> =
        gateway.admins.iter().chain(platform_rule.into_iter().flat_map(|r| &r.admins)).collect();
    if !explicit.is_empty() {
        return format!(
            "{} (from {}_ADMIN_USERS / GATEWAY_ADMIN_USERS)",
            sorted(explicit),
            platform.to_ascii_uppercase()
        );
    }
    let listed: HashSet<&String> =
        gateway.users.iter().chain(platform_rule.into_iter().flat_map(|r| &r.users)).collect();
    if listed.is_empty() {
        return "nobody (set GATEWAY_ADMIN_USERS or list users by id in an allowlist)".to_owned();
    }
    format!("{} (listed by id in the allowlists; no *_ADMIN_USERS set)", sorted(listed))
}

/// One line per platform naming its admins (`hermesd check`).
pub fn admin_report<'a>(env: &Env, platforms: impl IntoIterator<Item = (&'a str, AccessRules)>) -> Vec<String> {
    let gateway = rule(env, "GATEWAY");
    platforms
        .into_iter()
        .map(|(p, rules)| {
            let platform_rule = adapter_rule(env, p, rules);
            format!("{p}: {}", describe_admins(&gateway, Some(&platform_rule), p))
        })
        .collect()
}

/// One adapter's access as configured (`Access::report`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessReport {
    /// The adapter (`telegram`, `telegram@work`).
    pub platform: String,
    /// User ids its allowlists and `GATEWAY_ALLOWED_USERS` let in.
    pub users: Vec<String>,
    /// Role ids whose holders are let in (Discord).
    pub roles: Vec<String>,
    /// `*_ALLOW_ALL_USERS`: everyone.
    pub everyone: bool,
    /// Whether a stranger's DM gets a pairing code.
    pub pairs_strangers: bool,
    /// Who its admins are, as `hermesd check` says it.
    pub admins: String,
}

/// The allowlists and admins read from the environment at one time.
struct Lists {
    rules: HashMap<String, Rule>,
    gateway: Rule,
}

impl Lists {
    fn read(env: &Env, adapters: &[(String, AccessRules)]) -> Self {
        let rules = adapters.iter().map(|(platform, access)| (platform.clone(), adapter_rule(env, platform, *access)));
        Self { rules: rules.collect(), gateway: rule(env, "GATEWAY") }
    }
}

impl Access {
    /// Read the allowlists and admins for `platforms` (each with its adapter's `AccessRules`)
    /// from `env`; pairing codes are hashed with `key`.
    pub fn from_env<'a>(
        env: &Env,
        platforms: impl IntoIterator<Item = (&'a str, AccessRules)>,
        store: Arc<dyn Store>,
        key: PairingKey,
    ) -> Self {
        let adapters: Vec<(String, AccessRules)> = platforms.into_iter().map(|(p, a)| (p.to_owned(), a)).collect();
        let no_pairing = adapters.iter().filter(|(_, a)| !a.pairs_strangers).map(|(p, _)| p.clone()).collect();
        let phone_ids = adapters.iter().filter(|(_, a)| a.phone_number_ids).map(|(p, _)| p.clone()).collect();
        let lists = std::sync::RwLock::new(Arc::new(Lists::read(env, &adapters)));
        Self { lists, adapters, store, key, answered: Mutex::default(), no_pairing, phone_ids }
    }

    /// Read the allowlists and admins again from `env` (SIGHUP: the config's `.env` and the
    /// process environment); checks from now on use them, a check under way keeps the old ones.
    pub fn reload(&self, env: &Env) {
        let fresh = Arc::new(Lists::read(env, &self.adapters));
        *self.lists.write().unwrap_or_else(std::sync::PoisonError::into_inner) = fresh;
    }

    /// Each adapter's lists in force, as the control panel shows them: who is let in (ids, roles,
    /// everyone) and who the admins are.
    pub fn report(&self) -> Vec<AccessReport> {
        let lists = self.lists();
        let sorted = |set: &HashSet<String>| {
            let mut ids: Vec<String> = set.iter().cloned().collect();
            ids.sort_unstable();
            ids
        };
        let mut out: Vec<AccessReport> = self
            .adapters
            .iter()
            .map(|(platform, _)| {
                let own = lists.rules.get(platform);
                let users = own.map(|r| sorted(&r.users)).unwrap_or_default();
                let mut all_users = sorted(&lists.gateway.users);
                all_users.extend(users);
                all_users.sort_unstable();
                all_users.dedup();
                AccessReport {
                    platform: platform.clone(),
                    users: all_users,
                    roles: own.map(|r| sorted(&r.roles)).unwrap_or_default(),
                    everyone: lists.gateway.all || own.is_some_and(|r| r.all),
                    pairs_strangers: !self.no_pairing.contains(platform),
                    admins: describe_admins(&lists.gateway, own, platform),
                }
            })
            .collect();
        out.sort_by(|a, b| a.platform.cmp(&b.platform));
        out
    }

    fn lists(&self) -> Arc<Lists> {
        self.lists.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
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
        if chat_type != ChatType::Dm
            || self.no_pairing.contains(platform)
            || !self.first_reply_in_window(platform, &sender.id)
        {
            return Ok(Decision::Ignore);
        }
        let code = new_code();
        let who = PairingSubject { platform, user_id: &sender.id, user_name: sender.name.as_deref(), chat_id };
        let outcome = self.store.request_pairing(&who, &self.key.hash(&code), &LIMITS, now_ms()).await?;
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

    /// Whether `sender` on `platform` may run admin commands and act on what others made.
    pub fn is_admin(&self, platform: &str, sender_id: &str) -> bool {
        // The operator's own shell could edit the environment anyway; nobody stands behind
        // cron runs, webhook deliveries and watched changes to be an admin.
        if let Some(fixed) = Origin::of(platform).fixed_admin() {
            return fixed;
        }
        let lists = self.lists();
        let platform_rule = lists.rules.get(platform);
        let explicit = !lists.gateway.admins.is_empty() || platform_rule.is_some_and(|r| !r.admins.is_empty());
        let phone = self.phone_ids.contains(platform);
        let held = |pick: fn(&Rule) -> &HashSet<String>| {
            holds(pick(&lists.gateway), phone, sender_id)
                || platform_rule.is_some_and(|r| holds(pick(r), phone, sender_id))
        };
        if explicit { held(|r| &r.admins) } else { held(|r| &r.users) }
    }

    /// Whether `sender` is named in `<PLATFORM>_ADMIN_USERS` or `GATEWAY_ADMIN_USERS` (or is the
    /// terminal's operator): unlike `is_admin`, never true merely for being allowlisted while no
    /// admin list is set. `[limits]` exempts these.
    pub fn is_named_admin(&self, platform: &str, sender_id: &str) -> bool {
        let phone = self.phone_ids.contains(platform);
        Origin::of(platform).fixed_admin().unwrap_or_else(|| {
            let lists = self.lists();
            holds(&lists.gateway.admins, phone, sender_id)
                || lists.rules.get(platform).is_some_and(|r| holds(&r.admins, phone, sender_id))
        })
    }

    /// Whether allowlists (not approvals) admit the user, by id or by a role they hold.
    fn listed(&self, platform: &str, sender: &Sender) -> bool {
        let phone = self.phone_ids.contains(platform);
        let admits = |rule: &Rule| {
            rule.all
                || holds(&rule.users, phone, &sender.id)
                || sender.roles.iter().any(|r| rule.roles.contains(r) || (is_number(r) && rule.users.contains(r)))
        };
        let lists = self.lists();
        admits(&lists.gateway) || lists.rules.get(platform).is_some_and(admits)
    }

    /// Records a reply to a stranger; false when they had one within the window (or too many
    /// strangers are remembered to take another).
    fn first_reply_in_window(&self, platform: &str, user_id: &str) -> bool {
        let now = now_ms();
        let window = LIMITS.min_interval_ms;
        let mut answered = self.answered.lock().unwrap_or_else(PoisonError::into_inner);
        let who = (platform.to_owned(), user_id.to_owned());
        if answered.get(&who).is_some_and(|&at| now - at < window) {
            return false;
        }
        if answered.len() >= MAX_ANSWERED {
            answered.retain(|_, at| now - *at < window);
            if answered.len() >= MAX_ANSWERED {
                return false;
            }
        }
        answered.insert(who, now);
        true
    }
}

/// Approve a code typed by the operator.
pub async fn approve(
    store: &dyn Store,
    key: &PairingKey,
    platform: &str,
    code: &str,
) -> Result<PairingApproval, StoreError> {
    store.approve_pairing(platform, &key.hash(&normalise(code)), &LIMITS, now_ms()).await
}

fn new_code() -> String {
    let mut rng = rand::rng();
    (0..CODE_LEN).map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char).collect()
}

/// Codes are compared case-insensitively and without separators an operator may type.
fn normalise(code: &str) -> String {
    code.chars().filter(|c| c.is_ascii_alphanumeric()).map(|c| c.to_ascii_uppercase()).collect()
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
        let phones = AccessRules { phone_number_ids: true, ..AccessRules::DEFAULT };
        let platforms = [("telegram", AccessRules::DEFAULT), ("slack", AccessRules::DEFAULT), ("whatsapp", phones)];
        (Access::from_env(&env, platforms, store.clone(), key()), store, dir)
    }

    fn key() -> PairingKey {
        PairingKey::from_bytes([3; 32])
    }

    fn code_in(text: &str) -> String {
        text.split_whitespace()
            .find(|w| w.len() == CODE_LEN && w.chars().all(|c| ALPHABET.contains(&(c as u8))))
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn an_adapters_rules_name_its_variables_and_whether_strangers_pair() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(1), 1).await.unwrap());
        let env = Env::from_map(HashMap::from([("HASS_ALLOWED_USERS".to_owned(), "u1".to_owned())]));
        let rules = AccessRules { env_prefix: Some("HASS"), phone_number_ids: false, pairs_strangers: false };
        let access = Access::from_env(&env, [("homeassistant", rules)], store, key());
        assert_eq!(access.check("homeassistant", "c", ChatType::Dm, &sender("u1")).await.unwrap(), Decision::Allow);
        assert_eq!(access.check("homeassistant", "c", ChatType::Dm, &sender("u2")).await.unwrap(), Decision::Ignore);
        let report = admin_report(&env, [("homeassistant", rules)]);
        assert!(report[0].contains("u1"), "{report:?}");
    }

    #[tokio::test]
    async fn an_account_has_the_platforms_lists_unless_it_sets_its_own() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(1), 1).await.unwrap());
        let vars = [("TELEGRAM_ALLOWED_USERS", "ann"), ("TELEGRAM_FAMILY_BOT_ALLOWED_USERS", "kid")];
        let env = Env::from_map(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect());
        let adapters = ["telegram", "telegram@work", "telegram@family-bot"].map(|p| (p, AccessRules::DEFAULT));
        let access = Access::from_env(&env, adapters, store, key());
        for (platform, user, allowed) in [
            ("telegram", "ann", true),
            ("telegram@work", "ann", true),
            ("telegram@work", "kid", false),
            ("telegram@family-bot", "kid", true),
            ("telegram@family-bot", "ann", false),
        ] {
            let decision = access.check(platform, "c", ChatType::Dm, &sender(user)).await.unwrap();
            assert_eq!(decision == Decision::Allow, allowed, "{user} on {platform}: {decision:?}");
        }
    }

    #[tokio::test]
    async fn whatsapp_numbers_match_with_or_without_the_plus() {
        let (access, _store, _dir) = access(&[
            ("WHATSAPP_ALLOWED_USERS", "+15551230001, 15551230002"),
            ("GATEWAY_ALLOWED_USERS", "+15551230003"),
            ("WHATSAPP_ADMIN_USERS", "+15551230002"),
        ])
        .await;
        for id in ["15551230001", "15551230002", "15551230003"] {
            let decision = access.check("whatsapp", id, ChatType::Dm, &sender(id)).await.unwrap();
            assert_eq!(decision, Decision::Allow, "{id}");
        }
        assert!(access.is_admin("whatsapp", "15551230002") && access.is_named_admin("whatsapp", "15551230002"));
        assert!(!access.is_admin("whatsapp", "15551230001"));
        let stranger = access.check("whatsapp", "15559999999", ChatType::Dm, &sender("15559999999")).await.unwrap();
        assert!(matches!(stranger, Decision::Pair(_)), "{stranger:?}");
        let telegram = access.check("telegram", "x", ChatType::Dm, &sender("15551230003")).await.unwrap();
        assert_ne!(telegram, Decision::Allow, "the plus rule is WhatsApp's alone");
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
    async fn a_number_in_the_allowlist_admits_the_person_a_platform_knows_by_uuid() {
        let (access, _, _dir) =
            access(&[("TELEGRAM_ALLOWED_USERS", "+15557654321, 0d6a0c8e-0000-4000-8000-000000000001")]).await;
        let by_number = Sender { roles: vec!["+15557654321".into()], ..sender("a11ce000-0000-4000-8000-00000000000a") };
        assert_eq!(access.check("telegram", "c", ChatType::Group, &by_number).await.unwrap(), Decision::Allow);
        let by_uuid = sender("0d6a0c8e-0000-4000-8000-000000000001");
        assert_eq!(access.check("telegram", "c", ChatType::Group, &by_uuid).await.unwrap(), Decision::Allow);
        let other = Sender { roles: vec!["+15550000000".into()], ..sender("b0b00000-0000-4000-8000-00000000000b") };
        assert_eq!(access.check("telegram", "c", ChatType::Group, &other).await.unwrap(), Decision::Ignore);
        assert!(!is_number("+") && !is_number("mods") && is_number("+1"));
    }

    #[tokio::test]
    async fn pairing_flow_with_limits() {
        let (access, store, _dir) = access(&[]).await;
        let Decision::Pair(text) = access.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap() else {
            panic!()
        };
        let code = code_in(&text);
        // Asking again at once gets no reply at all: one per window.
        assert_eq!(access.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap(), Decision::Ignore);
        // A fresh daemon (nothing remembered) answers once that a code is already out.
        let (env, fresh) = (Env::from_map(HashMap::new()), store.clone());
        let restarted = Access::from_env(&env, [("telegram", AccessRules::DEFAULT)], fresh, key());
        let Decision::Pair(again) = restarted.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap() else {
            panic!()
        };
        assert!(again.contains("less than 10 minutes"), "{again}");
        assert_eq!(restarted.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap(), Decision::Ignore);
        // Wrong code, then the right one (typed in lower case with a dash).
        assert_eq!(approve(store.as_ref(), &key(), "telegram", "AAAA2222").await.unwrap(), PairingApproval::NoSuchCode);
        let typed = format!("{}-{}", &code[..4], &code[4..]).to_lowercase();
        let approved = approve(store.as_ref(), &key(), "telegram", &typed).await.unwrap();
        assert_eq!(approved, PairingApproval::Approved { user_id: "7".into(), user_name: Some("Ann".into()) });
        assert_eq!(access.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap(), Decision::Allow);
        // At most `max_pending` waiting codes per platform.
        for i in 0..LIMITS.max_pending {
            let id = format!("n{i}");
            access.check("telegram", &id, ChatType::Dm, &sender(&id)).await.unwrap();
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
    async fn a_few_strangers_do_not_block_pairing_for_everyone() {
        let (access, store, _dir) = access(&[]).await;
        // Three strangers (or one person with three accounts) ask, and ask again.
        for id in ["s1", "s2", "s3"] {
            for _ in 0..3 {
                access.check("telegram", id, ChatType::Dm, &sender(id)).await.unwrap();
            }
        }
        let Decision::Pair(text) = access.check("telegram", "ann", ChatType::Dm, &sender("ann")).await.unwrap() else {
            panic!()
        };
        assert!(text.contains("Your pairing code is"), "{text}");
        // Each stranger holds one code at most, so the pending codes are one per person.
        let pending = store.access_entries(now_ms()).await.unwrap();
        assert_eq!(pending.iter().filter(|e| e.user_id.starts_with('s')).count(), 3, "{pending:?}");
    }

    #[tokio::test]
    async fn a_code_hashed_under_another_homes_key_does_not_approve() {
        let (access, store, _dir) = access(&[]).await;
        let Decision::Pair(text) = access.check("telegram", "c7", ChatType::Dm, &sender("7")).await.unwrap() else {
            panic!()
        };
        let code = code_in(&text);
        let other = PairingKey::from_bytes([4; 32]);
        assert_eq!(approve(store.as_ref(), &other, "telegram", &code).await.unwrap(), PairingApproval::NoSuchCode);
        assert!(matches!(
            approve(store.as_ref(), &key(), "telegram", &code).await.unwrap(),
            PairingApproval::Approved { .. }
        ));
    }

    #[tokio::test]
    async fn admins_are_named_or_else_the_listed_users() {
        let (listed, _, _dir) = access(&[
            ("TELEGRAM_ALLOWED_USERS", "1"),
            ("GATEWAY_ALLOWED_USERS", "9"),
            ("SLACK_ALLOW_ALL_USERS", "true"),
        ])
        .await;
        assert!(listed.is_admin("telegram", "1") && listed.is_admin("telegram", "9") && listed.is_admin("slack", "9"));
        assert!(!listed.is_admin("slack", "anyone"), "allow-all never makes admins");
        assert!(!listed.is_admin("slack", "1"), "a telegram id is no slack admin");
        assert!(
            listed.is_admin("terminal", "local") && !listed.is_admin("cron", "9") && !listed.is_admin("webhook", "9")
        );
        let (named, store, _dir2) =
            access(&[("TELEGRAM_ALLOWED_USERS", "1,2"), ("TELEGRAM_ADMIN_USERS", "2"), ("GATEWAY_ADMIN_USERS", "5")])
                .await;
        assert!(named.is_admin("telegram", "2") && named.is_admin("telegram", "5") && named.is_admin("slack", "5"));
        assert!(!named.is_admin("telegram", "1"), "a named admin list replaces the allowlist fallback");
        // Paired users are never admins by default.
        let Decision::Pair(text) = named.check("slack", "d", ChatType::Dm, &sender("p")).await.unwrap() else {
            panic!()
        };
        approve(store.as_ref(), &key(), "slack", &code_in(&text)).await.unwrap();
        assert_eq!(named.check("slack", "d", ChatType::Dm, &sender("p")).await.unwrap(), Decision::Allow);
        assert!(!named.is_admin("slack", "p"));
        let env = Env::from_map(
            [("TELEGRAM_ALLOWED_USERS", "1"), ("SLACK_ADMIN_USERS", "s1,s0")]
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        let report =
            admin_report(&env, ["telegram", "slack", "discord", "terminal"].map(|p| (p, AccessRules::DEFAULT)));
        assert!(report[0].starts_with("telegram: 1 (listed by id"), "{report:?}");
        assert!(report[1].starts_with("slack: s0, s1 (from SLACK_ADMIN_USERS"), "{report:?}");
        assert!(report[2].starts_with("discord: nobody"), "{report:?}");
        assert!(report[3].starts_with("terminal: the terminal user"), "{report:?}");
    }

    #[tokio::test]
    async fn repeated_wrong_codes_lock_approvals() {
        let (_, store, _dir) = access(&[]).await;
        for _ in 0..LIMITS.max_failures {
            assert_eq!(
                approve(store.as_ref(), &key(), "telegram", "WRONG234").await.unwrap(),
                PairingApproval::NoSuchCode
            );
        }
        assert!(matches!(
            approve(store.as_ref(), &key(), "telegram", "WRONG234").await.unwrap(),
            PairingApproval::Locked { .. }
        ));
    }

    #[tokio::test]
    async fn email_addresses_match_case_insensitively_and_unknown_senders_are_not_paired_when_off() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(1), 1).await.unwrap());
        let vars = [("EMAIL_ALLOWED_USERS", " Ann@Example.ORG , bob@example.org")];
        let env = Env::from_map(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<HashMap<_, _>>());
        let unpaired = AccessRules { pairs_strangers: false, ..AccessRules::DEFAULT };
        let platforms = [("email", unpaired), ("telegram", AccessRules::DEFAULT)];
        let access = Access::from_env(&env, platforms, store, key());
        let check = |p: &'static str, id: &'static str| {
            let access = &access;
            async move { access.check(p, "c", ChatType::Dm, &sender(id)).await.unwrap() }
        };
        assert_eq!(check("email", "ann@example.org").await, Decision::Allow);
        assert_eq!(check("email", "mallory@example.org").await, Decision::Ignore, "no pairing reply by mail");
        assert!(matches!(check("telegram", "7").await, Decision::Pair(_)), "other platforms still pair");
        assert!(access.is_admin("email", "ann@example.org"));
    }
}
