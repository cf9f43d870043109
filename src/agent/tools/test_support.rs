//! Fixtures shared by the tool tests: a `ToolContext` over temporary directories and a `Human`
//! that answers every approval the same way.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hermesd_platform::{ChatRef, ChatType};
use tokio_util::sync::CancellationToken;

use super::{Approval, Human, ToolContext, ToolPolicy};
use crate::store::SqliteStore;

/// Answers every approval the same way and remembers what it was asked.
pub(super) struct FixedHuman {
    pub(super) answer: Approval,
    pub(super) asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Human for FixedHuman {
    async fn approve(&self, action: &str, _timeout: Duration) -> Approval {
        self.asked.lock().unwrap().push(action.to_string());
        self.answer
    }

    async fn clarify(&self, _question: &str, _choices: &[String], _timeout: Duration) -> Option<String> {
        None
    }
}

/// A context for session `s` with its store in `dir`.
pub(super) async fn context(dir: &Path, workdir: PathBuf, data_dir: PathBuf, human: Arc<dyn Human>) -> ToolContext {
    let store = SqliteStore::open(&dir.join("s.db"), Duration::from_secs(1), 1).await.unwrap();
    ToolContext {
        session_id: "s".into(),
        session_key: "agent:main:api:dm:c".into(),
        chat: ChatRef::new("api", "c", ChatType::Dm),
        user_id: "u".into(),
        workdir,
        data_dir,
        store: Arc::new(store),
        human,
        cancel: CancellationToken::new(),
        policy: ToolPolicy::new(crate::config::ALL_TOOLSETS.iter().copied()),
        admin: false,
    }
}
