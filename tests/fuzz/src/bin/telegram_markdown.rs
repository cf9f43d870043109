//! Fuzz target `telegram_markdown`: model markdown → Telegram HTML, always well-formed (the checks
//! live in `hermesd_telegram::fuzzing::markdown`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_telegram::fuzzing::markdown(data));
}
