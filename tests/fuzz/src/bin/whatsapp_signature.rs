//! Fuzz target `whatsapp_signature`: the `X-Hub-Signature-256` check and the verification
//! handshake (the checks live in `hermesd_whatsapp::fuzzing::signature`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_whatsapp::fuzzing::signature(data));
}
