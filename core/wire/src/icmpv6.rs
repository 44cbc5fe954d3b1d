//! ICMP for IPv6 (RFC 4443) with echo and neighbour solicitation/advertisement
//! (RFC 4861). The checksum covers the IPv6 pseudo-header, so it takes the addresses.
use std::net::Ipv6Addr;

use crate::checksum;
use crate::ethernet::EthernetAddress;
use crate::ip::IpProtocol;
use crate::{Error, Result};

mod ndisc;

pub use ndisc::{NdiscOption, NdiscOptions, NeighborFlags};

/// Length of the ICMPv6 header every message has (type, code, checksum, 4 more bytes).
pub const HEADER_LEN: usize = 8;

/// Length of a neighbour solicitation or advertisement without options.
pub const NEIGHBOR_LEN: usize = 24;

mod field {
    use std::ops::Range;
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    pub const NEIGH_FLAGS: usize = 4;
    pub const TARGET_ADDR: Range<usize> = 8..24;
}

/// An ICMPv6 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6Message {
    /// 1.
    DstUnreachable,
    /// 2.
    PktTooBig,
    /// 3.
    TimeExceeded,
    /// 4.
    ParamProblem,
    /// 128.
    EchoRequest,
    /// 129.
    EchoReply,
    /// 133.
    RouterSolicit,
    /// 134.
    RouterAdvert,
    /// 135.
    NeighborSolicit,
    /// 136.
    NeighborAdvert,
    /// 137.
    Redirect,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Icmpv6Message {
    fn from(value: u8) -> Self {
        match value {
            1 => Self::DstUnreachable,
            2 => Self::PktTooBig,
            3 => Self::TimeExceeded,
            4 => Self::ParamProblem,
            128 => Self::EchoRequest,
            129 => Self::EchoReply,
            133 => Self::RouterSolicit,
            134 => Self::RouterAdvert,
            135 => Self::NeighborSolicit,
            136 => Self::NeighborAdvert,
            137 => Self::Redirect,
            other => Self::Unknown(other),
        }
    }
}

impl From<Icmpv6Message> for u8 {
    fn from(value: Icmpv6Message) -> Self {
        match value {
            Icmpv6Message::DstUnreachable => 1,
            Icmpv6Message::PktTooBig => 2,
            Icmpv6Message::TimeExceeded => 3,
            Icmpv6Message::ParamProblem => 4,
            Icmpv6Message::EchoRequest => 128,
            Icmpv6Message::EchoReply => 129,
            Icmpv6Message::RouterSolicit => 133,
            Icmpv6Message::RouterAdvert => 134,
            Icmpv6Message::NeighborSolicit => 135,
            Icmpv6Message::NeighborAdvert => 136,
            Icmpv6Message::Redirect => 137,
            Icmpv6Message::Unknown(other) => other,
        }
    }
}

impl Icmpv6Message {
    /// For neighbour-discovery messages, the offset of their options (which is also
    /// their minimum length).
    const fn ndisc_options_at(self) -> Option<usize> {
        match self {
            Self::RouterSolicit => Some(8),
            Self::RouterAdvert => Some(16),
            Self::NeighborSolicit | Self::NeighborAdvert => Some(NEIGHBOR_LEN),
            Self::Redirect => Some(40),
            _ => None,
        }
    }
}

/// A view of an ICMPv6 message. The buffer is the whole message (the upper-layer part
/// of the IPv6 packet); the checksum covers all of it and the pseudo-header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv6Packet<T> {
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

    /// [`Error::Truncated`] if the buffer is shorter than 8 bytes, or than the fixed
    /// part of a neighbour-discovery message (24 bytes for NS/NA, 16 for RA, 40 for
    /// redirect).
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < self.msg_type().ndisc_options_at().unwrap_or(0) {
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

    /// The message type.
    pub fn msg_type(&self) -> Icmpv6Message {
        Icmpv6Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The echo identifier (bytes 4..6).
    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    /// The echo sequence number (bytes 6..8).
    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQNO)
    }

    /// The bytes after the 8-byte header (echo data, or the invoking packet of an error).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }

    /// The R/S/O flags of a neighbour advertisement (byte 4).
    pub fn neighbor_flags(&self) -> NeighborFlags {
        NeighborFlags(self.buffer.as_ref()[field::NEIGH_FLAGS] & NeighborFlags::MASK)
    }

    /// R: the advertiser is a router.
    pub fn router_flag(&self) -> bool {
        self.neighbor_flags().router()
    }

    /// S: the advertisement answers a solicitation.
    pub fn solicited_flag(&self) -> bool {
        self.neighbor_flags().solicited()
    }

    /// O: the advertisement overrides a cached link-layer address.
    pub fn override_flag(&self) -> bool {
        self.neighbor_flags().is_override()
    }

    /// The target address of an NS, NA or redirect (bytes 8..24). For a message shorter
    /// than that (possible only for other types) it is `::`, so this never panics.
    pub fn target_addr(&self) -> Ipv6Addr {
        self.buffer.as_ref().get(field::TARGET_ADDR).map_or(Ipv6Addr::UNSPECIFIED, |b| {
            let mut octets = [0u8; 16];
            octets.copy_from_slice(b);
            Ipv6Addr::from(octets)
        })
    }

    /// The option bytes of a neighbour-discovery message (RS, RA, NS, NA, redirect);
    /// empty for other types.
    pub fn options(&self) -> &[u8] {
        let at = self.msg_type().ndisc_options_at().unwrap_or(usize::MAX);
        self.buffer.as_ref().get(at..).unwrap_or(&[])
    }

    /// An iterator over [`options`](Self::options).
    pub fn ndisc_options(&self) -> NdiscOptions<'_> {
        NdiscOptions::new(self.options())
    }

    fn sum_with_pseudo_header(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> u16 {
        let data = self.buffer.as_ref();
        let pseudo = checksum::pseudo_header_v6(src, dst, IpProtocol::ICMPV6, data.len() as u32);
        checksum::fold(pseudo + checksum::sum(data))
    }

    /// Whether the checksum verifies for these IPv6 source and destination addresses.
    pub fn verify_checksum(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        self.sum_with_pseudo_header(src, dst) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv6Packet<T> {
    fn set_u16_at(&mut self, r: std::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the message type.
    pub fn set_msg_type(&mut self, value: Icmpv6Message) {
        self.buffer.as_mut()[field::TYPE] = value.into();
    }

    /// Sets the code.
    pub fn set_code(&mut self, value: u8) {
        self.buffer.as_mut()[field::CODE] = value;
    }

    /// Sets the checksum field.
    pub fn set_checksum(&mut self, value: u16) {
        self.set_u16_at(field::CHECKSUM, value);
    }

    /// Sets the echo identifier.
    pub fn set_echo_ident(&mut self, value: u16) {
        self.set_u16_at(field::ECHO_IDENT, value);
    }

    /// Sets the echo sequence number.
    pub fn set_echo_seq_no(&mut self, value: u16) {
        self.set_u16_at(field::ECHO_SEQNO, value);
    }

    /// Sets bytes 4..8 to zero (the reserved field of an NS, or flags and reserved of
    /// an NA before [`set_neighbor_flags`](Self::set_neighbor_flags)).
    pub fn clear_reserved(&mut self) {
        self.buffer.as_mut()[4..8].fill(0);
    }

    /// Sets the R/S/O flags, keeping the reserved bits.
    pub fn set_neighbor_flags(&mut self, flags: NeighborFlags) {
        let b = &mut self.buffer.as_mut()[field::NEIGH_FLAGS];
        *b = (*b & !NeighborFlags::MASK) | (flags.0 & NeighborFlags::MASK);
    }

    /// Sets the target address (bytes 8..24).
    pub fn set_target_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::TARGET_ADDR].copy_from_slice(&value.octets());
    }

    /// The bytes after the 8-byte header, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }

    /// The bytes after the 8-byte header, mutably (alias of [`data_mut`](Self::data_mut)).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.data_mut()
    }

    /// The option bytes of a neighbour-discovery message, mutably (empty otherwise).
    pub fn options_mut(&mut self) -> &mut [u8] {
        let at = self.msg_type().ndisc_options_at().unwrap_or(usize::MAX);
        self.buffer.as_mut().get_mut(at..).unwrap_or(&mut [])
    }

    /// Computes and stores the checksum for these IPv6 addresses.
    pub fn fill_checksum(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let cksum = !self.sum_with_pseudo_header(src, dst);
        self.set_checksum(cksum);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The ICMPv6 messages handled here. Echo data is not held: it stays in the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv6Repr {
    /// Type 128.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Bytes of data after the header.
        data_len: usize,
    },
    /// Type 129.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Bytes of data after the header.
        data_len: usize,
    },
    /// Type 135.
    NeighborSolicit {
        /// The address being resolved.
        target_addr: Ipv6Addr,
        /// The source link-layer address option, if present.
        lladdr: Option<EthernetAddress>,
    },
    /// Type 136.
    NeighborAdvert {
        /// R/S/O flags.
        flags: NeighborFlags,
        /// The address being advertised.
        target_addr: Ipv6Addr,
        /// The target link-layer address option, if present.
        lladdr: Option<EthernetAddress>,
    },
}

impl Icmpv6Repr {
    /// Reads an echo or neighbour message sent from `src` to `dst`.
    ///
    /// Checks: the checksum if `verify_checksum` ([`Error::Checksum`]); code 0; for NS
    /// and NA the RFC 4861 §7.1 rules that need no IP header besides the addresses: a
    /// unicast target, well-formed options, no source link-layer address from `::`, no
    /// S flag towards a multicast destination ([`Error::Malformed`]). The caller checks
    /// the hop limit (255). Unknown options are skipped. Other types are
    /// [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]>>(
        packet: &Icmpv6Packet<T>,
        src: &Ipv6Addr,
        dst: &Ipv6Addr,
        verify_checksum: bool,
    ) -> Result<Self> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum(src, dst) {
            return Err(Error::Checksum);
        }
        let msg_type = packet.msg_type();
        let known = matches!(
            msg_type,
            Icmpv6Message::EchoRequest
                | Icmpv6Message::EchoReply
                | Icmpv6Message::NeighborSolicit
                | Icmpv6Message::NeighborAdvert
        );
        if !known {
            return Err(Error::Unsupported);
        }
        if packet.code() != 0 {
            return Err(Error::Malformed);
        }
        let (ident, seq_no, data_len) = (packet.echo_ident(), packet.echo_seq_no(), packet.data().len());
        match msg_type {
            Icmpv6Message::EchoRequest => return Ok(Self::EchoRequest { ident, seq_no, data_len }),
            Icmpv6Message::EchoReply => return Ok(Self::EchoReply { ident, seq_no, data_len }),
            _ => {}
        }
        let target_addr = packet.target_addr();
        if target_addr.is_multicast() {
            return Err(Error::Malformed);
        }
        let mut source_lladdr = None;
        let mut target_lladdr = None;
        for option in packet.ndisc_options() {
            match option? {
                NdiscOption::SourceLinkLayerAddr(a) => source_lladdr = Some(a),
                NdiscOption::TargetLinkLayerAddr(a) => target_lladdr = Some(a),
                NdiscOption::Unknown { .. } => {}
            }
        }
        if msg_type == Icmpv6Message::NeighborSolicit {
            if src.is_unspecified() && source_lladdr.is_some() {
                return Err(Error::Malformed);
            }
            return Ok(Self::NeighborSolicit { target_addr, lladdr: source_lladdr });
        }
        let flags = packet.neighbor_flags();
        if dst.is_multicast() && flags.solicited() {
            return Err(Error::Malformed);
        }
        Ok(Self::NeighborAdvert { flags, target_addr, lladdr: target_lladdr })
    }

    /// Bytes of the whole message [`emit`](Self::emit) expects.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::EchoRequest { data_len, .. } | Self::EchoReply { data_len, .. } => HEADER_LEN + *data_len,
            Self::NeighborSolicit { lladdr, .. } | Self::NeighborAdvert { lladdr, .. } => {
                NEIGHBOR_LEN + if lladdr.is_some() { 8 } else { 0 }
            }
        }
    }

    /// Writes the message and the checksum for `src` and `dst` over the whole buffer,
    /// which should be exactly [`buffer_len`](Self::buffer_len) long. For echo, **write
    /// the data first** (through [`Icmpv6Packet::data_mut`]) or call
    /// [`Icmpv6Packet::fill_checksum`] again after.
    ///
    /// # Panics
    /// If the buffer is shorter than [`buffer_len`](Self::buffer_len) minus the echo data.
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv6Packet<T>, src: &Ipv6Addr, dst: &Ipv6Addr) {
        match *self {
            Self::EchoRequest { ident, seq_no, .. } | Self::EchoReply { ident, seq_no, .. } => {
                let msg_type = match self {
                    Self::EchoRequest { .. } => Icmpv6Message::EchoRequest,
                    _ => Icmpv6Message::EchoReply,
                };
                packet.set_msg_type(msg_type);
                packet.set_code(0);
                packet.set_echo_ident(ident);
                packet.set_echo_seq_no(seq_no);
            }
            Self::NeighborSolicit { target_addr, lladdr } => {
                packet.set_msg_type(Icmpv6Message::NeighborSolicit);
                packet.set_code(0);
                packet.clear_reserved();
                packet.set_target_addr(target_addr);
                if let Some(a) = lladdr {
                    NdiscOption::SourceLinkLayerAddr(a).emit(packet.options_mut());
                }
            }
            Self::NeighborAdvert { flags, target_addr, lladdr } => {
                packet.set_msg_type(Icmpv6Message::NeighborAdvert);
                packet.set_code(0);
                packet.clear_reserved();
                packet.set_neighbor_flags(flags);
                packet.set_target_addr(target_addr);
                if let Some(a) = lladdr {
                    NdiscOption::TargetLinkLayerAddr(a).emit(packet.options_mut());
                }
            }
        }
        packet.fill_checksum(src, dst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv6::{upper_layer, Ipv6Packet};
    use crate::testutil::hex;

    /// fe80::5054:ff:fe12:3456 asks ff02::1:ff00:2 who has fe80::2, hop limit 255.
    const NS: &str = "6000 0000 0020 3a ff
        fe80 0000 0000 0000 5054 00ff fe12 3456
        ff02 0000 0000 0000 0000 0001 ff00 0002
        8700 7220 0000 0000 fe80 0000 0000 0000 0000 0000 0000 0002
        0101 5254 0012 3456";

    fn addr(s: &str) -> Ipv6Addr {
        s.parse().unwrap()
    }

    fn mac() -> EthernetAddress {
        EthernetAddress([0x52, 0x54, 0, 0x12, 0x34, 0x56])
    }

    #[test]
    fn parse_real_neighbor_solicitation() {
        let bytes = hex(NS);
        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        assert_eq!(upper_layer(&ip), Ok((IpProtocol::ICMPV6, 40)));
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let p = Icmpv6Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(p.msg_type(), Icmpv6Message::NeighborSolicit);
        assert_eq!(p.checksum(), 0x7220);
        assert!(p.verify_checksum(&src, &dst));
        assert!(!p.verify_checksum(&src, &addr("ff02::1")));
        assert_eq!(p.target_addr(), addr("fe80::2"));
        assert_eq!(p.ndisc_options().collect::<Vec<_>>(), vec![Ok(NdiscOption::SourceLinkLayerAddr(mac()))]);
        assert_eq!(
            Icmpv6Repr::parse(&p, &src, &dst, true),
            Ok(Icmpv6Repr::NeighborSolicit { target_addr: addr("fe80::2"), lladdr: Some(mac()) })
        );
    }

    #[test]
    fn repr_round_trips() {
        let src = addr("fe80::2");
        let dst = addr("fe80::5054:ff:fe12:3456");
        let reprs = [
            Icmpv6Repr::EchoRequest { ident: 7, seq_no: 9, data_len: 5 },
            Icmpv6Repr::EchoReply { ident: 7, seq_no: 9, data_len: 0 },
            Icmpv6Repr::NeighborSolicit { target_addr: addr("2001:db8::1"), lladdr: None },
            Icmpv6Repr::NeighborSolicit { target_addr: addr("2001:db8::1"), lladdr: Some(mac()) },
            Icmpv6Repr::NeighborAdvert {
                flags: NeighborFlags::SOLICITED | NeighborFlags::OVERRIDE,
                target_addr: src,
                lladdr: Some(mac()),
            },
            Icmpv6Repr::NeighborAdvert { flags: NeighborFlags::ROUTER, target_addr: src, lladdr: None },
        ];
        for repr in reprs {
            let mut bytes = vec![0xa5u8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &src, &dst);
            let p = Icmpv6Packet::new_checked(&bytes[..]).unwrap();
            assert!(p.verify_checksum(&src, &dst), "{repr:?}");
            assert_eq!(Icmpv6Repr::parse(&p, &src, &dst, true), Ok(repr));
        }
    }

    #[test]
    fn emit_matches_real_solicitation() {
        let bytes = hex(NS);
        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let repr = Icmpv6Repr::NeighborSolicit { target_addr: addr("fe80::2"), lladdr: Some(mac()) };
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut Icmpv6Packet::new_unchecked(&mut out[..]), &ip.src_addr(), &ip.dst_addr());
        assert_eq!(out, ip.payload());
    }

    #[test]
    fn neighbor_rules() {
        let src = addr("fe80::1");
        let any = Ipv6Addr::UNSPECIFIED;
        let all_nodes = addr("ff02::1");
        let emit = |repr: Icmpv6Repr, src: &Ipv6Addr, dst: &Ipv6Addr| {
            let mut bytes = vec![0u8; repr.buffer_len()];
            repr.emit(&mut Icmpv6Packet::new_unchecked(&mut bytes[..]), src, dst);
            bytes
        };
        let parse = |bytes: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr| {
            Icmpv6Repr::parse(&Icmpv6Packet::new_checked(bytes).unwrap(), src, dst, true)
        };
        // DAD: from :: without a link-layer address is fine, with one it is not.
        let dad = Icmpv6Repr::NeighborSolicit { target_addr: src, lladdr: None };
        assert_eq!(parse(&emit(dad, &any, &all_nodes), &any, &all_nodes), Ok(dad));
        let bad = Icmpv6Repr::NeighborSolicit { target_addr: src, lladdr: Some(mac()) };
        assert_eq!(parse(&emit(bad, &any, &all_nodes), &any, &all_nodes), Err(Error::Malformed));
        // Solicited advertisement to a multicast group.
        let na = Icmpv6Repr::NeighborAdvert { flags: NeighborFlags::SOLICITED, target_addr: src, lladdr: None };
        assert_eq!(parse(&emit(na, &src, &all_nodes), &src, &all_nodes), Err(Error::Malformed));
        // Multicast target.
        let ns = Icmpv6Repr::NeighborSolicit { target_addr: all_nodes, lladdr: None };
        assert_eq!(parse(&emit(ns, &src, &all_nodes), &src, &all_nodes), Err(Error::Malformed));
        // Zero-length option.
        let mut bytes = emit(Icmpv6Repr::NeighborSolicit { target_addr: src, lladdr: Some(mac()) }, &src, &all_nodes);
        bytes[25] = 0;
        let mut p = Icmpv6Packet::new_unchecked(&mut bytes[..]);
        p.fill_checksum(&src, &all_nodes);
        assert_eq!(parse(&bytes, &src, &all_nodes), Err(Error::Malformed));
        // Nonzero code, other types.
        let mut bytes = emit(Icmpv6Repr::EchoRequest { ident: 1, seq_no: 1, data_len: 0 }, &src, &all_nodes);
        let mut p = Icmpv6Packet::new_unchecked(&mut bytes[..]);
        p.set_code(1);
        p.fill_checksum(&src, &all_nodes);
        assert_eq!(parse(&bytes, &src, &all_nodes), Err(Error::Malformed));
        let mut p = Icmpv6Packet::new_unchecked(&mut bytes[..]);
        p.set_msg_type(Icmpv6Message::PktTooBig);
        p.fill_checksum(&src, &all_nodes);
        assert_eq!(parse(&bytes, &src, &all_nodes), Err(Error::Unsupported));
        assert_eq!(Icmpv6Packet::new_checked(&bytes[..]).unwrap().options(), &[] as &[u8]);
    }

    #[test]
    fn message_types() {
        for t in 0..=255u8 {
            assert_eq!(u8::from(Icmpv6Message::from(t)), t);
        }
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex(NS);
        let ip = Ipv6Packet::new_checked(&bytes[..]).unwrap();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let icmp = ip.payload();
        for len in 0..icmp.len() {
            let b = &icmp[..len];
            if len < NEIGHBOR_LEN {
                assert_eq!(Icmpv6Packet::new_checked(b), Err(Error::Truncated), "len {len}");
            }
            assert!(Icmpv6Repr::parse(&Icmpv6Packet::new_unchecked(b), &src, &dst, true).is_err(), "len {len}");
            // Without the checksum, 24 bytes are a valid NS without options.
            let unverified = Icmpv6Repr::parse(&Icmpv6Packet::new_unchecked(b), &src, &dst, false);
            assert_eq!(unverified.is_ok(), len == NEIGHBOR_LEN, "len {len}");
        }
        // An echo request only 8 bytes long: the NS-only accessors stay in bounds.
        let p = Icmpv6Packet::new_checked(&[128u8, 0, 0, 0, 0, 0, 0, 0][..]).unwrap();
        assert_eq!(p.target_addr(), Ipv6Addr::UNSPECIFIED);
        assert!(p.options().is_empty());
    }
}
