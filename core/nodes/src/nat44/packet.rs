//! The bytes `nat44` reads and rewrites: an IPv4 packet's addresses and ports (or ICMP
//! query id), with the IPv4, TCP, UDP and ICMP checksums updated incrementally
//! (RFC 1624) or, for a checksum the kernel left partial (only the pseudo-header
//! summed), the pseudo-header part alone; the packet quoted in an ICMP error (RFC
//! 5508); a SYN's MSS option.

use super::table::{Endpoint, ICMP, TCP, UDP};
use ironpath_wire::checksum::{self, update16, update32};

/// An IPv4 packet's header fields the node needs (`off`: where IPv4 starts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ip {
    /// IPv4 header offset in the frame.
    pub off: usize,
    /// IPv4 header length.
    pub ihl: usize,
    /// Total length.
    pub total: usize,
    /// Protocol.
    pub proto: u8,
    /// Source, host order.
    pub src: u32,
    /// Destination.
    pub dst: u32,
    /// A fragment (more fragments, or an offset).
    pub fragment: bool,
    /// Time to live.
    pub ttl: u8,
}

/// The IPv4 header of a frame whose IPv4 starts at `off`: `None` if it is malformed
/// (short, not version 4, lengths that disagree with each other or with the frame of
/// `pkt_len` bytes, or not all in `d`, the first segment).
pub fn ip(d: &[u8], off: usize, pkt_len: usize) -> Option<Ip> {
    let h = d.get(off..off + 20)?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if h[0] >> 4 != 4 || ihl < 20 || total < ihl || off + total > pkt_len || d.len() < off + ihl {
        return None;
    }
    let a = |at: usize| u32::from_be_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
    Some(Ip {
        off,
        ihl,
        total,
        proto: h[9],
        src: a(12),
        dst: a(16),
        fragment: u16::from_be_bytes([h[6], h[7]]) & 0x3fff != 0,
        ttl: h[8],
    })
}

/// The transport part the node translates by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L4 {
    /// TCP or UDP: ports, and TCP's flags (0 for UDP).
    Ports {
        /// Source port.
        sport: u16,
        /// Destination port.
        dport: u16,
        /// TCP flags.
        flags: u8,
    },
    /// ICMP echo request (8) or reply (0): its id.
    Echo {
        /// The message type.
        ty: u8,
        /// Query id.
        id: u16,
    },
    /// An ICMP error (destination unreachable, source quench, time exceeded,
    /// parameter problem): it quotes a packet.
    Error,
    /// Anything else (other ICMP, other protocols).
    Other,
}

/// What the transport header of `ip` holds, `None` when it is cut short (in the first
/// segment, and within the IP packet).
pub fn l4(d: &[u8], ip: &Ip) -> Option<L4> {
    let at = ip.off + ip.ihl;
    let len = ip.total - ip.ihl;
    let need = match ip.proto {
        TCP => 20,
        UDP | ICMP => 8,
        _ => return Some(L4::Other),
    };
    if len < need {
        return None;
    }
    let t = d.get(at..at + need)?;
    match ip.proto {
        // The data offset within the segment; the UDP length within the packet.
        TCP if !(20..=len).contains(&(usize::from(t[12] >> 4) * 4)) => return None,
        UDP if !(8..=len).contains(&usize::from(u16::from_be_bytes([t[4], t[5]]))) => return None,
        _ => {}
    }
    Some(match ip.proto {
        TCP | UDP => L4::Ports {
            sport: u16::from_be_bytes([t[0], t[1]]),
            dport: u16::from_be_bytes([t[2], t[3]]),
            flags: if ip.proto == TCP { t[13] } else { 0 },
        },
        _ => match t[0] {
            0 | 8 if t[1] == 0 => L4::Echo { ty: t[0], id: u16::from_be_bytes([t[4], t[5]]) },
            3 | 4 | 11 | 12 => L4::Error,
            _ => L4::Other,
        },
    })
}

/// How the transport checksum of a packet stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sum {
    /// Complete: updated for every change it covers.
    Full,
    /// Partial (the pseudo-header sum, not complemented): updated for address changes
    /// only; the port completing it sums the rest.
    Partial,
}

/// Rewrite a packet's source (`src`) and/or destination (`dst`) endpoint, checksums
/// updated. For ICMP queries the id is rewritten from `src.port` (outbound) or
/// `dst.port` (inbound).
///
/// The changed words' one's complement differences are summed once (RFC 1624: `~m +
/// m'` per word) and each checksum takes its share in one fold: the IPv4 header the
/// addresses', TCP and UDP the addresses' (pseudo-header) and the ports', ICMP the
/// id's; a partial checksum (the pseudo-header sum, not complemented) the
/// addresses' only.
pub fn rewrite(d: &mut [u8], ip: &Ip, src: Option<Endpoint>, dst: Option<Endpoint>, sum: Sum) {
    let (o, l4) = (ip.off, ip.off + ip.ihl);
    let (mut addrs, mut ports) = (0u32, 0u32);
    let word_at = |d: &[u8], at: usize| u16::from_be_bytes([d[at], d[at + 1]]);
    for (new, addr_at, port_at) in [(src, o + 12, l4), (dst, o + 16, l4 + 2)] {
        let Some(new) = new else { continue };
        let old = (u32::from(word_at(d, addr_at)) << 16) | u32::from(word_at(d, addr_at + 2));
        if old != new.addr {
            addrs += u32::from(!(old >> 16) as u16) + u32::from(!old as u16) + (new.addr >> 16) + (new.addr & 0xffff);
            d[addr_at..addr_at + 4].copy_from_slice(&new.addr.to_be_bytes());
        }
        // ICMP: the query id, one field for both directions.
        let port_at = if ip.proto == ICMP { l4 + 4 } else { port_at };
        let oldp = word_at(d, port_at);
        if oldp != new.port {
            ports += u32::from(!oldp) + u32::from(new.port);
            d[port_at..port_at + 2].copy_from_slice(&new.port.to_be_bytes());
        }
    }
    let apply = |field: u16, delta: u32| !checksum::fold(u32::from(!field) + delta);
    if addrs != 0 {
        let c = apply(word_at(d, o + 10), addrs);
        d[o + 10..o + 12].copy_from_slice(&c.to_be_bytes());
    }
    let (at, delta) = match ip.proto {
        TCP | UDP if sum == Sum::Partial => {
            // The pseudo-header's share only: the port completing it sums the rest.
            let at = if ip.proto == TCP { l4 + 16 } else { l4 + 6 };
            let p = checksum::fold(u32::from(word_at(d, at)) + addrs);
            d[at..at + 2].copy_from_slice(&p.to_be_bytes());
            return;
        }
        TCP => (l4 + 16, addrs + ports),
        // A UDP checksum of zero is none: left so.
        UDP if word_at(d, l4 + 6) != 0 => (l4 + 6, addrs + ports),
        ICMP => (l4 + 2, ports),
        _ => return,
    };
    if delta != 0 {
        let mut c = apply(word_at(d, at), delta);
        if ip.proto == UDP && c == 0 {
            // A computed UDP checksum of zero is sent as all ones (zero: none).
            c = 0xffff;
        }
        d[at..at + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// Lower every MSS option of a TCP SYN to `clamp` where it is larger (a receiver may
/// take any of several); whether one was.
pub fn clamp_mss(d: &mut [u8], ip: &Ip, clamp: u16, sum: Sum) -> bool {
    let l4 = ip.off + ip.ihl;
    let doff = usize::from(d[l4 + 12] >> 4) * 4;
    if doff <= 20 || ip.total < ip.ihl + doff || d.len() < l4 + doff {
        return false;
    }
    let mut at = l4 + 20;
    let end = l4 + doff;
    let mut clamped = false;
    while at < end {
        match d[at] {
            0 => break,
            1 => at += 1,
            kind => {
                let Some(&len) = d.get(at + 1) else { break };
                let len = usize::from(len);
                if len < 2 || at + len > end {
                    break;
                }
                let v = at + 2;
                let mss = if kind == 2 && len == 4 { u16::from_be_bytes([d[v], d[v + 1]]) } else { 0 };
                if mss > clamp {
                    d[v..v + 2].copy_from_slice(&clamp.to_be_bytes());
                    if sum == Sum::Full {
                        // A word at an odd offset of the segment adds to the sum
                        // with its bytes swapped (2^16 is 1 modulo 0xffff).
                        let (o, c) = if (v - l4).is_multiple_of(2) {
                            (mss, clamp)
                        } else {
                            (mss.swap_bytes(), clamp.swap_bytes())
                        };
                        let at = l4 + 16;
                        let cs = update16(u16::from_be_bytes([d[at], d[at + 1]]), o, c);
                        d[at..at + 2].copy_from_slice(&cs.to_be_bytes());
                    }
                    clamped = true;
                }
                at += len;
            }
        }
    }
    clamped
}

/// The packet an ICMP error quotes: its IPv4 header at `at` (in `d`), protocol,
/// addresses and the id or ports of its first 8 transport bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Quoted {
    /// Where its IPv4 header starts.
    pub at: usize,
    /// Its header length.
    pub ihl: usize,
    /// Protocol.
    pub proto: u8,
    /// Source address and port (or echo id).
    pub src: Endpoint,
    /// Destination address and port (or echo id).
    pub dst: Endpoint,
    /// Bytes of it quoted (within the error).
    pub len: usize,
}

/// The packet quoted by the ICMP error of `ip`: TCP, UDP, or an ICMP echo (its id in
/// both ports); `None` for anything else or a quote cut short. The whole error must
/// be in `d` (the first segment): its checksum is computed again.
pub fn quoted(d: &[u8], ip: &Ip) -> Option<Quoted> {
    let at = ip.off + ip.ihl + 8;
    let end = ip.off + ip.total;
    if d.len() < end {
        return None;
    }
    let q = d.get(at..end)?;
    if q.len() < 28 || q[0] >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(q[0] & 0x0f) * 4;
    let t = q.get(ihl..ihl + 8).filter(|_| ihl >= 20)?;
    let a = |x: usize| u32::from_be_bytes([q[x], q[x + 1], q[x + 2], q[x + 3]]);
    let proto = q[9];
    let (sp, dp) = match proto {
        TCP | UDP => (u16::from_be_bytes([t[0], t[1]]), u16::from_be_bytes([t[2], t[3]])),
        ICMP if matches!(t[0], 0 | 8) => {
            let id = u16::from_be_bytes([t[4], t[5]]);
            (id, id)
        }
        _ => return None,
    };
    // Only a first fragment quotes ports.
    if u16::from_be_bytes([q[6], q[7]]) & 0x1fff != 0 {
        return None;
    }
    Some(Quoted { at, ihl, proto, src: Endpoint::new(a(12), sp), dst: Endpoint::new(a(16), dp), len: q.len() })
}

/// Whether the ICMP checksum of `ip`'s message (all in `d`) verifies.
pub fn icmp_sum_ok(d: &[u8], ip: &Ip) -> bool {
    d.get(ip.off + ip.ihl..ip.off + ip.total).is_some_and(|m| checksum::data(m) == 0xffff)
}

/// Rewrite an ICMP error: the outer source or destination address (`outer_src`,
/// `outer_dst`) and the quoted packet's source (`q_src`) or destination (`q_dst`)
/// endpoint, every checksum updated (the quoted ones incrementally where quoted,
/// the ICMP one computed again).
pub fn rewrite_error(
    d: &mut [u8],
    ip: &Ip,
    q: &Quoted,
    outer_src: Option<u32>,
    outer_dst: Option<u32>,
    q_src: Option<Endpoint>,
    q_dst: Option<Endpoint>,
) {
    let qa = q.at;
    let ql4 = qa + q.ihl;
    let qend = qa + q.len;
    let mut qipsum = u16::from_be_bytes([d[qa + 10], d[qa + 11]]);
    let l4sum_at = match q.proto {
        TCP if ql4 + 18 <= qend => Some((ql4 + 16, true)),
        UDP if ql4 + 8 <= qend && d[ql4 + 6..ql4 + 8] != [0, 0] => Some((ql4 + 6, true)),
        ICMP => Some((ql4 + 2, false)),
        _ => None,
    };
    let mut l4sum = l4sum_at.map(|(c, _)| u16::from_be_bytes([d[c], d[c + 1]]));
    let pseudo = l4sum_at.is_some_and(|(_, p)| p);
    for (new, addr_at, port_at) in [(q_src, qa + 12, ql4), (q_dst, qa + 16, ql4 + 2)] {
        let Some(new) = new else { continue };
        let old = u32::from_be_bytes([d[addr_at], d[addr_at + 1], d[addr_at + 2], d[addr_at + 3]]);
        qipsum = update32(qipsum, old, new.addr);
        d[addr_at..addr_at + 4].copy_from_slice(&new.addr.to_be_bytes());
        if pseudo {
            l4sum = l4sum.map(|s| update32(s, old, new.addr));
        }
        let port_at = if q.proto == ICMP { ql4 + 4 } else { port_at };
        let oldp = u16::from_be_bytes([d[port_at], d[port_at + 1]]);
        d[port_at..port_at + 2].copy_from_slice(&new.port.to_be_bytes());
        l4sum = l4sum.map(|s| update16(s, oldp, new.port));
    }
    d[qa + 10..qa + 12].copy_from_slice(&qipsum.to_be_bytes());
    if let (Some((c, _)), Some(mut s)) = (l4sum_at, l4sum) {
        if q.proto == UDP && s == 0 {
            s = 0xffff;
        }
        d[c..c + 2].copy_from_slice(&s.to_be_bytes());
    }
    let o = ip.off;
    let mut ipsum = u16::from_be_bytes([d[o + 10], d[o + 11]]);
    for (new, at) in [(outer_src, o + 12), (outer_dst, o + 16)] {
        let Some(new) = new else { continue };
        let old = u32::from_be_bytes([d[at], d[at + 1], d[at + 2], d[at + 3]]);
        ipsum = update32(ipsum, old, new);
        d[at..at + 4].copy_from_slice(&new.to_be_bytes());
    }
    d[o + 10..o + 12].copy_from_slice(&ipsum.to_be_bytes());
    // The ICMP checksum covers the quote: computed again over the whole message.
    let icmp = o + ip.ihl;
    let end = o + ip.total;
    d[icmp + 2..icmp + 4].fill(0);
    let s = !checksum::data(&d[icmp..end]);
    d[icmp + 2..icmp + 4].copy_from_slice(&s.to_be_bytes());
}
