//! Fuzz target `hass_event`: a Home Assistant event frame → a request or a watch prompt (the
//! checks live in `hermesd_homeassistant::fuzzing::event`).

fn main() {
    afl::fuzz!(|data: &[u8]| hermesd_homeassistant::fuzzing::event(data));
}
