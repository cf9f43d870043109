//! HMAC-SHA256 as webhook senders use it (Slack's `v0=`, WhatsApp's and GitHub's `sha256=`,
//! hermesd's generic scheme): a tag over a message given in parts, checked in constant time,
//! and the 64-hex-digit form tags travel in. One implementation for the adapters and the host.

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// Bytes in a tag.
pub const TAG_LEN: usize = 32;

fn keyed(key: &[u8]) -> Hmac<Sha256> {
    Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts keys of any length")
}

/// The tag of the message `parts` (concatenated) under `key`.
pub fn tag(key: &[u8], parts: &[&[u8]]) -> [u8; TAG_LEN] {
    let mut mac = keyed(key);
    parts.iter().for_each(|part| mac.update(part));
    mac.finalize().into_bytes().into()
}

/// Whether `tag` is the tag of `parts` under `key`, compared in constant time.
pub fn verify(key: &[u8], parts: &[&[u8]], tag: &[u8]) -> bool {
    let mut mac = keyed(key);
    parts.iter().for_each(|part| mac.update(part));
    mac.verify_slice(tag).is_ok()
}

/// Exactly 64 hex digits (either case) as a tag; anything else is `None`.
pub fn decode_hex(hex: &str) -> Option<[u8; TAG_LEN]> {
    let bytes = hex.as_bytes();
    if bytes.len() != 2 * TAG_LEN {
        return None;
    }
    let mut tag = [0u8; TAG_LEN];
    for (out, pair) in tag.iter_mut().zip(bytes.chunks_exact(2)) {
        *out = nibble(pair[0])? << 4 | nibble(pair[1])?;
    }
    Some(tag)
}

fn nibble(digit: u8) -> Option<u8> {
    match digit {
        b'0'..=b'9' => Some(digit - b'0'),
        b'a'..=b'f' => Some(digit - b'a' + 10),
        b'A'..=b'F' => Some(digit - b'A' + 10),
        _ => None,
    }
}

/// Lowercase hex of `bytes`.
pub fn encode_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    bytes.iter().flat_map(|b| [DIGITS[usize::from(b >> 4)], DIGITS[usize::from(b & 0xf)]]).map(char::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_round_trip_and_verify_only_their_message() {
        // RFC 4231 test case 2.
        let tag = tag(b"Jefe", &[b"what do ya want ", b"for nothing?"]);
        let hex = encode_hex(&tag);
        assert_eq!(hex, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
        assert_eq!(decode_hex(&hex.to_ascii_uppercase()), Some(tag));
        assert!(verify(b"Jefe", &[b"what do ya want for nothing?"], &tag));
        assert!(!verify(b"Jefe", &[b"what do ya want for nothing!"], &tag));
        assert!(!verify(b"jefe", &[b"what do ya want for nothing?"], &tag));
        for bad in ["", "5bdc", &hex[1..], &format!("{}g", &hex[1..])] {
            assert_eq!(decode_hex(bad), None, "{bad:?}");
        }
    }
}
