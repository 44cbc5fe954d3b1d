//! Reading what receive aggregation needs from a TCP segment's headers: the flow
//! key, the fields that must match for a merge, and the payload's checksum sum.

use ironpath_eal::abi;
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{l3_offset, EtherType};
use ironpath_wire::IpProtocol;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Longest L2 header kept in a flow key (Ethernet + two VLAN tags).
pub const MAX_L2: usize = 22;
/// Bytes of a flow key: L2 header, addresses, ports.
pub const KEY_LEN: usize = MAX_L2 + 1 + 32 + 4;

/// TCP flags that forbid a merge.
pub const NO_MERGE: u8 = 0x02 | 0x04 | 0x20 | 0x40 | 0x80; // SYN RST URG ECE CWR
/// TCP flags that end a merge after the segment carrying them.
pub const END_MERGE: u8 = 0x01 | 0x08; // FIN PSH

/// A flow key: everything that names a TCP connection in one direction on one link.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Key(pub [u8; KEY_LEN]);

/// Why a segment cannot be aggregated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not TCP over IPv4/IPv6 without extension headers, or a fragment.
    NotTcp,
    /// Truncated or inconsistent headers.
    Malformed,
    /// A checksum is wrong.
    BadChecksum,
}

/// One TCP segment's aggregation view.
#[derive(Clone, Copy)]
pub struct Seg {
    /// Flow key.
    pub key: Key,
    /// Hash of the key.
    pub hash: u32,
    /// L2 header length (Ethernet and VLAN tags).
    pub l2: u16,
    /// IP header length.
    pub l3: u16,
    /// TCP header length.
    pub l4: u16,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP flags byte.
    pub flags: u8,
    /// Window field.
    pub window: u16,
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    /// Bytes that must be equal for a merge besides ACK and window: IPv4 TOS, TTL
    /// and flags (DF); IPv6 traffic class, flow label and hop limit.
    pub ip_same: u64,
    /// TCP option bytes (compared as a whole).
    pub opts: [u8; 40],
    /// Length of the options.
    pub opt_len: u8,
    /// Payload bytes.
    pub payload: u16,
    /// Ones-complement sum of the payload (16-bit, folded).
    pub psum: u16,
}

#[inline(always)]
fn be16(d: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([d[o], d[o + 1]])
}

#[inline(always)]
fn be32(d: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
}

/// FNV-1a over 8-byte words of the key: cheap and good enough to tell flows apart
/// before the full comparison.
#[inline(always)]
fn hash(k: &[u8; KEY_LEN]) -> u32 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for c in k.chunks(8) {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        h = (h ^ u64::from_le_bytes(w)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    (h ^ (h >> 32)) as u32
}

/// Read segment `frame` (the first segment's data; `pkt_len` the whole packet's
/// length, which must equal it: chained input is not aggregated). `ol_flags`
/// tells which checksums the port already checked.
pub fn parse(frame: &[u8], pkt_len: usize, ol_flags: u64) -> Result<Seg, Skip> {
    if frame.len() != pkt_len {
        return Err(Skip::NotTcp);
    }
    let (et, l2) = l3_offset(frame).map_err(|_| Skip::Malformed)?;
    if l2 > MAX_L2 {
        return Err(Skip::NotTcp);
    }
    let ip = &frame[l2..];
    let mut key = [0u8; KEY_LEN];
    key[..l2].copy_from_slice(&frame[..l2]);
    key[MAX_L2] = l2 as u8;
    let (v6, l3, ip_total, ip_id, ip_same, pseudo) = match et {
        EtherType::IPV4 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return Err(Skip::Malformed);
            }
            let hl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(be16(ip, 2));
            if hl < 20 || total < hl || total > ip.len() {
                return Err(Skip::Malformed);
            }
            let frag = be16(ip, 6);
            if frag & 0x3fff != 0 || ip[9] != IpProtocol::TCP.0 {
                return Err(Skip::NotTcp); // a fragment (MF or offset) or not TCP
            }
            if ol_flags & abi::RX_IP_CKSUM_GOOD == 0 && checksum::data(&ip[..hl]) != 0xffff {
                return Err(Skip::BadChecksum);
            }
            key[MAX_L2 + 1..MAX_L2 + 9].copy_from_slice(&ip[12..20]);
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let same = u64::from(ip[1]) << 24 | u64::from(ip[8]) << 16 | u64::from(frag & 0x4000);
            let tcp_len = (total - hl) as u16;
            (false, hl, total, be16(ip, 4), same, checksum::pseudo_header_v4(&src, &dst, IpProtocol::TCP, tcp_len))
        }
        EtherType::IPV6 => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return Err(Skip::Malformed);
            }
            let total = 40 + usize::from(be16(ip, 4));
            if total > ip.len() {
                return Err(Skip::Malformed);
            }
            if ip[6] != IpProtocol::TCP.0 {
                return Err(Skip::NotTcp); // extension headers are not aggregated
            }
            key[MAX_L2 + 1..MAX_L2 + 33].copy_from_slice(&ip[8..40]);
            let mut a = [0u8; 16];
            a.copy_from_slice(&ip[8..24]);
            let src = Ipv6Addr::from(a);
            a.copy_from_slice(&ip[24..40]);
            let dst = Ipv6Addr::from(a);
            // Traffic class + flow label (first word minus version), hop limit.
            let same = u64::from(be32(ip, 0) & 0x0fff_ffff) << 8 | u64::from(ip[7]);
            let tcp_len = (total - 40) as u32;
            (true, 40, total, 0, same, checksum::pseudo_header_v6(&src, &dst, IpProtocol::TCP, tcp_len))
        }
        _ => return Err(Skip::NotTcp),
    };
    let tcp = &ip[l3..ip_total];
    if tcp.len() < 20 {
        return Err(Skip::Malformed);
    }
    let l4 = usize::from(tcp[12] >> 4) * 4;
    if l4 < 20 || l4 > tcp.len() {
        return Err(Skip::Malformed);
    }
    key[MAX_L2 + 33..MAX_L2 + 37].copy_from_slice(&tcp[0..4]);
    let payload = &tcp[l4..];
    // The payload's sum: derived from a checksum the port verified (header-only
    // work), else computed, which also verifies it when the field is complete.
    let psum = if ol_flags & abi::RX_L4_CKSUM_GOOD != 0 {
        let hdr = checksum::sum(&tcp[..l4]);
        // header + pseudo + payload folds to 0xffff: payload = ~(header + pseudo).
        !checksum::fold(hdr + pseudo)
    } else {
        let p = checksum::fold(checksum::sum(payload));
        if ol_flags & abi::RX_L4_CKSUM_NONE == 0 {
            // A complete checksum we have to check ourselves.
            let all = checksum::sum(&tcp[..l4]) + pseudo + u32::from(p);
            if checksum::fold(all) != 0xffff {
                return Err(Skip::BadChecksum);
            }
        }
        // RX_L4_CKSUM_NONE: the field holds only the pseudo-header sum (a kernel
        // peer on veth): the data is the sender's own, nothing to check.
        p
    };
    let mut opts = [0u8; 40];
    opts[..l4 - 20].copy_from_slice(&tcp[20..l4]);
    Ok(Seg {
        hash: hash(&key),
        key: Key(key),
        l2: l2 as u16,
        l3: l3 as u16,
        l4: l4 as u16,
        v6,
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        flags: tcp[13],
        window: be16(tcp, 14),
        ip_id,
        ip_same,
        opts,
        opt_len: (l4 - 20) as u8,
        payload: payload.len() as u16,
        psum,
    })
}

/// Rewrite the headers of an aggregate whose first segment is `frame`: lengths,
/// IPv4 header checksum, PSH/FIN of the last segment, and the TCP checksum from
/// the payload sum `psum` of all segments (`tcp_payload` bytes).
pub fn finish_headers(frame: &mut [u8], s: &Seg, tcp_payload: u32, last_flags: u8, psum: u16) {
    let (l2, l3, l4) = (usize::from(s.l2), usize::from(s.l3), usize::from(s.l4));
    let tcp_len = l4 as u32 + tcp_payload;
    let pseudo = if s.v6 {
        let ip = &mut frame[l2..];
        ip[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        let mut a = [0u8; 16];
        a.copy_from_slice(&ip[8..24]);
        let src = Ipv6Addr::from(a);
        a.copy_from_slice(&ip[24..40]);
        checksum::pseudo_header_v6(&src, &Ipv6Addr::from(a), IpProtocol::TCP, tcp_len)
    } else {
        let ip = &mut frame[l2..];
        ip[2..4].copy_from_slice(&((l3 as u32 + tcp_len) as u16).to_be_bytes());
        ip[10] = 0;
        ip[11] = 0;
        let c = !checksum::data(&ip[..l3]);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
        let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
        checksum::pseudo_header_v4(&src, &dst, IpProtocol::TCP, tcp_len as u16)
    };
    let tcp = &mut frame[l2 + l3..l2 + l3 + l4];
    tcp[13] |= last_flags & END_MERGE;
    tcp[16] = 0;
    tcp[17] = 0;
    let c = !checksum::fold(checksum::sum(tcp) + pseudo + u32::from(psum));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
}

/// Add the sum `b` of bytes that start at an odd offset of the stream to `a`
/// (a byte-swapped contribution), or at an even one.
#[inline(always)]
pub fn add_sum(a: u16, b: u16, odd_offset: bool) -> u16 {
    let b = if odd_offset { b.swap_bytes() } else { b };
    checksum::fold(u32::from(a) + u32::from(b))
}
