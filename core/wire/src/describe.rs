//! One line per header of a frame, for traces and debugging (as a verbose packet dump).
//!
//! [`describe`] walks Ethernet, up to two VLAN tags, ARP, IPv4, IPv6 (with its
//! extension headers), TCP, UDP, ICMP, ICMPv6 and VXLAN (UDP port 4789, whose inner
//! frame is described again, [`MAX_DEPTH`] levels at most). Each line is appended to
//! `out` ending in `\n`. Bytes are untrusted: every field is read through a bounds
//! check, a header cut short gives a `truncated` line and the walk stops; nothing
//! panics and nothing is allocated beyond `out`'s growth.

use std::fmt::Write;

use crate::ethernet::EthernetAddress;

/// Most encapsulation levels described (an outer frame and a VXLAN inner one count two).
pub const MAX_DEPTH: usize = 3;
/// Most IPv6 extension headers described before the walk stops.
pub const MAX_EXT_HEADERS: usize = 8;

/// The UDP port of VXLAN (RFC 7348).
const VXLAN_PORT: u16 = 4789;

/// A bounds-checked reader over the bytes of one header.
#[derive(Clone, Copy)]
struct Bytes<'a>(&'a [u8]);

impl<'a> Bytes<'a> {
    fn u8(&self, at: usize) -> Option<u8> {
        self.0.get(at).copied()
    }
    fn u16(&self, at: usize) -> Option<u16> {
        Some(u16::from_be_bytes([self.u8(at)?, self.u8(at + 1)?]))
    }
    fn u32(&self, at: usize) -> Option<u32> {
        Some(u32::from_be_bytes([self.u8(at)?, self.u8(at + 1)?, self.u8(at + 2)?, self.u8(at + 3)?]))
    }
    fn mac(&self, at: usize) -> Option<EthernetAddress> {
        let b = self.0.get(at..at + 6)?;
        let mut a = [0u8; 6];
        a.copy_from_slice(b);
        Some(EthernetAddress(a))
    }
    fn v4(&self, at: usize) -> Option<std::net::Ipv4Addr> {
        Some(std::net::Ipv4Addr::from(self.u32(at)?))
    }
    fn v6(&self, at: usize) -> Option<std::net::Ipv6Addr> {
        let b = self.0.get(at..at + 16)?;
        let mut a = [0u8; 16];
        a.copy_from_slice(b);
        Some(std::net::Ipv6Addr::from(a))
    }
    fn from(&self, at: usize) -> Bytes<'a> {
        Bytes(self.0.get(at..).unwrap_or(&[]))
    }
    fn len(&self) -> usize {
        self.0.len()
    }
}

/// Append one line per header of the Ethernet frame `frame` to `out`.
pub fn describe(frame: &[u8], out: &mut String) {
    ethernet(Bytes(frame), 0, out);
}

fn truncated(out: &mut String, what: &str, have: usize, need: usize) {
    let _ = writeln!(out, "{what}: truncated ({have} of {need} bytes)");
}

fn ethernet(b: Bytes<'_>, depth: usize, out: &mut String) {
    let (Some(dst), Some(src), Some(mut ty)) = (b.mac(0), b.mac(6), b.u16(12)) else {
        return truncated(out, "ethernet", b.len(), 14);
    };
    let _ = writeln!(out, "ethernet: {src} > {dst}, type 0x{ty:04x} ({}), length {}", ether_name(ty), b.len());
    let mut at = 14;
    for _ in 0..2 {
        if ty != 0x8100 && ty != 0x88a8 {
            break;
        }
        let (Some(tci), Some(inner)) = (b.u16(at), b.u16(at + 2)) else {
            return truncated(out, "vlan", b.len().saturating_sub(at), 4);
        };
        let _ = writeln!(
            out,
            "vlan: {} vid {}, pcp {}, dei {}, type 0x{inner:04x} ({})",
            if ty == 0x88a8 { "802.1ad" } else { "802.1Q" },
            tci & 0x0fff,
            tci >> 13,
            (tci >> 12) & 1,
            ether_name(inner)
        );
        ty = inner;
        at += 4;
    }
    let l3 = b.from(at);
    match ty {
        0x0800 => ipv4(l3, depth, out),
        0x86dd => ipv6(l3, depth, out),
        0x0806 => arp(l3, out),
        0x8100 | 0x88a8 => {
            let _ = writeln!(out, "vlan: more than two tags, not described");
        }
        _ => {}
    }
}

fn ether_name(ty: u16) -> &'static str {
    match ty {
        0x0800 => "IPv4",
        0x86dd => "IPv6",
        0x0806 => "ARP",
        0x8100 => "802.1Q",
        0x88a8 => "802.1ad",
        0x88cc => "LLDP",
        0x8847 => "MPLS",
        _ if ty < 0x0600 => "802.3 length",
        _ => "unknown",
    }
}

fn arp(b: Bytes<'_>, out: &mut String) {
    let (Some(htype), Some(ptype), Some(hlen), Some(plen), Some(op)) = (b.u16(0), b.u16(2), b.u8(4), b.u8(5), b.u16(6))
    else {
        return truncated(out, "arp", b.len(), 8);
    };
    if htype != 1 || ptype != 0x0800 || hlen != 6 || plen != 4 {
        let _ =
            writeln!(out, "arp: htype {htype} ptype 0x{ptype:04x} hlen {hlen} plen {plen} op {op} (not Ethernet/IPv4)");
        return;
    }
    let (Some(sha), Some(spa), Some(tha), Some(tpa)) = (b.mac(8), b.v4(14), b.mac(18), b.v4(24)) else {
        return truncated(out, "arp", b.len(), 28);
    };
    let _ = match op {
        1 => writeln!(out, "arp: request who-has {tpa} tell {spa} ({sha}), target mac {tha}"),
        2 => writeln!(out, "arp: reply {spa} is-at {sha}, to {tpa} ({tha})"),
        _ => writeln!(out, "arp: op {op}, sender {spa} ({sha}), target {tpa} ({tha})"),
    };
}

fn proto_name(p: u8) -> &'static str {
    match p {
        0 => "hop-by-hop",
        1 => "ICMP",
        2 => "IGMP",
        4 => "IPIP",
        6 => "TCP",
        17 => "UDP",
        41 => "IPv6",
        43 => "routing",
        44 => "fragment",
        47 => "GRE",
        50 => "ESP",
        51 => "AH",
        58 => "ICMPv6",
        59 => "no next header",
        60 => "destination options",
        132 => "SCTP",
        _ => "unknown",
    }
}

fn ipv4(b: Bytes<'_>, depth: usize, out: &mut String) {
    let Some(vihl) = b.u8(0) else { return truncated(out, "ipv4", 0, 20) };
    let ihl = usize::from(vihl & 0x0f) * 4;
    if vihl >> 4 != 4 || ihl < 20 {
        let _ = writeln!(out, "ipv4: bad version/ihl 0x{vihl:02x}");
        return;
    }
    let Some(hdr) = b.0.get(..ihl) else { return truncated(out, "ipv4", b.len(), ihl) };
    let h = Bytes(hdr);
    let (tos, total, id, frag, ttl, proto, ck) = (
        h.u8(1).unwrap_or(0),
        h.u16(2).unwrap_or(0),
        h.u16(4).unwrap_or(0),
        h.u16(6).unwrap_or(0),
        h.u8(8).unwrap_or(0),
        h.u8(9).unwrap_or(0),
        h.u16(10).unwrap_or(0),
    );
    let (src, dst) =
        (h.v4(12).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED), h.v4(16).unwrap_or(std::net::Ipv4Addr::UNSPECIFIED));
    let ok = crate::checksum::data(hdr) == 0xffff;
    let mut flags = String::new();
    if frag & 0x4000 != 0 {
        flags.push_str(" DF");
    }
    if frag & 0x2000 != 0 {
        flags.push_str(" MF");
    }
    if flags.is_empty() {
        flags.push_str(" none");
    }
    let off = (frag & 0x1fff) * 8;
    let _ = writeln!(
        out,
        "ipv4: {src} > {dst}, proto {proto} ({}), ttl {ttl}, tos 0x{tos:02x}, len {total}, id {id}, flags [{}], offset {off}, \
         cksum 0x{ck:04x} ({}){}",
        proto_name(proto),
        &flags[1..],
        if ok { "ok" } else { "bad" },
        if ihl > 20 { format!(", options {} bytes", ihl - 20) } else { String::new() }
    );
    if usize::from(total) > b.len() {
        let _ = writeln!(out, "ipv4: truncated ({} of {total} bytes)", b.len());
    }
    if off != 0 {
        let _ = writeln!(out, "ipv4: non-first fragment, payload not described");
        return;
    }
    let end = usize::from(total).clamp(ihl, b.len());
    let payload = Bytes(b.0.get(ihl..end).unwrap_or(&[]));
    l4(proto, payload, false, depth, out);
}

fn ipv6(b: Bytes<'_>, depth: usize, out: &mut String) {
    let Some(vtc) = b.u32(0) else { return truncated(out, "ipv6", b.len(), 40) };
    if vtc >> 28 != 6 {
        let _ = writeln!(out, "ipv6: bad version {}", vtc >> 28);
        return;
    }
    let (Some(plen), Some(mut nh), Some(hl), Some(src), Some(dst)) = (b.u16(4), b.u8(6), b.u8(7), b.v6(8), b.v6(24))
    else {
        return truncated(out, "ipv6", b.len(), 40);
    };
    let _ = writeln!(
        out,
        "ipv6: {src} > {dst}, next header {nh} ({}), hop limit {hl}, payload length {plen}, class 0x{:02x}, flow label 0x{:05x}",
        proto_name(nh),
        (vtc >> 20) & 0xff,
        vtc & 0xfffff
    );
    let have = b.len() - 40;
    if usize::from(plen) > have {
        let _ = writeln!(out, "ipv6: truncated ({have} of {plen} payload bytes)");
    }
    let end = (40 + usize::from(plen)).min(b.len());
    let mut p = Bytes(b.0.get(40..end).unwrap_or(&[]));
    for _ in 0..MAX_EXT_HEADERS {
        let name = match nh {
            0 => "hop-by-hop",
            43 => "routing",
            44 => "fragment",
            60 => "destination options",
            51 => "ah",
            _ => return l4(nh, p, true, depth, out),
        };
        let Some(next) = p.u8(0) else { return truncated(out, name, p.len(), 8) };
        let len = match nh {
            44 => 8,
            51 => (usize::from(p.u8(1).unwrap_or(0)) + 2) * 4,
            _ => (usize::from(p.u8(1).unwrap_or(0)) + 1) * 8,
        };
        if p.len() < len {
            return truncated(out, name, p.len(), len);
        }
        let _ = match nh {
            43 => writeln!(
                out,
                "routing: next header {next} ({}), type {}, segments left {}, length {len}",
                proto_name(next),
                p.u8(2).unwrap_or(0),
                p.u8(3).unwrap_or(0)
            ),
            44 => {
                let fo = p.u16(2).unwrap_or(0);
                let id = p.u32(4).unwrap_or(0);
                writeln!(
                    out,
                    "fragment: next header {next} ({}), offset {}, M {}, id 0x{id:08x}",
                    proto_name(next),
                    (fo >> 3) * 8,
                    fo & 1
                )
            }
            51 => writeln!(
                out,
                "ah: next header {next} ({}), spi 0x{:08x}, seq {}, length {len}",
                proto_name(next),
                p.u32(4).unwrap_or(0),
                p.u32(8).unwrap_or(0)
            ),
            _ => writeln!(out, "{name}: next header {next} ({}), length {len}", proto_name(next)),
        };
        if nh == 44 && p.u16(2).unwrap_or(0) >> 3 != 0 {
            let _ = writeln!(out, "fragment: non-first fragment, payload not described");
            return;
        }
        nh = next;
        p = p.from(len);
    }
    let _ = writeln!(out, "ipv6: more than {MAX_EXT_HEADERS} extension headers, not described");
}

fn l4(proto: u8, p: Bytes<'_>, v6: bool, depth: usize, out: &mut String) {
    match proto {
        6 => tcp(p, out),
        17 => udp(p, depth, out),
        1 if !v6 => icmp(p, out),
        58 if v6 => icmpv6(p, out),
        _ => {}
    }
}

fn tcp(b: Bytes<'_>, out: &mut String) {
    let (Some(sp), Some(dp), Some(seq), Some(ack), Some(off), Some(fl), Some(win), Some(ck), Some(urg)) =
        (b.u16(0), b.u16(2), b.u32(4), b.u32(8), b.u8(12), b.u8(13), b.u16(14), b.u16(16), b.u16(18))
    else {
        return truncated(out, "tcp", b.len(), 20);
    };
    let hlen = usize::from(off >> 4) * 4;
    let mut f = String::new();
    for (bit, c) in
        [(0x02, 'S'), (0x01, 'F'), (0x04, 'R'), (0x08, 'P'), (0x20, 'U'), (0x40, 'E'), (0x80, 'W'), (0x10, '.')]
    {
        if fl & bit != 0 {
            f.push(c);
        }
    }
    if f.is_empty() {
        f.push_str("none");
    }
    let _ = write!(out, "tcp: {sp} > {dp}, flags [{f}], seq {seq}");
    if fl & 0x10 != 0 {
        let _ = write!(out, ", ack {ack}");
    }
    let _ = write!(out, ", win {win}, cksum 0x{ck:04x}");
    if fl & 0x20 != 0 {
        let _ = write!(out, ", urg {urg}");
    }
    if hlen < 20 {
        let _ = writeln!(out, ", bad data offset {hlen}");
        return;
    }
    let Some(opts) = b.0.get(20..hlen) else {
        let _ = writeln!(out);
        return truncated(out, "tcp options", b.len().saturating_sub(20), hlen - 20);
    };
    if !opts.is_empty() {
        out.push_str(", options [");
        tcp_options(Bytes(opts), out);
        out.push(']');
    }
    let _ = writeln!(out, ", length {}", b.len() - hlen);
}

fn tcp_options(o: Bytes<'_>, out: &mut String) {
    let mut at = 0;
    let mut first = true;
    while let Some(kind) = o.u8(at) {
        if !first {
            out.push(',');
        }
        first = false;
        if kind == 0 {
            out.push_str("eol");
            return;
        }
        if kind == 1 {
            out.push_str("nop");
            at += 1;
            continue;
        }
        let len = usize::from(o.u8(at + 1).unwrap_or(0));
        if len < 2 || at + len > o.len() {
            out.push_str("bad option length");
            return;
        }
        let v = Bytes(&o.0[at + 2..at + len]);
        let _ = match (kind, len) {
            (2, 4) => write!(out, "mss {}", v.u16(0).unwrap_or(0)),
            (3, 3) => write!(out, "wscale {}", v.u8(0).unwrap_or(0)),
            (4, 2) => write!(out, "sackOK"),
            (8, 10) => write!(out, "TS val {} ecr {}", v.u32(0).unwrap_or(0), v.u32(4).unwrap_or(0)),
            (5, _) if (len - 2) % 8 == 0 => {
                out.push_str("sack");
                let mut k = 0;
                while let (Some(l), Some(r)) = (v.u32(k), v.u32(k + 4)) {
                    let _ = write!(out, " {l}:{r}");
                    k += 8;
                }
                Ok(())
            }
            _ => write!(out, "opt-{kind}:{}", len - 2),
        };
        at += len;
    }
}

fn udp(b: Bytes<'_>, depth: usize, out: &mut String) {
    let (Some(sp), Some(dp), Some(len), Some(ck)) = (b.u16(0), b.u16(2), b.u16(4), b.u16(6)) else {
        return truncated(out, "udp", b.len(), 8);
    };
    let _ = writeln!(out, "udp: {sp} > {dp}, len {len}, cksum 0x{ck:04x}");
    if dp == VXLAN_PORT {
        vxlan(b.from(8), depth, out);
    }
}

fn vxlan(b: Bytes<'_>, depth: usize, out: &mut String) {
    let (Some(flags), Some(vni)) = (b.u8(0), b.u32(4)) else { return truncated(out, "vxlan", b.len(), 8) };
    let _ = writeln!(out, "vxlan: flags 0x{flags:02x}, vni {}", vni >> 8);
    if depth + 1 >= MAX_DEPTH {
        let _ = writeln!(out, "vxlan: inner frame not described (more than {MAX_DEPTH} levels)");
        return;
    }
    ethernet(b.from(8), depth + 1, out);
}

fn icmp(b: Bytes<'_>, out: &mut String) {
    let (Some(ty), Some(code), Some(ck)) = (b.u8(0), b.u8(1), b.u16(2)) else {
        return truncated(out, "icmp", b.len(), 4);
    };
    let name = match ty {
        0 => "echo reply",
        3 => "destination unreachable",
        5 => "redirect",
        8 => "echo request",
        11 => "time exceeded",
        12 => "parameter problem",
        13 => "timestamp request",
        14 => "timestamp reply",
        _ => "unknown",
    };
    let _ = write!(out, "icmp: {name} (type {ty}, code {code}");
    if ty == 3 {
        let c = match code {
            0 => "net unreachable",
            1 => "host unreachable",
            2 => "protocol unreachable",
            3 => "port unreachable",
            4 => "fragmentation needed",
            13 => "administratively prohibited",
            _ => "",
        };
        if !c.is_empty() {
            let _ = write!(out, " {c}");
        }
    }
    let _ = write!(out, "), cksum 0x{ck:04x}");
    if matches!(ty, 0 | 8) {
        match (b.u16(4), b.u16(6)) {
            (Some(id), Some(seq)) => {
                let _ = write!(out, ", id {id}, seq {seq}, length {}", b.len());
            }
            _ => out.push_str(", echo header truncated"),
        }
    }
    out.push('\n');
}

fn icmpv6(b: Bytes<'_>, out: &mut String) {
    let (Some(ty), Some(code), Some(ck)) = (b.u8(0), b.u8(1), b.u16(2)) else {
        return truncated(out, "icmpv6", b.len(), 4);
    };
    let name = match ty {
        1 => "destination unreachable",
        2 => "packet too big",
        3 => "time exceeded",
        4 => "parameter problem",
        128 => "echo request",
        129 => "echo reply",
        133 => "router solicitation",
        134 => "router advertisement",
        135 => "neighbor solicitation",
        136 => "neighbor advertisement",
        137 => "redirect",
        143 => "multicast listener report v2",
        _ => "unknown",
    };
    let _ = write!(out, "icmpv6: {name} (type {ty}, code {code}), cksum 0x{ck:04x}");
    let opts_at = match ty {
        128 | 129 => {
            match (b.u16(4), b.u16(6)) {
                (Some(id), Some(seq)) => {
                    let _ = write!(out, ", id {id}, seq {seq}, length {}", b.len());
                }
                _ => out.push_str(", echo header truncated"),
            }
            None
        }
        133 => Some(8),
        134 => {
            match (b.u8(4), b.u8(5), b.u16(6), b.u32(8), b.u32(12)) {
                (Some(hl), Some(fl), Some(life), Some(reach), Some(retrans)) => {
                    let _ = write!(
                        out,
                        ", hop limit {hl}, flags [{}{}], router lifetime {life}s, reachable {reach}ms, retrans {retrans}ms",
                        if fl & 0x80 != 0 { "M" } else { "" },
                        if fl & 0x40 != 0 { "O" } else { "" }
                    );
                }
                _ => out.push_str(", header truncated"),
            }
            Some(16)
        }
        135 | 136 => {
            match b.v6(8) {
                Some(t) => {
                    let _ = write!(out, ", target {t}");
                }
                None => out.push_str(", target truncated"),
            }
            if ty == 136 {
                let fl = b.u8(4).unwrap_or(0);
                let _ = write!(
                    out,
                    ", flags [{}{}{}]",
                    if fl & 0x80 != 0 { "R" } else { "" },
                    if fl & 0x40 != 0 { "S" } else { "" },
                    if fl & 0x20 != 0 { "O" } else { "" }
                );
            }
            Some(24)
        }
        _ => None,
    };
    out.push('\n');
    if let Some(at) = opts_at {
        nd_options(b.from(at), out);
    }
}

fn nd_options(o: Bytes<'_>, out: &mut String) {
    let mut at = 0;
    while let Some(ty) = o.u8(at) {
        let len = usize::from(o.u8(at + 1).unwrap_or(0)) * 8;
        if len == 0 || at + len > o.len() {
            let _ = writeln!(out, "icmpv6 option: bad length at offset {at}");
            return;
        }
        let v = o.from(at + 2);
        let _ = match ty {
            1 | 2 => writeln!(
                out,
                "icmpv6 option: {} link-layer address {}",
                if ty == 1 { "source" } else { "target" },
                v.mac(0).map(|m| m.to_string()).unwrap_or_default()
            ),
            3 => writeln!(
                out,
                "icmpv6 option: prefix {}/{}, valid {}s, preferred {}s",
                v.v6(14).unwrap_or(std::net::Ipv6Addr::UNSPECIFIED),
                v.u8(0).unwrap_or(0),
                v.u32(2).unwrap_or(0),
                v.u32(6).unwrap_or(0)
            ),
            5 => writeln!(out, "icmpv6 option: mtu {}", v.u32(2).unwrap_or(0)),
            _ => writeln!(out, "icmpv6 option: type {ty}, length {len}"),
        };
        at += len;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(f: &[u8]) -> Vec<String> {
        let mut s = String::new();
        describe(f, &mut s);
        s.lines().map(str::to_string).collect()
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    /// A TCP SYN 198.18.0.1:40000 > 198.18.0.2:80 with mss, sackOK, TS, nop, wscale.
    pub(crate) fn tcp_syn() -> Vec<u8> {
        hex("02000000000202000000000108004500003c1c4640004006\
             0000c6120001c61200029c400050000003e800000000a002faf000000000\
             020405b40402080a000000640000000001030307")
    }

    /// An ARP request: who has 198.18.0.2, tell 198.18.0.1.
    pub(crate) fn arp_request() -> Vec<u8> {
        hex("ffffffffffff0200000000010806000108000604000102000000000\
             1c6120001000000000000c6120002")
    }

    /// A neighbour solicitation from fd00::1 for fd00::2, with a source link-layer option.
    pub(crate) fn neighbour_solicitation() -> Vec<u8> {
        hex("3333ff000002020000000001 86dd 6000000000203aff\
             fd000000000000000000000000000001 ff0200000000000000000001ff000002\
             8700 0000 00000000 fd000000000000000000000000000002 0101020000000001")
    }

    #[test]
    fn tcp_syn_lines() {
        let mut f = tcp_syn();
        let ck = crate::checksum::data(&f[14..34]);
        f[24..26].copy_from_slice(&(!ck).to_be_bytes());
        let l = lines(&f);
        assert_eq!(l[0], "ethernet: 02:00:00:00:00:01 > 02:00:00:00:00:02, type 0x0800 (IPv4), length 74");
        assert_eq!(
            l[1],
            format!(
                "ipv4: 198.18.0.1 > 198.18.0.2, proto 6 (TCP), ttl 64, tos 0x00, len 60, id 7238, flags [DF], offset 0, \
                 cksum 0x{:04x} (ok)",
                !ck
            )
        );
        assert_eq!(
            l[2],
            "tcp: 40000 > 80, flags [S], seq 1000, win 64240, cksum 0x0000, options [mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 7], length 0"
        );
        assert_eq!(l.len(), 3);
    }

    #[test]
    fn arp_request_lines() {
        let l = lines(&arp_request());
        assert_eq!(
            l[1],
            "arp: request who-has 198.18.0.2 tell 198.18.0.1 (02:00:00:00:00:01), target mac 00:00:00:00:00:00"
        );
    }

    #[test]
    fn neighbour_solicitation_lines() {
        let l = lines(&neighbour_solicitation());
        assert_eq!(
            l[1],
            "ipv6: fd00::1 > ff02::1:ff00:2, next header 58 (ICMPv6), hop limit 255, payload length 32, class 0x00, flow label 0x00000"
        );
        assert_eq!(l[2], "icmpv6: neighbor solicitation (type 135, code 0), cksum 0x0000, target fd00::2");
        assert_eq!(l[3], "icmpv6 option: source link-layer address 02:00:00:00:00:01");
    }

    #[test]
    fn vlan_qinq_and_fragment_ext_header() {
        // 802.1ad 100 / 802.1Q 200 / IPv6 with a fragment header (offset 8, M 1) then UDP.
        let f = hex("020000000002020000000001 88a8 6064 8100 30c8 86dd 6000000000103a40\
                     fd000000000000000000000000000001 fd000000000000000000000000000002\
                     11000009 12345678 00350035 00080000");
        let l = lines(&f);
        assert_eq!(l[1], "vlan: 802.1ad vid 100, pcp 3, dei 0, type 0x8100 (802.1Q)");
        assert_eq!(l[2], "vlan: 802.1Q vid 200, pcp 1, dei 1, type 0x86dd (IPv6)");
        assert!(l[3].contains("next header 58"), "{}", l[3]);
        // Next header says 58 but the first header is not ICMPv6-shaped: it is described as
        // ICMPv6 (type 17 unknown); what matters is no panic and one line.
        assert_eq!(l.len(), 5, "{l:?}");
        let f = hex("020000000002020000000001 86dd 60000000001 02c40\
                     fd000000000000000000000000000001 fd000000000000000000000000000002\
                     11000009 12345678 00350035 00080000");
        let l = lines(&f);
        assert_eq!(l[2], "fragment: next header 17 (UDP), offset 8, M 1, id 0x12345678");
        assert_eq!(l[3], "fragment: non-first fragment, payload not described");
    }

    #[test]
    fn vxlan_inner_frame_is_described() {
        let inner = arp_request();
        let mut f = hex("020000000002020000000001 0800 45000000 00000000 4011 0000 c6120001 c6120002\
                         c00012b5 0000 0000 08000000 00002a00");
        let total = (f.len() - 14 + inner.len()) as u16;
        f[16..18].copy_from_slice(&total.to_be_bytes());
        let udp_len = (8 + 8 + inner.len()) as u16;
        f[38..40].copy_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&inner);
        let l = lines(&f);
        assert_eq!(l[2], format!("udp: 49152 > 4789, len {udp_len}, cksum 0x0000"));
        assert_eq!(l[3], "vxlan: flags 0x08, vni 42");
        assert!(l[4].starts_with("ethernet: 02:00:00:00:00:01 > ff:ff:ff:ff:ff:ff"), "{}", l[4]);
        assert!(l[5].starts_with("arp: request who-has 198.18.0.2"), "{}", l[5]);
    }

    #[test]
    fn truncated_headers_say_so() {
        let f = tcp_syn();
        assert_eq!(lines(&f[..10]), ["ethernet: truncated (10 of 14 bytes)"]);
        let l = lines(&f[..40]);
        assert_eq!(l[1].split(", ").next(), Some("ipv4: 198.18.0.1 > 198.18.0.2"));
        assert_eq!(l[2], "ipv4: truncated (26 of 60 bytes)");
        assert_eq!(l[3], "tcp: truncated (6 of 20 bytes)");
        let l = lines(&f[..60]);
        assert_eq!(l[4], "tcp options: truncated (6 of 20 bytes)");
        // Every prefix of every sample: no panic, at least one line.
        for s in [tcp_syn(), arp_request(), neighbour_solicitation()] {
            for n in 0..=s.len() {
                assert!(!lines(&s[..n]).is_empty());
            }
        }
    }

    #[test]
    fn mutated_frames_never_panic() {
        // The fuzz target's invariant on deterministic mutations of the samples: one
        // to four bytes changed, then cut at a random length.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for s in [tcp_syn(), arp_request(), neighbour_solicitation()] {
            for _ in 0..5000 {
                let mut f = s.clone();
                for _ in 0..=rnd() % 4 {
                    let i = (rnd() % f.len() as u64) as usize;
                    f[i] = rnd() as u8;
                }
                let n = (rnd() % (f.len() as u64 + 1)) as usize;
                let mut out = String::new();
                describe(&f[..n], &mut out);
                assert!(out.ends_with('\n'));
            }
        }
    }

    #[test]
    fn icmp_echo_and_sack() {
        let f = hex("020000000002020000000001 0800 4500001c 00000000 4001 0000 c6120001 c6120002 0800f7fe 00010000");
        let l = lines(&f);
        assert_eq!(l[2], "icmp: echo request (type 8, code 0), cksum 0xf7fe, id 1, seq 0, length 8");
        let mut o = String::new();
        tcp_options(Bytes(&hex("0101050a0000000a00000014")), &mut o);
        assert_eq!(o, "nop,nop,sack 10:20");
    }
}
