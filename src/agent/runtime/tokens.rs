//! Token estimates the runtime decides by without a tokenizer: about four bytes a token, plus a
//! per-message overhead. Used for the compression threshold, the tools' schema cost and the
//! size check before a turn; the provider's reported counts replace them where known.

use crate::agent::provider::ToolSchema;
use crate::vocab::message::Message;

/// One message's estimate: its text and tool calls, plus the per-message overhead.
pub fn message_tokens(message: &Message) -> u64 {
    let chars = message.content.as_deref().map_or(0, str::len)
        + message.tool_calls.iter().map(|c| c.name.len() + c.arguments.len()).sum::<usize>();
    (chars as u64).div_ceil(4) + 4
}

/// A provider-independent token estimate: about four bytes a token, plus per-message overhead.
pub fn estimate_tokens(messages: &[Message], tools: &[ToolSchema]) -> u64 {
    messages_tokens(messages) + schema_tokens(tools)
}

/// The estimate for the messages alone.
pub fn messages_tokens(messages: &[Message]) -> u64 {
    messages.iter().map(message_tokens).sum()
}

/// The estimate for tool schemas (they serialise, so compute it once per turn).
pub fn schema_tokens(tools: &[ToolSchema]) -> u64 {
    let schema: usize = tools.iter().map(|t| t.name.len() + t.description.len() + t.parameters.to_string().len()).sum();
    (schema as u64).div_ceil(4)
}
