//! Target parsing and resolution.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hermesd_platform::ChatType;

use super::*;
use crate::delivery::local::LocalPlatform;
use crate::store::SqliteStore;

#[test]
fn parses_every_form_and_prints_it_back() {
    for (text, target) in [
        ("origin", Target::Origin),
        ("local", Target::Local),
        ("telegram", Target::Home("telegram".into())),
        ("telegram:-100123", Target::Chat { platform: "telegram".into(), chat_id: "-100123".into(), thread_id: None }),
        ("telegram@work:42", Target::Chat { platform: "telegram@work".into(), chat_id: "42".into(), thread_id: None }),
        (
            "slack:C01:1700000000.000100",
            Target::Chat {
                platform: "slack".into(),
                chat_id: "C01".into(),
                thread_id: Some("1700000000.000100".into()),
            },
        ),
    ] {
        assert_eq!(Target::parse(text).unwrap(), target, "{text}");
        assert_eq!(target.to_string(), text);
    }
    for bad in
        ["", "Telegram", "telegram:", "telegram::5", "tele gram:1", "telegram:1:", "telegram@:1", "@work:1", "t@W:1"]
    {
        assert!(Target::parse(bad).is_err(), "{bad:?} should be refused");
    }
}

#[tokio::test]
async fn resolves_homes_from_store_then_env_and_refuses_what_it_cannot_reach() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(1), 1).await.unwrap());
    let mut platforms = PlatformRegistry::default();
    platforms.insert(Arc::new(LocalPlatform::new(dir.path().join("d"))));
    let env = Env::from_map(HashMap::from([("LOCAL_HOME_CHANNEL".to_owned(), "ops".to_owned())]));
    let targets = Targets::new(store.clone(), platforms, &env);

    let home = targets.resolve(&Target::parse("local:x").unwrap(), None).await.unwrap();
    assert_eq!((home.platform.as_str(), home.chat_id.as_str()), ("local", "x"));
    // The env home, until /sethome stores one.
    let env_home = targets.resolve(&Target::Home("local".into()), None).await.unwrap();
    assert_eq!(env_home.chat_id, "ops");
    let chosen = ChatRef::new("local", "chosen", ChatType::Group);
    store.set_home_channel(&chosen, 1).await.unwrap();
    assert_eq!(targets.resolve(&Target::Home("local".into()), None).await.unwrap(), chosen);

    assert_eq!(targets.resolve(&Target::Origin, None).await.unwrap_err(), TargetError::NoOrigin);
    assert_eq!(targets.resolve(&Target::Origin, Some(&chosen)).await.unwrap(), chosen);
    let err = targets.resolve(&Target::parse("telegram:5").unwrap(), None).await.unwrap_err();
    assert!(err.to_string().contains("not enabled (running: local)"), "{err}");
    assert!(targets.check("discord").is_err());
}

/// A platform whose ids of groups start with `g`; everything else is `local`'s.
struct Grouped(LocalPlatform);

#[async_trait::async_trait]
impl hermesd_platform::Platform for Grouped {
    fn name(&self) -> &str {
        "grouped"
    }

    fn capabilities(&self) -> hermesd_platform::Capabilities {
        self.0.capabilities()
    }

    async fn run(
        &self,
        ctx: hermesd_platform::PlatformContext,
        cancel: tokio_util::sync::CancellationToken,
    ) -> Result<(), hermesd_platform::PlatformError> {
        self.0.run(ctx, cancel).await
    }

    async fn send(
        &self,
        message: &hermesd_platform::OutboundMessage,
    ) -> Result<hermesd_platform::MessageRef, hermesd_platform::PlatformError> {
        self.0.send(message).await
    }

    async fn edit(
        &self,
        message: &hermesd_platform::MessageRef,
        text: &str,
    ) -> Result<(), hermesd_platform::PlatformError> {
        self.0.edit(message, text).await
    }

    async fn typing(&self, chat: &ChatRef) -> Result<(), hermesd_platform::PlatformError> {
        self.0.typing(chat).await
    }

    fn chat_type_of(&self, chat_id: &str) -> ChatType {
        if chat_id.starts_with('g') { ChatType::Group } else { ChatType::Dm }
    }
}

#[tokio::test]
async fn explicit_chats_get_their_type_from_the_platform() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&dir.path().join("s.db"), Duration::from_secs(1), 1).await.unwrap());
    let mut platforms = PlatformRegistry::default();
    platforms.insert(Arc::new(Grouped(LocalPlatform::new(dir.path().join("d")))));
    let targets = Targets::new(store, platforms, &Env::from_map(HashMap::new()));
    let chat_type = |chat_id: &str, thread: Option<&str>| {
        targets.explicit_chat("grouped".into(), chat_id.into(), thread.map(str::to_owned)).chat_type
    };
    assert_eq!(chat_type("g1", None), ChatType::Group);
    assert_eq!(chat_type("42", None), ChatType::Dm);
    assert_eq!(chat_type("g1", Some("7")), ChatType::Thread);
    let resolved = targets.resolve(&Target::parse("grouped:g9").unwrap(), None).await.unwrap();
    assert_eq!(resolved.chat_type, ChatType::Group);
    assert_eq!(targets.explicit_chat("gone".into(), "g1".into(), None).chat_type, ChatType::Dm);
}

#[test]
fn an_account_moves_a_platform_target_onto_it() {
    use crate::vocab::target::on_account;
    assert_eq!(on_account("telegram:42", "work").as_deref(), Ok("telegram@work:42"));
    assert_eq!(on_account("slack:C1:17.5", "ops").as_deref(), Ok("slack@ops:C1:17.5"));
    assert_eq!(on_account("telegram", "work").as_deref(), Ok("telegram@work"));
    for (target, account, error) in [
        ("local", "work", "--account needs a platform target"),
        ("telegram@home:1", "work", "names an account already"),
        ("telegram:1", "Work!", "is not an account name"),
        ("tele gram:1", "work", "invalid delivery target"),
    ] {
        let refused = on_account(target, account).unwrap_err();
        assert!(refused.contains(error), "{target} {account}: {refused}");
    }
}
