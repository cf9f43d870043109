//! IMAP connections: TCP, then implicit TLS, STARTTLS or (loopback only) plain; greeting, login,
//! capabilities. TLS is rustls on ring, verified against the system's roots.
//!
//! The password goes to the server's LOGIN command and nowhere else; errors name the server and
//! the step, never the credentials.
//!
//! `MailStream` is the connection, plain or TLS; connecting reads the greeting, sends LOGIN and
//! asks CAPABILITY (whether the server has IDLE).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use async_imap::{Client, Session};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::config::{EmailSettings, Endpoint, Protocol, Security};

/// A connection to the IMAP server, encrypted or (loopback only) not.
#[derive(Debug)]
pub(crate) enum MailStream {
    /// Plain TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl AsyncRead for MailStream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for MailStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_flush(cx),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match self.get_mut() {
            MailStream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            MailStream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// A logged-in IMAP session.
pub(crate) type ImapSession = Session<MailStream>;

/// Why talking to the IMAP server failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImapError {
    /// Connecting, TLS or the greeting failed.
    #[error("imap connect to {server}: {reason}")]
    Connect {
        /// host:port.
        server: String,
        /// What failed.
        reason: String,
    },
    /// The server refused the login.
    #[error("imap login to {server} refused: {reason}")]
    Login {
        /// host:port.
        server: String,
        /// The server's words.
        reason: String,
    },
    /// A command failed or the connection broke.
    #[error("imap {step}: {reason}")]
    Command {
        /// The command.
        step: &'static str,
        /// What failed.
        reason: String,
    },
}

impl ImapError {
    /// A failed `step`.
    pub(crate) fn command(step: &'static str, error: impl std::fmt::Display) -> Self {
        ImapError::Command { step, reason: error.to_string() }
    }
}

/// The rustls client config: ring only, the system's root certificates.
pub(crate) fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    let loaded = rustls_native_certs::load_native_certs();
    let (added, _ignored) = roots.add_parsable_certificates(loaded.certs);
    if added == 0 {
        return Err("no system root certificates found".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

async fn start_tls(tcp: TcpStream, host: &str) -> Result<MailStream, String> {
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| format!("server name: {e}"))?;
    let connector = tokio_rustls::TlsConnector::from(tls_config()?);
    let tls = connector.connect(name, tcp).await.map_err(|e| format!("tls: {e}"))?;
    Ok(MailStream::Tls(Box::new(tls)))
}

/// Connects and logs in; also returns whether the server offers IDLE.
pub(crate) async fn connect(settings: &EmailSettings) -> Result<(ImapSession, bool), ImapError> {
    let endpoint = Endpoint::parse(&settings.imap_url, Protocol::Imap)
        .map_err(|reason| ImapError::Connect { server: settings.imap_url.clone(), reason })?;
    let server = format!("{}:{}", endpoint.host, endpoint.port);
    let connect_error = |reason: String| ImapError::Connect { server: server.clone(), reason };
    let login = async {
        let tcp = TcpStream::connect((endpoint.host.as_str(), endpoint.port))
            .await
            .map_err(|e| connect_error(e.to_string()))?;
        let stream = match endpoint.security {
            Security::Plain => MailStream::Plain(tcp),
            Security::Tls => start_tls(tcp, &endpoint.host).await.map_err(connect_error)?,
            Security::StartTls => {
                let mut client = Client::new(MailStream::Plain(tcp));
                greeting(&mut client).await.map_err(connect_error)?;
                client
                    .run_command_and_check_ok("STARTTLS", None)
                    .await
                    .map_err(|e| connect_error(format!("STARTTLS: {e}")))?;
                let MailStream::Plain(tcp) = client.into_inner() else {
                    return Err(connect_error("STARTTLS on a TLS stream".into()));
                };
                start_tls(tcp, &endpoint.host).await.map_err(connect_error)?
            }
        };
        let mut client = Client::new(stream);
        if endpoint.security != Security::StartTls {
            greeting(&mut client).await.map_err(connect_error)?;
        }
        let mut session = client
            .login(&settings.username, &settings.password)
            .await
            .map_err(|(e, _)| ImapError::Login { server: server.clone(), reason: e.to_string() })?;
        let capabilities = session.capabilities().await.map_err(|e| ImapError::command("CAPABILITY", e))?;
        Ok((session, capabilities.has_str("IDLE")))
    };
    match tokio::time::timeout(settings.connect_timeout, login).await {
        Ok(outcome) => outcome,
        Err(_) => Err(ImapError::Connect { server: server.clone(), reason: "timed out".into() }),
    }
}

async fn greeting(client: &mut Client<MailStream>) -> Result<(), String> {
    match client.read_response().await {
        Ok(Some(_)) => Ok(()),
        Ok(None) => Err("connection closed before the greeting".into()),
        Err(e) => Err(format!("greeting: {e}")),
    }
}
