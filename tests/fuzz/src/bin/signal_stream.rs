//! Fuzz target `signal_stream`: bytes of signal-cli's event stream through the SSE decoder (the
//! checks live in `hermesd_signal::fuzzing::stream`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_signal::fuzzing::stream(data));
}
