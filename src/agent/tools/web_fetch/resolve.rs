//! `web_fetch`'s DNS resolver for reqwest: it looks a name up once, refuses the whole answer when
//! any address in it is special (`net_guard`), and hands reqwest exactly the checked addresses,
//! so the connection goes where the check looked and a rebinding name gets no second chance.
//! It must never return an address it did not check.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use async_trait::async_trait;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::net_guard::{AddressPolicy, Special};

/// Looks a host name up. The system resolver in the daemon; a scripted one in tests.
#[async_trait]
pub trait Lookup: Send + Sync {
    /// Every address `host` resolves to.
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The system resolver (getaddrinfo on a blocking thread).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemLookup;

#[async_trait]
impl Lookup for SystemLookup {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0)).await?.map(|a| a.ip()).collect())
    }
}

/// A host whose address is not public; found in a reqwest error's source chain to tell a refusal
/// from a network failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The name or literal as written in the URL.
    pub host: String,
    /// The address that was refused.
    pub ip: IpAddr,
    /// Why.
    pub special: Special,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host == self.ip.to_string() {
            write!(f, "{} is {}", self.host, self.special)
        } else {
            write!(f, "{} resolves to {}, {}", self.host, self.ip, self.special)
        }
    }
}

impl std::error::Error for Refused {}

/// The checked resolver installed in `web_fetch`'s client.
#[derive(Clone)]
pub(super) struct GuardedResolver {
    pub(super) lookup: Arc<dyn Lookup>,
    pub(super) policy: AddressPolicy,
    /// Tests only: a checked public address is served by a fake on 127.0.0.1 (the check still
    /// sees the public address; only the socket goes to the stand-in).
    #[cfg(test)]
    pub(super) stand_ins: Arc<std::collections::HashMap<IpAddr, SocketAddr>>,
}

impl GuardedResolver {
    /// The addresses of `host`, all of them checked; the port is left 0 for reqwest to fill.
    pub(super) async fn resolve_checked(
        &self,
        host: &str,
    ) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
        let addresses = self.lookup.lookup(host).await?;
        if addresses.is_empty() {
            return Err(format!("{host} has no addresses").into());
        }
        for ip in &addresses {
            if let Err(special) = self.policy.check(*ip) {
                return Err(Box::new(Refused { host: host.to_owned(), ip: *ip, special }));
            }
        }
        Ok(addresses.into_iter().map(|ip| self.socket_for(ip)).collect())
    }

    #[cfg(not(test))]
    fn socket_for(&self, ip: IpAddr) -> SocketAddr {
        SocketAddr::new(ip, 0)
    }

    #[cfg(test)]
    fn socket_for(&self, ip: IpAddr) -> SocketAddr {
        self.stand_ins.get(&ip).copied().unwrap_or(SocketAddr::new(ip, 0))
    }
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let this = self.clone();
        Box::pin(async move {
            let addresses = this.resolve_checked(name.as_str()).await?;
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}
