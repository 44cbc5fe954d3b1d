//! What the netlink follower (`core/netlink`) takes from an rtnetlink socket: one
//! datagram of messages, as a broken kernel or a bug in it could send them.
//!
//! Input: the first byte picks the table followed (main, or 100), the rest is the
//! datagram.
//!
//! No panic; each message consumes at least its 16-byte header, so a datagram gives
//! at most len / 16 + 1 messages; a route delivered belongs to the table followed,
//! its prefix length fits its family and its destination has no bit set past it;
//! an interface name had fewer than IFNAMSIZ (16) bytes (each may decode to up to
//! three).
#![no_main]
use std::net::IpAddr;

use ironpath_netlink::{parse, Message};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&pick, datagram)) = data.split_first() else { return };
    let table = if pick & 1 == 0 { 254 } else { 100 };
    let mut n = 0usize;
    parse(datagram, table, &mut |p| {
        n += 1;
        match p.msg {
            Message::Route { route, .. } => {
                assert_eq!(route.table, table);
                match route.dst {
                    IpAddr::V4(a) => {
                        assert!(route.len <= 32);
                        assert_eq!(u32::from(a).checked_shl(u32::from(route.len)).unwrap_or(0), 0);
                    }
                    IpAddr::V6(a) => {
                        assert!(route.len <= 128);
                        assert_eq!(u128::from(a).checked_shl(u32::from(route.len)).unwrap_or(0), 0);
                    }
                }
            }
            Message::Link { link, .. } => assert!(link.name.is_none_or(|s| s.len() < 16 * 3)),
            _ => {}
        }
    });
    assert!(n <= datagram.len() / 16 + 1, "{n} messages from {} bytes", datagram.len());
});
