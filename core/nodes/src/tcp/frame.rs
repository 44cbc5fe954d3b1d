//! Frames built (Ethernet, IPv4/IPv6, TCP with checksums; TSO packets) and
//! parsed (headers checked, checksums verified unless the port did).

use super::*;

pub(super) fn is_v4(a: &IpAddress) -> bool {
    matches!(a, IpAddress::V4(_))
}

/// Ethernet and IP headers for `seg` (whose TCP header and payload make `tcp_len`
/// bytes) at the start of `d`; returns the offset of the TCP header.
pub(super) fn emit_l2_l3(
    d: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    seg: &Segment<Chunk>,
    ip_id: u16,
    tcp_len: usize,
) -> usize {
    let (ethertype, ip_len) = match seg.dst_addr {
        IpAddress::V4(_) => (EtherType::IPV4, 20),
        IpAddress::V6(_) => (EtherType::IPV6, 40),
    };
    EthernetRepr { src_addr: EthernetAddress(src_mac), dst_addr: EthernetAddress(dst_mac), ethertype }
        .emit(&mut EthernetFrame::new_unchecked(&mut d[..ETH_LEN]));
    match (seg.src_addr, seg.dst_addr) {
        (IpAddress::V4(s), IpAddress::V4(t)) => {
            let mut ip = Ipv4Packet::new_unchecked(&mut d[ETH_LEN..ETH_LEN + 20]);
            Ipv4Repr { src_addr: s, dst_addr: t, next_header: IpProtocol::TCP, payload_len: tcp_len, hop_limit: 64 }
                .emit(&mut ip);
            if ip_id != 0 {
                ip.set_ident(ip_id);
                ip.fill_checksum();
            }
        }
        (s, t) => Ipv6Repr {
            src_addr: s.to_ipv6(),
            dst_addr: t.to_ipv6(),
            next_header: IpProtocol::TCP,
            payload_len: tcp_len,
            hop_limit: 64,
        }
        .emit(&mut Ipv6Packet::new_unchecked(&mut d[ETH_LEN..ETH_LEN + 40])),
    }
    ETH_LEN + ip_len
}

/// The frame carrying `seg` (Ethernet, IPv4 or IPv6, TCP with its checksum); `None`
/// if the pool is empty or the frame does not fit one buffer. `ip_id` is the IPv4
/// identification: a connection's frames carry consecutive ones (as Linux sends
/// them), which receive aggregation (GRO) expects. A TSO segment
/// (`seg.tso_segsz > 0`) becomes a chained packet for the port to cut
/// (`build_tso_frame`).
pub fn build_frame(
    pool: &Mempool,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    seg: &Segment<Chunk>,
    ip_id: u16,
) -> Option<Mbuf> {
    if seg.tso_segsz > 0 {
        return build_tso_frame(pool, src_mac, dst_mac, seg, ip_id);
    }
    let hl = seg.repr.header_len();
    let plen = seg.payload.as_ref().map_or(0, ironpath_tcp::Payload::len);
    let tcp_len = hl + plen;
    let ip_len = if is_v4(&seg.dst_addr) { 20 } else { 40 };
    let mut m = Mbuf::alloc(pool).ok()?;
    let d = m.append(ETH_LEN + ip_len + tcp_len).ok()?;
    let l4 = emit_l2_l3(d, src_mac, dst_mac, seg, ip_id, tcp_len);
    let psum = match &seg.payload {
        Some(p) => p.copy_and_sum(&mut d[l4 + hl..]),
        None => 0,
    };
    let mut tcp = TcpPacket::new_unchecked(&mut d[l4..l4 + hl]);
    seg.repr.emit_header(&mut tcp);
    tcp.set_checksum(0);
    let hsum = checksum::sum(tcp.into_inner());
    let pseudo = checksum::pseudo_header(&seg.src_addr, &seg.dst_addr, IpProtocol::TCP, tcp_len as u32);
    let total = u64::from(pseudo) + u64::from(hsum) + u64::from(psum);
    let folded = checksum::fold(((total & 0xffff_ffff) + (total >> 32)) as u32);
    d[l4 + 16..l4 + 18].copy_from_slice(&(!folded).to_be_bytes());
    Some(m)
}

/// A TSO segment as one packet for the port to cut into `seg.tso_segsz`-byte
/// segments: headers in the first buffer, the payload in chained segments that point
/// into the data's own buffers (external and indirect segments, no copy),
/// `TX_TCP_SEG | TX_TCP_CKSUM` with the header lengths and `tso_segsz`, and in the
/// checksum field the pseudo-header sum over the whole TCP length (what a NIC or the
/// kernel's GSO completes per segment). `None` if the pool ran out or the IP length
/// would not fit.
pub(super) fn build_tso_frame(
    pool: &Mempool,
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    seg: &Segment<Chunk>,
    ip_id: u16,
) -> Option<Mbuf> {
    let p = seg.payload.as_ref()?;
    let hl = seg.repr.header_len();
    let tcp_len = hl + ironpath_tcp::Payload::len(p);
    let v4 = is_v4(&seg.dst_addr);
    let ip_len = if v4 { 20 } else { 40 };
    if tcp_len + if v4 { ip_len } else { 0 } > 65535 {
        return None;
    }
    let mut m = Mbuf::alloc(pool).ok()?;
    let d = m.append(ETH_LEN + ip_len + hl).ok()?;
    let l4 = emit_l2_l3(d, src_mac, dst_mac, seg, ip_id, tcp_len);
    let mut tcp = TcpPacket::new_unchecked(&mut d[l4..l4 + hl]);
    seg.repr.emit_header(&mut tcp);
    let pseudo = checksum::pseudo_header(&seg.src_addr, &seg.dst_addr, IpProtocol::TCP, tcp_len as u32);
    tcp.set_checksum(checksum::fold(pseudo));
    // The payload: segments pointing into the application's buffers (or the received
    // packets it echoes), no copy; the port's driver copies once, into the kernel.
    let mut tails: Vec<Mbuf> = Vec::with_capacity(4);
    if p.to_segments(pool, &mut tails).is_err() || m.chain_many(&mut tails).is_err() {
        return None;
    }
    let h = m.header_mut();
    h.ol_flags |= abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | if v4 { abi::TX_IPV4 } else { abi::TX_IPV6 };
    h.l2_len = ETH_LEN as u8;
    h.l3_len = ip_len as u16;
    h.l4_len = hl as u8;
    h.tso_segsz = seg.tso_segsz;
    Some(m)
}

/// A received segment after the IP layer.
pub(super) struct Rx {
    pub(super) src: IpAddress,
    pub(super) dst: IpAddress,
    pub(super) repr: TcpRepr,
    /// Offset of the payload in the packet.
    pub(super) off: usize,
    pub(super) segs: u16,
    pub(super) src_mac: [u8; 6],
}

/// Why a frame was refused.
pub(super) enum Refused {
    Malformed,
    Checksum,
    NotOurs,
}

/// The Internet checksum sum of `len` bytes of `m` from `off`, across segments.
pub(super) fn sum_chain(m: &Mbuf, off: usize, len: usize) -> u32 {
    let (mut skip, mut left, mut at) = (off, len, 0usize);
    let mut acc: u64 = 0;
    for s in m.segments() {
        if left == 0 {
            break;
        }
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        let n = (s.len() - skip).min(left);
        let sum = checksum::fold(checksum::sum(&s[skip..skip + n]));
        acc += u64::from(if at % 2 == 1 { sum.swap_bytes() } else { sum });
        at += n;
        left -= n;
        skip = 0;
    }
    ((acc & 0xffff_ffff) + (acc >> 32)) as u32
}

/// Parses the headers of a TCP frame addressed to one of `ours`.
pub(super) fn parse_frame(m: &Mbuf, ours: &[IpAddress]) -> Result<Rx, Refused> {
    let d = m.data();
    let pkt_len = m.pkt_len();
    if d.len() < ETH_LEN {
        return Err(Refused::Malformed);
    }
    let mut src_mac = [0; 6];
    src_mac.copy_from_slice(&d[6..12]);
    let h = m.header();
    let (src, dst, l4, l4_len) = match EtherType(u16::from_be_bytes([d[12], d[13]])) {
        EtherType::IPV4 => {
            // Only the headers need to be in the first segment: an aggregate's payload
            // continues in a chain, so lengths are checked against the whole packet.
            if d.len() < ETH_LEN + 20 {
                return Err(Refused::Malformed);
            }
            let ip = Ipv4Packet::new_unchecked(&d[ETH_LEN..]);
            if usize::from(ip.header_len()) < 20 || d.len() < ETH_LEN + usize::from(ip.header_len()) {
                return Err(Refused::Malformed);
            }
            let verify = h.ol_flags & abi::RX_IP_CKSUM_GOOD == 0;
            if h.ol_flags & abi::RX_IP_CKSUM_BAD != 0 {
                return Err(Refused::Checksum);
            }
            let ihl = usize::from(ip.header_len());
            let total = usize::from(ip.total_len());
            if ip.version() != 4 || ip.is_fragment() || total < ihl || total > pkt_len - ETH_LEN {
                return Err(Refused::Malformed);
            }
            if verify && !ip.verify_checksum() {
                return Err(Refused::Checksum);
            }
            if ip.next_header() != IpProtocol::TCP {
                return Err(Refused::NotOurs);
            }
            (IpAddress::V4(ip.src_addr()), IpAddress::V4(ip.dst_addr()), ETH_LEN + ihl, total - ihl)
        }
        EtherType::IPV6 => {
            if d.len() < ETH_LEN + 40 {
                return Err(Refused::Malformed);
            }
            let ip = Ipv6Packet::new_unchecked(&d[ETH_LEN..]);
            let plen = usize::from(ip.payload_len());
            if ip.version() != 6 || plen + 40 > pkt_len - ETH_LEN {
                return Err(Refused::Malformed);
            }
            if ip.next_header() != IpProtocol::TCP {
                return Err(Refused::NotOurs);
            }
            (IpAddress::V6(ip.src_addr()), IpAddress::V6(ip.dst_addr()), ETH_LEN + 40, plen)
        }
        _ => return Err(Refused::Malformed),
    };
    if !ours.contains(&dst) {
        return Err(Refused::NotOurs);
    }
    if l4_len < 20 || d.len() < l4 + 20 {
        return Err(Refused::Malformed);
    }
    let hl = usize::from(d[l4 + 12] >> 4) * 4;
    if hl < 20 || hl > l4_len || d.len() < l4 + hl {
        return Err(Refused::Malformed);
    }
    if h.ol_flags & abi::RX_L4_CKSUM_BAD != 0 {
        return Err(Refused::Checksum);
    }
    if h.ol_flags & (abi::RX_L4_CKSUM_GOOD | abi::RX_L4_CKSUM_NONE) == 0 {
        let pseudo = checksum::pseudo_header(&src, &dst, IpProtocol::TCP, l4_len as u32);
        let total = u64::from(pseudo) + u64::from(sum_chain(m, l4, l4_len));
        if checksum::fold(((total & 0xffff_ffff) + (total >> 32)) as u32) != 0xffff {
            return Err(Refused::Checksum);
        }
    }
    let mut repr = TcpRepr::parse(&TcpPacket::new_unchecked(&d[l4..l4 + hl]), &src, &dst, false)
        .map_err(|_| Refused::Malformed)?;
    repr.payload_len = l4_len - hl;
    let segs = if h.ol_flags & abi::RX_AGGREGATED != 0 { h.aggr_segs.max(1) } else { 1 };
    Ok(Rx { src, dst, repr, off: l4 + hl, segs, src_mac })
}
