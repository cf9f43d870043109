//! Property tests of the normaliser: any text in a text message comes out as the message's
//! text, any button id as the action's data, and no body, however mangled, makes it panic.

use proptest::prelude::*;
use serde_json::json;

use super::*;

const NUMBER_ID: &str = "106540352242922";

fn body(messages: serde_json::Value) -> Vec<u8> {
    json!({ "object": "whatsapp_business_account", "entry": [{ "id": "1", "changes": [{ "field": "messages",
        "value": { "messaging_product": "whatsapp", "metadata": { "display_phone_number": "1555", "phone_number_id": NUMBER_ID },
        "messages": messages } }] }] })
    .to_string()
    .into_bytes()
}

proptest! {
    #[test]
    fn text_survives_normalising(text in "\\PC{1,300}", from in "[1-9][0-9]{6,14}") {
        let message = json!({ "from": from, "id": "wamid.P", "timestamp": "1700000000", "type": "text", "text": { "body": text } });
        let parsed = parse(&body(json!([message])), NUMBER_ID, 0).expect("parses");
        if text.trim().is_empty() {
            prop_assert!(parsed.events.is_empty());
        } else {
            let InboundEvent::Message { message, .. } = &parsed.events[0].event else { panic!("not a message") };
            prop_assert_eq!(&message.text, &text);
            prop_assert_eq!(&message.chat.chat_id, &from);
        }
    }

    #[test]
    fn a_button_id_comes_back_as_the_action_data(id in "\\PC{1,256}") {
        let message = json!({ "from": "1555", "id": "wamid.B", "type": "interactive",
            "interactive": { "type": "button_reply", "button_reply": { "id": id, "title": "x" } } });
        let parsed = parse(&body(json!([message])), NUMBER_ID, 0).expect("parses");
        let InboundEvent::Action { action, .. } = &parsed.events[0].event else { panic!("not an action") };
        prop_assert_eq!(&action.data, &id);
    }

    #[test]
    fn mangled_bodies_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600)) {
        crate::fuzzing::notification(&bytes);
        crate::fuzzing::signature(&bytes);
    }
}
