//! Which IP addresses an outbound fetch on the model's behalf (`web_fetch`, later a URL
//! attachment) may connect to: only global unicast addresses. Everything in the IANA IPv4 and
//! IPv6 special-purpose address registries is refused, and so is every IPv6 form that embeds an
//! IPv4 address (mapped, compatible, NAT64, 6to4, Teredo), naming the inner address when that
//! one is special too. This module only classifies; it never resolves or connects.
//!
//! `classify` names an address's special block; `AddressPolicy::check` applies a caller's policy:
//! private-use networks only when `allow_private` (`tools.web_allow_private`; the commands' egress
//! proxy never), loopback only through a test-only constructor that configuration cannot reach.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Why an address is not a public internet address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Special {
    /// The registry block it falls in, e.g. `"loopback (127.0.0.0/8)"`.
    pub block: &'static str,
    /// A private-use network (RFC 1918, shared CGNAT space, unique-local IPv6): the only blocks an
    /// operator may open with `tools.web_allow_private`.
    pub private_use: bool,
    /// For an IPv6 form embedding an IPv4 address whose own class is special: that address.
    pub inner: Option<Ipv4Addr>,
}

impl fmt::Display for Special {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.block)?;
        match self.inner {
            Some(inner) => write!(f, " embedding {inner}"),
            None => Ok(()),
        }
    }
}

/// What a caller permits beyond public addresses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// Private-use networks (see `Special::private_use`); loopback, link-local and the other
    /// special blocks stay refused.
    pub allow_private: bool,
    /// Loopback too: only tests against fakes on 127.0.0.1 construct this, config cannot.
    loopback_for_tests: bool,
}

impl AddressPolicy {
    /// Public addresses only, plus private-use networks when `allow_private`.
    pub fn new(allow_private: bool) -> Self {
        Self { allow_private, loopback_for_tests: false }
    }

    /// Also loopback, for tests whose fake servers listen on 127.0.0.1.
    #[cfg(test)]
    pub(crate) fn allow_loopback_for_tests() -> Self {
        Self { allow_private: false, loopback_for_tests: true }
    }

    /// `Ok` when `ip` may be connected to, else why not.
    pub fn check(&self, ip: IpAddr) -> Result<(), Special> {
        match classify(ip) {
            None => Ok(()),
            Some(special) if special.private_use && self.allow_private => Ok(()),
            Some(_) if self.loopback_for_tests && ip.is_loopback() => Ok(()),
            Some(special) => Err(special),
        }
    }
}

/// `None` for a public (global unicast) address; otherwise the special block it belongs to.
pub fn classify(ip: IpAddr) -> Option<Special> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => classify_v6(v6),
    }
}

const fn special(block: &'static str) -> Special {
    Special { block, private_use: false, inner: None }
}

const fn private(block: &'static str) -> Special {
    Special { block, private_use: true, inner: None }
}

/// The IANA IPv4 special-purpose registry (plus multicast and the reserved 240/4), as
/// (network, prefix length, class).
const V4_BLOCKS: &[([u8; 4], u8, Special)] = &[
    ([0, 0, 0, 0], 8, special("\"this network\" (0.0.0.0/8)")),
    ([10, 0, 0, 0], 8, private("private-use (10.0.0.0/8)")),
    ([100, 64, 0, 0], 10, private("shared address space (100.64.0.0/10)")),
    ([127, 0, 0, 0], 8, special("loopback (127.0.0.0/8)")),
    ([169, 254, 0, 0], 16, special("link-local (169.254.0.0/16)")),
    ([172, 16, 0, 0], 12, private("private-use (172.16.0.0/12)")),
    ([192, 0, 0, 0], 24, special("IETF protocol assignments (192.0.0.0/24)")),
    ([192, 0, 2, 0], 24, special("documentation (192.0.2.0/24)")),
    ([192, 31, 196, 0], 24, special("AS112-v4 (192.31.196.0/24)")),
    ([192, 52, 193, 0], 24, special("AMT (192.52.193.0/24)")),
    ([192, 88, 99, 0], 24, special("deprecated 6to4 relay anycast (192.88.99.0/24)")),
    ([192, 168, 0, 0], 16, private("private-use (192.168.0.0/16)")),
    ([192, 175, 48, 0], 24, special("direct delegation AS112 service (192.175.48.0/24)")),
    ([198, 18, 0, 0], 15, special("benchmarking (198.18.0.0/15)")),
    ([198, 51, 100, 0], 24, special("documentation (198.51.100.0/24)")),
    ([203, 0, 113, 0], 24, special("documentation (203.0.113.0/24)")),
    ([224, 0, 0, 0], 4, special("multicast (224.0.0.0/4)")),
    ([255, 255, 255, 255], 32, special("limited broadcast (255.255.255.255/32)")),
    ([240, 0, 0, 0], 4, special("reserved (240.0.0.0/4)")),
];

fn classify_v4(ip: Ipv4Addr) -> Option<Special> {
    let bits = u32::from(ip);
    V4_BLOCKS
        .iter()
        .find(|(net, len, _)| {
            let mask = u32::MAX.checked_shl(32 - u32::from(*len)).unwrap_or(0);
            bits & mask == u32::from_be_bytes(*net)
        })
        .map(|(_, _, class)| *class)
}

/// The IANA IPv6 special-purpose registry, as (network, prefix length, class). Blocks that embed
/// an IPv4 address are handled before this table, so the inner address can be named.
const V6_BLOCKS: &[(u128, u8, Special)] = &[
    (0, 128, special("unspecified (::/128)")),
    (1, 128, special("loopback (::1/128)")),
    (0x0064_ff9b_0001 << 80, 48, special("local-use IPv4/IPv6 translation (64:ff9b:1::/48)")),
    (0x0100 << 112, 64, special("discard-only (100::/64)")),
    (0x2001_0db8 << 96, 32, special("documentation (2001:db8::/32)")),
    (0x2001 << 112, 23, special("IETF protocol assignments (2001::/23)")),
    (0x2620_004f_8000 << 80, 48, special("direct delegation AS112 service (2620:4f:8000::/48)")),
    (0x3fff << 112, 20, special("documentation (3fff::/20)")),
    (0x5f00 << 112, 16, special("segment routing SIDs (5f00::/16)")),
    (0xfc00 << 112, 7, private("unique-local (fc00::/7)")),
    (0xfe80 << 112, 10, special("link-local (fe80::/10)")),
    (0xfec0 << 112, 10, special("deprecated site-local (fec0::/10)")),
    (0xff00 << 112, 8, special("multicast (ff00::/8)")),
];

fn in_v6(bits: u128, net: u128, len: u8) -> bool {
    let mask = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
    bits & mask == net
}

fn classify_v6(ip: Ipv6Addr) -> Option<Special> {
    let bits = u128::from(ip);
    let low32 = Ipv4Addr::from((bits & 0xffff_ffff) as u32);
    let embedded = if in_v6(bits, 0xffff << 32, 96) {
        Some(("IPv4-mapped (::ffff:0:0/96)", low32))
    } else if in_v6(bits, 0x0064_ff9b << 96, 96) {
        Some(("NAT64 (64:ff9b::/96)", low32))
    } else if in_v6(bits, 0x2002 << 112, 16) {
        Some(("6to4 (2002::/16)", Ipv4Addr::from(((bits >> 80) & 0xffff_ffff) as u32)))
    } else if in_v6(bits, 0x2001 << 112, 32) {
        // Teredo stores the client's IPv4 address inverted in the low 32 bits.
        Some(("Teredo (2001::/32)", Ipv4Addr::from(!((bits & 0xffff_ffff) as u32))))
    } else if in_v6(bits, 0, 96) && bits > 1 {
        Some(("IPv4-compatible (::/96)", low32))
    } else {
        None
    };
    if let Some((block, inner)) = embedded {
        let inner = classify_v4(inner).map(|_| inner);
        return Some(Special { block, private_use: false, inner });
    }
    if let Some((_, _, class)) = V6_BLOCKS.iter().find(|(net, len, _)| in_v6(bits, *net, *len)) {
        return Some(*class);
    }
    // Only 2000::/3 is allocated for global unicast; anything else is reserved by IETF.
    (!in_v6(bits, 0x2000 << 112, 3)).then_some(special("reserved, outside global unicast 2000::/3"))
}

#[cfg(test)]
mod tests;
