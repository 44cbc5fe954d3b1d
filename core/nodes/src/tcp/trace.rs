//! The `tcp` node's trace records, as tcpdump prints a segment:
//! `IP 198.18.0.1.40000 > 198.18.0.2.80: Flags [S], seq 1000, win 65535, length 0`
//! (absolute sequence numbers, as `tcpdump -S`). The record is read from the
//! frame's first segment: the payload of an aggregate may continue in a chain, so
//! the length is the IP header's.

use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// Appends the tcpdump-style line of the TCP segment in `frame` to `out`; `false`
/// (nothing written) when `frame` is not an untagged Ethernet frame carrying an
/// unfragmented TCP segment whose headers it holds whole.
pub fn format_segment(frame: &[u8], out: &mut String) -> bool {
    let Some((src, dst, tcp, l4_len)) = ip_layer(frame) else { return false };
    let Some(h) = tcp.get(..20) else { return false };
    let hl = usize::from(h[12] >> 4) * 4;
    if hl < 20 || hl > l4_len {
        return false;
    }
    let be16 = |o: usize| u16::from_be_bytes([h[o], h[o + 1]]);
    let be32 = |o: usize| u32::from_be_bytes([h[o], h[o + 1], h[o + 2], h[o + 3]]);
    let (sport, dport, seq, ack, flags, win) = (be16(0), be16(2), be32(4), be32(8), h[13], be16(14));
    let len = l4_len - hl;
    let family = if src.is_ipv4() { "IP" } else { "IP6" };
    let _ = write!(out, "{family} {src}.{sport} > {dst}.{dport}: Flags [");
    for (bit, c) in [(0x02, 'S'), (0x01, 'F'), (0x08, 'P'), (0x04, 'R'), (0x20, 'U'), (0x40, 'E'), (0x80, 'W')] {
        if flags & bit != 0 {
            out.push(c);
        }
    }
    if flags & 0x10 != 0 {
        out.push('.');
    }
    out.push(']');
    if len > 0 {
        let _ = write!(out, ", seq {seq}:{}", seq.wrapping_add(len as u32));
    } else {
        let _ = write!(out, ", seq {seq}");
    }
    if flags & 0x10 != 0 {
        let _ = write!(out, ", ack {ack}");
    }
    let _ = write!(out, ", win {win}, length {len}");
    true
}

/// The addresses, the bytes from the TCP header on, and the TCP length.
fn ip_layer(frame: &[u8]) -> Option<(IpAddr, IpAddr, &[u8], usize)> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let ip = frame.get(14..)?;
    match ethertype {
        0x0800 => {
            let h = ip.get(..20)?;
            let ihl = usize::from(h[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
            let fragment = u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0;
            if h[0] >> 4 != 4 || ihl < 20 || total < ihl || h[9] != 6 || fragment {
                return None;
            }
            let addr = |o: usize| IpAddr::V4(Ipv4Addr::new(h[o], h[o + 1], h[o + 2], h[o + 3]));
            Some((addr(12), addr(16), ip.get(ihl..)?, total - ihl))
        }
        0x86dd => {
            let h = ip.get(..40)?;
            if h[0] >> 4 != 6 || h[6] != 6 {
                return None;
            }
            let addr = |o: usize| {
                let b: [u8; 16] = h[o..o + 16].try_into().expect("16 bytes");
                IpAddr::V6(Ipv6Addr::from(b))
            };
            Some((addr(8), addr(24), &ip[40..], usize::from(u16::from_be_bytes([h[4], h[5]]))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::format_segment;
    use crate::tests::{eth, ipv4, ipv6, PEER4, PEER6, PEER_MAC, US4, US6, US_MAC};

    /// A TCP header (no options) and `payload`; the checksum is not filled.
    fn tcp(sport: u16, dport: u16, seq: u32, ack: u32, flags: u8, win: u16, payload: &[u8]) -> Vec<u8> {
        let mut t = vec![0u8; 20];
        t[..2].copy_from_slice(&sport.to_be_bytes());
        t[2..4].copy_from_slice(&dport.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..12].copy_from_slice(&ack.to_be_bytes());
        t[12] = 5 << 4;
        t[13] = flags;
        t[14..16].copy_from_slice(&win.to_be_bytes());
        t.extend_from_slice(payload);
        t
    }

    fn line(frame: &[u8]) -> String {
        let mut s = String::new();
        assert!(format_segment(frame, &mut s), "not a TCP frame");
        s
    }

    #[test]
    fn prints_segments_as_tcpdump_does() {
        let syn = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 6, 64, &tcp(40000, 80, 1000, 0, 0x02, 65535, &[])));
        assert_eq!(line(&syn), "IP 198.18.0.1.40000 > 198.18.0.2.80: Flags [S], seq 1000, win 65535, length 0");
        let syn_ack =
            eth(PEER_MAC, US_MAC, 0x0800, &ipv4(US4, PEER4, 6, 64, &tcp(80, 40000, 7, 1001, 0x12, 64240, &[])));
        assert_eq!(
            line(&syn_ack),
            "IP 198.18.0.2.80 > 198.18.0.1.40000: Flags [S.], seq 7, ack 1001, win 64240, length 0"
        );
        let data = tcp(40000, 80, 1001, 8, 0x18, 502, b"GET / HTTP/1.1\r\n\r\n");
        let push = eth(US_MAC, PEER_MAC, 0x86dd, &ipv6(PEER6, US6, 6, 64, &data));
        assert_eq!(line(&push), "IP6 fd00::1.40000 > fd00::2.80: Flags [P.], seq 1001:1019, ack 8, win 502, length 18");
        let rst = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 6, 64, &tcp(40000, 80, 1019, 0, 0x04, 0, &[])));
        assert_eq!(line(&rst), "IP 198.18.0.1.40000 > 198.18.0.2.80: Flags [R], seq 1019, win 0, length 0");
    }

    #[test]
    fn other_frames_are_left_to_the_default() {
        let udp = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 17, 64, &[0; 8]));
        let short = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 6, 64, &[0; 10]));
        let mut s = String::new();
        for f in [&udp[..], &short[..], &[0u8; 5][..], &eth(US_MAC, PEER_MAC, 0x0806, &[0; 28])[..]] {
            assert!(!format_segment(f, &mut s));
        }
        assert!(s.is_empty());
    }

    #[test]
    fn the_tcp_node_traces_with_it() {
        use ironpath_graph::Node;
        let pool = crate::tests::pool(16);
        let node = super::super::TcpNode::new(super::super::kind::defaults(), pool).expect("node");
        let syn = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, 6, 64, &tcp(40000, 80, 1000, 0, 0x02, 65535, &[])));
        let mut s = String::new();
        node.trace(&syn, &mut s);
        assert_eq!(s, "IP 198.18.0.1.40000 > 198.18.0.2.80: Flags [S], seq 1000, win 65535, length 0");
        s.clear();
        node.trace(&[1, 2, 3], &mut s);
        assert_eq!(s, "len 3 010203", "anything else: the default record");
    }
}
