//! Neighbour discovery (RFC 4861) pieces of ICMPv6: NA flags and the option TLVs.
use std::ops::BitOr;

use crate::ethernet::EthernetAddress;
use crate::{Error, Result};

/// The flags of a neighbour advertisement (the high bits of byte 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NeighborFlags(pub u8);

impl NeighborFlags {
    /// R: the sender is a router.
    pub const ROUTER: Self = Self(0x80);
    /// S: sent in response to a solicitation.
    pub const SOLICITED: Self = Self(0x40);
    /// O: override an existing cache entry.
    pub const OVERRIDE: Self = Self(0x20);
    /// The bits that carry flags; the rest of the byte is reserved.
    pub const MASK: u8 = 0xe0;

    /// No flags.
    pub const fn empty() -> Self {
        Self(0)
    }

    /// Whether every flag of `other` is set here.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// R is set.
    pub const fn router(self) -> bool {
        self.contains(Self::ROUTER)
    }

    /// S is set.
    pub const fn solicited(self) -> bool {
        self.contains(Self::SOLICITED)
    }

    /// O is set (`override` is a Rust keyword).
    pub const fn is_override(self) -> bool {
        self.contains(Self::OVERRIDE)
    }
}

impl BitOr for NeighborFlags {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

const TYPE_SOURCE_LLADDR: u8 = 1;
const TYPE_TARGET_LLADDR: u8 = 2;

/// One neighbour-discovery option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NdiscOption<'a> {
    /// Type 1: the sender's link-layer address.
    SourceLinkLayerAddr(EthernetAddress),
    /// Type 2: the target's link-layer address.
    TargetLinkLayerAddr(EthernetAddress),
    /// Any other option, as its type and the bytes after the type and length.
    Unknown {
        /// Option type.
        kind: u8,
        /// Bytes after the two-byte type/length (padding included).
        data: &'a [u8],
    },
}

impl NdiscOption<'_> {
    /// Bytes [`emit`](Self::emit) writes: a multiple of 8.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::SourceLinkLayerAddr(_) | Self::TargetLinkLayerAddr(_) => 8,
            Self::Unknown { data, .. } => (2 + data.len()).div_ceil(8) * 8,
        }
    }

    /// Writes the option, zero-padded to a multiple of 8 bytes, and returns its length.
    /// An `Unknown` option longer than 2040 bytes cannot be encoded and is truncated.
    ///
    /// # Panics
    /// If `buf` is shorter than [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len().min(255 * 8);
        let buf = &mut buf[..len];
        buf.fill(0);
        buf[1] = (len / 8) as u8;
        match self {
            Self::SourceLinkLayerAddr(addr) => {
                buf[0] = TYPE_SOURCE_LLADDR;
                buf[2..8].copy_from_slice(&addr.0);
            }
            Self::TargetLinkLayerAddr(addr) => {
                buf[0] = TYPE_TARGET_LLADDR;
                buf[2..8].copy_from_slice(&addr.0);
            }
            Self::Unknown { kind, data } => {
                buf[0] = *kind;
                let n = data.len().min(len - 2);
                buf[2..2 + n].copy_from_slice(&data[..n]);
            }
        }
        len
    }
}

/// An iterator over neighbour-discovery options. A zero length or an option running past
/// the end yields `Err(Error::Malformed)` and ends the iteration.
#[derive(Debug, Clone)]
pub struct NdiscOptions<'a> {
    data: &'a [u8],
}

impl<'a> NdiscOptions<'a> {
    /// Iterates over the options in `data`.
    pub const fn new(data: &'a [u8]) -> Self {
        Self { data }
    }
}

impl<'a> Iterator for NdiscOptions<'a> {
    type Item = Result<NdiscOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        let data = self.data;
        if data.is_empty() {
            return None;
        }
        let len = data.get(1).map_or(0, |&units| usize::from(units) * 8);
        if len == 0 || len > data.len() {
            self.data = &[];
            return Some(Err(Error::Malformed));
        }
        let (option, rest) = data.split_at(len);
        self.data = rest;
        // len >= 8, so the six address bytes after type and length are present.
        let lladdr = || EthernetAddress([option[2], option[3], option[4], option[5], option[6], option[7]]);
        Some(Ok(match option[0] {
            TYPE_SOURCE_LLADDR => NdiscOption::SourceLinkLayerAddr(lladdr()),
            TYPE_TARGET_LLADDR => NdiscOption::TargetLinkLayerAddr(lladdr()),
            kind => NdiscOption::Unknown { kind, data: &option[2..] },
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{hex, XorShift};

    #[test]
    fn flags() {
        let f = NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE;
        assert_eq!(f.0, 0x60);
        assert!(f.solicited() && f.is_override() && !f.router());
        assert!(NeighborFlags::empty().contains(NeighborFlags::empty()));
    }

    #[test]
    fn parse_and_emit() {
        let bytes = hex("0101 525400123456 0201 0a0000000001 1802 00112233445566778899aabbccdd");
        let options: Vec<_> = NdiscOptions::new(&bytes).collect();
        let mac = |last| EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, last]);
        assert_eq!(options.len(), 3);
        assert_eq!(options[0], Ok(NdiscOption::SourceLinkLayerAddr(mac(0x56))));
        assert_eq!(options[1], Ok(NdiscOption::TargetLinkLayerAddr(EthernetAddress([0x0a, 0, 0, 0, 0, 1]))));
        assert_eq!(options[2], Ok(NdiscOption::Unknown { kind: 0x18, data: &bytes[18..] }));

        let mut out = vec![0xffu8; 32];
        let mut at = 0;
        for option in options {
            at += option.unwrap().emit(&mut out[at..]);
        }
        assert_eq!(at, 32);
        assert_eq!(out, bytes);
        let odd = NdiscOption::Unknown { kind: 9, data: &[1, 2, 3, 4, 5, 6, 7] };
        assert_eq!(odd.buffer_len(), 16);
        let mut out = [0xffu8; 16];
        assert_eq!(odd.emit(&mut out), 16);
        assert_eq!(out, [9, 2, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0]);
    }

    #[test]
    fn malformed_stops_iteration() {
        for bad in ["01", "0100 525400123456", "0102 525400123456", "0101 5254001234"] {
            let bytes = hex(bad);
            let options: Vec<_> = NdiscOptions::new(&bytes).collect();
            assert_eq!(options, vec![Err(Error::Malformed)], "{bad}");
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = XorShift(0x4861);
        for _ in 0..20_000 {
            let len = rng.index(64);
            let mut bytes = rng.bytes(len);
            for b in bytes.iter_mut().skip(1).step_by(8) {
                *b &= 3;
            }
            let mut total = 0;
            for option in NdiscOptions::new(&bytes) {
                match option {
                    Ok(option) => total += option.buffer_len(),
                    Err(_) => break,
                }
            }
            assert!(total <= len);
        }
    }
}
