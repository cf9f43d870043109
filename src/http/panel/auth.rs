//! Who may use the panel: a login with the API key (or, on a keyless daemon, the home's local
//! key) makes a panel session — a random id in an `HttpOnly`, `SameSite=Strict` cookie, never a
//! key — with a CSRF token of its own. Every state-changing request must carry that token and
//! come from the panel's own origin. Sessions are in memory, bounded and expiring: a restart
//! logs everyone out.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, header};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// The cookie's name.
pub(super) const COOKIE: &str = "hermesd_panel";
/// Panel sessions held at once; the oldest goes first.
const MAX_SESSIONS: usize = 64;
/// Event streams (live status pages) open at once.
const MAX_STREAMS: usize = 16;
/// A session unused this long ends.
const IDLE: Duration = Duration::from_secs(2 * 3600);
/// A session ends this long after the login, used or not.
const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// One logged-in browser.
#[derive(Debug, Clone)]
pub(super) struct PanelSession {
    /// The token its forms carry.
    pub(super) csrf: String,
    /// Which key logged in (`api` or `local`), for the log.
    pub(super) who: &'static str,
    started: Instant,
    used: Instant,
}

/// The panel's sessions.
#[derive(Debug)]
pub struct PanelSessions {
    sessions: Mutex<HashMap<String, PanelSession>>,
    /// When the daemon started (the status page's uptime).
    since: Instant,
    /// Open event streams (live status), bounded.
    streams: Arc<Semaphore>,
}

impl Default for PanelSessions {
    fn default() -> Self {
        Self { sessions: Mutex::default(), since: Instant::now(), streams: Arc::new(Semaphore::new(MAX_STREAMS)) }
    }
}

fn random_token() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

impl PanelSessions {
    /// Start a session for `who`; returns its id (the cookie's value).
    pub(super) fn start(&self, who: &'static str) -> String {
        let now = Instant::now();
        let id = random_token();
        let mut sessions = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions.retain(|_, s| alive(s, now));
        while sessions.len() >= MAX_SESSIONS {
            let Some(oldest) = sessions.iter().min_by_key(|(_, s)| s.used).map(|(k, _)| k.clone()) else { break };
            sessions.remove(&oldest);
        }
        sessions.insert(id.clone(), PanelSession { csrf: random_token(), who, started: now, used: now });
        id
    }

    /// The session of a request's cookie, when it is alive (marked used).
    pub(super) fn of(&self, headers: &HeaderMap) -> Option<PanelSession> {
        let id = cookie(headers)?;
        let now = Instant::now();
        let mut sessions = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match sessions.get_mut(&id) {
            Some(session) if alive(session, now) => {
                session.used = now;
                Some(session.clone())
            }
            Some(_) => {
                sessions.remove(&id);
                None
            }
            None => None,
        }
    }

    /// Whether the session of a request's cookie is alive, without marking it used (an open
    /// event stream does not keep a login alive).
    pub(super) fn alive(&self, headers: &HeaderMap) -> bool {
        let Some(id) = cookie(headers) else { return false };
        let sessions = self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        sessions.get(&id).is_some_and(|s| alive(s, Instant::now()))
    }

    /// When the daemon started.
    pub(super) fn since(&self) -> Instant {
        self.since
    }

    /// A place for one more event stream, while fewer than `MAX_STREAMS` are open.
    pub(super) fn stream_permit(&self) -> Option<OwnedSemaphorePermit> {
        self.streams.clone().try_acquire_owned().ok()
    }

    /// End the session of a request's cookie.
    pub(super) fn end(&self, headers: &HeaderMap) {
        if let Some(id) = cookie(headers) {
            self.sessions.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&id);
        }
    }
}

fn alive(session: &PanelSession, now: Instant) -> bool {
    now.duration_since(session.used) < IDLE && now.duration_since(session.started) < LIFETIME
}

/// The panel cookie's value in a request.
fn cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Whether a state-changing request comes from the panel's own pages: its `Origin` (else its
/// `Referer`) names the host it was sent to, and no browser marks it cross-site.
pub(super) fn same_origin(headers: &HeaderMap) -> bool {
    let host = headers.get(header::HOST).and_then(|v| v.to_str().ok()).map(str::to_ascii_lowercase);
    let Some(host) = host else { return false };
    if headers.get("sec-fetch-site").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site")) {
        return false;
    }
    let from = headers
        .get(header::ORIGIN)
        .or_else(|| headers.get(header::REFERER))
        .and_then(|v| v.to_str().ok())
        .map(str::to_ascii_lowercase);
    let Some(from) = from else { return false };
    let rest = from.strip_prefix("http://").or_else(|| from.strip_prefix("https://"));
    rest.map(|r| r.split('/').next().unwrap_or_default()) == Some(host.as_str())
}

/// The cookie that carries a session (`Secure` when the request came over HTTPS, as a proxy in
/// front says).
pub(super) fn set_cookie(id: &str, headers: &HeaderMap) -> String {
    let secure = headers.get("x-forwarded-proto").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"https"));
    format!(
        "{COOKIE}={id}; Path=/; HttpOnly; SameSite=Strict; Max-Age={}{}",
        LIFETIME.as_secs(),
        if secure { "; Secure" } else { "" }
    )
}

/// The cookie that ends a session in the browser.
pub(super) fn clear_cookie() -> String {
    format!("{COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(axum::http::HeaderName::from_bytes(name.as_bytes()).unwrap(), value.parse().unwrap());
        }
        map
    }

    #[test]
    fn sessions_are_found_by_cookie_and_bounded() {
        let sessions = PanelSessions::default();
        let id = sessions.start("api");
        let found = sessions.of(&headers(&[("cookie", &format!("a=b; {COOKIE}={id}"))])).unwrap();
        assert_eq!(found.who, "api");
        assert!(sessions.of(&headers(&[("cookie", &format!("{COOKIE}=nope"))])).is_none());
        for _ in 0..MAX_SESSIONS + 5 {
            sessions.start("api");
        }
        assert!(sessions.sessions.lock().unwrap().len() <= MAX_SESSIONS);
    }

    #[test]
    fn only_the_panels_own_origin_may_change_state() {
        assert!(same_origin(&headers(&[("host", "127.0.0.1:8642"), ("origin", "http://127.0.0.1:8642")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8642"), ("origin", "http://evil.example")])));
        assert!(!same_origin(&headers(&[("host", "127.0.0.1:8642")])), "no Origin or Referer: refused");
        assert!(same_origin(&headers(&[("host", "h:1"), ("referer", "https://h:1/ui/sessions")])));
        assert!(!same_origin(&headers(&[("host", "h:1"), ("origin", "http://h:1"), ("sec-fetch-site", "cross-site")])));
    }
}
