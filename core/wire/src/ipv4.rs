//! IPv4 headers (RFC 791).
use std::net::Ipv4Addr;

use crate::checksum;
use crate::ip::IpProtocol;
use crate::{Error, Result};

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

mod field {
    use std::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    pub const FLG_OFF: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A view of an IPv4 packet.
///
/// After [`check_len`](Self::check_len): `20 <= header_len <= total_len <= buffer length`,
/// so [`options`](Self::options) and [`payload`](Self::payload) are in bounds. Bytes past
/// `total_len` (Ethernet padding) are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Checks the buffer against the fixed header, `header_len` and `total_len`:
    /// [`Error::Truncated`] if one of them exceeds the buffer, [`Error::Malformed`] if
    /// `header_len < 20` or `total_len < header_len`. The version is not checked.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if header_len > len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::Malformed);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: std::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header length in bytes (IHL × 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point.
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification.
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Header plus payload length in bytes.
    pub fn total_len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// The fragment identification.
    pub fn ident(&self) -> u16 {
        self.u16_at(field::IDENT)
    }

    /// The "don't fragment" flag.
    pub fn dont_frag(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_DF != 0
    }

    /// The "more fragments" flag.
    pub fn more_frags(&self) -> bool {
        self.u16_at(field::FLG_OFF) & FLAG_MF != 0
    }

    /// The fragment offset in bytes (the field × 8).
    pub fn frag_offset(&self) -> u16 {
        (self.u16_at(field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// Whether this is a fragment (more fragments follow, or a non-zero offset).
    pub fn is_fragment(&self) -> bool {
        self.u16_at(field::FLG_OFF) & (FLAG_MF | OFFSET_MASK) != 0
    }

    /// The time to live.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// The time to live (alias of [`hop_limit`](Self::hop_limit)).
    pub fn ttl(&self) -> u8 {
        self.hop_limit()
    }

    /// The protocol of the payload.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// The header checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The options: bytes 20 to `header_len`.
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.header_len())]
    }

    /// The payload: bytes `header_len` to `total_len`.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..usize::from(self.total_len())]
    }

    /// Whether the header checksum verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(&self.buffer.as_ref()[..usize::from(self.header_len())]) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    fn set_u16_at(&mut self, r: std::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the version field.
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (value << 4);
    }

    /// Sets the header length in bytes (rounded down to a multiple of 4, at most 60).
    pub fn set_header_len(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((value / 4) & 0x0f);
    }

    /// Sets the DSCP (low 6 bits used).
    pub fn set_dscp(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (value << 2);
    }

    /// Sets the ECN (low 2 bits used).
    pub fn set_ecn(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0xfc) | (value & 0x03);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, value: u16) {
        self.set_u16_at(field::LENGTH, value);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, value: u16) {
        self.set_u16_at(field::IDENT, value);
    }

    /// Clears the flags and the fragment offset.
    pub fn clear_flags(&mut self) {
        self.set_u16_at(field::FLG_OFF, 0);
    }

    fn set_flag(&mut self, flag: u16, on: bool) {
        let raw = self.u16_at(field::FLG_OFF);
        self.set_u16_at(field::FLG_OFF, if on { raw | flag } else { raw & !flag });
    }

    /// Sets the "don't fragment" flag.
    pub fn set_dont_frag(&mut self, value: bool) {
        self.set_flag(FLAG_DF, value);
    }

    /// Sets the "more fragments" flag.
    pub fn set_more_frags(&mut self, value: bool) {
        self.set_flag(FLAG_MF, value);
    }

    /// Sets the fragment offset in bytes (a multiple of 8).
    pub fn set_frag_offset(&mut self, value: u16) {
        let raw = self.u16_at(field::FLG_OFF);
        self.set_u16_at(field::FLG_OFF, (raw & !OFFSET_MASK) | ((value >> 3) & OFFSET_MASK));
    }

    /// Sets the time to live.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the time to live (alias of [`set_hop_limit`](Self::set_hop_limit)).
    pub fn set_ttl(&mut self, value: u8) {
        self.set_hop_limit(value);
    }

    /// Sets the payload protocol.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.0;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// Computes and stores the header checksum over `header_len` bytes.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let cksum = !checksum::data(&self.buffer.as_ref()[..usize::from(self.header_len())]);
        self.set_checksum(cksum);
    }

    /// The options, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The payload (`header_len` to `total_len`), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an unfragmented IPv4 header that a stack acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv4Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Payload protocol.
    pub next_header: IpProtocol,
    /// Payload length in bytes (`total_len - header_len`).
    pub payload_len: usize,
    /// Time to live.
    pub hop_limit: u8,
}

impl Ipv4Repr {
    /// Validates and reads a header: [`check_len`](Ipv4Packet::check_len), version 4
    /// ([`Error::Malformed`]), the checksum if `verify_checksum` ([`Error::Checksum`]).
    /// Fragments are [`Error::Unsupported`]: this repr cannot describe them. Options are
    /// skipped; DSCP/ECN and the identification are not kept.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv4Packet<T>, verify_checksum: bool) -> Result<Self> {
        packet.check_len()?;
        if packet.version() != 4 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        if packet.is_fragment() {
            return Err(Error::Unsupported);
        }
        Ok(Self {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.total_len()) - usize::from(packet.header_len()),
            hop_limit: packet.hop_limit(),
        })
    }

    /// Bytes of header [`emit`](Self::emit) writes: [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes a 20-byte header (DSCP/ECN 0, identification 0, DF set, RFC 6864) with its
    /// checksum. The payload is left alone. `payload_len` must be at most 65515.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv4Packet<T>) {
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(0);
        packet.set_ecn(0);
        packet.set_total_len((HEADER_LEN + self.payload_len) as u16);
        packet.set_ident(0);
        packet.clear_flags();
        packet.set_dont_frag(true);
        packet.set_hop_limit(self.hop_limit);
        packet.set_next_header(self.next_header);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::testutil::{hex, XorShift};

    /// A Linux ping: 192.168.0.1 -> 192.168.0.2, ICMP echo request, 84 bytes.
    pub(crate) const PING: &str = "4500 0054 1c46 4000 4001 9d0f c0a80001 c0a80002
        0800 2588 04d2 0001 6a4d 2b66 0000 0000 6d1e 0c00 0000 0000
        1011 1213 1415 1617 1819 1a1b 1c1d 1e1f 2021 2223 2425 2627
        2829 2a2b 2c2d 2e2f 3031 3233 3435 3637";

    #[test]
    fn parse_real_header() {
        let bytes = hex(PING);
        assert_eq!(bytes.len(), 84);
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 84);
        assert_eq!(p.ident(), 0x1c46);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_fragment());
        assert_eq!(p.frag_offset(), 0);
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.next_header(), IpProtocol::ICMP);
        assert_eq!(p.checksum(), 0x9d0f);
        assert!(p.verify_checksum());
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 2));
        assert!(p.options().is_empty());
        assert_eq!(p.payload().len(), 64);
        let repr = Ipv4Repr::parse(&p, true).unwrap();
        assert_eq!(repr.payload_len, 64);
        assert_eq!(repr.next_header, IpProtocol::ICMP);
    }

    #[test]
    fn repr_round_trip() {
        let repr = Ipv4Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            next_header: IpProtocol::UDP,
            payload_len: 12,
            hop_limit: 17,
        };
        let mut bytes = vec![0xa5u8; repr.buffer_len() + repr.payload_len];
        let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
        repr.emit(&mut p);
        assert!(p.verify_checksum());
        assert_eq!(p.payload_mut().len(), 12);
        assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_checked(&bytes[..]).unwrap(), true), Ok(repr));
    }

    #[test]
    fn setters_and_options() {
        let mut bytes = [0u8; 28];
        let mut p = Ipv4Packet::new_unchecked(&mut bytes[..]);
        p.set_version(4);
        p.set_header_len(24);
        p.set_total_len(28);
        p.set_dscp(46);
        p.set_ecn(3);
        p.set_more_frags(true);
        p.set_frag_offset(1480);
        p.set_dont_frag(true);
        p.set_dont_frag(false);
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        p.fill_checksum();
        let p = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.dscp(), p.ecn()), (46, 3));
        assert!(p.more_frags() && !p.dont_frag() && p.is_fragment());
        assert_eq!(p.frag_offset(), 1480);
        assert_eq!(p.options(), &[1, 1, 1, 0]);
        assert_eq!(p.payload().len(), 4);
        assert!(p.verify_checksum());
        assert_eq!(Ipv4Repr::parse(&p, true), Err(Error::Unsupported));
    }

    #[test]
    fn rejects_bad_headers() {
        let good = hex(PING);
        let with = |at: usize, value: u8| {
            let mut b = good.clone();
            b[at] = value;
            b
        };
        let parse = |b: &[u8], verify| Ipv4Repr::parse(&Ipv4Packet::new_unchecked(b), verify);
        assert_eq!(parse(&with(0, 0x65), false), Err(Error::Malformed), "version 6");
        assert_eq!(parse(&with(0, 0x44), false), Err(Error::Malformed), "header_len 16");
        assert_eq!(parse(&with(3, 0), false), Err(Error::Malformed), "total_len 0");
    }

    #[test]
    fn length_fields_are_bounded() {
        let good = hex(PING);
        let mut b = good.clone();
        b[3] = 19; // total_len < header_len
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(Error::Malformed));
        b[3] = 85; // total_len > buffer
        assert_eq!(Ipv4Packet::new_checked(&b[..]), Err(Error::Truncated));
        let mut b = good.clone();
        b[0] = 0x4f; // header_len 60 fits in 84 bytes: options run into the payload
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.options().len(), 40);
        assert_eq!(Ipv4Repr::parse(&p, true), Err(Error::Checksum));
        assert_eq!(Ipv4Repr::parse(&p, false).map(|r| r.payload_len), Ok(24));
        // Ethernet padding after total_len is ignored.
        let mut padded = good.clone();
        padded.extend_from_slice(&[0; 6]);
        assert_eq!(Ipv4Packet::new_checked(&padded[..]).unwrap().payload().len(), 64);
    }

    #[test]
    fn bad_checksum_unless_ignored() {
        let mut b = hex(PING);
        b[8] = 63;
        let p = Ipv4Packet::new_checked(&b[..]).unwrap();
        assert_eq!(Ipv4Repr::parse(&p, true), Err(Error::Checksum));
        assert_eq!(Ipv4Repr::parse(&p, false).map(|r| r.hop_limit), Ok(63));
        // The TTL decrement a router does, as an RFC 1624 update.
        let mut b = hex(PING);
        let old = u16::from_be_bytes([b[8], b[9]]);
        b[8] -= 1;
        let new = u16::from_be_bytes([b[8], b[9]]);
        let cksum = checksum::update16(u16::from_be_bytes([b[10], b[11]]), old, new);
        b[10..12].copy_from_slice(&cksum.to_be_bytes());
        assert!(Ipv4Packet::new_checked(&b[..]).unwrap().verify_checksum());
    }

    #[test]
    fn truncation_never_panics() {
        let good = hex(PING);
        for len in 0..good.len() {
            let b = &good[..len];
            assert_eq!(Ipv4Packet::new_checked(b), Err(Error::Truncated), "len {len}");
            assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_unchecked(b), false), Err(Error::Truncated));
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(7);
        for _ in 0..20_000 {
            let len = rng.index(80);
            let mut b = rng.bytes(len);
            if len > 0 {
                b[0] = 0x40 | (b[0] & 0x0f);
            }
            if let Ok(p) = Ipv4Packet::new_checked(&b[..]) {
                let _ = (p.options(), p.payload(), p.verify_checksum(), p.frag_offset());
                let _ = Ipv4Repr::parse(&p, false);
            }
        }
    }
}
