//! Splitting an aggregated TCP packet back into segments of `tso_segsz` payload
//! bytes: each segment gets a copy of the headers (lengths, IPv4 ID + k and
//! checksums rewritten, sequence number advanced, PSH/FIN only on the last) and
//! its payload as indirect mbufs sharing the aggregate's buffers (no copy).

use super::parse::END_MERGE;
use ironpath_eal::abi;
use ironpath_eal::{Mbuf, Mempool};
use ironpath_wire::checksum;
use ironpath_wire::IpProtocol;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Why a packet was not split.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GsoSkip {
    /// Not an aggregate (or no segment size): pass on unchanged.
    NotAggregate,
    /// Headers not as the aggregate flags say.
    Malformed,
    /// No mbuf for a header or payload slice.
    NoMbuf,
}

/// Split `m` into segments pushed to `out` in order, using `pool` for the new
/// headers and payload slices. `m` is consumed on success; on error it is given back.
pub fn segment(
    m: Mbuf,
    pool: &Mempool,
    mss_override: u16,
    out: &mut impl FnMut(Mbuf),
) -> Result<usize, (Mbuf, GsoSkip)> {
    let h = m.header();
    let mss = if mss_override != 0 { mss_override } else { h.tso_segsz };
    if h.ol_flags & abi::RX_AGGREGATED == 0 && mss_override == 0 || mss == 0 {
        return Err((m, GsoSkip::NotAggregate));
    }
    let (l2, l3, l4) = (usize::from(h.l2_len), usize::from(h.l3_len), usize::from(h.l4_len));
    let hdr = l2 + l3 + l4;
    let first = m.data();
    if l3 == 0 || l4 < 20 || first.len() < hdr {
        return Err((m, GsoSkip::Malformed));
    }
    let v6 = first[l2] >> 4 == 6;
    let payload = m.pkt_len() - hdr;
    let mss = usize::from(mss);
    if payload <= mss {
        return Err((m, GsoSkip::NotAggregate));
    }
    let mut template = [0u8; 256];
    template[..hdr].copy_from_slice(&first[..hdr]);
    let seq0 = u32::from_be_bytes(template[l2 + l3 + 4..l2 + l3 + 8].try_into().unwrap_or_default());
    let id0 = u16::from_be_bytes([template[l2 + 4], template[l2 + 5]]);
    let flags0 = template[l2 + l3 + 13];
    // The segments are complete (checksums written): no offload request stays.
    let ol = h.ol_flags
        & !(abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE | abi::RX_L4_CKSUM_BAD | abi::TX_TCP_SEG | abi::TX_TCP_CKSUM);
    let (port, rss) = (h.port, h.rss_hash);
    let n = payload.div_ceil(mss);
    // Build every segment first, so a failure leaves `m` untouched.
    let mut segs: Vec<Mbuf> = Vec::with_capacity(n);
    for k in 0..n {
        let off = k * mss;
        let len = mss.min(payload - off);
        let Ok(mut seg) = Mbuf::alloc(pool) else { return Err((m, GsoSkip::NoMbuf)) };
        let Ok(d) = seg.append(hdr) else { return Err((m, GsoSkip::NoMbuf)) };
        d.copy_from_slice(&template[..hdr]);
        let last = k == n - 1;
        let tcp_len = (l4 + len) as u32;
        let pseudo = if v6 {
            d[l2 + 4..l2 + 6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
            let src = Ipv6Addr::from(<[u8; 16]>::try_from(&d[l2 + 8..l2 + 24]).unwrap_or_default());
            let dst = Ipv6Addr::from(<[u8; 16]>::try_from(&d[l2 + 24..l2 + 40]).unwrap_or_default());
            checksum::pseudo_header_v6(&src, &dst, IpProtocol::TCP, tcp_len)
        } else {
            let ip = &mut d[l2..l2 + l3];
            ip[2..4].copy_from_slice(&((l3 as u32 + tcp_len) as u16).to_be_bytes());
            ip[4..6].copy_from_slice(&id0.wrapping_add(k as u16).to_be_bytes());
            ip[10] = 0;
            ip[11] = 0;
            let c = !checksum::data(ip);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let src = Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            checksum::pseudo_header_v4(&src, &dst, IpProtocol::TCP, tcp_len as u16)
        };
        let tcp = &mut d[l2 + l3..hdr];
        tcp[4..8].copy_from_slice(&seq0.wrapping_add(off as u32).to_be_bytes());
        tcp[13] = if last { flags0 } else { flags0 & !END_MERGE };
        tcp[16] = 0;
        tcp[17] = 0;
        let body = match m.slice_indirect(pool, hdr + off, len) {
            Ok(b) => b,
            Err(_) => return Err((m, GsoSkip::NoMbuf)),
        };
        let psum: u32 = body
            .segments()
            .scan(0usize, |pos, s| {
                let v = checksum::sum(s);
                // A slice starting at an odd offset of the payload contributes swapped bytes.
                let v = if *pos % 2 == 1 { checksum::fold(v).swap_bytes() as u32 } else { v };
                *pos += s.len();
                Some(v)
            })
            .sum();
        let c = !checksum::fold(checksum::sum(tcp) + pseudo + psum);
        tcp[16..18].copy_from_slice(&c.to_be_bytes());
        if seg.chain(body).is_err() {
            return Err((m, GsoSkip::NoMbuf));
        }
        let sh = seg.header_mut();
        sh.ol_flags = ol | abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD;
        sh.port = port;
        sh.rss_hash = rss;
        sh.l2_len = l2 as u8;
        sh.l3_len = l3 as u16;
        sh.l4_len = l4 as u8;
        segs.push(seg);
    }
    drop(m);
    for s in segs {
        out(s);
    }
    Ok(n)
}
