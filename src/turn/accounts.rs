//! A turn's accounts and addressing: the daily-cap refusal, the usage record of its model calls,
//! and the reply's route with its `MEDIA:` files.
//!
//! `refused_by_limits` answers with the cap's message and runs no model call; `account` records the
//! turn's usage before its end is stored (a crash after the calls still spent that money) and posts
//! it for the API; `route_with_media` routes the reply, `MEDIA:` lines becoming file messages after
//! the text.

use hermesd_platform::OutboundKind;

use super::{Ending, Finishing, TurnJob, TurnRunner};
use crate::agent::runtime::agent_loop::LoopResult;
use crate::agent::tools::place::turn_whose;
use crate::agent::tools::send_file::{attach_media, split_media_lines};
use crate::clock::now_ms;
use crate::delivery::turns::{Routed, TurnOrigin};
use crate::store::StoreError;
use crate::usage::{Payer, TurnUsage};
use crate::vocab::origin::Origin;

impl TurnRunner {
    /// Answer with the cap's message, running no model call, when `payer` reached a daily cap.
    pub(super) async fn refused_by_limits(&self, at: &Finishing<'_>, payer: &Payer) -> Result<bool, StoreError> {
        let Some(text) = self.parts.accounting.refusal(payer, now_ms()).await else { return Ok(false) };
        let ending = Ending { error: Some("daily limit reached"), ..Ending::default() };
        self.finish(at, &text, OutboundKind::Reply, ending).await?;
        self.count_turn(&at.job.key, "limited");
        Ok(true)
    }

    /// Record what a turn's model calls used (before its end is stored: a crash after the calls
    /// still spent that money) and post it for the platform that reports it (the API).
    pub(super) async fn account(&self, job: &TurnJob, payer: &Payer, session_id: &str, result: &LoopResult) {
        let usage = TurnUsage { tokens: result.usage, cost: result.cost };
        let accounting = &self.parts.accounting;
        // Only the API reports usage with its answer; other platforms' turns are not posted.
        if Origin::of(&job.message.chat.platform) == Origin::Api {
            accounting.board().post(&job.message.chat.platform, &job.message.message_id, usage);
        }
        accounting.record(payer, session_id, &usage, &result.by_model, true, now_ms()).await;
    }

    /// Address a turn's reply; an answer's `MEDIA:<path>` lines become file messages after its
    /// text (workdir files only, copied into the data dir before the reply is stored).
    pub(super) async fn route_with_media(
        &self,
        job: &TurnJob,
        origin: &TurnOrigin,
        text: &str,
        kind: OutboundKind,
    ) -> Routed {
        let (text, media) = match kind {
            OutboundKind::Reply => split_media_lines(text),
            _ => (text.to_owned(), Vec::new()),
        };
        let outbox = &self.parts.outbox;
        let mut routed = self.parts.routing.route(outbox, &job.message, origin, &text, kind).await;
        let workdir = turn_whose(&job.message, origin).workdir(&self.agent(&job.key).workdir);
        let data_dir = &self.parts.data_dir;
        attach_media(outbox, &workdir, data_dir, &routed.chat, &mut routed.messages, media).await;
        routed
    }
}
