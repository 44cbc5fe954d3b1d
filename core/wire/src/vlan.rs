//! 802.1Q / 802.1ad VLAN tags.
//!
//! The view starts *after* the TPID (`0x8100` or `0x88a8`), which is the EtherType of the
//! enclosing header: it covers the tag control information and the inner EtherType.
use crate::ethernet::EtherType;
use crate::{Error, Result};

/// Length of a VLAN tag after its TPID: TCI and inner EtherType.
pub const HEADER_LEN: usize = 4;

mod field {
    use std::ops::{Range, RangeFrom};
    pub const TCI: Range<usize> = 0..2;
    pub const ETHERTYPE: Range<usize> = 2..4;
    pub const PAYLOAD: RangeFrom<usize> = 4..;
}

const PCP_SHIFT: u16 = 13;
const DEI_BIT: u16 = 0x1000;
const VID_MASK: u16 = 0x0fff;

/// A view of a VLAN tag (TCI and inner EtherType) and what follows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VlanHeader<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> VlanHeader<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Self {
        Self { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Self> {
        let header = Self::new_unchecked(buffer);
        header.check_len()?;
        Ok(header)
    }

    /// [`Error::Truncated`] if the buffer is shorter than [`HEADER_LEN`].
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

    /// The whole tag control information.
    pub fn tci(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::TCI];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// Priority code point (0..=7).
    pub fn pcp(&self) -> u8 {
        (self.tci() >> PCP_SHIFT) as u8
    }

    /// Drop eligible indicator.
    pub fn dei(&self) -> bool {
        self.tci() & DEI_BIT != 0
    }

    /// VLAN identifier (0..=4095).
    pub fn vid(&self) -> u16 {
        self.tci() & VID_MASK
    }

    /// The EtherType of what follows the tag.
    pub fn ethertype(&self) -> EtherType {
        let b = &self.buffer.as_ref()[field::ETHERTYPE];
        EtherType(u16::from_be_bytes([b[0], b[1]]))
    }

    /// The bytes after the tag.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> VlanHeader<T> {
    /// Sets the whole tag control information.
    pub fn set_tci(&mut self, tci: u16) {
        self.buffer.as_mut()[field::TCI].copy_from_slice(&tci.to_be_bytes());
    }

    /// Sets the priority code point (only the low 3 bits are used).
    pub fn set_pcp(&mut self, pcp: u8) {
        let tci = (self.tci() & !(0x7 << PCP_SHIFT)) | (u16::from(pcp & 0x7) << PCP_SHIFT);
        self.set_tci(tci);
    }

    /// Sets the drop eligible indicator.
    pub fn set_dei(&mut self, dei: bool) {
        let tci = if dei { self.tci() | DEI_BIT } else { self.tci() & !DEI_BIT };
        self.set_tci(tci);
    }

    /// Sets the VLAN identifier (only the low 12 bits are used).
    pub fn set_vid(&mut self, vid: u16) {
        self.set_tci((self.tci() & !VID_MASK) | (vid & VID_MASK));
    }

    /// Sets the inner EtherType.
    pub fn set_ethertype(&mut self, ethertype: EtherType) {
        self.buffer.as_mut()[field::ETHERTYPE].copy_from_slice(&ethertype.0.to_be_bytes());
    }

    /// The bytes after the tag, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for VlanHeader<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a VLAN tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VlanRepr {
    /// Priority code point (0..=7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..=4095).
    pub vid: u16,
    /// The inner EtherType.
    pub ethertype: EtherType,
}

impl VlanRepr {
    /// Reads the tag (every TCI value is accepted).
    pub fn parse<T: AsRef<[u8]>>(header: &VlanHeader<T>) -> Result<Self> {
        header.check_len()?;
        Ok(Self { pcp: header.pcp(), dei: header.dei(), vid: header.vid(), ethertype: header.ethertype() })
    }

    /// Bytes [`emit`](Self::emit) writes: [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the tag; out-of-range `pcp`/`vid` bits are masked off.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, header: &mut VlanHeader<T>) {
        let tci = (u16::from(self.pcp & 0x7) << PCP_SHIFT) | if self.dei { DEI_BIT } else { 0 } | (self.vid & VID_MASK);
        header.set_tci(tci);
        header.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::hex;

    #[test]
    fn fields() {
        let bytes = hex("b064 0800 45");
        let tag = VlanHeader::new_checked(&bytes[..]).unwrap();
        assert_eq!(tag.tci(), 0xb064);
        assert_eq!(tag.pcp(), 5);
        assert!(tag.dei());
        assert_eq!(tag.vid(), 100);
        assert_eq!(tag.ethertype(), EtherType::IPV4);
        assert_eq!(tag.payload(), &[0x45]);
    }

    #[test]
    fn setters_keep_other_bits() {
        let mut bytes = [0u8; 4];
        let mut tag = VlanHeader::new_unchecked(&mut bytes[..]);
        tag.set_vid(0xfff);
        tag.set_pcp(7);
        tag.set_dei(true);
        assert_eq!(tag.tci(), 0xffff);
        tag.set_pcp(0);
        tag.set_dei(false);
        assert_eq!(tag.tci(), 0x0fff);
        tag.set_vid(1);
        assert_eq!(tag.tci(), 0x0001);
    }

    #[test]
    fn repr_round_trip() {
        let repr = VlanRepr { pcp: 3, dei: false, vid: 4094, ethertype: EtherType::IPV6 };
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&mut VlanHeader::new_unchecked(&mut bytes[..]));
        assert_eq!(bytes, hex("6ffe 86dd"));
        assert_eq!(VlanRepr::parse(&VlanHeader::new_checked(&bytes[..]).unwrap()), Ok(repr));
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex("b064 0800");
        for len in 0..bytes.len() {
            assert_eq!(VlanHeader::new_checked(&bytes[..len]), Err(Error::Truncated));
            assert_eq!(VlanRepr::parse(&VlanHeader::new_unchecked(&bytes[..len])), Err(Error::Truncated));
        }
    }
}
