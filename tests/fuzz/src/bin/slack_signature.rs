//! Fuzz target `slack_signature`: the Events API request signature (v0 HMAC-SHA256) check (the
//! checks live in `hermesd_slack::fuzzing::signature`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_slack::fuzzing::signature(data));
}
