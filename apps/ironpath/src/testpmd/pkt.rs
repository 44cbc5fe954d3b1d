//! Minimal header arithmetic the forwarding engines need: Ethernet/VLAN/IPv4/IPv6/
//! TCP/UDP offsets, full and incremental (RFC 1624) Internet checksums, and the
//! txonly template. Every access is bounds-checked: a short or malformed packet
//! yields `None`, never a panic.
//!
//! (The full zero-copy wire library is `core/wire`; this stays small on purpose and
//! takes its checksum arithmetic from there.)

use ironpath_wire::checksum;

/// Ethernet header length.
pub const ETH_LEN: usize = 14;
/// EtherType IPv4.
pub const ETH_P_IP: u16 = 0x0800;
/// EtherType IPv6.
pub const ETH_P_IPV6: u16 = 0x86dd;
/// EtherType ARP.
pub const ETH_P_ARP: u16 = 0x0806;
/// EtherType 802.1Q VLAN.
pub const ETH_P_8021Q: u16 = 0x8100;
/// IP protocol TCP.
pub const IPPROTO_TCP: u8 = 6;
/// IP protocol UDP.
pub const IPPROTO_UDP: u8 = 17;
/// IP protocol ICMP.
pub const IPPROTO_ICMP: u8 = 1;

/// Read a big-endian u16 at `off`.
#[inline(always)]
pub fn be16(d: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*d.get(off)?, *d.get(off + 1)?]))
}

/// Write a big-endian u16 at `off` (no-op if out of range).
#[inline(always)]
pub fn put16(d: &mut [u8], off: usize, v: u16) {
    if let Some(s) = d.get_mut(off..off + 2) {
        s.copy_from_slice(&v.to_be_bytes());
    }
}

/// One's-complement sum of `data` added to `init` (not folded, not inverted).
/// The arithmetic is core/wire's (one checksum implementation for the project).
#[inline]
pub fn sum16(data: &[u8], init: u32) -> u32 {
    checksum::fold(init) as u32 + checksum::sum(data)
}

/// Fold a 32-bit sum into 16 bits and invert.
#[inline]
pub fn fold(s: u32) -> u16 {
    !checksum::fold(s)
}

/// The Internet checksum of `data`.
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    fold(sum16(data, 0))
}

/// RFC 1624 incremental update: checksum `hc` after a 16-bit field changed `old`→`new`.
#[inline]
pub fn csum_update16(hc: u16, old: u16, new: u16) -> u16 {
    checksum::update16(hc, old, new)
}

/// Where the layers of a packet start.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Layers {
    /// Offset of the L3 header.
    pub l3: usize,
    /// EtherType of the L3 header.
    pub ethertype: u16,
    /// Offset of the L4 header (0 if none or unknown).
    pub l4: usize,
    /// IP protocol (0 if not IP).
    pub proto: u8,
    /// End of the IP packet (from its length field), bounded by the buffer.
    pub ip_end: usize,
}

/// Parse Ethernet (one optional VLAN tag), IPv4 or IPv6 (no extension headers), and
/// note where L4 starts. `None` for runts and malformed IP headers.
pub fn parse(d: &[u8]) -> Option<Layers> {
    let mut et = be16(d, 12)?;
    let mut l3 = ETH_LEN;
    if et == ETH_P_8021Q {
        et = be16(d, 16)?;
        l3 = 18;
    }
    let mut l = Layers { l3, ethertype: et, ..Default::default() };
    match et {
        ETH_P_IP => {
            let vihl = *d.get(l3)?;
            let ihl = usize::from(vihl & 0x0f) * 4;
            if vihl >> 4 != 4 || ihl < 20 || d.len() < l3 + ihl {
                return None;
            }
            let tot = usize::from(be16(d, l3 + 2)?);
            if tot < ihl {
                return None;
            }
            l.ip_end = (l3 + tot).min(d.len());
            l.proto = d[l3 + 9];
            let frag = be16(d, l3 + 6)? & 0x3fff;
            if frag == 0 {
                l.l4 = l3 + ihl;
            }
        }
        ETH_P_IPV6 => {
            if d.len() < l3 + 40 || d[l3] >> 4 != 6 {
                return None;
            }
            l.ip_end = (l3 + 40 + usize::from(be16(d, l3 + 4)?)).min(d.len());
            l.proto = d[l3 + 6];
            l.l4 = l3 + 40;
        }
        _ => {}
    }
    Some(l)
}

/// Pseudo-header sum for the L4 checksum of the IP packet described by `l`.
pub fn pseudo_sum(d: &[u8], l: &Layers) -> Option<u32> {
    let l4_len = l.ip_end.checked_sub(l.l4)?;
    let s = match l.ethertype {
        ETH_P_IP => sum16(d.get(l.l3 + 12..l.l3 + 20)?, 0),
        ETH_P_IPV6 => sum16(d.get(l.l3 + 8..l.l3 + 40)?, 0),
        _ => return None,
    };
    Some(s + u32::from(l.proto) + l4_len as u32)
}

/// Offset of the checksum field within the L4 header.
pub fn l4_csum_off(proto: u8) -> Option<usize> {
    match proto {
        IPPROTO_TCP => Some(16),
        IPPROTO_UDP => Some(6),
        _ => None,
    }
}

/// Build the txonly packet: Ethernet / IPv4 / UDP of `len` bytes from `src_mac` to
/// `dst_mac`, 198.18.0.1:9 → 198.18.0.2:9, payload zero, both checksums valid.
pub fn udp_template(len: usize, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Vec<u8> {
    let len = len.max(42);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&dst_mac);
    f[6..12].copy_from_slice(&src_mac);
    put16(&mut f, 12, ETH_P_IP);
    let ip_len = (len - ETH_LEN) as u16;
    f[14] = 0x45;
    put16(&mut f, 16, ip_len);
    f[22] = 64;
    f[23] = IPPROTO_UDP;
    f[26..30].copy_from_slice(&[198, 18, 0, 1]);
    f[30..34].copy_from_slice(&[198, 18, 0, 2]);
    let c = checksum(&f[14..34]);
    put16(&mut f, 24, c);
    put16(&mut f, 34, 9);
    put16(&mut f, 36, 9);
    put16(&mut f, 38, ip_len - 20);
    let l = parse(&f).expect("template parses");
    let ps = pseudo_sum(&f, &l).expect("template has UDP");
    let mut c = fold(sum16(&f[34..], ps));
    if c == 0 {
        c = 0xffff;
    }
    put16(&mut f, 40, c);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_checksums_verify() {
        let f = udp_template(64, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let l = parse(&f).unwrap();
        assert_eq!((l.l3, l.l4, l.proto, l.ip_end), (14, 34, IPPROTO_UDP, 64));
        assert_eq!(checksum(&f[14..34]), 0);
        let ps = pseudo_sum(&f, &l).unwrap();
        assert_eq!(fold(sum16(&f[34..64], ps)), 0);
    }

    #[test]
    fn incremental_update_matches_full_recompute() {
        let mut f = udp_template(100, [2; 6], [4; 6]);
        let old = be16(&f, 32).unwrap();
        let hc = be16(&f, 24).unwrap();
        put16(&mut f, 32, 0x1234);
        put16(&mut f, 24, csum_update16(hc, old, 0x1234));
        assert_eq!(checksum(&f[14..34]), 0);
    }

    #[test]
    fn runts_and_bad_headers_are_none() {
        assert!(parse(&[0u8; 10]).is_none());
        let mut f = udp_template(64, [2; 6], [4; 6]);
        f[14] = 0x44;
        assert!(parse(&f).is_none());
        f[14] = 0x45;
        put16(&mut f, 16, 10);
        assert!(parse(&f).is_none());
    }
}
