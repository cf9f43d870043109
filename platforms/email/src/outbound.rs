//! Replies out over SMTP submission: threading headers (In-Reply-To, References, `Re:` once),
//! multipart/alternative text + HTML, an optional attachment, `Auto-Submitted: auto-replied`.
//!
//! SMTP 4xx is transient (the host's outbox retries), 5xx permanent (the receipt records the
//! failure), a refused login unauthorised. Errors never carry the password.
//!
//! `Mailer` sends; a file makes the mail multipart/mixed around the alternative part. An SMTP 4xx
//! whose text speaks of throttling is `RateLimited`; 530, 534 and 535 are `Unauthorized`.

use std::time::Duration;

use hermesd_platform::{OutboundFile, PlatformError};
use lettre::message::header::{ContentType, HeaderName, HeaderValue};
use lettre::message::{Attachment, Mailbox, MultiPart, SinglePart};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor};

use crate::config::{EmailSettings, Endpoint, Protocol, Security};
use crate::format::markdown_to_html;
use crate::text;

/// Everything the headers of one outgoing mail need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Envelope {
    /// The recipient.
    pub(crate) to: String,
    /// The subject of the message answered (or of the thread), if known.
    pub(crate) subject: Option<String>,
    /// The message answered.
    pub(crate) in_reply_to: Option<String>,
    /// The thread's ids, oldest first, ending with `in_reply_to`.
    pub(crate) references: Vec<String>,
}

/// The SMTP side: one transport, built once.
pub(crate) struct Mailer {
    transport: Result<AsyncSmtpTransport<Tokio1Executor>, String>,
    from: Result<Mailbox, String>,
    domain: String,
}

/// How long one SMTP command may wait for the server.
const SMTP_TIMEOUT: Duration = Duration::from_secs(60);

impl Mailer {
    /// Builds the transport (no network until the first send).
    pub(crate) fn new(settings: &EmailSettings) -> Self {
        let from = settings.address.parse::<Mailbox>().map_err(|e| format!("address {:?}: {e}", settings.address));
        let domain = settings.address.rsplit('@').next().unwrap_or("localhost").to_owned();
        Self { transport: transport(settings), from, domain }
    }

    /// Builds the mail for `text` (markdown) with an optional file, returning it and its
    /// Message-ID (without brackets).
    pub(crate) fn build(
        &self,
        envelope: &Envelope,
        text: &str,
        file: Option<(&OutboundFile, &[u8])>,
    ) -> Result<(Message, String), PlatformError> {
        let from = self.from.clone().map_err(PlatformError::Permanent)?;
        let to = envelope
            .to
            .parse::<Mailbox>()
            .map_err(|e| PlatformError::Permanent(format!("recipient {:?}: {e}", envelope.to)))?;
        let id = format!("{}@{}", uuid::Uuid::now_v7().simple(), self.domain);
        let subject = match (&envelope.subject, &envelope.in_reply_to) {
            (Some(subject), _) => text::reply_subject(subject),
            (None, Some(_)) => "Re: your message".to_owned(),
            (None, None) => "A message from your agent".to_owned(),
        };
        let mut builder =
            Message::builder().from(from).to(to).subject(subject).message_id(Some(format!("<{id}>"))).raw_header(
                HeaderValue::new(HeaderName::new_from_ascii_str("Auto-Submitted"), "auto-replied".to_owned()),
            );
        if let Some(parent) = &envelope.in_reply_to {
            builder = builder.in_reply_to(format!("<{parent}>"));
        }
        if !envelope.references.is_empty() {
            let references: Vec<String> = envelope.references.iter().map(|r| format!("<{r}>")).collect();
            builder = builder.references(references.join(" "));
        }
        let alternative = MultiPart::alternative_plain_html(text.to_owned(), markdown_to_html(text));
        let body = match file {
            None => alternative,
            Some((file, bytes)) => {
                let content_type = ContentType::parse(&file.mime)
                    .unwrap_or_else(|_| ContentType::parse("application/octet-stream").expect("a valid MIME type"));
                let part: SinglePart = Attachment::new(file.name.clone()).body(bytes.to_vec(), content_type);
                MultiPart::mixed().multipart(alternative).singlepart(part)
            }
        };
        let message = builder.multipart(body).map_err(|e| PlatformError::Permanent(format!("build mail: {e}")))?;
        Ok((message, id))
    }

    /// Submits `message`.
    pub(crate) async fn submit(&self, message: Message) -> Result<(), PlatformError> {
        let transport = self.transport.as_ref().map_err(|e| PlatformError::Permanent(e.clone()))?;
        transport.send(message).await.map(|_| ()).map_err(classify)
    }
}

fn transport(settings: &EmailSettings) -> Result<AsyncSmtpTransport<Tokio1Executor>, String> {
    let endpoint = Endpoint::parse(&settings.smtp_url, Protocol::Smtp)?;
    let tls = match endpoint.security {
        Security::Plain => Tls::None,
        Security::Tls | Security::StartTls => {
            let parameters = TlsParameters::new_rustls(endpoint.host.clone()).map_err(|e| format!("smtp tls: {e}"))?;
            if endpoint.security == Security::Tls { Tls::Wrapper(parameters) } else { Tls::Required(parameters) }
        }
    };
    Ok(AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(endpoint.host)
        .port(endpoint.port)
        .tls(tls)
        .credentials(Credentials::new(settings.username.clone(), settings.password.clone()))
        .timeout(Some(SMTP_TIMEOUT))
        .build())
}

/// How long to hold a chat after a server said we send too fast (SMTP gives no figure).
pub(crate) const THROTTLE_WAIT: Duration = Duration::from_secs(60);

/// Maps an SMTP failure to what the host does about it.
fn classify(error: lettre::transport::smtp::Error) -> PlatformError {
    let code = error.status().map(|code| code.to_string());
    let text = error.to_string();
    classify_reply(code.as_deref(), error.is_permanent(), &text)
}

/// `code` (e.g. "451"), whether the server called it permanent (5xx), and its words.
fn classify_reply(code: Option<&str>, permanent: bool, text: &str) -> PlatformError {
    let lower = text.to_ascii_lowercase();
    let throttled = ["rate limit", "rate-limit", "ratelimit", "rate limited", "too many", "throttl"]
        .iter()
        .any(|word| lower.contains(word));
    match code {
        Some("535" | "534" | "530") => PlatformError::Unauthorized(format!("smtp: {text}")),
        Some(_) if permanent => PlatformError::Permanent(format!("smtp: {text}")),
        // Submission servers say "slow down" with a 4xx and words, never a number.
        Some(c) if c.starts_with('4') && throttled => PlatformError::RateLimited { retry_after: THROTTLE_WAIT },
        _ => PlatformError::Transient(format!("smtp: {text}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mailer() -> Mailer {
        let settings = EmailSettings {
            address: "agent@example.com".into(),
            smtp_url: "smtp://127.0.0.1:2525".into(),
            ..EmailSettings::default()
        };
        Mailer::new(&settings)
    }

    #[test]
    fn replies_thread_and_carry_both_parts_and_auto_submitted() {
        let envelope = Envelope {
            to: "ann@example.org".into(),
            subject: Some("Re: Plans".into()),
            in_reply_to: Some("m2@example.org".into()),
            references: vec!["m1@example.org".into(), "m2@example.org".into()],
        };
        let (message, id) = mailer().build(&envelope, "**Yes**, at noon.", None).expect("built");
        let raw = String::from_utf8(message.formatted()).expect("utf-8");
        assert!(raw.contains("Subject: Re: Plans\r\n"), "{raw}");
        assert!(raw.contains("In-Reply-To: <m2@example.org>\r\n"), "{raw}");
        assert!(raw.contains("References: <m1@example.org> <m2@example.org>\r\n"), "{raw}");
        assert!(raw.contains("Auto-Submitted: auto-replied\r\n"));
        assert!(raw.contains(&format!("Message-ID: <{id}>")));
        assert!(id.ends_with("@example.com"));
        assert!(raw.contains("multipart/alternative"));
        assert!(raw.contains("<strong>Yes</strong>"), "{raw}");
    }

    #[test]
    fn smtp_replies_map_to_what_the_host_does() {
        let kind = |code, permanent, text| classify_reply(Some(code), permanent, text).kind();
        assert_eq!(kind("451", false, "4.3.0 mailbox busy"), "transient");
        assert_eq!(kind("421", false, "4.7.28 rate limited, too many messages"), "rate");
        assert_eq!(kind("550", true, "5.7.1 recipient refused"), "permanent");
        assert_eq!(kind("554", true, "5.7.1 rate of spam too high"), "permanent");
        assert_eq!(kind("535", true, "5.7.8 bad credentials"), "unauthorized");
        assert_eq!(classify_reply(None, false, "connection reset").kind(), "transient");
    }

    #[test]
    fn a_file_makes_it_multipart_mixed() {
        let envelope = Envelope { to: "ann@example.org".into(), subject: None, in_reply_to: None, references: vec![] };
        let file = OutboundFile {
            path: "media/outbound/x/report.txt".into(),
            name: "report.txt".into(),
            mime: "text/plain".into(),
            kind: hermesd_platform::AttachmentKind::Document,
            size: 5,
        };
        let (message, _) = mailer().build(&envelope, "Here it is", Some((&file, b"hello"))).expect("built");
        let raw = String::from_utf8(message.formatted()).expect("utf-8");
        assert!(raw.contains("multipart/mixed") && raw.contains("report.txt"), "{raw}");
        assert!(raw.contains("Subject: A message from your agent"));
        assert!(!raw.contains("In-Reply-To"));
    }
}
