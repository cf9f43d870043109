//! The adapter's own view of its health: when Slack last delivered, and what is failing.
//!
//! Judged by inbound progress (a Socket Mode envelope or hello, an Events API request), never by
//! socket state: a socket can stay open while Slack feeds another connection. The facts are
//! `hermesd_platform::health`'s, plus `Own`.
//!
//! A hello's `num_connections` above one means another consumer shares the app token (Slack then
//! splits events between them); `/readyz` says so.

use std::ops::Deref;
use std::time::Duration;

use hermesd_platform::PlatformHealth;
use hermesd_platform::health::Health;

/// Progress and failures, written by the receive loop and read by `health()`.
#[derive(Debug)]
pub(crate) struct HealthTracker {
    socket: bool,
    /// Without an envelope or hello for longer than this the adapter is unhealthy.
    stale_after: Duration,
    health: Health<Own>,
}

/// Slack's own facts.
#[derive(Debug, Default)]
pub(crate) struct Own {
    /// Events mode: the bot identity is known, so requests can be served.
    ready: bool,
    /// Socket Mode: a hello arrived on the socket now open.
    connected: bool,
    /// Socket Mode: `num_connections` of the latest hello.
    connections: u32,
}

impl Deref for HealthTracker {
    type Target = Health<Own>;

    fn deref(&self) -> &Health<Own> {
        &self.health
    }
}

impl HealthTracker {
    pub(crate) fn new(socket: bool, stale_after: Duration) -> Self {
        Self { socket, stale_after, health: Health::default() }
    }

    /// Events mode: the bot is known; requests can be served.
    pub(crate) fn ready(&self) {
        self.health.with(|state| {
            state.own.ready = true;
            state.failing = None;
        });
    }

    /// Socket Mode: a hello arrived; `connections` is how many sockets this app token has open.
    pub(crate) fn hello(&self, connections: u32) {
        self.health.progressed();
        self.health.with(|state| {
            state.own.connected = true;
            state.own.connections = connections;
        });
    }

    /// Socket Mode: the socket closed; a new one is being opened.
    pub(crate) fn disconnected(&self, why: String) {
        self.health.with(|state| {
            state.own.connected = false;
            state.failing = Some(why);
        });
    }

    pub(crate) fn report(&self) -> Option<PlatformHealth> {
        self.health.report(|state| {
            let since = state.since().map(|s| s.as_secs_f64());
            let own = &state.own;
            if !self.socket {
                let detail = match (&state.failing, since) {
                    (Some(failing), _) => failing.clone(),
                    (None, Some(secs)) => format!("last events api request {secs:.1} s ago"),
                    (None, None) if own.ready => "events api ready; no request yet".to_owned(),
                    (None, None) => "starting: auth.test pending".to_owned(),
                };
                return (own.ready, detail);
            }
            let shared = own.connections > 1;
            let detail = match (&state.failing, since) {
                _ if shared => format!(
                    "{} socket mode connections share this app token: Slack splits events between them, so another \
                     consumer is stealing events; run one hermesd per Slack app",
                    own.connections
                ),
                (Some(failing), _) => failing.clone(),
                (None, _) if !own.connected => "connecting to socket mode".to_owned(),
                (None, Some(secs)) => format!(
                    "last envelope or hello {secs:.1} s ago (one socket mode connection per app token; a second \
                     consumer would steal events)"
                ),
                (None, None) => "waiting for hello".to_owned(),
            };
            (own.connected && state.fresh(self.stale_after) && !shared, detail)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_health_follows_hellos_envelopes_and_connection_count() {
        let health = HealthTracker::new(true, Duration::from_secs(60));
        assert_eq!(health.report(), None, "nothing to report before run");
        health.started();
        let report = health.report().expect("started");
        assert!(!report.healthy && report.detail == "connecting to socket mode", "{report:?}");
        health.hello(1);
        let report = health.report().expect("started");
        assert!(report.healthy && report.detail.starts_with("last envelope or hello 0.0 s ago"), "{report:?}");
        health.hello(2);
        let report = health.report().expect("started");
        assert!(!report.healthy && report.detail.contains("another consumer is stealing events"), "{report:?}");
        health.hello(1);
        health.disconnected("socket closed: refresh_requested".into());
        let report = health.report().expect("started");
        assert!(!report.healthy && report.detail == "socket closed: refresh_requested", "{report:?}");
    }

    #[test]
    fn a_socket_without_envelopes_goes_stale() {
        let health = HealthTracker::new(true, Duration::ZERO);
        health.started();
        health.hello(1);
        assert!(!health.report().is_some_and(|r| r.healthy), "an open socket is not enough");
    }

    #[test]
    fn events_health_is_ready_once_identified() {
        let health = HealthTracker::new(false, Duration::from_secs(60));
        health.started();
        assert!(!health.report().is_some_and(|r| r.healthy));
        health.ready();
        let report = health.report().expect("started");
        assert!(report.healthy && report.detail == "events api ready; no request yet", "{report:?}");
        health.progressed();
        assert!(health.report().is_some_and(|r| r.detail.starts_with("last events api request")));
    }
}
