//! [`TcpRepr`]: the fields of a TCP header a stack acts on.
use super::option::TcpOption;
use super::{TcpPacket, HEADER_LEN, MAX_OPTIONS_LEN};
use crate::ip::IpAddress;
use crate::{Error, Result};

/// The one control flag of a segment that a stack dispatches on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TcpControl {
    /// No SYN, FIN, RST or PSH.
    #[default]
    None,
    /// PSH (without SYN, FIN or RST).
    Psh,
    /// SYN.
    Syn,
    /// FIN.
    Fin,
    /// RST.
    Rst,
}

impl TcpControl {
    /// Sequence space the flag occupies: 1 for SYN and FIN, else 0.
    pub const fn len(self) -> usize {
        match self {
            Self::Syn | Self::Fin => 1,
            _ => 0,
        }
    }

    /// Whether the flag occupies no sequence space.
    pub const fn is_empty(self) -> bool {
        self.len() == 0
    }
}

/// The fields of a TCP header that a stack acts on. URG, ECE and CWR and the urgent
/// pointer are not represented (emitted as zero).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TcpRepr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Sequence number.
    pub seq_number: u32,
    /// Acknowledgment number, `Some` exactly when ACK is set.
    pub ack_number: Option<u32>,
    /// SYN, FIN, RST, PSH or none.
    pub control: TcpControl,
    /// The window field as sent (unscaled).
    pub window_len: u16,
    /// The MSS option.
    pub max_seg_size: Option<u16>,
    /// The window-scale option (parse clamps it to 14, RFC 7323 §2.3).
    pub window_scale: Option<u8>,
    /// The SACK-permitted option.
    pub sack_permitted: bool,
    /// SACK blocks, the `Some` ones first.
    pub sack_ranges: [Option<(u32, u32)>; 3],
    /// The timestamp option as `(tsval, tsecr)`.
    pub timestamp: Option<(u32, u32)>,
    /// Bytes of payload.
    pub payload_len: usize,
}

impl TcpRepr {
    /// Validates and reads a segment sent from `src` to `dst`.
    ///
    /// Errors: from [`check_len`](TcpPacket::check_len); [`Error::Malformed`] for a zero
    /// port, SYN, FIN and RST in any combination of two or more, or a malformed option;
    /// [`Error::Checksum`] if `verify_checksum` and it fails. PSH is only reported when
    /// no other control flag is set. Later copies of an option replace earlier ones;
    /// unknown options are skipped; nothing after an end-of-list option is read.
    pub fn parse<T: AsRef<[u8]>>(
        packet: &TcpPacket<T>,
        src: &IpAddress,
        dst: &IpAddress,
        verify_checksum: bool,
    ) -> Result<Self> {
        packet.check_len()?;
        if packet.src_port() == 0 || packet.dst_port() == 0 {
            return Err(Error::Malformed);
        }
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let control = match (packet.syn(), packet.fin(), packet.rst(), packet.psh()) {
            (false, false, false, false) => TcpControl::None,
            (false, false, false, true) => TcpControl::Psh,
            (true, false, false, _) => TcpControl::Syn,
            (false, true, false, _) => TcpControl::Fin,
            (false, false, true, _) => TcpControl::Rst,
            _ => return Err(Error::Malformed),
        };
        let mut repr = Self {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq_number: packet.seq_number(),
            ack_number: packet.ack().then(|| packet.ack_number()),
            control,
            window_len: packet.window_len(),
            max_seg_size: None,
            window_scale: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload_len: packet.payload().len(),
        };
        for option in packet.options_iter() {
            match option? {
                TcpOption::EndOfList | TcpOption::NoOperation | TcpOption::Unknown { .. } => {}
                TcpOption::MaxSegmentSize(mss) => repr.max_seg_size = Some(mss),
                TcpOption::WindowScale(shift) => repr.window_scale = Some(shift.min(14)),
                TcpOption::SackPermitted => repr.sack_permitted = true,
                TcpOption::SackRange(blocks) => repr.sack_ranges = blocks,
                TcpOption::Timestamp { tsval, tsecr } => repr.timestamp = Some((tsval, tsecr)),
            }
        }
        Ok(repr)
    }

    /// The options as [`emit`](Self::emit) writes them.
    ///
    /// Preferred layout, as Linux sends it: MSS; SACK-permitted and timestamp together,
    /// or each behind two NOPs; NOP and window scale; two NOPs and the SACK blocks. When
    /// that exceeds 40 bytes the options are packed without NOPs, and if even that does
    /// not fit, trailing SACK blocks are dropped. The result is padded with zeros
    /// (end of list) to a multiple of 4.
    fn options(&self) -> ([u8; MAX_OPTIONS_LEN], usize) {
        let mut out = [0u8; MAX_OPTIONS_LEN];
        // Nearly every segment of an established connection: a timestamp or nothing
        // (what the general path below writes for them, without trying layouts).
        if self.max_seg_size.is_none()
            && !self.sack_permitted
            && self.window_scale.is_none()
            && self.sack_ranges == [None; 3]
        {
            let Some((tsval, tsecr)) = self.timestamp else { return (out, 0) };
            out[..4].copy_from_slice(&[1, 1, 8, 10]); // NOP NOP, kind 8, length 10
            out[4..8].copy_from_slice(&tsval.to_be_bytes());
            out[8..12].copy_from_slice(&tsecr.to_be_bytes());
            return (out, 12);
        }
        let blocks = self.sack_ranges.iter().flatten().count();
        let attempts = std::iter::once((true, blocks)).chain((0..=blocks).rev().map(|b| (false, b)));
        for (aligned, blocks) in attempts {
            let mut scratch = [0u8; 64];
            let len = self.write_options(&mut scratch, aligned, blocks);
            if len <= MAX_OPTIONS_LEN {
                out[..len].copy_from_slice(&scratch[..len]);
                return (out, len.next_multiple_of(4));
            }
        }
        unreachable!("MSS, window scale, SACK-permitted and timestamp take 19 bytes at most")
    }

    /// Writes the options into `buf` (64 bytes is always enough) and returns the length.
    fn write_options(&self, buf: &mut [u8; 64], aligned: bool, blocks: usize) -> usize {
        let mut at = 0;
        let mut put = |option: TcpOption<'_>| at += option.emit(&mut buf[at..]);
        let nops = |put: &mut dyn FnMut(TcpOption<'_>), n: usize| {
            for _ in 0..if aligned { n } else { 0 } {
                put(TcpOption::NoOperation);
            }
        };
        if let Some(mss) = self.max_seg_size {
            put(TcpOption::MaxSegmentSize(mss));
        }
        match (self.sack_permitted, self.timestamp) {
            (true, Some((tsval, tsecr))) => {
                put(TcpOption::SackPermitted);
                put(TcpOption::Timestamp { tsval, tsecr });
            }
            (sack_permitted, timestamp) => {
                if let Some((tsval, tsecr)) = timestamp {
                    nops(&mut put, 2);
                    put(TcpOption::Timestamp { tsval, tsecr });
                }
                if sack_permitted {
                    nops(&mut put, 2);
                    put(TcpOption::SackPermitted);
                }
            }
        }
        if let Some(shift) = self.window_scale {
            nops(&mut put, 1);
            put(TcpOption::WindowScale(shift));
        }
        if blocks > 0 {
            let mut kept = [None; 3];
            for (slot, block) in kept.iter_mut().zip(self.sack_ranges.iter().flatten().take(blocks)) {
                *slot = Some(*block);
            }
            nops(&mut put, 2);
            put(TcpOption::SackRange(kept));
        }
        at
    }

    /// The header length [`emit`](Self::emit) writes: 20 plus the padded options.
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options().1
    }

    /// Bytes of the whole segment: [`header_len`](Self::header_len) plus `payload_len`.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload_len
    }

    /// Writes the header and the checksum for `src` and `dst` over the whole buffer,
    /// which should be exactly [`buffer_len`](Self::buffer_len) long: **write the
    /// payload first** (at offset [`header_len`](Self::header_len)), or call
    /// [`TcpPacket::fill_checksum`] again after.
    ///
    /// # Panics
    /// If the buffer is shorter than [`header_len`](Self::header_len).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut TcpPacket<T>, src: &IpAddress, dst: &IpAddress) {
        self.emit_header(packet);
        packet.fill_checksum(src, dst);
    }

    /// Writes the header (options included) and leaves the checksum field as it was:
    /// for a caller that computes the checksum itself (from a payload sum it got while
    /// copying the payload, say).
    ///
    /// # Panics
    /// If the buffer is shorter than [`header_len`](Self::header_len).
    pub fn emit_header<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut TcpPacket<T>) {
        let (options, options_len) = self.options();
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq_number);
        packet.set_ack_number(self.ack_number.unwrap_or(0));
        packet.set_header_len((HEADER_LEN + options_len) as u8);
        packet.clear_flags();
        match self.control {
            TcpControl::None => {}
            TcpControl::Psh => packet.set_psh(true),
            TcpControl::Syn => packet.set_syn(true),
            TcpControl::Fin => packet.set_fin(true),
            TcpControl::Rst => packet.set_rst(true),
        }
        packet.set_ack(self.ack_number.is_some());
        packet.set_window_len(self.window_len);
        packet.set_urgent_at(0);
        packet.options_mut().copy_from_slice(&options[..options_len]);
    }

    /// Sequence space the segment occupies: payload plus SYN/FIN.
    pub const fn segment_len(&self) -> usize {
        self.payload_len + self.control.len()
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv6Addr;

    use super::*;
    use crate::tcp::tests::{v4, SYN};
    use crate::testutil::{hex, XorShift};

    #[test]
    fn the_established_fast_path_writes_the_general_layout() {
        let mut rng = XorShift(0x1234_5678);
        for ts in [None, Some((0, 0)), Some((u32::MAX, 1)), Some((rng.next_u64() as u32, rng.next_u64() as u32))] {
            let mut r = syn_repr();
            (r.max_seg_size, r.window_scale, r.sack_permitted, r.timestamp) = (None, None, false, ts);
            let (fast, len) = r.options();
            let mut general = [0u8; 64];
            let glen = r.write_options(&mut general, true, 0);
            assert_eq!(len, glen.next_multiple_of(4), "{ts:?}");
            assert_eq!(fast[..len], general[..len], "{ts:?}");
        }
    }

    fn syn_repr() -> TcpRepr {
        TcpRepr {
            src_port: 51234,
            dst_port: 80,
            seq_number: 0x9d3a_1c5e,
            ack_number: None,
            control: TcpControl::Syn,
            window_len: 64240,
            max_seg_size: Some(1460),
            window_scale: Some(7),
            sack_permitted: true,
            sack_ranges: [None; 3],
            timestamp: Some((0x0a1b_2c3d, 0)),
            payload_len: 0,
        }
    }

    #[test]
    fn parse_and_emit_linux_syn_byte_for_byte() {
        let bytes = hex(SYN);
        let p = TcpPacket::new_checked(&bytes[..]).unwrap();
        let repr = TcpRepr::parse(&p, &v4(1), &v4(2), true).unwrap();
        assert_eq!(repr, syn_repr());
        assert_eq!(repr.header_len(), 40);
        assert_eq!(repr.segment_len(), 1);
        let mut out = vec![0xeeu8; repr.buffer_len()];
        repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &v4(1), &v4(2));
        assert_eq!(out, bytes);
        assert_eq!(TcpRepr::parse(&p, &v4(1), &v4(3), true), Err(Error::Checksum));
    }

    fn round_trip(repr: &TcpRepr, src: &IpAddress, dst: &IpAddress) {
        let mut out = vec![0u8; repr.buffer_len()];
        let header_len = repr.header_len();
        for (i, b) in out[header_len..].iter_mut().enumerate() {
            *b = i as u8;
        }
        repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), src, dst);
        let p = TcpPacket::new_checked(&out[..]).unwrap();
        assert_eq!(usize::from(p.header_len()), header_len);
        assert_eq!(TcpRepr::parse(&p, src, dst, true).as_ref(), Ok(repr), "{out:02x?}");
    }

    #[test]
    fn round_trips_over_v4_and_v6() {
        let a6 = IpAddress::V6("2001:db8::1".parse::<Ipv6Addr>().unwrap());
        let b6 = IpAddress::V6("2001:db8::2".parse::<Ipv6Addr>().unwrap());
        let mut data_ack = syn_repr();
        data_ack.control = TcpControl::Psh;
        data_ack.ack_number = Some(12345);
        data_ack.max_seg_size = None;
        data_ack.window_scale = None;
        data_ack.sack_permitted = false;
        data_ack.sack_ranges = [Some((1, 2)), Some((3, 4)), None];
        data_ack.payload_len = 100;
        let mut everything = syn_repr();
        everything.sack_ranges = [Some((1, 2)), Some((3, 4)), Some((5, 6))];
        let mut bare = data_ack;
        bare.timestamp = None;
        bare.sack_ranges = [None; 3];
        bare.control = TcpControl::Fin;
        for repr in [syn_repr(), data_ack, bare] {
            round_trip(&repr, &v4(1), &v4(2));
            round_trip(&repr, &a6, &b6);
        }
        // Too much to fit: packed, then trailing SACK blocks dropped.
        assert_eq!(everything.header_len(), 60);
        let mut out = vec![0u8; everything.buffer_len()];
        everything.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &a6, &b6);
        let parsed = TcpRepr::parse(&TcpPacket::new_checked(&out[..]).unwrap(), &a6, &b6, true).unwrap();
        assert_eq!(parsed.sack_ranges, [Some((1, 2)), Some((3, 4)), None]);
        assert_eq!(bare.header_len(), 20);
    }

    #[test]
    fn packed_layout_when_aligned_does_not_fit() {
        // MSS + timestamp + three SACK blocks: 40 bytes packed, 44 aligned.
        let mut repr = syn_repr();
        repr.control = TcpControl::None;
        repr.window_scale = None;
        repr.sack_permitted = false;
        repr.sack_ranges = [Some((1, 2)), Some((3, 4)), Some((5, 6))];
        assert_eq!(repr.header_len(), 60);
        round_trip(&repr, &v4(1), &v4(2));
    }

    #[test]
    fn control_flags() {
        let bytes = hex(SYN);
        let parse_with = |flags: u8| {
            let mut b = bytes.clone();
            let mut p = TcpPacket::new_unchecked(&mut b[..]);
            p.set_flags_raw(flags);
            TcpRepr::parse(&p, &v4(1), &v4(2), false).map(|r| (r.control, r.ack_number))
        };
        assert_eq!(parse_with(0x12), Ok((TcpControl::Syn, Some(0))));
        assert_eq!(parse_with(0x19), Ok((TcpControl::Fin, Some(0))));
        assert_eq!(parse_with(0x0c), Ok((TcpControl::Rst, None)));
        assert_eq!(parse_with(0x18), Ok((TcpControl::Psh, Some(0))));
        assert_eq!(parse_with(0xe0), Ok((TcpControl::None, None)));
        assert_eq!(parse_with(0x03), Err(Error::Malformed));
        assert_eq!(parse_with(0x06), Err(Error::Malformed));
        assert_eq!(parse_with(0x05), Err(Error::Malformed));
        assert_eq!(TcpControl::Syn.len(), 1);
        assert!(TcpControl::Rst.is_empty());
    }

    #[test]
    fn rejects() {
        let bytes = hex(SYN);
        let parse = |b: &[u8]| TcpRepr::parse(&TcpPacket::new_unchecked(b), &v4(1), &v4(2), false);
        let mut b = bytes.clone();
        b[0..2].fill(0);
        assert_eq!(parse(&b), Err(Error::Malformed), "port 0");
        let mut b = bytes.clone();
        b[21] = 5; // MSS length 5
        assert_eq!(parse(&b), Err(Error::Malformed));
        let mut b = bytes.clone();
        b[39] = 200; // window scale above 14
        assert_eq!(parse(&b).map(|r| r.window_scale), Ok(Some(14)));
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex(SYN);
        for len in 0..bytes.len() {
            let b = &bytes[..len];
            assert!(TcpRepr::parse(&TcpPacket::new_unchecked(b), &v4(1), &v4(2), false).is_err(), "len {len}");
        }
    }

    #[test]
    fn random_headers_never_panic_and_round_trip() {
        let mut rng = XorShift(0x5eed);
        let kinds = [0u8, 1, 2, 3, 4, 5, 8, 30];
        let mut parsed = 0;
        for _ in 0..20_000 {
            let options_len = 4 * rng.index(11);
            let payload_len = rng.index(8);
            let mut b = rng.bytes(HEADER_LEN + options_len + payload_len);
            b[12] = ((5 + options_len / 4) as u8) << 4;
            b[13] &= 0x1f | if rng.index(2) == 0 { 0 } else { 0xe0 };
            let mut at = HEADER_LEN;
            while at + 2 <= HEADER_LEN + options_len {
                let kind = kinds[rng.index(kinds.len())];
                let len = match kind {
                    2 => 4,
                    3 => 3,
                    4 => 2,
                    5 => 2 + 8 * (1 + rng.index(4)),
                    8 => 10,
                    _ => 2 + rng.index(6),
                };
                b[at] = kind;
                b[at + 1] = len as u8;
                at += len;
            }
            let p = TcpPacket::new_checked(&b[..]).unwrap();
            let _ = p.options_iter().count();
            if let Ok(repr) = TcpRepr::parse(&p, &v4(1), &v4(2), false) {
                round_trip(&repr, &v4(1), &v4(2));
                parsed += 1;
            }
        }
        assert!(parsed > 2_000, "only {parsed} random headers parsed");
    }
}
