//! UDP datagrams (RFC 768). Checksums cover the IPv4 or IPv6 pseudo-header.
use crate::checksum;
use crate::ip::{IpAddress, IpProtocol};
use crate::{Error, Result};

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

mod field {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const CHECKSUM: Range<usize> = 6..8;
}

/// A view of a UDP datagram.
///
/// After [`check_len`](Self::check_len): `8 <= len <= buffer length`; bytes after `len`
/// are ignored by [`payload`](Self::payload) and the checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> UdpPacket<T> {
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

    /// [`Error::Truncated`] if the buffer is shorter than 8 bytes or than the length
    /// field, [`Error::Malformed`] if the length field is below 8.
    pub fn check_len(&self) -> Result<()> {
        let buffer_len = self.buffer.as_ref().len();
        if buffer_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len > buffer_len {
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

    /// The source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// The destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// The length field: header plus payload.
    #[allow(clippy::len_without_is_empty)] // the wire field is called "length"; a datagram is never empty
    pub fn len(&self) -> u16 {
        self.u16_at(field::LENGTH)
    }

    /// The checksum field (0 over IPv4 means "not computed").
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The payload: bytes 8 to `len`.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }

    fn sum_with_pseudo_header(&self, src: &IpAddress, dst: &IpAddress) -> u16 {
        let len = self.len();
        let data = &self.buffer.as_ref()[..usize::from(len)];
        checksum::fold(checksum::pseudo_header(src, dst, IpProtocol::UDP, u32::from(len)) + checksum::sum(data))
    }

    /// Whether the checksum verifies for these IP addresses. A zero checksum over IPv4
    /// means "none" and verifies; over IPv6 it is invalid (RFC 8200 §8.1) and does not.
    pub fn verify_checksum(&self, src: &IpAddress, dst: &IpAddress) -> bool {
        if self.checksum() == 0 {
            return matches!((src, dst), (IpAddress::V4(_), IpAddress::V4(_)));
        }
        self.sum_with_pseudo_header(src, dst) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> UdpPacket<T> {
    fn set_u16_at(&mut self, r: std::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        self.set_u16_at(field::SRC_PORT, value);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        self.set_u16_at(field::DST_PORT, value);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, value: u16) {
        self.set_u16_at(field::LENGTH, value);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// The payload (bytes 8 to `len`), mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Computes and stores the checksum over `len` bytes for these addresses. A result
    /// of 0 is stored as `0xffff`, since 0 means "none".
    pub fn fill_checksum(&mut self, src: &IpAddress, dst: &IpAddress) {
        self.set_checksum(0);
        let cksum = match !self.sum_with_pseudo_header(src, dst) {
            0 => 0xffff,
            c => c,
        };
        self.set_checksum(cksum);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for UdpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UdpRepr {
    /// Source port (0 means none).
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Bytes of payload.
    pub payload_len: usize,
}

impl UdpRepr {
    /// Validates and reads a datagram sent from `src` to `dst`: destination port 0 is
    /// [`Error::Malformed`]; a failing checksum, when `verify_checksum`, is
    /// [`Error::Checksum`] (see [`UdpPacket::verify_checksum`] for zero checksums).
    pub fn parse<T: AsRef<[u8]>>(
        packet: &UdpPacket<T>,
        src: &IpAddress,
        dst: &IpAddress,
        verify_checksum: bool,
    ) -> Result<Self> {
        packet.check_len()?;
        if packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        Ok(Self { src_port: packet.src_port(), dst_port: packet.dst_port(), payload_len: packet.payload().len() })
    }

    /// Bytes of header [`emit`](Self::emit) writes: [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Bytes of the whole datagram: header plus `payload_len`.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header (length `8 + payload_len`, at most 65535) and the checksum, so
    /// **write the payload first** (at offset 8), or call [`UdpPacket::fill_checksum`]
    /// again after.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut UdpPacket<T>, src: &IpAddress, dst: &IpAddress) {
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(self.buffer_len() as u16);
        packet.fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;
    use crate::testutil::{hex, XorShift};

    /// A DNS query header from 192.168.0.1:53000 to 8.8.8.8:53, odd length.
    const DNS: &str = "cf08 0035 0011 4ca0 1234 0100 0001 0000 00";

    fn src() -> IpAddress {
        IpAddress::V4(Ipv4Addr::new(192, 168, 0, 1))
    }

    fn dst() -> IpAddress {
        IpAddress::V4(Ipv4Addr::new(8, 8, 8, 8))
    }

    #[test]
    fn parse_real_datagram() {
        let bytes = hex(DNS);
        let p = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len(), p.checksum()), (53000, 53, 17, 0x4ca0));
        assert_eq!(p.payload().len(), 9);
        assert!(p.verify_checksum(&src(), &dst()));
        assert_eq!(
            UdpRepr::parse(&p, &src(), &dst(), true),
            Ok(UdpRepr { src_port: 53000, dst_port: 53, payload_len: 9 })
        );
        assert_eq!(UdpRepr::parse(&p, &src(), &src(), true), Err(Error::Checksum));
    }

    #[test]
    fn zero_checksum() {
        let mut bytes = hex(DNS);
        bytes[6..8].fill(0);
        let p = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert!(p.verify_checksum(&src(), &dst()), "none over IPv4");
        let a6 = IpAddress::V6(Ipv6Addr::LOCALHOST);
        assert!(!p.verify_checksum(&a6, &a6), "invalid over IPv6");
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Search for a payload word that makes the checksum come out as zero.
        let repr = UdpRepr { src_port: 1, dst_port: 2, payload_len: 2 };
        let mut found = false;
        for word in 0..=u16::MAX {
            let mut bytes = vec![0u8; repr.buffer_len()];
            bytes[8..].copy_from_slice(&word.to_be_bytes());
            let mut p = UdpPacket::new_unchecked(&mut bytes[..]);
            repr.emit(&mut p, &src(), &dst());
            if p.checksum() == 0xffff {
                assert!(p.verify_checksum(&src(), &dst()));
                found = true;
                break;
            }
            assert_ne!(p.checksum(), 0);
        }
        assert!(found);
    }

    #[test]
    fn repr_round_trip_v4_and_v6() {
        let a6 = IpAddress::V6("fe80::1".parse().unwrap());
        let b6 = IpAddress::V6("ff02::fb".parse().unwrap());
        let repr = UdpRepr { src_port: 5353, dst_port: 5353, payload_len: 5 };
        for (s, d) in [(src(), dst()), (a6, b6)] {
            let mut bytes = vec![0u8; repr.buffer_len()];
            let mut p = UdpPacket::new_unchecked(&mut bytes[..]);
            p.set_len(repr.buffer_len() as u16);
            p.payload_mut().copy_from_slice(b"hello");
            repr.emit(&mut p, &s, &d);
            let p = UdpPacket::new_checked(&bytes[..]).unwrap();
            assert_eq!(UdpRepr::parse(&p, &s, &d, true), Ok(repr));
            assert_eq!(p.payload(), b"hello");
        }
    }

    #[test]
    fn length_field_is_bounded() {
        let mut bytes = hex(DNS);
        bytes[5] = 7;
        assert_eq!(UdpPacket::new_checked(&bytes[..]), Err(Error::Malformed));
        bytes[5] = 18;
        assert_eq!(UdpPacket::new_checked(&bytes[..]), Err(Error::Truncated));
        bytes[5] = 9;
        let p = UdpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.payload(), &[0x12]);
        let mut bytes = hex(DNS);
        bytes[2..4].fill(0);
        assert_eq!(
            UdpRepr::parse(&UdpPacket::new_checked(&bytes[..]).unwrap(), &src(), &dst(), false),
            Err(Error::Malformed)
        );
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex(DNS);
        for len in 0..bytes.len() {
            let b = &bytes[..len];
            assert_eq!(UdpPacket::new_checked(b), Err(Error::Truncated), "len {len}");
            assert_eq!(UdpRepr::parse(&UdpPacket::new_unchecked(b), &src(), &dst(), true), Err(Error::Truncated));
        }
    }

    #[test]
    fn checksum_matches_reference_on_random_datagrams() {
        let mut rng = XorShift(0x0d9);
        for _ in 0..500 {
            let payload_len = rng.index(300);
            let repr = UdpRepr { src_port: 1 + rng.index(65535) as u16, dst_port: 1, payload_len };
            let mut bytes = rng.bytes(repr.buffer_len());
            repr.emit(&mut UdpPacket::new_unchecked(&mut bytes[..]), &src(), &dst());
            // Reference: RFC 768 sum over pseudo-header and datagram, written out.
            let mut all = vec![192, 168, 0, 1, 8, 8, 8, 8, 0, 17];
            all.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            all.extend_from_slice(&bytes);
            assert_eq!(checksum::data(&all), 0xffff);
        }
    }
}
