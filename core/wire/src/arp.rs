//! ARP (RFC 826). The view reads any hardware/protocol address lengths; [`ArpRepr`]
//! handles Ethernet/IPv4 only.
use std::net::Ipv4Addr;
use std::ops::Range;

use crate::ethernet::{EtherType, EthernetAddress};
use crate::{Error, Result};

/// Length of an Ethernet/IPv4 ARP packet.
pub const LEN: usize = 28;

/// Hardware type of Ethernet.
const HTYPE_ETHERNET: u16 = 1;

mod field {
    use std::ops::Range;
    pub const HTYPE: Range<usize> = 0..2;
    pub const PTYPE: Range<usize> = 2..4;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: Range<usize> = 6..8;
    /// Start of the four variable-length addresses.
    pub const ADDRS: usize = 8;
}

/// An ARP operation code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ArpOperation {
    /// 1: who has...?
    Request,
    /// 2: ... is at.
    Reply,
    /// Any other code.
    Unknown(u16),
}

impl From<u16> for ArpOperation {
    fn from(value: u16) -> Self {
        match value {
            1 => ArpOperation::Request,
            2 => ArpOperation::Reply,
            other => ArpOperation::Unknown(other),
        }
    }
}

impl From<ArpOperation> for u16 {
    fn from(value: ArpOperation) -> Self {
        match value {
            ArpOperation::Request => 1,
            ArpOperation::Reply => 2,
            ArpOperation::Unknown(other) => other,
        }
    }
}

/// A view of an ARP packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> ArpPacket<T> {
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

    /// [`Error::Truncated`] if the buffer cannot hold the fixed fields and the four
    /// addresses their length fields announce. Trailing bytes (Ethernet padding) are fine.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < field::ADDRS || len < field::ADDRS + 2 * (self.hardware_len() + self.protocol_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn u16_at(&self, r: Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Hardware type (1 for Ethernet).
    pub fn hardware_type(&self) -> u16 {
        self.u16_at(field::HTYPE)
    }

    /// Protocol type (an EtherType).
    pub fn protocol_type(&self) -> EtherType {
        EtherType(self.u16_at(field::PTYPE))
    }

    /// Hardware address length in bytes.
    pub fn hardware_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::HLEN])
    }

    /// Protocol address length in bytes.
    pub fn protocol_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::PLEN])
    }

    /// The operation.
    pub fn operation(&self) -> ArpOperation {
        ArpOperation::from(self.u16_at(field::OPER))
    }

    fn sha(&self) -> Range<usize> {
        field::ADDRS..field::ADDRS + self.hardware_len()
    }

    fn spa(&self) -> Range<usize> {
        let start = self.sha().end;
        start..start + self.protocol_len()
    }

    fn tha(&self) -> Range<usize> {
        let start = self.spa().end;
        start..start + self.hardware_len()
    }

    fn tpa(&self) -> Range<usize> {
        let start = self.tha().end;
        start..start + self.protocol_len()
    }

    /// Sender hardware address.
    pub fn source_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.sha()]
    }

    /// Sender protocol address.
    pub fn source_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.spa()]
    }

    /// Target hardware address.
    pub fn target_hardware_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tha()]
    }

    /// Target protocol address.
    pub fn target_protocol_addr(&self) -> &[u8] {
        &self.buffer.as_ref()[self.tpa()]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> ArpPacket<T> {
    fn set_u16_at(&mut self, r: Range<usize>, value: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the hardware type.
    pub fn set_hardware_type(&mut self, value: u16) {
        self.set_u16_at(field::HTYPE, value);
    }

    /// Sets the protocol type.
    pub fn set_protocol_type(&mut self, value: EtherType) {
        self.set_u16_at(field::PTYPE, value.0);
    }

    /// Sets the hardware address length.
    pub fn set_hardware_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::HLEN] = value;
    }

    /// Sets the protocol address length.
    pub fn set_protocol_len(&mut self, value: u8) {
        self.buffer.as_mut()[field::PLEN] = value;
    }

    /// Sets the operation.
    pub fn set_operation(&mut self, value: ArpOperation) {
        self.set_u16_at(field::OPER, value.into());
    }

    /// Sets the sender hardware address (length must match `hardware_len`).
    pub fn set_source_hardware_addr(&mut self, value: &[u8]) {
        let r = self.sha();
        self.buffer.as_mut()[r].copy_from_slice(value);
    }

    /// Sets the sender protocol address (length must match `protocol_len`).
    pub fn set_source_protocol_addr(&mut self, value: &[u8]) {
        let r = self.spa();
        self.buffer.as_mut()[r].copy_from_slice(value);
    }

    /// Sets the target hardware address (length must match `hardware_len`).
    pub fn set_target_hardware_addr(&mut self, value: &[u8]) {
        let r = self.tha();
        self.buffer.as_mut()[r].copy_from_slice(value);
    }

    /// Sets the target protocol address (length must match `protocol_len`).
    pub fn set_target_protocol_addr(&mut self, value: &[u8]) {
        let r = self.tpa();
        self.buffer.as_mut()[r].copy_from_slice(value);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for ArpPacket<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An Ethernet/IPv4 ARP packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ArpRepr {
    /// The operation.
    pub operation: ArpOperation,
    /// Sender MAC address.
    pub source_hardware_addr: EthernetAddress,
    /// Sender IPv4 address.
    pub source_protocol_addr: Ipv4Addr,
    /// Target MAC address (zero in a request).
    pub target_hardware_addr: EthernetAddress,
    /// Target IPv4 address.
    pub target_protocol_addr: Ipv4Addr,
}

impl ArpRepr {
    /// Reads an Ethernet/IPv4 ARP packet: hardware type 1, protocol type `0x0800`,
    /// lengths 6 and 4; any other combination is [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]>>(packet: &ArpPacket<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.hardware_type() != HTYPE_ETHERNET
            || packet.protocol_type() != EtherType::IPV4
            || packet.hardware_len() != 6
            || packet.protocol_len() != 4
        {
            return Err(Error::Unsupported);
        }
        let ipv4 = |b: &[u8]| Ipv4Addr::new(b[0], b[1], b[2], b[3]);
        let mac = |b: &[u8]| EthernetAddress([b[0], b[1], b[2], b[3], b[4], b[5]]);
        Ok(Self {
            operation: packet.operation(),
            source_hardware_addr: mac(packet.source_hardware_addr()),
            source_protocol_addr: ipv4(packet.source_protocol_addr()),
            target_hardware_addr: mac(packet.target_hardware_addr()),
            target_protocol_addr: ipv4(packet.target_protocol_addr()),
        })
    }

    /// Bytes [`emit`](Self::emit) writes: [`LEN`].
    pub const fn buffer_len(&self) -> usize {
        LEN
    }

    /// Writes the packet.
    ///
    /// # Panics
    /// If the buffer is shorter than [`LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut ArpPacket<T>) {
        packet.set_hardware_type(HTYPE_ETHERNET);
        packet.set_protocol_type(EtherType::IPV4);
        packet.set_hardware_len(6);
        packet.set_protocol_len(4);
        packet.set_operation(self.operation);
        packet.set_source_hardware_addr(&self.source_hardware_addr.0);
        packet.set_source_protocol_addr(&self.source_protocol_addr.octets());
        packet.set_target_hardware_addr(&self.target_hardware_addr.0);
        packet.set_target_protocol_addr(&self.target_protocol_addr.octets());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::{EthernetFrame, HEADER_LEN};
    use crate::testutil::hex;

    /// A broadcast who-has 192.168.0.2 from 192.168.0.1, padded to 60 bytes.
    const REQUEST: &str = "ffffffffffff 525400123456 0806
                           0001 0800 06 04 0001 525400123456 c0a80001 000000000000 c0a80002
                           000000000000000000000000000000000000";

    fn request_repr() -> ArpRepr {
        ArpRepr {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56]),
            source_protocol_addr: Ipv4Addr::new(192, 168, 0, 1),
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: Ipv4Addr::new(192, 168, 0, 2),
        }
    }

    #[test]
    fn parse_real_request() {
        let bytes = hex(REQUEST);
        assert_eq!(bytes.len(), 60);
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(frame.ethertype(), EtherType::ARP);
        let packet = ArpPacket::new_checked(frame.payload()).unwrap();
        assert_eq!(packet.operation(), ArpOperation::Request);
        assert_eq!(packet.hardware_type(), 1);
        assert_eq!(ArpRepr::parse(&packet), Ok(request_repr()));
    }

    #[test]
    fn repr_round_trip() {
        let mut repr = request_repr();
        repr.operation = ArpOperation::Reply;
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&bytes[..]).unwrap()), Ok(repr));
        assert_eq!(&bytes[..8], &hex("0001 0800 06 04 0002")[..]);
        let expected = hex(REQUEST);
        repr.operation = ArpOperation::Request;
        repr.emit(&mut ArpPacket::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, expected[HEADER_LEN..HEADER_LEN + LEN]);
    }

    #[test]
    fn operations() {
        assert_eq!(ArpOperation::from(7), ArpOperation::Unknown(7));
        assert_eq!(u16::from(ArpOperation::Unknown(7)), 7);
        assert_eq!(u16::from(ArpOperation::Reply), 2);
    }

    #[test]
    fn other_address_types_are_unsupported() {
        let bytes = hex(REQUEST);
        let arp = &bytes[HEADER_LEN..HEADER_LEN + LEN];
        for (at, value) in [(1, 6u8), (3, 0xdd), (4, 5), (5, 16)] {
            let mut b = arp.to_vec();
            b.resize(64, 0);
            b[at] = value;
            let packet = ArpPacket::new_checked(&b[..]).unwrap();
            assert_eq!(ArpRepr::parse(&packet), Err(Error::Unsupported), "byte {at} = {value}");
        }
        // Large address lengths are bounded by check_len, and accessors stay in bounds.
        let mut b = arp.to_vec();
        b[4] = 255;
        b[5] = 255;
        assert_eq!(ArpPacket::new_checked(&b[..]), Err(Error::Truncated));
        b.resize(8 + 2 * 510, 0);
        let packet = ArpPacket::new_checked(&b[..]).unwrap();
        assert_eq!(packet.target_protocol_addr().len(), 255);
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex(REQUEST);
        let arp = &bytes[HEADER_LEN..HEADER_LEN + LEN];
        for len in 0..LEN {
            assert_eq!(ArpPacket::new_checked(&arp[..len]), Err(Error::Truncated));
            assert_eq!(ArpRepr::parse(&ArpPacket::new_unchecked(&arp[..len])), Err(Error::Truncated));
        }
    }
}
