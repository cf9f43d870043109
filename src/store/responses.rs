//! Responses of the Responses API kept for the client (`store: true`): retrieved and deleted by
//! id, and continued with `previous_response_id`, which names the API chat they were given in.
//! Bounded by `[retention] responses`.

use async_trait::async_trait;

use hermesd_platform::HistoryMessage;

use super::StoreResult;

/// A stored response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredApiResponse {
    /// Its id (`resp_…`).
    pub id: String,
    /// The API chat it was given in.
    pub chat_id: String,
    /// The response object as the client got it (JSON).
    pub body: String,
    /// Created, Unix ms.
    pub created_at: i64,
    /// The messages its conversation opened with (the first request's earlier input items),
    /// which every continuation gives the model before the stored transcript.
    pub context: Vec<HistoryMessage>,
}

/// Stored responses.
#[async_trait]
pub trait ResponseStore: Send + Sync {
    /// Keep a response (written again, the newer body wins).
    async fn save_response(&self, response: &StoredApiResponse) -> StoreResult<()>;
    /// A response by id.
    async fn api_response(&self, id: &str) -> StoreResult<Option<StoredApiResponse>>;
    /// The id of the newest response given in `chat_id`.
    async fn latest_response(&self, chat_id: &str) -> StoreResult<Option<String>>;
    /// Delete a response; false when there was none.
    async fn delete_response(&self, id: &str) -> StoreResult<bool>;
    /// Delete up to `limit` responses created before `before`; how many went.
    async fn prune_responses(&self, before: i64, limit: u32) -> StoreResult<u64>;
}
