//! Fuzz target `telegram_update`: Bot API update JSON → InboundEvent under every rule set (the
//! checks live in `hermesd_telegram::fuzzing::update`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_telegram::fuzzing::update(data));
}
