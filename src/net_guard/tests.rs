//! Table tests over the IANA special-purpose registries: the first, a middle and the last address
//! of every block are refused with that block's name; embedded IPv4 forms name their inner
//! address; public addresses pass.

use super::*;

/// (block, an address at its start, one inside, one at its end, the name expected).
const V4: &[(&str, &str, &str, &str, &str)] = &[
    ("0.0.0.0/8", "0.0.0.0", "0.1.2.3", "0.255.255.255", "\"this network\""),
    ("10.0.0.0/8", "10.0.0.0", "10.20.30.40", "10.255.255.255", "private-use (10."),
    ("100.64.0.0/10", "100.64.0.0", "100.100.1.1", "100.127.255.255", "shared address space"),
    ("127.0.0.0/8", "127.0.0.0", "127.0.0.1", "127.255.255.255", "loopback"),
    ("169.254.0.0/16", "169.254.0.0", "169.254.169.254", "169.254.255.255", "link-local"),
    ("172.16.0.0/12", "172.16.0.0", "172.20.1.1", "172.31.255.255", "private-use (172."),
    ("192.0.0.0/24", "192.0.0.0", "192.0.0.170", "192.0.0.255", "IETF protocol assignments"),
    ("192.0.2.0/24", "192.0.2.0", "192.0.2.10", "192.0.2.255", "documentation (192.0.2"),
    ("192.31.196.0/24", "192.31.196.0", "192.31.196.1", "192.31.196.255", "AS112-v4"),
    ("192.52.193.0/24", "192.52.193.0", "192.52.193.1", "192.52.193.255", "AMT"),
    ("192.88.99.0/24", "192.88.99.0", "192.88.99.1", "192.88.99.255", "6to4 relay anycast"),
    ("192.168.0.0/16", "192.168.0.0", "192.168.1.1", "192.168.255.255", "private-use (192.168"),
    ("192.175.48.0/24", "192.175.48.0", "192.175.48.6", "192.175.48.255", "direct delegation AS112"),
    ("198.18.0.0/15", "198.18.0.0", "198.18.200.1", "198.19.255.255", "benchmarking"),
    ("198.51.100.0/24", "198.51.100.0", "198.51.100.7", "198.51.100.255", "documentation (198.51"),
    ("203.0.113.0/24", "203.0.113.0", "203.0.113.9", "203.0.113.255", "documentation (203.0"),
    ("224.0.0.0/4", "224.0.0.0", "239.1.2.3", "239.255.255.255", "multicast"),
    ("240.0.0.0/4", "240.0.0.0", "250.1.2.3", "255.255.255.254", "reserved (240"),
    ("255.255.255.255/32", "255.255.255.255", "255.255.255.255", "255.255.255.255", "limited broadcast"),
];

const V6: &[(&str, &str, &str, &str, &str)] = &[
    ("::/128", "::", "::", "::", "unspecified"),
    ("::1/128", "::1", "::1", "::1", "loopback (::1"),
    ("::ffff:0:0/96", "::ffff:0.0.0.0", "::ffff:8.8.8.8", "::ffff:255.255.255.255", "IPv4-mapped"),
    ("::/96", "::0.0.0.2", "::8.8.8.8", "::255.255.255.255", "IPv4-compatible"),
    ("64:ff9b::/96", "64:ff9b::", "64:ff9b::8.8.8.8", "64:ff9b::ffff:ffff", "NAT64 (64:ff9b::/96)"),
    ("64:ff9b:1::/48", "64:ff9b:1::", "64:ff9b:1:2::3", "64:ff9b:1:ffff:ffff:ffff:ffff:ffff", "local-use IPv4/IPv6"),
    ("100::/64", "100::", "100::1", "100::ffff:ffff:ffff:ffff", "discard-only"),
    ("2001::/23", "2001:100::", "2001:10::1", "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", "IETF protocol"),
    ("2001::/32", "2001::", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", "2001:0:ffff:ffff:ffff:ffff:ffff:ffff", "Teredo"),
    (
        "2001:db8::/32",
        "2001:db8::",
        "2001:db8:1::1",
        "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
        "documentation (2001:db8",
    ),
    ("2002::/16", "2002::", "2002:0808:0808::1", "2002:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "6to4"),
    ("2620:4f:8000::/48", "2620:4f:8000::", "2620:4f:8000::1", "2620:4f:8000:ffff:ffff:ffff:ffff:ffff", "AS112"),
    ("3fff::/20", "3fff::", "3fff:100::1", "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff", "documentation (3fff"),
    ("5f00::/16", "5f00::", "5f00:1::1", "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "segment routing"),
    ("fc00::/7", "fc00::", "fd12:3456::1", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "unique-local"),
    ("fe80::/10", "fe80::", "fe80::1", "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "link-local (fe80"),
    ("fec0::/10", "fec0::", "fec0::1", "feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "site-local"),
    ("ff00::/8", "ff00::", "ff02::1", "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "multicast (ff00"),
    ("outside 2000::/3", "4000::", "8000::1", "bfff::1", "outside global unicast"),
];

#[test]
fn every_special_purpose_block_is_refused_by_name() {
    for (block, first, middle, last, name) in V4.iter().chain(V6) {
        for address in [first, middle, last] {
            let ip: IpAddr = address.parse().unwrap_or_else(|e| panic!("{address}: {e}"));
            let found = classify(ip).unwrap_or_else(|| panic!("{address} in {block} passed as public"));
            assert!(found.to_string().contains(name), "{address} in {block}: {found}");
            assert_eq!(AddressPolicy::default().check(ip), Err(found), "{address}");
        }
    }
}

#[test]
fn embedded_ipv4_forms_name_a_special_inner_address() {
    let cases = [
        ("::ffff:127.0.0.1", "IPv4-mapped", "127.0.0.1"),
        ("::ffff:10.0.0.1", "IPv4-mapped", "10.0.0.1"),
        ("::ffff:169.254.169.254", "IPv4-mapped", "169.254.169.254"),
        ("::127.0.0.1", "IPv4-compatible", "127.0.0.1"),
        ("64:ff9b::7f00:1", "NAT64", "127.0.0.1"),
        ("64:ff9b::192.168.1.1", "NAT64", "192.168.1.1"),
        ("2002:7f00:0001::1", "6to4", "127.0.0.1"),
        ("2002:a9fe:a9fe:1::1", "6to4", "169.254.169.254"),
        ("2002:c0a8:0101::", "6to4", "192.168.1.1"),
        // Teredo keeps the client address inverted: !127.0.0.1 = 80ff:fffe, !10.0.0.1 = f5ff:fffe.
        ("2001:0:4136:e378:8000:63bf:80ff:fffe", "Teredo", "127.0.0.1"),
        ("2001:0:4136:e378:8000:63bf:f5ff:fffe", "Teredo", "10.0.0.1"),
    ];
    for (address, block, inner) in cases {
        let found = classify(address.parse().unwrap()).unwrap_or_else(|| panic!("{address} passed"));
        assert!(found.block.contains(block), "{address}: {found}");
        assert_eq!(found.inner, Some(inner.parse().unwrap()), "{address}: {found}");
        assert!(found.to_string().ends_with(&format!("embedding {inner}")), "{found}");
    }
    // A public inner address does not make the embedding form public.
    for address in ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2001:0:4136:e378:8000:63bf:f7f7:f7f7"] {
        let found = classify(address.parse().unwrap()).unwrap_or_else(|| panic!("{address} passed"));
        assert_eq!(found.inner, None, "{address}");
    }
}

#[test]
fn public_addresses_pass() {
    for address in [
        "1.1.1.1",
        "8.8.8.8",
        "9.255.255.255",
        "11.0.0.0",
        "100.63.255.255",
        "100.128.0.0",
        "172.15.255.255",
        "172.32.0.0",
        "192.0.3.1",
        "192.88.98.255",
        "192.169.0.1",
        "198.17.255.255",
        "198.20.0.0",
        "223.255.255.255",
        "2606:4700:4700::1111",
        "2a00:1450:4001:82a::200e",
        "2001:200::1",
        "2001:db9::1",
        "2003::1",
        "2620:4f:8001::1",
        "3ffe:ffff::1",
    ] {
        let ip: IpAddr = address.parse().unwrap();
        assert_eq!(classify(ip), None, "{address}");
        assert_eq!(AddressPolicy::default().check(ip), Ok(()), "{address}");
    }
}

#[test]
fn allow_private_opens_private_use_networks_only() {
    let policy = AddressPolicy::new(true);
    for open in ["10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "fd00::1"] {
        assert_eq!(policy.check(open.parse().unwrap()), Ok(()), "{open}");
    }
    for closed in ["127.0.0.1", "::1", "169.254.169.254", "0.0.0.0", "fe80::1", "::ffff:10.0.0.1", "224.0.0.1"] {
        assert!(policy.check(closed.parse().unwrap()).is_err(), "{closed}");
    }
    let tests = AddressPolicy::allow_loopback_for_tests();
    assert_eq!(tests.check("127.0.0.1".parse().unwrap()), Ok(()));
    assert_eq!(tests.check("::1".parse().unwrap()), Ok(()));
    assert!(tests.check("10.0.0.1".parse().unwrap()).is_err());
    assert!(tests.check("::ffff:127.0.0.1".parse().unwrap()).is_err(), "a mapped loopback is not loopback");
}
