//! Fuzz target `sse`: the SSE decoder over arbitrary bytes split anywhere (the checks live in
//! `hermesd::fuzzing::sse`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd::fuzzing::sse(data));
}
