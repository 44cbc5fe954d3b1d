//! What a packet still asks of the port that sends it, done in software when that
//! port cannot: a checksum only partial (received so from the kernel, or
//! `TX_TCP_CKSUM`/`TX_UDP_CKSUM`) completed, and a TSO packet or a GSO frame (its
//! checksum partial) cut into segments (`aggregate::gso`). The sending nodes (`port_tx`, `tx_batch`) and the
//! testpmd engines run every burst through a [`TxFixup`] made from the port's
//! `tx_offload_capa`: nothing at all for a port that does every offload (af_packet
//! with TSO, tap, null), one flag test per packet for the others. Nothing leaves broken: what cannot be fixed is dropped and
//! counted.

use crate::aggregate::gso::{segment, GsoSkip};
use ironpath_eal::abi::{self, ptype};
use ironpath_eal::{Burst, Mbuf, Mempool, MAX_BURST};
use ironpath_wire::checksum;

/// Flags that ask something of the sending port.
const ASKS: u64 = abi::RX_L4_CKSUM_NONE | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM | abi::TX_TCP_SEG | abi::RX_AGGREGATED;

/// What [`TxFixup::prepare`] did (cumulative).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixupStats {
    /// Checksums completed in software.
    pub csum_sw: u64,
    /// Packets cut into segments in software.
    pub gso_split: u64,
    /// Packets dropped: an offload neither the port nor software could do (a shared
    /// packet, malformed headers, no mbuf for the segments, UDP GSO).
    pub dropped: u64,
}

/// The offloads that leave nothing to do here.
const ALL: u64 = abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM;

/// Software fallbacks for one sending port.
pub struct TxFixup {
    capa: u64,
    /// The port lacks some offload: bursts are looked at (else nothing can need it).
    active: bool,
    pool: Mempool,
    /// The packets of a burst being fixed (kept for its capacity).
    work: Vec<Mbuf>,
    /// Cumulative counts.
    pub stats: FixupStats,
}

/// What a packet needs that its port may lack.
enum Need {
    Nothing,
    Checksum,
    Segments,
}

impl TxFixup {
    /// Fallbacks for a port offering `capa` (`abi::TX_*`), segments from `pool`.
    pub fn new(capa: u64, pool: Mempool) -> Self {
        TxFixup { capa, active: capa & ALL != ALL, pool, work: Vec::new(), stats: FixupStats::default() }
    }

    fn need(&self, h: &abi::Mbuf) -> Need {
        let f = h.ol_flags;
        let partial = f & (abi::RX_L4_CKSUM_NONE | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM) != 0;
        // A TSO packet, or a GSO frame received with its checksum partial, must be cut
        // before it is a valid packet: by the port, or here. (An aggregate made by
        // `rx_aggregate` carries complete checksums: a valid, large packet, sent as it
        // is; a `gso` node cuts it for a port that cannot take it. One made with
        // `tso: true` is a TSO packet, `TX_TCP_SEG`.)
        let gso = f & abi::TX_TCP_SEG != 0 || (f & abi::RX_AGGREGATED != 0 && partial);
        if gso && h.tso_segsz > 0 && self.capa & abi::TX_TCP_SEG == 0 {
            let hdr = usize::from(h.l2_len) + usize::from(h.l3_len) + usize::from(h.l4_len);
            if h.pkt_len as usize > hdr + usize::from(h.tso_segsz) {
                return Need::Segments;
            }
        }
        if partial {
            let udp = f & abi::TX_UDP_CKSUM != 0 || (h.packet_type & ptype::L4_UDP != 0 && f & abi::TX_TCP_CKSUM == 0);
            let want = if udp { abi::TX_UDP_CKSUM } else { abi::TX_TCP_CKSUM };
            if self.capa & want == 0 {
                return Need::Checksum;
            }
        }
        Need::Nothing
    }

    /// Makes every packet of `pkts` something the port can send: checksums completed
    /// and segments cut where it cannot. Packets beyond the burst's room after
    /// cutting are handed to `overflow` in order, to be sent after `pkts`.
    #[inline]
    pub fn prepare(&mut self, pkts: &mut Burst, mut overflow: impl FnMut(Mbuf)) {
        if !self.active {
            return;
        }
        let n = pkts.len();
        let work_to_do = (0..n).any(|i| {
            let h = pkts.header(i);
            h.ol_flags & ASKS != 0 && !matches!(self.need(h), Need::Nothing)
        });
        if !work_to_do {
            return;
        }
        let mut work = std::mem::take(&mut self.work);
        pkts.take_into(&mut work);
        for mut m in work.drain(..) {
            match self.need(m.header()) {
                Need::Nothing => push(pkts, m, &mut overflow),
                Need::Checksum => {
                    if complete_checksum(&mut m) {
                        self.stats.csum_sw += 1;
                        push(pkts, m, &mut overflow);
                    } else {
                        self.stats.dropped += 1;
                    }
                }
                Need::Segments => {
                    let udp = m.header().packet_type & ptype::L4_UDP != 0;
                    if udp {
                        self.stats.dropped += 1;
                        continue;
                    }
                    // A TSO packet (not an aggregate) is cut at its own segment size.
                    let h = m.header();
                    let mss = if h.ol_flags & abi::TX_TCP_SEG != 0 { h.tso_segsz } else { 0 };
                    match segment(m, &self.pool, mss, &mut |s| push(pkts, s, &mut overflow)) {
                        Ok(_) => self.stats.gso_split += 1,
                        Err((m, GsoSkip::NotAggregate)) => push(pkts, m, &mut overflow),
                        Err(_) => self.stats.dropped += 1,
                    }
                }
            }
        }
        self.work = work;
    }
}

fn push(pkts: &mut Burst, m: Mbuf, overflow: &mut impl FnMut(Mbuf)) {
    if pkts.len() < MAX_BURST {
        if let Err(m) = pkts.push(m) {
            overflow(m);
        }
    } else {
        overflow(m);
    }
}

/// Completes the L4 checksum of `m` in place: the field holds the pseudo-header sum
/// (a partial checksum, or one a `TX_*_CKSUM` packet carries), and the sum of
/// everything from the L4 header on goes into it. False (nothing changed) when the
/// packet is shared or its header lengths do not fit it.
pub fn complete_checksum(m: &mut Mbuf) -> bool {
    let h = m.header();
    let f = h.ol_flags;
    let udp = f & abi::TX_UDP_CKSUM != 0 || (h.packet_type & ptype::L4_UDP != 0 && f & abi::TX_TCP_CKSUM == 0);
    let start = usize::from(h.l2_len) + usize::from(h.l3_len);
    let field = start + if udp { 6 } else { 16 };
    if start == 0 || field + 2 > m.data_len() || !m.is_writable() {
        return false;
    }
    let mut acc: u64 = 0;
    let (mut skip, mut at) = (start, 0usize);
    for s in m.segments() {
        if skip >= s.len() {
            skip -= s.len();
            continue;
        }
        let part = &s[skip..];
        let sum = u64::from(checksum::fold(checksum::sum(part)));
        // A run starting at an odd offset of the L4 data contributes its sum swapped.
        acc += if at % 2 == 1 { u64::from((sum as u16).swap_bytes()) } else { sum };
        at += part.len();
        skip = 0;
    }
    while acc > 0xffff_ffff {
        acc = (acc & 0xffff_ffff) + (acc >> 32);
    }
    let mut c = !checksum::fold(acc as u32);
    if udp && c == 0 {
        c = 0xffff;
    }
    let Ok(d) = m.data_mut() else { return false };
    d[field..field + 2].copy_from_slice(&c.to_be_bytes());
    let h = m.header_mut();
    h.ol_flags =
        (h.ol_flags & !(abi::RX_L4_CKSUM_NONE | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM)) | abi::RX_L4_CKSUM_GOOD;
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{eth, ipv4, pool, PEER4, PEER_MAC, US4, US_MAC};
    use ironpath_wire::{IpAddress, IpProtocol, TcpPacket, UdpPacket};

    /// A TCP or UDP frame over IPv4 whose checksum field holds only the pseudo-header
    /// sum, as the kernel hands over CHECKSUM_PARTIAL frames.
    fn partial(udp: bool, payload: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let l4len = if udp { 8 } else { 20 };
        let mut l4 = vec![0u8; l4len + payload.len()];
        l4[l4len..].copy_from_slice(payload);
        l4[0..2].copy_from_slice(&1234u16.to_be_bytes());
        l4[2..4].copy_from_slice(&80u16.to_be_bytes());
        if udp {
            let n = l4.len() as u16;
            l4[4..6].copy_from_slice(&n.to_be_bytes());
        } else {
            l4[12] = 5 << 4;
            l4[13] = 0x18;
        }
        let proto = if udp { IpProtocol::UDP } else { IpProtocol::TCP };
        let mut t = l4.clone();
        if udp {
            UdpPacket::new_unchecked(&mut t[..]).fill_checksum(&IpAddress::V4(PEER4), &IpAddress::V4(US4));
        } else {
            TcpPacket::new_unchecked(&mut t[..]).fill_checksum(&IpAddress::V4(PEER4), &IpAddress::V4(US4));
        }
        let full = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, proto.0, 64, &t));
        let pseudo = checksum::pseudo_header(&IpAddress::V4(PEER4), &IpAddress::V4(US4), proto, l4.len() as u32);
        let at = if udp { 6 } else { 16 };
        l4[at..at + 2].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
        let part = eth(US_MAC, PEER_MAC, 0x0800, &ipv4(PEER4, US4, proto.0, 64, &l4));
        (part, full)
    }

    #[test]
    fn partial_checksums_are_completed_for_a_port_without_checksum_offload() {
        let p = pool(64);
        for udp in [false, true] {
            for len in [0usize, 1, 2, 1000, 3001] {
                let payload: Vec<u8> = (0..len).map(|i| (i * 7 + 3) as u8).collect();
                let (part, full) = partial(udp, &payload);
                let mut m = Mbuf::from_slice(&p, &part).unwrap();
                let h = m.header_mut();
                h.ol_flags |= abi::RX_L4_CKSUM_NONE;
                (h.l2_len, h.l3_len) = (14, 20);
                h.packet_type = if udp { ptype::L4_UDP } else { ptype::L4_TCP };
                let mut b = Burst::new();
                b.push(m).unwrap();
                let mut fx = TxFixup::new(0, p.clone());
                fx.prepare(&mut b, |_| panic!("no overflow"));
                assert_eq!(fx.stats.csum_sw, 1);
                let got: Vec<Vec<u8>> = b.drain().map(|m| m.to_vec()).collect();
                assert!(got.len() == 1 && got[0] == full, "udp {udp} len {len}: checksum not completed");
                // A port that completes checksums gets the packet as it is.
                let mut m = Mbuf::from_slice(&p, &part).unwrap();
                m.header_mut().ol_flags |= abi::RX_L4_CKSUM_NONE;
                let mut b2 = Burst::new();
                b2.push(m).unwrap();
                let mut fx = TxFixup::new(abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM, p.clone());
                fx.prepare(&mut b2, |_| panic!("no overflow"));
                assert_eq!(fx.stats.csum_sw, 0);
                let got: Vec<Vec<u8>> = b2.drain().map(|m| m.to_vec()).collect();
                assert!(got == [part], "a port that offloads gets the packet unchanged");
            }
        }
        assert_eq!(p.stats().in_use, 0);
    }

    #[test]
    fn a_gso_frame_is_cut_for_a_port_that_cannot_segment_and_passed_whole_to_one_that_can() {
        let p = pool(64);
        let payload: Vec<u8> = (0..3000).map(|i| (i % 251) as u8).collect();
        let (part, _) = partial(false, &payload);
        let gso_frame = |p: &Mempool| {
            let mut m = Mbuf::from_slice(p, &part).unwrap();
            let h = m.header_mut();
            h.ol_flags |= abi::RX_L4_CKSUM_NONE | abi::RX_AGGREGATED;
            (h.l2_len, h.l3_len, h.l4_len, h.tso_segsz) = (14, 20, 20, 1000);
            h.packet_type = ptype::L4_TCP | ptype::L3_IPV4;
            m
        };
        let mut b = Burst::new();
        b.push(gso_frame(&p)).unwrap();
        let mut fx = TxFixup::new(abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM, p.clone());
        fx.prepare(&mut b, |_| panic!("no overflow"));
        assert_eq!(fx.stats.gso_split, 1);
        let segs: Vec<Vec<u8>> = b.drain().map(|m| m.to_vec()).collect();
        assert_eq!(segs.len(), 3);
        let mut got = Vec::new();
        for s in &segs {
            let tcp = TcpPacket::new_checked(&s[34..]).unwrap();
            assert!(tcp.verify_checksum(&IpAddress::V4(PEER4), &IpAddress::V4(US4)), "segment checksum");
            got.extend_from_slice(tcp.payload());
        }
        assert_eq!(got, payload);
        // A port that segments takes it whole.
        let mut b = Burst::new();
        b.push(gso_frame(&p)).unwrap();
        let mut fx = TxFixup::new(abi::TX_TCP_SEG | abi::TX_TCP_CKSUM, p.clone());
        fx.prepare(&mut b, |_| panic!("no overflow"));
        assert_eq!((fx.stats.gso_split, b.len()), (0, 1));
        b.free_all();
        assert_eq!(p.stats().in_use, 0);
    }
}
