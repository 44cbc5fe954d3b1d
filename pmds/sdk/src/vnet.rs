//! `struct virtio_net_hdr` (`linux/virtio_net.h`): the offload state a TAP or an
//! AF_PACKET socket with `PACKET_VNET_HDR` passes next to each frame (checksum to
//! complete, GSO type and segment size), and its mapping to and from mbuf offload
//! flags. Shared by the PMDs that talk to the kernel this way.

use crate::abi::{self, ptype, Mbuf};

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`.
pub const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`.
pub const F_DATA_VALID: u8 = 2;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_UDP_L4` (UDP segmentation: each segment a datagram).
pub const GSO_UDP_L4: u8 = 5;

/// `struct virtio_net_hdr` (little-endian on the wire of a TAP on x86).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct VnetHdr {
    /// `F_NEEDS_CSUM`, `F_DATA_VALID`.
    pub flags: u8,
    /// `GSO_*` (0 = none).
    pub gso_type: u8,
    /// Length of the headers to copy into each segment.
    pub hdr_len: u16,
    /// Payload bytes per segment.
    pub gso_size: u16,
    /// Where checksumming starts.
    pub csum_start: u16,
    /// Where the checksum goes, from `csum_start`.
    pub csum_offset: u16,
}

fn le16(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes([b[o], b[o + 1]])
}

impl VnetHdr {
    /// Size on the wire.
    pub const LEN: usize = 10;

    /// Split a read into header and frame; `None` for a short read.
    pub fn split(b: &[u8]) -> Option<(VnetHdr, &[u8])> {
        if b.len() < Self::LEN + 14 {
            return None;
        }
        Some((Self::parse(&b[..Self::LEN])?, &b[Self::LEN..]))
    }

    /// The header in the first [`VnetHdr::LEN`] bytes of `b` (`None` if shorter).
    pub fn parse(b: &[u8]) -> Option<VnetHdr> {
        if b.len() < Self::LEN {
            return None;
        }
        Some(VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le16(b, 2),
            gso_size: le16(b, 4),
            csum_start: le16(b, 6),
            csum_offset: le16(b, 8),
        })
    }

    /// The header from its first 8 bytes and its last 2, as little-endian words (two
    /// loads where a data path reads it from shared memory).
    #[inline(always)]
    pub fn from_words(lo: u64, hi: u16) -> VnetHdr {
        VnetHdr {
            flags: lo as u8,
            gso_type: (lo >> 8) as u8,
            hdr_len: (lo >> 16) as u16,
            gso_size: (lo >> 32) as u16,
            csum_start: (lo >> 48) as u16,
            csum_offset: hi,
        }
    }

    /// The header as its first 8 bytes and its last 2, little-endian words (the
    /// inverse of [`VnetHdr::from_words`]).
    #[inline(always)]
    pub fn to_words(self) -> (u64, u16) {
        let lo = u64::from(self.flags)
            | u64::from(self.gso_type) << 8
            | u64::from(self.hdr_len) << 16
            | u64::from(self.gso_size) << 32
            | u64::from(self.csum_start) << 48;
        (lo, self.csum_offset)
    }

    /// Encode.
    pub fn to_bytes(self) -> [u8; 10] {
        let mut b = [0u8; 10];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
        b
    }

    /// The header of the same frame with `by` bytes inserted in front of the L3
    /// header (a VLAN tag the kernel had taken off, put back: 4).
    pub fn shifted(self, by: u16) -> VnetHdr {
        let grow = |v: u16| if v == 0 { 0 } else { v.saturating_add(by) };
        VnetHdr { hdr_len: grow(self.hdr_len), csum_start: grow(self.csum_start), ..self }
    }

    /// Offload state of a received frame into the mbuf's flags and lengths.
    pub fn to_mbuf(self, m: &mut Mbuf) {
        self.to_mbuf_l2(m, 14);
    }

    /// As [`VnetHdr::to_mbuf`] for a frame whose L2 header is `l2` bytes (18 with a
    /// VLAN tag in the frame). A GSO frame of UDP (`GSO_UDP_L4`) is marked as a TCP
    /// aggregate is (`RX_AGGREGATED`, `tso_segsz`) with the UDP packet type.
    pub fn to_mbuf_l2(self, m: &mut Mbuf, l2: u16) {
        let mut fl = 0;
        if self.flags & F_NEEDS_CSUM != 0 {
            fl |= abi::RX_L4_CKSUM_NONE;
            m.l2_len = l2 as u8;
            m.l3_len = self.csum_start.saturating_sub(l2);
            m.packet_type |= match self.csum_offset {
                16 => ptype::L4_TCP,
                6 => ptype::L4_UDP,
                _ => 0,
            };
        } else if self.flags & F_DATA_VALID != 0 {
            fl |= abi::RX_L4_CKSUM_GOOD;
        }
        match self.gso_type & 0x7f {
            GSO_TCPV4 | GSO_TCPV6 | GSO_UDP_L4 if self.gso_size > 0 => {
                fl |= abi::RX_AGGREGATED;
                m.tso_segsz = self.gso_size;
                m.packet_type |= match self.gso_type & 0x7f {
                    GSO_TCPV4 => ptype::L4_TCP | ptype::L3_IPV4,
                    GSO_TCPV6 => ptype::L4_TCP | ptype::L3_IPV6,
                    _ => ptype::L4_UDP,
                };
                m.l4_len = self.hdr_len.saturating_sub(self.csum_start).min(255) as u8;
                let payload = m.pkt_len.saturating_sub(u32::from(self.hdr_len));
                m.aggr_segs = payload.div_ceil(u32::from(self.gso_size)).min(u32::from(u16::MAX)) as u16;
            }
            _ => {}
        }
        m.ol_flags |= fl;
    }

    /// The header that asks the kernel for the offloads an outgoing mbuf needs. Header
    /// lengths that do not fit the packet (whatever set them) ask for no offload: the
    /// kernel is never told to checksum or cut beyond the data.
    pub fn from_mbuf(m: &Mbuf) -> VnetHdr {
        let f = m.ol_flags;
        let len = m.pkt_len.min(u32::from(u16::MAX));
        let start32 = u32::from(m.l2_len) + u32::from(m.l3_len);
        if start32 == 0 || start32 >= len {
            return VnetHdr::default();
        }
        let start = start32 as u16;
        let udp = f & abi::TX_UDP_CKSUM != 0 || (m.packet_type & ptype::L4_UDP != 0 && f & abi::TX_TCP_CKSUM == 0);
        let mut h = VnetHdr::default();
        // A TSO packet, or a GSO frame received as one (its checksum still partial:
        // an aggregate made here carries complete checksums, which GSO cannot use).
        let gso_in = f & (abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE) == abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE;
        let udp_gso = f & abi::TX_TCP_SEG == 0 && m.packet_type & ptype::L4_UDP != 0;
        let hdr32 = start32 + if udp_gso { 8 } else { u32::from(m.l4_len.max(20)) };
        let segment = (f & abi::TX_TCP_SEG != 0 || gso_in) && m.tso_segsz > 0 && hdr32 <= len;
        if segment {
            let v4 = f & abi::TX_IPV4 != 0 || m.packet_type & ptype::L3_IPV4 != 0;
            h.gso_type = match (udp_gso, v4) {
                (true, _) => GSO_UDP_L4,
                (false, true) => GSO_TCPV4,
                (false, false) => GSO_TCPV6,
            };
            h.gso_size = m.tso_segsz;
            h.hdr_len = hdr32 as u16;
        }
        let partial = f & (abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM | abi::RX_L4_CKSUM_NONE) != 0;
        let offset: u16 = if udp && (!segment || h.gso_type == GSO_UDP_L4) { 6 } else { 16 };
        // The checksum field must lie inside the packet.
        if (segment || partial) && start32 + u32::from(offset) + 2 <= len {
            h.flags = F_NEEDS_CSUM;
            h.csum_start = start;
            h.csum_offset = offset;
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_and_bytes_agree() {
        let h = VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV6,
            hdr_len: 0x1234,
            gso_size: 0x5678,
            csum_start: 0x9abc,
            csum_offset: 0xdef0,
        };
        let b = h.to_bytes();
        let (lo, hi) = h.to_words();
        assert_eq!(lo.to_le_bytes(), b[..8]);
        assert_eq!(hi.to_le_bytes(), b[8..]);
        assert_eq!(VnetHdr::from_words(lo, hi), h);
        assert_eq!(VnetHdr::parse(&b), Some(h));
    }

    #[test]
    fn header_lengths_beyond_the_packet_ask_for_no_offload() {
        // SAFETY: `Mbuf` is integers and raw pointers; all-zero is a valid value.
        let mut m: Mbuf = unsafe { std::mem::zeroed() };
        m.pkt_len = 100;
        m.ol_flags = abi::RX_L4_CKSUM_NONE;
        (m.l2_len, m.l3_len, m.l4_len) = (255, 65535, 255);
        assert_eq!(VnetHdr::from_mbuf(&m), VnetHdr::default());
        (m.l2_len, m.l3_len, m.l4_len) = (14, 20, 20);
        let h = VnetHdr::from_mbuf(&m);
        assert_eq!((h.flags, h.csum_start, h.csum_offset), (F_NEEDS_CSUM, 34, 16));
    }

    #[test]
    fn header_round_trips_and_short_reads_are_refused() {
        let h = VnetHdr { flags: 1, gso_type: GSO_TCPV4, hdr_len: 66, gso_size: 1448, csum_start: 34, csum_offset: 16 };
        let mut b = h.to_bytes().to_vec();
        b.extend_from_slice(&[0u8; 60]);
        let (g, frame) = VnetHdr::split(&b).unwrap();
        assert_eq!((g, frame.len()), (h, 60));
        assert!(VnetHdr::split(&[0u8; 12]).is_none());
    }
}
