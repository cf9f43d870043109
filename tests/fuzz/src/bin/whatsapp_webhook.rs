//! Fuzz target `whatsapp_webhook`: Meta's webhook notifications through the WhatsApp normaliser
//! (the checks live in `hermesd_whatsapp::fuzzing::notification`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_whatsapp::fuzzing::notification(data));
}
