//! Files to Slack through the external upload flow: `files.getUploadURLExternal` (name and
//! length) → the bytes POSTed to the URL Slack returned → `files.completeUploadExternal` sharing
//! the file into the chat (and its thread) with the caption as `initial_comment`. The receipt is
//! Slack's file id. Errors never carry a token.

use hermesd_platform::{FileLimits, MessageRef, OutboundFile, OutboundMessage, PlatformError, Redactor};
use slack_morphism::prelude::*;

use crate::api::{Client, map_error};
use crate::format::markdown_to_mrkdwn;

/// A bound well under Slack's 1 GB per file: a chat gateway has no business sending more, and
/// the whole file is held in memory while it is sent.
pub(crate) const LIMITS: FileLimits =
    FileLimits { max_document_bytes: 100 * 1024 * 1024, max_photo_bytes: 100 * 1024 * 1024 };

/// How many `api_timeout`s one file's upload may take: three calls, and the bytes themselves.
pub(crate) const CALLS_PER_FILE: u32 = 6;

/// Upload `bytes` as `file` and share it into `message.chat`.
pub(crate) async fn send_file(
    client: &Client,
    token: &SlackApiToken,
    redactor: &Redactor,
    message: &OutboundMessage,
    file: &OutboundFile,
    bytes: &[u8],
) -> Result<MessageRef, PlatformError> {
    let channel = &message.chat.chat_id;
    let session = client.open_session(token);
    let context = |step: &str| format!("{step} for {} to {channel}", file.name);
    let target = session
        .get_upload_url_external(&SlackApiFilesGetUploadUrlExternalRequest::new(file.name.clone(), bytes.len()))
        .await
        .map_err(|e| map_error(&e, &context("files.getUploadURLExternal"), redactor))?;
    let upload = SlackApiFilesUploadViaUrlRequest::new(target.upload_url, bytes.to_vec(), file.mime.clone());
    session.files_upload_via_url(&upload).await.map_err(|e| map_error(&e, &context("file upload"), redactor))?;
    let shared = SlackApiFilesComplete::new(target.file_id.clone()).with_title(file.name.clone());
    let mut complete =
        SlackApiFilesCompleteUploadExternalRequest::new(vec![shared]).with_channel_id(SlackChannelId(channel.clone()));
    if let Some(thread) = &message.chat.thread_id {
        complete = complete.with_thread_ts(SlackTs(thread.clone()));
    }
    if !message.text.trim().is_empty() {
        complete = complete.with_initial_comment(markdown_to_mrkdwn(&message.text));
    }
    session
        .files_complete_upload_external(&complete)
        .await
        .map_err(|e| map_error(&e, &context("files.completeUploadExternal"), redactor))?;
    Ok(MessageRef { chat: message.chat.clone(), message_id: target.file_id.0 })
}
