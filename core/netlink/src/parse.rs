//! One datagram of rtnetlink messages, read defensively: every length is checked
//! before it is used, headers and attributes are walked on their 4-byte alignment,
//! and a message that does not hold together is reported as [`Message::Malformed`]
//! and skipped whole (a route whose attribute list is cut short could otherwise pass
//! for a default route). Nothing here panics, allocates only for interface names, and
//! does no I/O: the socket is in `socket.rs`.
//!
//! The formats are those of the Linux uapi headers `linux/netlink.h` (the 16-byte
//! message header, control messages), `linux/rtnetlink.h` (`struct rtmsg`, the
//! `RTA_*` attributes), `linux/neighbour.h` (`struct ndmsg`, `NDA_*`, `NUD_*`) and
//! `linux/if_link.h` (`struct ifinfomsg`, `IFLA_IFNAME`). Integers in headers are in
//! the host's byte order; addresses are in network order.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::RouteKind;

/// Message types, flags and attribute numbers used here (values from the uapi headers).
mod uapi {
    pub const NLMSG_HDRLEN: usize = 16;
    pub const NLMSG_NOOP: u16 = 1;
    pub const NLMSG_ERROR: u16 = 2;
    pub const NLMSG_DONE: u16 = 3;
    pub const NLMSG_OVERRUN: u16 = 4;
    pub const NLM_F_DUMP_INTR: u16 = 0x10;

    pub const RTM_NEWLINK: u16 = 16;
    pub const RTM_DELLINK: u16 = 17;
    pub const RTM_NEWROUTE: u16 = 24;
    pub const RTM_DELROUTE: u16 = 25;
    pub const RTM_NEWNEIGH: u16 = 28;
    pub const RTM_DELNEIGH: u16 = 29;

    pub const AF_UNSPEC: u8 = 0;
    pub const AF_INET: u8 = 2;
    pub const AF_INET6: u8 = 10;

    /// `struct rtmsg`: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
    pub const RTMSG_LEN: usize = 12;
    pub const RTM_F_CLONED: u32 = 0x200;
    pub const RTN_UNICAST: u8 = 1;
    pub const RTN_BLACKHOLE: u8 = 6;
    pub const RTN_UNREACHABLE: u8 = 7;
    pub const RTN_PROHIBIT: u8 = 8;
    pub const RTA_DST: u16 = 1;
    pub const RTA_OIF: u16 = 4;
    pub const RTA_GATEWAY: u16 = 5;
    pub const RTA_PRIORITY: u16 = 6;
    pub const RTA_MULTIPATH: u16 = 9;
    pub const RTA_TABLE: u16 = 15;
    pub const RTA_VIA: u16 = 18;
    pub const RTA_ENCAP: u16 = 22;
    pub const RTA_NH_ID: u16 = 30;

    /// `struct ndmsg`: family, 3 bytes padding, ifindex, state, flags, type.
    pub const NDMSG_LEN: usize = 12;
    pub const NDA_DST: u16 = 1;
    pub const NDA_LLADDR: u16 = 2;
    pub const NTF_PROXY: u8 = 0x08;
    /// NUD_REACHABLE | NUD_STALE | NUD_DELAY | NUD_PROBE | NUD_NOARP | NUD_PERMANENT.
    pub const NUD_USABLE: u16 = 0x02 | 0x04 | 0x08 | 0x10 | 0x40 | 0x80;

    /// `struct ifinfomsg`: family, padding, type, index, flags, change.
    pub const IFINFOMSG_LEN: usize = 16;
    pub const IFLA_IFNAME: u16 = 3;
    pub const IFF_UP: u32 = 1;
    pub const IFNAMSIZ: usize = 16;

    /// The attribute type bits (NLA_F_NESTED and NLA_F_NET_BYTEORDER masked off).
    pub const NLA_TYPE_MASK: u16 = 0x3fff;
}
use uapi::*;

/// A route message of an IPv4 or IPv6 table, the output interface still an index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RouteMsg {
    /// The destination, its bits past `len` cleared.
    pub dst: IpAddr,
    pub len: u8,
    pub kind: RouteKind,
    pub gateway: Option<IpAddr>,
    /// `RTA_OIF`, an interface index of the namespace the socket lives in.
    pub oif: Option<u32>,
    pub table: u32,
    pub metric: u32,
}

/// A neighbour message (ARP or NDP entry), the interface still an index.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct NeighMsg {
    pub addr: IpAddr,
    /// All zero when the entry has no link-layer address (incomplete, failed).
    pub mac: [u8; 6],
    pub ifindex: u32,
    /// A link-layer address is known and the NUD state says it may be used.
    pub reachable: bool,
}

/// A link message: what the follower needs to name interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkMsg {
    pub index: u32,
    pub name: Option<String>,
    /// `IFF_UP` is set.
    pub up: bool,
}

/// Why a well-formed message was not turned into a route, neighbour or link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ignored {
    /// A route of another table than the one followed.
    Table,
    /// A route type other than unicast, blackhole, unreachable, prohibit (local,
    /// broadcast, multicast, anycast, throw, nat).
    RouteType(u8),
    /// A cached clone (`RTM_F_CLONED`, e.g. a PMTU exception).
    Cloned,
    /// A route with several next hops (`RTA_MULTIPATH`): not followed.
    Multipath,
    /// A route through a nexthop object (`RTA_NH_ID`): not followed.
    NexthopObject,
    /// A route with a lightweight-tunnel encapsulation (`RTA_ENCAP`): not followed.
    Encap,
    /// An address family other than IPv4/IPv6 (routes, neighbours), or a link
    /// message of a family other than AF_UNSPEC (bridge port messages).
    Family(u8),
    /// A proxy neighbour entry (`NTF_PROXY`).
    Proxy,
    /// A neighbour whose link-layer address is not 6 bytes long.
    NotEthernet,
    /// A message type this parser does not read (NOOP, other rtnetlink types).
    MessageType(u16),
}

/// What did not hold together.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// A message header shorter than 16 bytes or longer than what is left of the
    /// datagram: the rest of the datagram is dropped.
    Header,
    /// A message body shorter than its fixed header.
    Body,
    /// An attribute shorter than its own header, longer than the message, or bytes
    /// left over after the last attribute.
    Attribute,
    /// An address attribute of the wrong length for its family, or missing.
    Address,
    /// A prefix length longer than the address.
    PrefixLength,
    /// An interface name longer than IFNAMSIZ.
    Name,
}

/// One message of a datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// `RTM_NEWROUTE` (`add`) or `RTM_DELROUTE` of the table followed.
    Route {
        add: bool,
        route: RouteMsg,
    },
    /// `RTM_NEWNEIGH` (`add`) or `RTM_DELNEIGH`.
    Neigh {
        add: bool,
        neigh: NeighMsg,
    },
    /// `RTM_NEWLINK` (`add`) or `RTM_DELLINK`.
    Link {
        add: bool,
        link: LinkMsg,
    },
    /// `NLMSG_DONE`: the end of a dump (its sequence number is in [`Parsed::seq`]).
    Done,
    /// `NLMSG_ERROR`: 0 for an acknowledgement, else a negative errno.
    Error(i32),
    /// `NLMSG_OVERRUN`: data was lost.
    Overrun,
    Ignored(Ignored),
    Malformed(Malformed),
}

/// A message and the header fields the follower matches on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Parsed {
    pub seq: u32,
    /// The port id of the socket the message answers (0 for the kernel's own
    /// notifications).
    pub pid: u32,
    pub flags: u16,
    pub msg: Message,
}

impl Parsed {
    /// `NLM_F_DUMP_INTR`: the dump this message belongs to saw the table change
    /// under it and may be inconsistent.
    pub fn interrupted(&self) -> bool {
        self.flags & NLM_F_DUMP_INTR != 0
    }
}

/// Parses one datagram read from an rtnetlink socket and hands each message to `out`
/// in order. Routes of a table other than `table` are reported as
/// [`Ignored::Table`]. A header that does not fit ends the datagram (after one
/// [`Malformed::Header`]); any other defect skips only its own message.
pub fn parse(datagram: &[u8], table: u32, out: &mut impl FnMut(Parsed)) {
    let mut off = 0;
    while off < datagram.len() {
        let rest = &datagram[off..];
        let (Some(len), Some(kind), Some(flags), Some(seq), Some(pid)) =
            (ne_u32(rest, 0), ne_u16(rest, 4), ne_u16(rest, 6), ne_u32(rest, 8), ne_u32(rest, 12))
        else {
            out(Parsed { seq: 0, pid: 0, flags: 0, msg: Message::Malformed(Malformed::Header) });
            return;
        };
        let len = len as usize;
        let Some(body) = rest.get(NLMSG_HDRLEN..len) else {
            out(Parsed { seq, pid, flags, msg: Message::Malformed(Malformed::Header) });
            return;
        };
        out(Parsed { seq, pid, flags, msg: message(kind, body, table) });
        off += align4(len);
    }
}

fn message(kind: u16, body: &[u8], table: u32) -> Message {
    let result = match kind {
        NLMSG_NOOP => Err(Message::Ignored(Ignored::MessageType(kind))),
        NLMSG_ERROR => match ne_u32(body, 0) {
            Some(e) => Ok(Message::Error(e as i32)),
            None => Err(Message::Malformed(Malformed::Body)),
        },
        NLMSG_DONE => Ok(Message::Done),
        NLMSG_OVERRUN => Ok(Message::Overrun),
        RTM_NEWROUTE | RTM_DELROUTE => {
            route(body, table).map(|route| Message::Route { add: kind == RTM_NEWROUTE, route })
        }
        RTM_NEWNEIGH | RTM_DELNEIGH => neigh(body).map(|neigh| Message::Neigh { add: kind == RTM_NEWNEIGH, neigh }),
        RTM_NEWLINK | RTM_DELLINK => link(body).map(|link| Message::Link { add: kind == RTM_NEWLINK, link }),
        other => Err(Message::Ignored(Ignored::MessageType(other))),
    };
    result.unwrap_or_else(|m| m)
}

fn route(body: &[u8], table: u32) -> Result<RouteMsg, Message> {
    let hdr = body.get(..RTMSG_LEN).ok_or(Message::Malformed(Malformed::Body))?;
    let (family, dst_len, rtm_table, rtype) = (hdr[0], hdr[1], hdr[4], hdr[7]);
    let rtm_flags = ne_u32(hdr, 8).unwrap_or(0);
    let bits = address_bits(family).ok_or(Message::Ignored(Ignored::Family(family)))?;
    if u32::from(dst_len) > bits {
        return Err(Message::Malformed(Malformed::PrefixLength));
    }
    let (mut dst, mut oif, mut gateway, mut metric, mut rta_table) = (None, None, None, 0, None);
    let (mut multipath, mut nh_id, mut encap) = (false, false, false);
    for attr in Attrs(&body[RTMSG_LEN..]) {
        let (ty, v) = attr.map_err(Message::Malformed)?;
        match ty {
            RTA_DST => dst = Some(address(family, v)?),
            RTA_GATEWAY => gateway = Some(address(family, v)?),
            RTA_VIA => {
                // `struct rtvia`: a 16-bit family, then the address.
                let via_family = ne_u16(v, 0).ok_or(Message::Malformed(Malformed::Address))?;
                let via_family = u8::try_from(via_family).map_err(|_| Message::Malformed(Malformed::Address))?;
                gateway = Some(address(via_family, &v[2..])?);
            }
            RTA_OIF => oif = Some(u32_attr(v)?),
            RTA_PRIORITY => metric = u32_attr(v)?,
            RTA_TABLE => rta_table = Some(u32_attr(v)?),
            RTA_MULTIPATH => multipath = true,
            RTA_NH_ID => nh_id = true,
            RTA_ENCAP => encap = true,
            _ => {}
        }
    }
    let dst = match dst {
        Some(d) => mask(d, dst_len),
        None if dst_len == 0 => unspecified(family),
        None => return Err(Message::Malformed(Malformed::Address)),
    };
    if rtm_flags & RTM_F_CLONED != 0 {
        return Err(Message::Ignored(Ignored::Cloned));
    }
    let route_table = rta_table.unwrap_or(u32::from(rtm_table));
    if route_table != table {
        return Err(Message::Ignored(Ignored::Table));
    }
    let kind = match rtype {
        RTN_UNICAST => RouteKind::Unicast,
        RTN_BLACKHOLE => RouteKind::Blackhole,
        RTN_UNREACHABLE => RouteKind::Unreachable,
        RTN_PROHIBIT => RouteKind::Prohibit,
        other => return Err(Message::Ignored(Ignored::RouteType(other))),
    };
    if multipath {
        return Err(Message::Ignored(Ignored::Multipath));
    }
    if nh_id {
        return Err(Message::Ignored(Ignored::NexthopObject));
    }
    if encap {
        return Err(Message::Ignored(Ignored::Encap));
    }
    Ok(RouteMsg { dst, len: dst_len, kind, gateway, oif, table: route_table, metric })
}

fn neigh(body: &[u8]) -> Result<NeighMsg, Message> {
    let hdr = body.get(..NDMSG_LEN).ok_or(Message::Malformed(Malformed::Body))?;
    let family = hdr[0];
    let ifindex = ne_u32(hdr, 4).unwrap_or(0);
    let state = ne_u16(hdr, 8).unwrap_or(0);
    let ntf = hdr[10];
    address_bits(family).ok_or(Message::Ignored(Ignored::Family(family)))?;
    let (mut addr, mut lladdr) = (None, None);
    for attr in Attrs(&body[NDMSG_LEN..]) {
        let (ty, v) = attr.map_err(Message::Malformed)?;
        match ty {
            NDA_DST => addr = Some(address(family, v)?),
            NDA_LLADDR => lladdr = Some(v),
            _ => {}
        }
    }
    let addr = addr.ok_or(Message::Malformed(Malformed::Address))?;
    if ntf & NTF_PROXY != 0 {
        return Err(Message::Ignored(Ignored::Proxy));
    }
    let mac = match lladdr {
        None => None,
        Some(l) => Some(<[u8; 6]>::try_from(l).map_err(|_| Message::Ignored(Ignored::NotEthernet))?),
    };
    let reachable = mac.is_some() && state & NUD_USABLE != 0;
    Ok(NeighMsg { addr, mac: mac.unwrap_or([0; 6]), ifindex, reachable })
}

fn link(body: &[u8]) -> Result<LinkMsg, Message> {
    let hdr = body.get(..IFINFOMSG_LEN).ok_or(Message::Malformed(Malformed::Body))?;
    let family = hdr[0];
    let index = ne_u32(hdr, 4).unwrap_or(0);
    let flags = ne_u32(hdr, 8).unwrap_or(0);
    if family != AF_UNSPEC {
        return Err(Message::Ignored(Ignored::Family(family)));
    }
    let mut name = None;
    for attr in Attrs(&body[IFINFOMSG_LEN..]) {
        let (ty, v) = attr.map_err(Message::Malformed)?;
        if ty == IFLA_IFNAME {
            let bytes = v.split(|b| *b == 0).next().unwrap_or(&[]);
            if bytes.len() >= IFNAMSIZ {
                return Err(Message::Malformed(Malformed::Name));
            }
            name = Some(String::from_utf8_lossy(bytes).into_owned());
        }
    }
    Ok(LinkMsg { index, name, up: flags & IFF_UP != 0 })
}

/// The attributes of a message body: (type, payload), or the first defect.
struct Attrs<'a>(&'a [u8]);

impl<'a> Iterator for Attrs<'a> {
    type Item = Result<(u16, &'a [u8]), Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let parsed = match (ne_u16(self.0, 0), ne_u16(self.0, 2)) {
            (Some(len), Some(ty)) if usize::from(len) >= 4 => {
                self.0.get(4..usize::from(len)).map(|v| (ty & NLA_TYPE_MASK, v, usize::from(len)))
            }
            _ => None,
        };
        match parsed {
            Some((ty, v, len)) => {
                self.0 = self.0.get(align4(len)..).unwrap_or(&[]);
                Some(Ok((ty, v)))
            }
            None => {
                self.0 = &[];
                Some(Err(Malformed::Attribute))
            }
        }
    }
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn ne_u16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at.checked_add(2)?)?.try_into().ok()?))
}

fn ne_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at.checked_add(4)?)?.try_into().ok()?))
}

fn u32_attr(v: &[u8]) -> Result<u32, Message> {
    match v.len() {
        4 => ne_u32(v, 0).ok_or(Message::Malformed(Malformed::Attribute)),
        _ => Err(Message::Malformed(Malformed::Attribute)),
    }
}

fn address_bits(family: u8) -> Option<u32> {
    match family {
        AF_INET => Some(32),
        AF_INET6 => Some(128),
        _ => None,
    }
}

fn address(family: u8, v: &[u8]) -> Result<IpAddr, Message> {
    match family {
        AF_INET => <[u8; 4]>::try_from(v).map(|a| IpAddr::V4(Ipv4Addr::from(a))),
        AF_INET6 => <[u8; 16]>::try_from(v).map(|a| IpAddr::V6(Ipv6Addr::from(a))),
        _ => return Err(Message::Malformed(Malformed::Address)),
    }
    .map_err(|_| Message::Malformed(Malformed::Address))
}

fn unspecified(family: u8) -> IpAddr {
    if family == AF_INET6 {
        IpAddr::V6(Ipv6Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    }
}

/// `addr` with its bits past `len` cleared (`len` already checked against the family).
fn mask(addr: IpAddr, len: u8) -> IpAddr {
    match addr {
        IpAddr::V4(a) => {
            let m = u32::MAX.checked_shl(32 - u32::from(len)).unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX.checked_shl(128 - u32::from(len)).unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    }
}

/// Builders of request messages and of the messages the kernel sends, for the tests
/// of this crate and for the fuzz target's seeds.
#[cfg(test)]
pub(crate) mod build {
    /// A message: header with `kind`, `flags`, `seq`, then `body` and `attrs`, padded.
    pub fn msg(kind: u16, flags: u16, seq: u32, body: &[u8], attrs: &[(u16, &[u8])]) -> Vec<u8> {
        let mut m = vec![0u8; 16];
        m[4..6].copy_from_slice(&kind.to_ne_bytes());
        m[6..8].copy_from_slice(&flags.to_ne_bytes());
        m[8..12].copy_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(body);
        for (ty, v) in attrs {
            let len = 4 + v.len() as u16;
            m.extend_from_slice(&len.to_ne_bytes());
            m.extend_from_slice(&ty.to_ne_bytes());
            m.extend_from_slice(v);
            while !m.len().is_multiple_of(4) {
                m.push(0);
            }
        }
        let len = m.len() as u32;
        m[0..4].copy_from_slice(&len.to_ne_bytes());
        m
    }

    /// A `struct rtmsg`.
    pub fn rtmsg(family: u8, dst_len: u8, table: u8, rtype: u8, flags: u32) -> Vec<u8> {
        let mut b = vec![family, dst_len, 0, 0, table, 4, 0, rtype];
        b.extend_from_slice(&flags.to_ne_bytes());
        b
    }

    /// A `struct ndmsg`.
    pub fn ndmsg(family: u8, ifindex: u32, state: u16, flags: u8) -> Vec<u8> {
        let mut b = vec![family, 0, 0, 0];
        b.extend_from_slice(&ifindex.to_ne_bytes());
        b.extend_from_slice(&state.to_ne_bytes());
        b.extend_from_slice(&[flags, 1]);
        b
    }

    /// A `struct ifinfomsg`.
    pub fn ifinfomsg(index: u32, flags: u32) -> Vec<u8> {
        let mut b = vec![0, 0, 1, 0];
        b.extend_from_slice(&index.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&0u32.to_ne_bytes());
        b
    }
}

#[cfg(test)]
mod tests {
    use super::build::*;
    use super::*;

    fn all(d: &[u8], table: u32) -> Vec<Parsed> {
        let mut v = Vec::new();
        parse(d, table, &mut |p| v.push(p));
        v
    }

    fn one(d: &[u8]) -> Message {
        let v = all(d, 254);
        assert_eq!(v.len(), 1, "{v:?}");
        v.into_iter().next().unwrap().msg
    }

    fn v4(s: &str) -> IpAddr {
        IpAddr::V4(s.parse().unwrap())
    }

    fn v6(s: &str) -> IpAddr {
        IpAddr::V6(s.parse().unwrap())
    }

    #[test]
    fn route_add_v4_with_gateway() {
        let m = msg(
            RTM_NEWROUTE,
            0,
            7,
            &rtmsg(AF_INET, 24, 254, RTN_UNICAST, 0),
            &[
                (RTA_TABLE, &254u32.to_ne_bytes()),
                (RTA_DST, &[198, 19, 5, 0]),
                (RTA_GATEWAY, &[198, 18, 0, 2]),
                (RTA_OIF, &3u32.to_ne_bytes()),
                (RTA_PRIORITY, &20u32.to_ne_bytes()),
            ],
        );
        let p = all(&m, 254);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].seq, 7);
        assert_eq!(
            p[0].msg,
            Message::Route {
                add: true,
                route: RouteMsg {
                    dst: v4("198.19.5.0"),
                    len: 24,
                    kind: RouteKind::Unicast,
                    gateway: Some(v4("198.18.0.2")),
                    oif: Some(3),
                    table: 254,
                    metric: 20,
                }
            }
        );
        // The same route followed in another table is ignored.
        assert_eq!(all(&m, 100)[0].msg, Message::Ignored(Ignored::Table));
    }

    #[test]
    fn route_del_v6_with_gateway_and_host_bits_masked() {
        let dst: Ipv6Addr = "fd00:5::1".parse().unwrap();
        let gw: Ipv6Addr = "fe80::1".parse().unwrap();
        let m = msg(
            RTM_DELROUTE,
            0,
            0,
            &rtmsg(AF_INET6, 64, 254, RTN_UNICAST, 0),
            &[(RTA_DST, &dst.octets()), (RTA_GATEWAY, &gw.octets()), (RTA_OIF, &2u32.to_ne_bytes())],
        );
        let Message::Route { add: false, route } = one(&m) else { panic!("{:?}", one(&m)) };
        assert_eq!(route.dst, v6("fd00:5::"));
        assert_eq!(route.len, 64);
        assert_eq!(route.gateway, Some(IpAddr::V6(gw)));
        assert_eq!(route.oif, Some(2));
        assert_eq!(route.metric, 0);
    }

    #[test]
    fn route_v4_via_v6_gateway() {
        let gw: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut via = u16::from(AF_INET6).to_ne_bytes().to_vec();
        via.extend_from_slice(&gw.octets());
        let m = msg(
            RTM_NEWROUTE,
            0,
            0,
            &rtmsg(AF_INET, 16, 254, RTN_UNICAST, 0),
            &[(RTA_DST, &[198, 18, 0, 0]), (RTA_VIA, &via)],
        );
        let Message::Route { route, .. } = one(&m) else { panic!() };
        assert_eq!(route.gateway, Some(IpAddr::V6(gw)));
    }

    #[test]
    fn blackhole_unreachable_prohibit_and_default() {
        for (rtype, kind) in [
            (RTN_BLACKHOLE, RouteKind::Blackhole),
            (RTN_UNREACHABLE, RouteKind::Unreachable),
            (RTN_PROHIBIT, RouteKind::Prohibit),
        ] {
            let m = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET, 0, 254, rtype, 0), &[]);
            let Message::Route { add: true, route } = one(&m) else { panic!() };
            assert_eq!(
                (route.dst, route.len, route.kind, route.gateway, route.oif),
                (v4("0.0.0.0"), 0, kind, None, None)
            );
        }
        let m = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET6, 0, 254, RTN_UNREACHABLE, 0), &[]);
        let Message::Route { route, .. } = one(&m) else { panic!() };
        assert_eq!(route.dst, v6("::"));
    }

    #[test]
    fn ignored_routes() {
        let dst = [(RTA_DST, &[198u8, 18, 0, 0][..])];
        let local = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET, 32, 254, 2, 0), &dst);
        assert_eq!(one(&local), Message::Ignored(Ignored::RouteType(2)));
        let cloned = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET, 32, 254, RTN_UNICAST, RTM_F_CLONED), &dst);
        assert_eq!(one(&cloned), Message::Ignored(Ignored::Cloned));
        let other = msg(
            RTM_NEWROUTE,
            0,
            0,
            &rtmsg(AF_INET, 32, 254, RTN_UNICAST, 0),
            &[dst[0], (RTA_TABLE, &100u32.to_ne_bytes())],
        );
        assert_eq!(one(&other), Message::Ignored(Ignored::Table));
        let mp = msg(
            RTM_NEWROUTE,
            0,
            0,
            &rtmsg(AF_INET, 32, 254, RTN_UNICAST, 0),
            &[dst[0], (RTA_MULTIPATH, &[8, 0, 0, 0, 0, 0, 0, 0])],
        );
        assert_eq!(one(&mp), Message::Ignored(Ignored::Multipath));
        let nh = msg(
            RTM_NEWROUTE,
            0,
            0,
            &rtmsg(AF_INET, 32, 254, RTN_UNICAST, 0),
            &[dst[0], (RTA_NH_ID, &1u32.to_ne_bytes())],
        );
        assert_eq!(one(&nh), Message::Ignored(Ignored::NexthopObject));
        let mpls = msg(RTM_NEWROUTE, 0, 0, &rtmsg(28, 20, 254, RTN_UNICAST, 0), &[]);
        assert_eq!(one(&mpls), Message::Ignored(Ignored::Family(28)));
        assert_eq!(one(&msg(20, 0, 0, &[0; 8], &[])), Message::Ignored(Ignored::MessageType(20)));
    }

    #[test]
    fn neighbour_add_and_del() {
        let mac = [2, 0, 0, 0, 0, 9];
        let m =
            msg(RTM_NEWNEIGH, 0, 0, &ndmsg(AF_INET, 4, 0x80, 0), &[(NDA_DST, &[198, 18, 0, 9]), (NDA_LLADDR, &mac)]);
        assert_eq!(
            one(&m),
            Message::Neigh { add: true, neigh: NeighMsg { addr: v4("198.18.0.9"), mac, ifindex: 4, reachable: true } }
        );
        let a6: Ipv6Addr = "fd00::9".parse().unwrap();
        let m = msg(RTM_DELNEIGH, 0, 0, &ndmsg(AF_INET6, 4, 0x04, 0), &[(NDA_DST, &a6.octets()), (NDA_LLADDR, &mac)]);
        let Message::Neigh { add: false, neigh } = one(&m) else { panic!() };
        assert!(neigh.reachable);
        // Incomplete, no link-layer address: present but not usable.
        let m = msg(RTM_NEWNEIGH, 0, 0, &ndmsg(AF_INET, 4, 0x01, 0), &[(NDA_DST, &[198, 18, 0, 10])]);
        let Message::Neigh { neigh, .. } = one(&m) else { panic!() };
        assert_eq!((neigh.mac, neigh.reachable), ([0; 6], false));
        // Failed with an old address: not usable.
        let m =
            msg(RTM_NEWNEIGH, 0, 0, &ndmsg(AF_INET, 4, 0x20, 0), &[(NDA_DST, &[198, 18, 0, 10]), (NDA_LLADDR, &mac)]);
        let Message::Neigh { neigh, .. } = one(&m) else { panic!() };
        assert!(!neigh.reachable);
        let proxy = msg(RTM_NEWNEIGH, 0, 0, &ndmsg(AF_INET, 4, 0x80, NTF_PROXY), &[(NDA_DST, &[198, 18, 0, 10])]);
        assert_eq!(one(&proxy), Message::Ignored(Ignored::Proxy));
        let bridge = msg(RTM_NEWNEIGH, 0, 0, &ndmsg(7, 4, 0x80, 0), &[(NDA_LLADDR, &mac)]);
        assert_eq!(one(&bridge), Message::Ignored(Ignored::Family(7)));
        let gre = msg(
            RTM_NEWNEIGH,
            0,
            0,
            &ndmsg(AF_INET, 4, 0x80, 0),
            &[(NDA_DST, &[198, 18, 0, 10]), (NDA_LLADDR, &[1, 2, 3, 4])],
        );
        assert_eq!(one(&gre), Message::Ignored(Ignored::NotEthernet));
    }

    #[test]
    fn links_and_control_messages() {
        let m = msg(RTM_NEWLINK, 0, 0, &ifinfomsg(5, IFF_UP), &[(IFLA_IFNAME, b"dummy0\0")]);
        assert_eq!(
            one(&m),
            Message::Link { add: true, link: LinkMsg { index: 5, name: Some("dummy0".into()), up: true } }
        );
        let long = msg(RTM_NEWLINK, 0, 0, &ifinfomsg(5, 0), &[(IFLA_IFNAME, b"a_name_of_17_byte\0")]);
        assert_eq!(one(&long), Message::Malformed(Malformed::Name));
        let mut d = msg(NLMSG_DONE, 2, 9, &0u32.to_ne_bytes(), &[]);
        d.extend(msg(NLMSG_ERROR, 0, 10, &(-16i32).to_ne_bytes(), &[]));
        d.extend(msg(NLMSG_DONE, 2 | NLM_F_DUMP_INTR, 11, &[], &[]));
        let p = all(&d, 254);
        assert_eq!(p.len(), 3);
        assert_eq!((p[0].seq, &p[0].msg, p[0].interrupted()), (9, &Message::Done, false));
        assert_eq!((p[1].seq, &p[1].msg), (10, &Message::Error(-16)));
        assert!(p[2].interrupted());
    }

    #[test]
    fn several_messages_in_one_datagram() {
        let mut d = msg(RTM_NEWROUTE, 2, 1, &rtmsg(AF_INET, 0, 254, RTN_BLACKHOLE, 0), &[]);
        d.extend(msg(RTM_NEWROUTE, 2, 1, &rtmsg(AF_INET, 8, 254, RTN_UNICAST, 0), &[(RTA_DST, &[10, 1, 2, 3])]));
        d.extend(msg(NLMSG_DONE, 2, 1, &0u32.to_ne_bytes(), &[]));
        let p = all(&d, 254);
        assert_eq!(p.len(), 3);
        let Message::Route { route, .. } = &p[1].msg else { panic!() };
        assert_eq!((route.dst, route.len), (v4("10.0.0.0"), 8));
    }

    #[test]
    fn truncated_and_garbage_input() {
        let good = msg(
            RTM_NEWROUTE,
            0,
            0,
            &rtmsg(AF_INET, 24, 254, RTN_UNICAST, 0),
            &[(RTA_DST, &[198, 19, 5, 0]), (RTA_GATEWAY, &[198, 18, 0, 2])],
        );
        // Every cut of a valid message is malformed; none is read as a route.
        for cut in 0..good.len() {
            let p = all(&good[..cut], 254);
            assert!(p.iter().all(|p| matches!(p.msg, Message::Malformed(_))), "cut {cut}: {p:?}");
            assert_eq!(p.len(), usize::from(cut > 0));
        }
        // The header's length is honest but the last attribute is cut: the message
        // is malformed, not a /24 with no gateway.
        for cut in 16 + 12..good.len() {
            let mut m = good[..cut].to_vec();
            let len = cut as u32;
            m[0..4].copy_from_slice(&len.to_ne_bytes());
            let msg = one(&m);
            let whole_attrs = cut == 16 + 12 + 8;
            assert!(matches!(msg, Message::Malformed(_)) || whole_attrs, "cut {cut}: {msg:?}");
        }
        // A prefix longer than the address.
        let m = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET, 33, 254, RTN_UNICAST, 0), &[(RTA_DST, &[1, 2, 3, 4])]);
        assert_eq!(one(&m), Message::Malformed(Malformed::PrefixLength));
        // A /24 without RTA_DST.
        let m = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET, 24, 254, RTN_UNICAST, 0), &[]);
        assert_eq!(one(&m), Message::Malformed(Malformed::Address));
        // An IPv6 route with a 4-byte destination.
        let m = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET6, 24, 254, RTN_UNICAST, 0), &[(RTA_DST, &[1, 2, 3, 4])]);
        assert_eq!(one(&m), Message::Malformed(Malformed::Address));
        // An attribute of length 2 (shorter than its header).
        let mut m = msg(RTM_NEWROUTE, 0, 0, &rtmsg(AF_INET, 0, 254, RTN_UNICAST, 0), &[(RTA_OIF, &1u32.to_ne_bytes())]);
        m[28..30].copy_from_slice(&2u16.to_ne_bytes());
        assert_eq!(one(&m), Message::Malformed(Malformed::Attribute));
        // A header claiming more than the datagram holds, then a good message: the
        // datagram ends at the bad header.
        let mut m = good.clone();
        m[0..4].copy_from_slice(&1000u32.to_ne_bytes());
        m.extend_from_slice(&good);
        assert_eq!(all(&m, 254).len(), 1);
        // Length below the header's own size.
        let mut m = good.clone();
        m[0..4].copy_from_slice(&4u32.to_ne_bytes());
        assert_eq!(one(&m), Message::Malformed(Malformed::Header));
        // Garbage: no panic, bounded output.
        let mut x = 0x1234_5678u32;
        for n in 0..2000 {
            let d: Vec<u8> = (0..n % 97)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            assert!(all(&d, 254).len() <= d.len() / 16 + 1);
        }
    }
}
