//! Fuzz target `discord_message`: MESSAGE_CREATE JSON → InboundEvent in every kind of place (the
//! checks live in `hermesd_discord::fuzzing::message`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_discord::fuzzing::message(data));
}
