//! TCP options (RFC 9293, 7323, 2018) and an iterator that never panics.
use crate::{Error, Result};

mod kind {
    pub const END: u8 = 0;
    pub const NOP: u8 = 1;
    pub const MSS: u8 = 2;
    pub const WS: u8 = 3;
    pub const SACK_PERMITTED: u8 = 4;
    pub const SACK: u8 = 5;
    pub const TIMESTAMP: u8 = 8;
}

/// One TCP option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TcpOption<'a> {
    /// Kind 0: the end of the option list (what follows is padding).
    EndOfList,
    /// Kind 1: a one-byte pad.
    NoOperation,
    /// Kind 2: maximum segment size.
    MaxSegmentSize(u16),
    /// Kind 3: window scale shift count (as sent; RFC 7323 says to use 14 if larger).
    WindowScale(u8),
    /// Kind 4: SACK permitted.
    SackPermitted,
    /// Kind 5: SACK blocks as `(left edge, right edge)`. The option can hold four blocks;
    /// only the first three are kept (the most that fit beside a timestamp, and the
    /// first block is the most recent one, RFC 2018 §4).
    SackRange([Option<(u32, u32)>; 3]),
    /// Kind 8: timestamps.
    Timestamp {
        /// The sender's timestamp value.
        tsval: u32,
        /// The echoed timestamp.
        tsecr: u32,
    },
    /// Any other kind, as its kind and the bytes after kind and length.
    Unknown {
        /// Option kind.
        kind: u8,
        /// Bytes after the kind and length bytes.
        data: &'a [u8],
    },
}

impl TcpOption<'_> {
    /// Bytes [`emit`](Self::emit) writes.
    pub fn buffer_len(&self) -> usize {
        match self {
            Self::EndOfList | Self::NoOperation => 1,
            Self::MaxSegmentSize(_) => 4,
            Self::WindowScale(_) => 3,
            Self::SackPermitted => 2,
            Self::SackRange(blocks) => 2 + 8 * blocks.iter().flatten().count(),
            Self::Timestamp { .. } => 10,
            Self::Unknown { data, .. } => 2 + data.len(),
        }
    }

    /// Writes the option at the start of `buf` and returns its length. A `SackRange`
    /// writes its `Some` blocks in order.
    ///
    /// # Panics
    /// If `buf` is shorter than [`buffer_len`](Self::buffer_len), or an `Unknown`
    /// option's data is longer than 253 bytes.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        match *self {
            Self::EndOfList => buf[0] = kind::END,
            Self::NoOperation => buf[0] = kind::NOP,
            Self::MaxSegmentSize(mss) => {
                buf[..2].copy_from_slice(&[kind::MSS, 4]);
                buf[2..].copy_from_slice(&mss.to_be_bytes());
            }
            Self::WindowScale(shift) => buf.copy_from_slice(&[kind::WS, 3, shift]),
            Self::SackPermitted => buf.copy_from_slice(&[kind::SACK_PERMITTED, 2]),
            Self::SackRange(blocks) => {
                buf[..2].copy_from_slice(&[kind::SACK, len as u8]);
                for (chunk, (left, right)) in buf[2..].chunks_exact_mut(8).zip(blocks.iter().flatten()) {
                    chunk[..4].copy_from_slice(&left.to_be_bytes());
                    chunk[4..].copy_from_slice(&right.to_be_bytes());
                }
            }
            Self::Timestamp { tsval, tsecr } => {
                buf[..2].copy_from_slice(&[kind::TIMESTAMP, 10]);
                buf[2..6].copy_from_slice(&tsval.to_be_bytes());
                buf[6..].copy_from_slice(&tsecr.to_be_bytes());
            }
            Self::Unknown { kind, data } => {
                let option_len = u8::try_from(len).expect("TCP option data longer than 253 bytes");
                buf[..2].copy_from_slice(&[kind, option_len]);
                buf[2..].copy_from_slice(data);
            }
        }
        len
    }
}

/// An iterator over the options of a TCP header.
///
/// Yields `Err(Error::Malformed)` once and stops when an option's length is missing, is
/// below 2, runs past the end, or is wrong for its kind. Stops after `EndOfList`.
#[derive(Debug, Clone)]
pub struct TcpOptions<'a> {
    data: &'a [u8],
}

impl<'a> TcpOptions<'a> {
    /// Iterates over `data` (the bytes of [`TcpPacket::options`](super::TcpPacket::options)).
    pub const fn new(data: &'a [u8]) -> Self {
        Self { data }
    }

    fn parse_one(data: &'a [u8]) -> Result<(TcpOption<'a>, &'a [u8])> {
        match data[0] {
            kind::END => return Ok((TcpOption::EndOfList, &[])),
            kind::NOP => return Ok((TcpOption::NoOperation, &data[1..])),
            _ => {}
        }
        let len = usize::from(*data.get(1).ok_or(Error::Malformed)?);
        if len < 2 || len > data.len() {
            return Err(Error::Malformed);
        }
        let (option, rest) = data.split_at(len);
        let body = &option[2..];
        let be32 = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
        let option = match (option[0], len) {
            (kind::MSS, 4) => TcpOption::MaxSegmentSize(u16::from_be_bytes([body[0], body[1]])),
            (kind::WS, 3) => TcpOption::WindowScale(body[0]),
            (kind::SACK_PERMITTED, 2) => TcpOption::SackPermitted,
            (kind::SACK, 10 | 18 | 26 | 34) => {
                let mut blocks = [None; 3];
                for (slot, b) in blocks.iter_mut().zip(body.chunks_exact(8)) {
                    *slot = Some((be32(&b[..4]), be32(&b[4..])));
                }
                TcpOption::SackRange(blocks)
            }
            (kind::TIMESTAMP, 10) => TcpOption::Timestamp { tsval: be32(&body[..4]), tsecr: be32(&body[4..]) },
            (kind::MSS | kind::WS | kind::SACK_PERMITTED | kind::SACK | kind::TIMESTAMP, _) => {
                return Err(Error::Malformed)
            }
            (kind, _) => TcpOption::Unknown { kind, data: body },
        };
        Ok((option, rest))
    }
}

impl<'a> Iterator for TcpOptions<'a> {
    type Item = Result<TcpOption<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.data.is_empty() {
            return None;
        }
        match Self::parse_one(self.data) {
            Ok((option, rest)) => {
                self.data = rest;
                Some(Ok(option))
            }
            Err(e) => {
                self.data = &[];
                Some(Err(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{hex, XorShift};

    #[test]
    fn linux_syn_options() {
        let bytes = hex("020405b4 0402 080a 0a1b2c3d 00000000 01 030307");
        let options: Vec<_> = TcpOptions::new(&bytes).map(Result::unwrap).collect();
        assert_eq!(
            options,
            [
                TcpOption::MaxSegmentSize(1460),
                TcpOption::SackPermitted,
                TcpOption::Timestamp { tsval: 0x0a1b_2c3d, tsecr: 0 },
                TcpOption::NoOperation,
                TcpOption::WindowScale(7),
            ]
        );
        let mut out = [0u8; 20];
        let mut at = 0;
        for option in &options {
            at += option.emit(&mut out[at..]);
        }
        assert_eq!(at, 20);
        assert_eq!(out[..], bytes[..]);
    }

    #[test]
    fn sack_blocks() {
        let bytes = hex("0101 051a 00000001 00000002 00000003 00000004 00000005 00000006");
        let options: Vec<_> = TcpOptions::new(&bytes).collect();
        let three = TcpOption::SackRange([Some((1, 2)), Some((3, 4)), Some((5, 6))]);
        assert_eq!(options[2], Ok(three));
        let mut out = [0u8; 26];
        assert_eq!(three.emit(&mut out), 26);
        assert_eq!(out[..], bytes[2..]);
        // Four blocks: the fourth is dropped.
        let four = hex("0522 00000001 00000002 00000003 00000004 00000005 00000006 00000007 00000008");
        assert_eq!(TcpOptions::new(&four).next(), Some(Ok(three)));
        let one = TcpOption::SackRange([Some((9, 10)), None, None]);
        assert_eq!(one.buffer_len(), 10);
    }

    #[test]
    fn end_of_list_and_unknown() {
        let bytes = hex("1e04 abcd 00 0204 05b4");
        let options: Vec<_> = TcpOptions::new(&bytes).collect();
        assert_eq!(options, [Ok(TcpOption::Unknown { kind: 30, data: &bytes[2..4] }), Ok(TcpOption::EndOfList)]);
        let mut out = [0u8; 4];
        assert_eq!(options[0].unwrap().emit(&mut out), 4);
        assert_eq!(out[..], bytes[..4]);
    }

    #[test]
    fn malformed_yields_one_error_then_stops() {
        for bad in [
            "02",
            "0201",
            "0205 05b40000",
            "0203 05",
            "0204 05",
            "0302 ",
            "0403 00",
            "0508 0000000000000000",
            "080a 00",
            "1e00",
            "1eff 00",
        ] {
            let bytes = hex(bad);
            let options: Vec<_> = TcpOptions::new(&bytes).collect();
            assert_eq!(options, [Err(Error::Malformed)], "{bad}");
        }
        let bytes = hex("01 01 0201");
        let options: Vec<_> = TcpOptions::new(&bytes).collect();
        assert_eq!(options, [Ok(TcpOption::NoOperation), Ok(TcpOption::NoOperation), Err(Error::Malformed)]);
    }

    #[test]
    fn random_bytes_never_panic_and_reemit() {
        let mut rng = XorShift(0x7c9);
        for _ in 0..50_000 {
            let len = rng.index(41);
            let mut bytes = rng.bytes(len);
            for b in bytes.iter_mut() {
                if rng.index(3) == 0 {
                    *b %= 12;
                }
            }
            let mut out = [0u8; 64];
            for option in TcpOptions::new(&bytes) {
                let Ok(option) = option else { break };
                let n = option.emit(&mut out);
                assert_eq!(n, option.buffer_len());
                assert_eq!(TcpOptions::new(&out[..n]).next(), Some(Ok(option)));
            }
        }
    }
}
