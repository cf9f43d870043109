//! Fuzz target `slack_envelope`: Socket Mode envelope / Events API body JSON → InboundEvent (the
//! checks live in `hermesd_slack::fuzzing::envelope`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_slack::fuzzing::envelope(data));
}
