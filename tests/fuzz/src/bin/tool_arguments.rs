//! Fuzz target `tool_arguments`: the repair of a model's tool-call arguments into one JSON object
//! (the checks live in `hermesd::fuzzing::tool_arguments`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd::fuzzing::tool_arguments(data));
}
