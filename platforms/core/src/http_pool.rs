//! How long outbound HTTP clients keep idle connections, shared by every adapter and the model
//! providers so a months-long daemon holds no more sockets than its recent traffic needs.
//!
//! An idle pooled connection closes after 5 s, and at most 16 stay idle per host (64 for the model
//! providers' client), so a burst of sends leaves no sockets or connection tasks behind it.

use std::time::Duration;

/// An idle pooled connection is closed after this long unused. Short enough that a burst (say,
/// every chat's reply going out at once after an outage) leaves no sockets and connection tasks
/// behind for long (the pool sweeps expired connections once per this period, so one is gone
/// within twice this), and no longer than the shortest keep-alive timeouts servers commonly use,
/// so a request is rarely sent into a connection the server is closing. A turn that is typing
/// (every 4 s) keeps its connection warm.
pub const HTTP_POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(5);

/// At most this many idle connections are kept per host by a platform adapter's client; a
/// larger burst's extra connections close as soon as their request is answered.
pub const HTTP_POOL_MAX_IDLE_PER_HOST: usize = 16;
