//! Fuzz target `chunk`: the chunker; every chunk fits its limit, no text is lost or reordered,
//! fences stay balanced (the checks live in `hermesd_platform::fuzzing::chunk`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_platform::fuzzing::chunk(data));
}
