//! The per-home pairing key: pairing codes are stored as HMAC-SHA256 under it, so a copy of the
//! database alone (a backup, a shared volume) does not let anyone test guesses offline.
//!
//! The key lives in `$HERMESD_HOME/pairing.key` (hex, mode 0600), made at first use. It must
//! never be logged or printed; `Debug` shows nothing of it.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use hmac::{Hmac, KeyInit, Mac};
use rand::RngCore;
use sha2::Sha256;

/// The file name under `HERMESD_HOME`.
const FILE: &str = "pairing.key";
/// Key length in bytes.
const LEN: usize = 32;

/// The secret pairing codes are hashed with.
#[derive(Clone)]
pub struct PairingKey([u8; LEN]);

impl fmt::Debug for PairingKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("PairingKey(redacted)")
    }
}

/// Why the key could not be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// Reading or writing the file failed.
    #[error("pairing key {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The file holds something other than 64 hex digits.
    #[error("pairing key {0}: not 64 hex digits; remove it to make a new one (waiting codes become invalid)")]
    Malformed(String),
}

impl PairingKey {
    /// The key of the home `home`, made (0600, never overwritten) when there is none yet.
    pub fn load_or_create(home: &Path) -> Result<Self, KeyError> {
        let path = home.join(FILE);
        let io = |source| KeyError::Io { path: path.display().to_string(), source };
        match std::fs::read_to_string(&path) {
            Ok(text) => return Self::parse(text.trim()).ok_or_else(|| KeyError::Malformed(path.display().to_string())),
            Err(e) if e.kind() == ErrorKind::NotFound => {}
            Err(e) => return Err(io(e)),
        }
        let mut key = [0u8; LEN];
        rand::rng().fill_bytes(&mut key);
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        // Written whole under a private name, then linked into place: the link fails if another
        // process got there first, so nobody ever reads a half-written key or replaces one.
        let temp = home.join(format!("{FILE}.{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)
            .and_then(|mut file| file.write_all(format!("{hex}\n").as_bytes()).and_then(|()| file.sync_all()));
        let linked = written.and_then(|()| std::fs::hard_link(&temp, &path));
        let _ = std::fs::remove_file(&temp);
        match linked {
            Ok(()) => Ok(Self(key)),
            Err(e) if e.kind() == ErrorKind::AlreadyExists => Self::load_or_create(home),
            Err(e) => Err(io(e)),
        }
    }

    /// A key from raw bytes (tests).
    pub fn from_bytes(bytes: [u8; LEN]) -> Self {
        Self(bytes)
    }

    fn parse(hex: &str) -> Option<Self> {
        if hex.len() != LEN * 2 || !hex.is_ascii() {
            return None;
        }
        let mut key = [0u8; LEN];
        for (i, byte) in key.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&hex[i * 2..i * 2 + 2], 16).ok()?;
        }
        Some(Self(key))
    }

    /// The bearer key local clients of this home's daemon (`hermesd send`, the panel) present on
    /// `/admin/*` (and on `/v1/*` beside `API_SERVER_KEY`): derived from this key, so only who can
    /// read the home — never a sandboxed command, which cannot — can use the admin routes, even
    /// with no `API_SERVER_KEY` set.
    pub fn local_api_key(&self) -> String {
        self.hash("hermesd local api key v1")
    }

    /// HMAC-SHA256 of `code` under this key, as hex.
    pub fn hash(&self, code: &str) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts keys of any length");
        mac.update(code.as_bytes());
        mac.finalize().into_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn made_once_private_and_stable() {
        let home = tempfile::tempdir().unwrap();
        let first = PairingKey::load_or_create(home.path()).unwrap();
        let mode = std::fs::metadata(home.path().join(FILE)).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = PairingKey::load_or_create(home.path()).unwrap();
        assert_eq!(first.hash("ABCD2345"), again.hash("ABCD2345"));
        let other = PairingKey::load_or_create(tempfile::tempdir().unwrap().path()).unwrap();
        assert_ne!(first.hash("ABCD2345"), other.hash("ABCD2345"));
        assert_eq!(format!("{first:?}"), "PairingKey(redacted)");
    }

    #[test]
    fn a_keyed_hash_is_not_bare_sha256() {
        use sha2::Digest;
        let key = PairingKey::from_bytes([7; LEN]);
        let bare: String = Sha256::digest(b"ABCD2345").iter().map(|b| format!("{b:02x}")).collect();
        assert_ne!(key.hash("ABCD2345"), bare);
        assert_eq!(key.hash("ABCD2345").len(), 64);
    }

    #[test]
    fn a_malformed_file_is_refused_not_replaced() {
        let home = tempfile::tempdir().unwrap();
        std::fs::write(home.path().join(FILE), "short").unwrap();
        assert!(matches!(PairingKey::load_or_create(home.path()), Err(KeyError::Malformed(_))));
        assert_eq!(std::fs::read_to_string(home.path().join(FILE)).unwrap(), "short");
    }
}
