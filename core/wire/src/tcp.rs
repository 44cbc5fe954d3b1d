//! TCP segments (RFC 9293): the [`TcpPacket`] view, its [`options`](TcpOption) and
//! [`TcpRepr`]. Checksums cover the IPv4 or IPv6 pseudo-header, so they take the
//! addresses as [`IpAddress`].
use crate::checksum;
use crate::ip::{IpAddress, IpProtocol};
use crate::{Error, Result};

mod option;
mod repr;

pub use option::{TcpOption, TcpOptions};
pub use repr::{TcpControl, TcpRepr};

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;

/// Most option bytes a header can hold (data offset 15 × 4 − 20).
pub const MAX_OPTIONS_LEN: usize = 40;

mod field {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: Range<usize> = 14..16;
    pub const CHECKSUM: Range<usize> = 16..18;
    pub const URGENT: Range<usize> = 18..20;
}

/// Bits of [`TcpPacket::flags_raw`].
pub mod flags {
    /// No more data from the sender.
    pub const FIN: u8 = 0x01;
    /// Synchronize sequence numbers.
    pub const SYN: u8 = 0x02;
    /// Reset the connection.
    pub const RST: u8 = 0x04;
    /// Push.
    pub const PSH: u8 = 0x08;
    /// The acknowledgment number is valid.
    pub const ACK: u8 = 0x10;
    /// The urgent pointer is valid.
    pub const URG: u8 = 0x20;
    /// ECN echo.
    pub const ECE: u8 = 0x40;
    /// Congestion window reduced.
    pub const CWR: u8 = 0x80;
}

/// A view of a TCP segment. The buffer is the whole segment (the IP payload): the
/// payload runs to its end and the checksum covers all of it.
///
/// After [`check_len`](Self::check_len): `20 <= header_len <= buffer length`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
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

    /// [`Error::Truncated`] if the buffer is shorter than 20 bytes or than `header_len`,
    /// [`Error::Malformed`] if `header_len < 20`.
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

    fn u32_at(&self, r: std::ops::Range<usize>) -> u32 {
        let b = &self.buffer.as_ref()[r];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The source port.
    pub fn src_port(&self) -> u16 {
        self.u16_at(field::SRC_PORT)
    }

    /// The destination port.
    pub fn dst_port(&self) -> u16 {
        self.u16_at(field::DST_PORT)
    }

    /// The sequence number.
    pub fn seq_number(&self) -> u32 {
        self.u32_at(field::SEQ_NUM)
    }

    /// The acknowledgment number (meaningful when [`ack`](Self::ack) is set).
    pub fn ack_number(&self) -> u32 {
        self.u32_at(field::ACK_NUM)
    }

    /// The header length in bytes (data offset × 4).
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::DATA_OFF] >> 4) * 4
    }

    /// The eight flag bits (see [`flags`]).
    pub fn flags_raw(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    fn flag(&self, bit: u8) -> bool {
        self.flags_raw() & bit != 0
    }

    /// FIN.
    pub fn fin(&self) -> bool {
        self.flag(flags::FIN)
    }

    /// SYN.
    pub fn syn(&self) -> bool {
        self.flag(flags::SYN)
    }

    /// RST.
    pub fn rst(&self) -> bool {
        self.flag(flags::RST)
    }

    /// PSH.
    pub fn psh(&self) -> bool {
        self.flag(flags::PSH)
    }

    /// ACK.
    pub fn ack(&self) -> bool {
        self.flag(flags::ACK)
    }

    /// URG.
    pub fn urg(&self) -> bool {
        self.flag(flags::URG)
    }

    /// ECE.
    pub fn ece(&self) -> bool {
        self.flag(flags::ECE)
    }

    /// CWR.
    pub fn cwr(&self) -> bool {
        self.flag(flags::CWR)
    }

    /// The window field (unscaled).
    pub fn window_len(&self) -> u16 {
        self.u16_at(field::WIN_SIZE)
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The urgent pointer.
    pub fn urgent_at(&self) -> u16 {
        self.u16_at(field::URGENT)
    }

    /// The option bytes (20 to `header_len`).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.header_len())]
    }

    /// An iterator over the options.
    pub fn options_iter(&self) -> TcpOptions<'_> {
        TcpOptions::new(self.options())
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..]
    }

    /// Sequence space the segment occupies: payload length plus one each for SYN and FIN.
    pub fn segment_len(&self) -> usize {
        self.payload().len() + usize::from(self.syn()) + usize::from(self.fin())
    }

    fn sum_with_pseudo_header(&self, src: &IpAddress, dst: &IpAddress) -> u16 {
        let data = self.buffer.as_ref();
        let pseudo = checksum::pseudo_header(src, dst, IpProtocol::TCP, data.len() as u32);
        checksum::fold(pseudo + checksum::sum(data))
    }

    /// Whether the checksum verifies for these IP source and destination addresses.
    pub fn verify_checksum(&self, src: &IpAddress, dst: &IpAddress) -> bool {
        self.sum_with_pseudo_header(src, dst) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> TcpPacket<T> {
    fn set_u16_at(&mut self, r: std::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&value.to_be_bytes());
    }

    fn set_u32_at(&mut self, r: std::ops::Range<usize>, value: u32) {
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

    /// Sets the sequence number.
    pub fn set_seq_number(&mut self, value: u32) {
        self.set_u32_at(field::SEQ_NUM, value);
    }

    /// Sets the acknowledgment number.
    pub fn set_ack_number(&mut self, value: u32) {
        self.set_u32_at(field::ACK_NUM, value);
    }

    /// Sets the header length in bytes (rounded down to a multiple of 4, at most 60);
    /// the reserved bits and the historic NS bit are cleared.
    pub fn set_header_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::DATA_OFF] = ((value / 4) & 0x0f) << 4;
    }

    /// Sets all eight flag bits.
    pub fn set_flags_raw(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Clears all flags.
    pub fn clear_flags(&mut self) {
        self.set_flags_raw(0);
    }

    fn set_flag(&mut self, bit: u8, on: bool) {
        let raw = self.flags_raw();
        self.set_flags_raw(if on { raw | bit } else { raw & !bit });
    }

    /// Sets FIN.
    pub fn set_fin(&mut self, value: bool) {
        self.set_flag(flags::FIN, value);
    }

    /// Sets SYN.
    pub fn set_syn(&mut self, value: bool) {
        self.set_flag(flags::SYN, value);
    }

    /// Sets RST.
    pub fn set_rst(&mut self, value: bool) {
        self.set_flag(flags::RST, value);
    }

    /// Sets PSH.
    pub fn set_psh(&mut self, value: bool) {
        self.set_flag(flags::PSH, value);
    }

    /// Sets ACK.
    pub fn set_ack(&mut self, value: bool) {
        self.set_flag(flags::ACK, value);
    }

    /// Sets URG.
    pub fn set_urg(&mut self, value: bool) {
        self.set_flag(flags::URG, value);
    }

    /// Sets ECE.
    pub fn set_ece(&mut self, value: bool) {
        self.set_flag(flags::ECE, value);
    }

    /// Sets CWR.
    pub fn set_cwr(&mut self, value: bool) {
        self.set_flag(flags::CWR, value);
    }

    /// Sets the window field.
    pub fn set_window_len(&mut self, value: u16) {
        self.set_u16_at(field::WIN_SIZE, value);
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// Sets the urgent pointer.
    pub fn set_urgent_at(&mut self, value: u16) {
        self.set_u16_at(field::URGENT, value);
    }

    /// The option bytes, mutably.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = usize::from(self.header_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// The bytes after the header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.header_len());
        &mut self.buffer.as_mut()[start..]
    }

    /// Computes and stores the checksum over the whole buffer for these addresses.
    pub fn fill_checksum(&mut self, src: &IpAddress, dst: &IpAddress) {
        self.set_checksum(0);
        let cksum = !self.sum_with_pseudo_header(src, dst);
        self.set_checksum(cksum);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for TcpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use crate::testutil::hex;

    /// A Linux SYN, 192.168.0.1:51234 -> 192.168.0.2:80: MSS 1460, SACK permitted,
    /// timestamps, NOP, window scale 7.
    pub(crate) const SYN: &str = "c822 0050 9d3a1c5e 00000000 a002 faf0 1358 0000
        020405b4 0402 080a 0a1b2c3d 00000000 01 030307";

    pub(crate) fn v4(last: u8) -> IpAddress {
        IpAddress::V4(Ipv4Addr::new(192, 168, 0, last))
    }

    #[test]
    fn parse_real_syn() {
        let bytes = hex(SYN);
        let p = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (51234, 80));
        assert_eq!(p.seq_number(), 0x9d3a_1c5e);
        assert_eq!(p.ack_number(), 0);
        assert_eq!(p.header_len(), 40);
        assert!(p.syn() && !p.ack() && !p.fin() && !p.rst() && !p.psh() && !p.urg() && !p.ece() && !p.cwr());
        assert_eq!(p.flags_raw(), flags::SYN);
        assert_eq!(p.window_len(), 64240);
        assert_eq!(p.checksum(), 0x1358);
        assert_eq!(p.urgent_at(), 0);
        assert_eq!(p.options().len(), 20);
        assert_eq!(p.options_iter().count(), 5);
        assert!(p.payload().is_empty());
        assert_eq!(p.segment_len(), 1);
        assert!(p.verify_checksum(&v4(1), &v4(2)));
        assert!(!p.verify_checksum(&v4(1), &v4(3)));
    }

    #[test]
    fn setters() {
        let mut bytes = [0u8; 24];
        let mut p = TcpPacket::new_unchecked(&mut bytes[..]);
        p.set_header_len(24);
        p.set_syn(true);
        p.set_ack(true);
        p.set_ece(true);
        p.set_cwr(true);
        p.set_urg(true);
        p.set_psh(true);
        p.set_rst(true);
        p.set_fin(true);
        assert_eq!(p.flags_raw(), 0xff);
        p.set_ece(false);
        p.set_rst(false);
        assert_eq!(p.flags_raw(), 0xbb);
        p.clear_flags();
        p.set_urgent_at(3);
        p.options_mut().copy_from_slice(&[1, 1, 1, 0]);
        assert!(p.payload_mut().is_empty());
        p.fill_checksum(&v4(1), &v4(2));
        let p = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!((p.header_len(), p.urgent_at(), p.flags_raw()), (24, 3, 0));
        assert!(p.verify_checksum(&v4(1), &v4(2)));
    }

    #[test]
    fn header_len_is_bounded() {
        let mut bytes = hex(SYN);
        bytes[12] = 0x40;
        assert_eq!(TcpPacket::new_checked(&bytes[..]), Err(Error::Malformed));
        bytes[12] = 0xf0;
        assert_eq!(TcpPacket::new_checked(&bytes[..]), Err(Error::Truncated));
        bytes.resize(60, 0);
        let p = TcpPacket::new_checked(&bytes[..]).unwrap();
        assert_eq!(p.options().len(), 40);
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex(SYN);
        for len in 0..bytes.len() {
            assert_eq!(TcpPacket::new_checked(&bytes[..len]), Err(Error::Truncated), "len {len}");
        }
    }
}
