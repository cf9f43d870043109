//! Fuzz target `signal_envelope`: a signal-cli `receive` payload → InboundEvent (the checks live
//! in `hermesd_signal::fuzzing::envelope`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_signal::fuzzing::envelope(data));
}
