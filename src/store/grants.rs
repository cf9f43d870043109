//! Approvals that last (`/approve always`): one row per person and command, so the same command
//! runs for that person without asking again (still inside the sandbox). Listed and revoked by
//! the person (`/approvals`) and the operator (`hermesd approvals`); erased with the person.

use async_trait::async_trait;

use super::StoreResult;

/// Most commands one person may approve for good; the oldest goes when a new one comes.
pub const MAX_GRANTS_PER_PERSON: u32 = 200;

/// One lasting approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    /// The adapter the person is on.
    pub platform: String,
    /// The person.
    pub user_id: String,
    /// The command as it was shown to them.
    pub pattern: String,
    /// Approved, Unix ms.
    pub created_at: i64,
}

/// Lasting approvals.
#[async_trait]
pub trait GrantStore: Send + Sync {
    /// Approve `pattern` for good for the person; keeps at most `MAX_GRANTS_PER_PERSON` each.
    async fn add_grant(&self, platform: &str, user_id: &str, pattern: &str, now: i64) -> StoreResult<()>;
    /// Whether the person approved `pattern` for good.
    async fn has_grant(&self, platform: &str, user_id: &str, pattern: &str) -> StoreResult<bool>;
    /// The person's lasting approvals (every person's with `None`), oldest first.
    async fn grants(&self, person: Option<(&str, &str)>) -> StoreResult<Vec<Grant>>;
    /// Revokes the person's approval of `pattern`, or all of theirs with `None`; how many went.
    async fn revoke_grants(&self, platform: &str, user_id: &str, pattern: Option<&str>) -> StoreResult<u64>;
}
