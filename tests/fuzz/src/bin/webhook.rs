//! Fuzz target `webhook`: webhook signature schemes and prompt templates (the checks live in
//! `hermesd::fuzzing::webhook`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd::fuzzing::webhook(data));
}
