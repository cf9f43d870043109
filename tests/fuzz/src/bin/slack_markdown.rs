//! Fuzz target `slack_markdown`: model markdown → Slack mrkdwn, never a mention or broadcast (the
//! checks live in `hermesd_slack::fuzzing::markdown`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_slack::fuzzing::markdown(data));
}
