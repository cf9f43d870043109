//! The adapter's settings, built by the host from `[platforms.email]` and `EMAIL_PASSWORD`, and
//! the server URLs it understands: `imaps://` / `smtps://` (implicit TLS), `imap://…?tls=required`
//! / `smtp://…?tls=required` (STARTTLS), and plain `imap://` / `smtp://` to a loopback host only.
//!
//! The password never appears in `Debug` output, a log line or an error.
//!
//! `EmailSettings` holds the settings, `Endpoint` a parsed server URL; `problems()` is what the
//! host's `validate` lists.

use std::fmt;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

/// The longest an IMAP IDLE may last before it is renewed (RFC 2177: servers may drop an IDLE
/// after 30 minutes).
pub const MAX_IDLE_TIMEOUT: Duration = Duration::from_secs(29 * 60);

/// How a connection to a mail server is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Security {
    /// TLS from the first byte (`imaps://`, `smtps://`).
    Tls,
    /// A plain connection upgraded with STARTTLS before login (`?tls=required`).
    StartTls,
    /// No TLS at all; accepted for loopback hosts only.
    Plain,
}

/// A mail server: host, port and how the connection is secured.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// Host name or IP literal (without brackets).
    pub host: String,
    /// TCP port.
    pub port: u16,
    /// TLS mode.
    pub security: Security,
}

/// Which protocol an endpoint URL is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// IMAP (`imap`, `imaps`).
    Imap,
    /// SMTP submission (`smtp`, `smtps`).
    Smtp,
}

impl Endpoint {
    /// Parses `url` for `protocol`, refusing plain connections to anything but loopback.
    pub fn parse(url: &str, protocol: Protocol) -> Result<Self, String> {
        let (plain, tls, plain_port, tls_port, starttls_port) = match protocol {
            Protocol::Imap => ("imap", "imaps", 143, 993, 143),
            Protocol::Smtp => ("smtp", "smtps", 25, 465, 587),
        };
        let (scheme, rest) =
            url.split_once("://").ok_or_else(|| format!("{url:?} is not a URL such as {tls}://host"))?;
        let (authority, query) = match rest.split_once('?') {
            Some((authority, query)) => (authority, Some(query)),
            None => (rest, None),
        };
        let authority = authority.trim_end_matches('/');
        if authority.contains('@') || authority.contains('/') {
            return Err(format!("{url:?}: give only host and port (credentials come from the environment)"));
        }
        let starttls = match query {
            None => false,
            Some("tls=required") => true,
            Some(other) => return Err(format!("{url:?}: unknown option {other:?} (only tls=required)")),
        };
        let security = match scheme {
            s if s == tls && !starttls => Security::Tls,
            s if s == plain && starttls => Security::StartTls,
            s if s == plain => Security::Plain,
            _ => return Err(format!("{url:?}: the scheme must be {tls}:// or {plain}://")),
        };
        let (host, port) = split_host_port(authority).ok_or_else(|| format!("{url:?}: bad host or port"))?;
        let port = port.unwrap_or(match security {
            Security::Tls => tls_port,
            Security::StartTls => starttls_port,
            Security::Plain => plain_port,
        });
        if security == Security::Plain && !is_loopback(&host) {
            return Err(format!(
                "{url:?}: plain {plain}:// is allowed only to a loopback host; use {tls}:// or {plain}://…?tls=required"
            ));
        }
        Ok(Self { host, port, security })
    }
}

fn split_host_port(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() || host.chars().any(|c| c.is_whitespace()) {
        return None;
    }
    let port = match port {
        Some(port) => Some(port.parse::<u16>().ok().filter(|p| *p > 0)?),
        None => None,
    };
    Some((host.to_owned(), port))
}

/// Whether `host` names this machine: `localhost` or a loopback IP literal.
pub fn is_loopback(host: &str) -> bool {
    host.eq_ignore_ascii_case("localhost") || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

/// Everything the adapter needs; the host fills it from config and secrets.
#[derive(Clone)]
pub struct EmailSettings {
    /// The account this mailbox is (`[platforms.email.accounts.<name>]`): the adapter is then
    /// `email@<name>`, with chats, sessions and a cursor of its own.
    pub account: Option<String>,
    /// The IMAP server mail is read from.
    pub imap_url: String,
    /// The SMTP submission server replies go through.
    pub smtp_url: String,
    /// The agent's own address: the From of every reply, never answered itself.
    pub address: String,
    /// The IMAP and SMTP login name.
    pub username: String,
    /// The IMAP and SMTP password (`EMAIL_PASSWORD`).
    pub password: String,
    /// The mailbox watched.
    pub folder: String,
    /// How often the mailbox is polled when the server has no IDLE.
    pub poll_interval: Duration,
    /// How long one IDLE lasts before it is renewed (at most 29 minutes).
    pub idle_timeout: Duration,
    /// The authserv-id of our own receiving server's `Authentication-Results` header.
    pub authserv_id: String,
    /// Refuse mail without a `dmarc=pass` verdict from `authserv_id`.
    pub require_auth: bool,
    /// Where inbound attachments are saved (`$HERMESD_HOME/media/email`).
    pub media_dir: PathBuf,
    /// The largest attachment saved, and the largest file sent, in bytes.
    pub max_file_bytes: u64,
    /// Connect (and TLS handshake, and login) timeout.
    pub connect_timeout: Duration,
    /// Unknown senders are answered with a pairing code (off by default: a reply to a spoofed
    /// sender is backscatter).
    pub pairing: bool,
}

impl Default for EmailSettings {
    fn default() -> Self {
        Self {
            account: None,
            imap_url: "imaps://imap.example.com".into(),
            smtp_url: "smtps://smtp.example.com".into(),
            address: "agent@example.com".into(),
            username: "agent@example.com".into(),
            password: String::new(),
            folder: "INBOX".into(),
            poll_interval: Duration::from_secs(60),
            idle_timeout: MAX_IDLE_TIMEOUT,
            authserv_id: String::new(),
            require_auth: true,
            media_dir: PathBuf::from("media/email"),
            max_file_bytes: 20 * 1024 * 1024,
            connect_timeout: Duration::from_secs(20),
            pairing: false,
        }
    }
}

impl fmt::Debug for EmailSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmailSettings")
            .field("account", &self.account)
            .field("imap_url", &self.imap_url)
            .field("smtp_url", &self.smtp_url)
            .field("address", &self.address)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .field("folder", &self.folder)
            .field("authserv_id", &self.authserv_id)
            .field("require_auth", &self.require_auth)
            .finish_non_exhaustive()
    }
}

impl EmailSettings {
    /// Every problem with these settings (pure; the host's `validate` lists them all).
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Err(e) = Endpoint::parse(&self.imap_url, Protocol::Imap) {
            problems.push(format!("imap_url: {e}"));
        }
        if let Err(e) = Endpoint::parse(&self.smtp_url, Protocol::Smtp) {
            problems.push(format!("smtp_url: {e}"));
        }
        if !valid_address(&self.address) {
            problems.push(format!("address: {:?} is not an e-mail address", self.address));
        }
        if self.folder.trim().is_empty() || self.folder.chars().any(|c| c.is_control() || c == '"' || c == '\\') {
            problems.push(format!("folder: {:?} is not a usable mailbox name", self.folder));
        }
        if self.poll_interval < Duration::from_secs(1) {
            problems.push("poll_interval: must be at least 1s".into());
        }
        if self.idle_timeout < Duration::from_secs(1) || self.idle_timeout > MAX_IDLE_TIMEOUT {
            problems.push("idle_timeout: must be between 1s and 29m".into());
        }
        if self.require_auth && self.authserv_id.trim().is_empty() {
            problems.push(
                "authserv_id: set it to your receiving server's Authentication-Results id, or set require_auth = false"
                    .into(),
            );
        }
        if self.max_file_bytes == 0 {
            problems.push("max_file_mb: must be positive".into());
        }
        problems
    }
}

/// A plain `local@domain` check: one `@`, both sides non-empty, no spaces or angle brackets.
pub fn valid_address(address: &str) -> bool {
    let bad = |c: char| c.is_whitespace() || c.is_control() || matches!(c, '<' | '>' | ',' | ';' | '"');
    let Some((local, domain)) = address.split_once('@') else { return false };
    !local.is_empty()
        && !domain.contains('@')
        && (domain.contains('.') || domain.eq_ignore_ascii_case("localhost"))
        && !address.chars().any(bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_with_default_ports_and_plain_only_on_loopback() {
        let imap = |u: &str| Endpoint::parse(u, Protocol::Imap);
        let smtp = |u: &str| Endpoint::parse(u, Protocol::Smtp);
        assert_eq!(
            imap("imaps://mail.example.com").unwrap(),
            Endpoint { host: "mail.example.com".into(), port: 993, security: Security::Tls }
        );
        assert_eq!(imap("imap://mail.example.com?tls=required").unwrap().security, Security::StartTls);
        assert_eq!(
            imap("imap://127.0.0.1:1143").unwrap(),
            Endpoint { host: "127.0.0.1".into(), port: 1143, security: Security::Plain }
        );
        assert_eq!(imap("imap://[::1]:10143").unwrap().host, "::1");
        assert!(imap("imap://mail.example.com").unwrap_err().contains("loopback"));
        assert!(imap("imap://10.0.0.1:143").is_err());
        assert!(imap("https://mail.example.com").is_err());
        assert!(imap("imaps://user:pw@mail.example.com").unwrap_err().contains("credentials"));
        assert!(imap("imaps://mail.example.com:0").is_err());
        assert!(imap("imaps://mail.example.com?tls=required").is_err());
        assert_eq!(smtp("smtps://smtp.example.com").unwrap().port, 465);
        assert_eq!(smtp("smtp://smtp.example.com?tls=required").unwrap().port, 587);
        assert_eq!(smtp("smtp://localhost:2525").unwrap().security, Security::Plain);
        assert!(smtp("smtp://smtp.example.com:25").is_err());
    }

    #[test]
    fn settings_list_every_problem() {
        let settings = EmailSettings {
            imap_url: "imap://mail.example.com".into(),
            smtp_url: "ftp://x".into(),
            address: "not an address".into(),
            folder: String::new(),
            poll_interval: Duration::ZERO,
            idle_timeout: Duration::from_secs(3600),
            max_file_bytes: 0,
            ..EmailSettings::default()
        };
        let problems = settings.problems();
        for key in
            ["imap_url", "smtp_url", "address", "folder", "poll_interval", "idle_timeout", "authserv_id", "max_file_mb"]
        {
            assert!(problems.iter().any(|p| p.starts_with(key)), "{key} missing in {problems:?}");
        }
        let fine = EmailSettings { authserv_id: "mx.example.com".into(), ..EmailSettings::default() };
        assert_eq!(fine.problems(), Vec::<String>::new());
        let open = EmailSettings { require_auth: false, ..EmailSettings::default() };
        assert!(open.problems().is_empty());
    }

    #[test]
    fn password_is_not_in_debug_output() {
        let settings = EmailSettings { password: "hunter2-secret".into(), ..EmailSettings::default() };
        assert!(!format!("{settings:?}").contains("hunter2"));
    }

    #[test]
    fn addresses() {
        assert!(valid_address("agent@example.com"));
        assert!(valid_address("agent@localhost"));
        assert!(!valid_address("agent"));
        assert!(!valid_address("a b@example.com"));
        assert!(!valid_address("<a@example.com>"));
        assert!(!valid_address("a@b@example.com"));
    }
}
