//! Ethernet II frames, MAC addresses, EtherTypes and the VLAN-skipping [`l3_offset`].
use std::fmt;
use std::str::FromStr;

use crate::{vlan, Error, Result};

/// Length of the Ethernet II header (no VLAN tag, no FCS).
pub const HEADER_LEN: usize = 14;

mod field {
    use std::ops::{Range, RangeFrom};
    pub const DESTINATION: Range<usize> = 0..6;
    pub const SOURCE: Range<usize> = 6..12;
    pub const ETHERTYPE: Range<usize> = 12..14;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// A 48-bit Ethernet (MAC) address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct EthernetAddress(pub [u8; 6]);

impl EthernetAddress {
    /// `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: Self = Self([0xff; 6]);

    /// The address in the first six bytes of `data`, or `None` if it is shorter.
    pub fn from_bytes(data: &[u8]) -> Option<Self> {
        data.get(..6).and_then(|b| b.try_into().ok()).map(Self)
    }

    /// The six octets.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether this is `ff:ff:ff:ff:ff:ff`.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit is set (broadcast included).
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether the group bit is clear.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Whether the locally-administered bit is set.
    pub const fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }
}

impl fmt::Display for EthernetAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(f, "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
    }
}

/// Parses six two-digit hex octets separated by `:` or `-` (`aa:bb:cc:dd:ee:ff`);
/// anything else is [`Error::Malformed`].
impl FromStr for EthernetAddress {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let mut out = [0u8; 6];
        let mut parts = s.split([':', '-']);
        for octet in out.iter_mut() {
            let part = parts.next().ok_or(Error::Malformed)?;
            if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(Error::Malformed);
            }
            *octet = u8::from_str_radix(part, 16).map_err(|_| Error::Malformed)?;
        }
        if parts.next().is_some() {
            return Err(Error::Malformed);
        }
        Ok(Self(out))
    }
}

/// An EtherType (or, after a VLAN tag, the inner protocol).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EtherType(pub u16);

impl EtherType {
    /// IPv4.
    pub const IPV4: Self = Self(0x0800);
    /// ARP.
    pub const ARP: Self = Self(0x0806);
    /// 802.1Q VLAN tag (C-tag).
    pub const VLAN: Self = Self(0x8100);
    /// 802.1ad VLAN tag (S-tag, "QinQ").
    pub const QINQ: Self = Self(0x88a8);
    /// IPv6.
    pub const IPV6: Self = Self(0x86dd);

    /// Whether this announces a VLAN tag (802.1Q or 802.1ad).
    pub const fn is_vlan(&self) -> bool {
        self.0 == Self::VLAN.0 || self.0 == Self::QINQ.0
    }
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        Self(value)
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        value.0
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::IPV4 => f.write_str("IPv4"),
            Self::ARP => f.write_str("ARP"),
            Self::VLAN => f.write_str("VLAN"),
            Self::QINQ => f.write_str("QinQ"),
            Self::IPV6 => f.write_str("IPv6"),
            Self(other) => write!(f, "0x{other:04x}"),
        }
    }
}

/// A view of an Ethernet II frame (without FCS).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EthernetFrame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> EthernetFrame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// [`Error::Truncated`] if the buffer is shorter than the header.
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Bytes needed for a frame carrying `payload_len` bytes.
    pub const fn buffer_len(payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// The destination address.
    pub fn dst_addr(&self) -> EthernetAddress {
        EthernetAddress(read6(&self.buffer.as_ref()[field::DESTINATION]))
    }

    /// The source address.
    pub fn src_addr(&self) -> EthernetAddress {
        EthernetAddress(read6(&self.buffer.as_ref()[field::SOURCE]))
    }

    /// The EtherType (a VLAN TPID if the frame is tagged).
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([b[0], b[1]]))
    }

    /// The bytes after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> EthernetFrame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&addr.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, addr: EthernetAddress) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&addr.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ethertype.0.to_be_bytes());
    }

    /// The bytes after the header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for EthernetFrame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

fn read6(b: &[u8]) -> [u8; 6] {
    [b[0], b[1], b[2], b[3], b[4], b[5]]
}

/// The fields of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EthernetRepr {
    /// Source address.
    pub src_addr: EthernetAddress,
    /// Destination address.
    pub dst_addr: EthernetAddress,
    /// EtherType.
    pub ethertype: EtherType,
}

impl EthernetRepr {
    /// Reads the header (any addresses and EtherType are accepted).
    pub fn parse<T: AsRef<[u8]>>(frame: &EthernetFrame<T>) -> Result<Self> {
        frame.check_len()?;
        Ok(Self { src_addr: frame.src_addr(), dst_addr: frame.dst_addr(), ethertype: frame.ethertype() })
    }

    /// Bytes [`emit`](Self::emit) writes: [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the payload is left alone.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut EthernetFrame<T>) {
        frame.set_src_addr(self.src_addr);
        frame.set_dst_addr(self.dst_addr);
        frame.set_ethertype(self.ethertype);
    }
}

/// Swap the destination and source addresses at the start of `frame` in place (a
/// reflector's turn-around); `false`, and nothing changed, when it is shorter than
/// the two (12 bytes). One 8-byte and one 4-byte load and store: the addresses are
/// moved in registers.
#[inline(always)]
pub fn swap_addresses(frame: &mut [u8]) -> bool {
    let Some((a, b)) = frame.get_mut(..12).map(|h| h.split_at_mut(8)) else { return false };
    // Little-endian: `x` holds dst[0..6] then src[0..2], `y` src[2..6].
    let x = u64::from_le_bytes(a.try_into().unwrap_or([0; 8]));
    let y = u32::from_le_bytes(b.try_into().unwrap_or([0; 4]));
    let src = (x >> 48) | (u64::from(y) << 16);
    a.copy_from_slice(&(src | (x << 48)).to_le_bytes());
    b.copy_from_slice(&((x >> 16) as u32).to_le_bytes());
    true
}

/// The EtherType after at most two VLAN tags (802.1Q `0x8100` or 802.1ad `0x88a8`) and
/// the offset of the L3 header from the start of `frame`.
///
/// [`Error::Truncated`] if a header does not fit, [`Error::Unsupported`] for a third tag.
pub fn l3_offset(frame: &[u8]) -> Result<(EtherType, usize)> {
    let eth = EthernetFrame::new_checked(frame)?;
    let mut ethertype = eth.ethertype();
    let mut offset = HEADER_LEN;
    for _ in 0..2 {
        if !ethertype.is_vlan() {
            return Ok((ethertype, offset));
        }
        let tag = vlan::VlanHeader::new_checked(&frame[offset..])?;
        ethertype = tag.ethertype();
        offset += vlan::HEADER_LEN;
    }
    if ethertype.is_vlan() {
        return Err(Error::Unsupported);
    }
    Ok((ethertype, offset))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;

    #[test]
    fn swap_addresses_turns_a_frame_around() {
        let mut f: Vec<u8> = (1..=14).collect();
        assert!(swap_addresses(&mut f));
        assert_eq!(f, [7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6, 13, 14]);
        let mut exact: Vec<u8> = (1..=12).collect();
        assert!(swap_addresses(&mut exact));
        assert_eq!(exact, [7, 8, 9, 10, 11, 12, 1, 2, 3, 4, 5, 6]);
        let mut runt = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11];
        assert!(!swap_addresses(&mut runt));
        assert_eq!(runt, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
    }

    #[test]
    fn address_display_parse_and_classes() {
        let a: EthernetAddress = "52:54:00:12:34:56".parse().unwrap();
        assert_eq!(a, EthernetAddress([0x52, 0x54, 0x00, 0x12, 0x34, 0x56]));
        assert_eq!(a.to_string(), "52:54:00:12:34:56");
        assert_eq!("AA-bb-cc-dd-ee-ff".parse::<EthernetAddress>().unwrap().to_string(), "aa:bb:cc:dd:ee:ff");
        assert!(a.is_unicast() && !a.is_multicast() && !a.is_broadcast() && a.is_local());
        assert!(EthernetAddress::BROADCAST.is_broadcast() && EthernetAddress::BROADCAST.is_multicast());
        assert!(EthernetAddress([0x33, 0x33, 0, 0, 0, 1]).is_multicast());
        for bad in
            ["", "52:54:00:12:34", "52:54:00:12:34:56:78", "5:54:00:12:34:56", "+2:54:00:12:34:56", "gg:54:00:12:34:56"]
        {
            assert_eq!(bad.parse::<EthernetAddress>(), Err(Error::Malformed), "{bad:?}");
        }
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3, 4, 5]), None);
        assert_eq!(EthernetAddress::from_bytes(&[1, 2, 3, 4, 5, 6, 7]), Some(EthernetAddress([1, 2, 3, 4, 5, 6])));
    }

    #[test]
    fn ethertype_display() {
        assert_eq!(EtherType::IPV6.to_string(), "IPv6");
        assert_eq!(EtherType(0x88cc).to_string(), "0x88cc");
        assert_eq!(u16::from(EtherType::ARP), 0x0806);
    }

    #[test]
    fn frame_fields_and_repr_round_trip() {
        let bytes = hex("ffffffffffff 525400123456 0806 0001");
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert_eq!(frame.dst_addr(), EthernetAddress::BROADCAST);
        assert_eq!(frame.src_addr().to_string(), "52:54:00:12:34:56");
        assert_eq!(frame.ethertype(), EtherType::ARP);
        assert_eq!(frame.payload(), &[0, 1]);
        let repr = EthernetRepr::parse(&frame).unwrap();

        let mut out = vec![0u8; EthernetFrame::<&[u8]>::buffer_len(2)];
        let mut frame = EthernetFrame::new_unchecked(&mut out[..]);
        repr.emit(&mut frame);
        frame.payload_mut().copy_from_slice(&[0, 1]);
        assert_eq!(out, bytes);
        assert_eq!(repr.buffer_len(), HEADER_LEN);
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex("ffffffffffff 525400123456 0800");
        for len in 0..bytes.len() {
            assert_eq!(EthernetFrame::new_checked(&bytes[..len]), Err(Error::Truncated));
            assert_eq!(l3_offset(&bytes[..len]), Err(Error::Truncated));
        }
        let frame = EthernetFrame::new_checked(&bytes[..]).unwrap();
        assert!(frame.payload().is_empty());
    }

    #[test]
    fn l3_offset_skips_up_to_two_tags() {
        let untagged = hex("ffffffffffff 525400123456 86dd 60");
        assert_eq!(l3_offset(&untagged), Ok((EtherType::IPV6, 14)));
        let one = hex("ffffffffffff 525400123456 8100 0064 0800 45");
        assert_eq!(l3_offset(&one), Ok((EtherType::IPV4, 18)));
        let two = hex("ffffffffffff 525400123456 88a8 0064 8100 00c8 0806");
        assert_eq!(l3_offset(&two), Ok((EtherType::ARP, 22)));
        for len in 0..two.len() {
            assert_eq!(l3_offset(&two[..len]), Err(Error::Truncated), "len {len}");
        }
        let three = hex("ffffffffffff 525400123456 88a8 0064 8100 00c8 8100 012c 0800");
        assert_eq!(l3_offset(&three), Err(Error::Unsupported));
    }
}
