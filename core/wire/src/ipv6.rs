//! IPv6 headers (RFC 8200) and a bounded walk over extension headers ([`upper_layer`]).
use std::net::Ipv6Addr;

use crate::ip::IpProtocol;
use crate::{Error, Result};

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Most extension headers [`upper_layer`] walks before giving up.
pub const MAX_EXT_HEADERS: usize = 8;

mod field {
    use std::ops::Range;
    pub const VER_TC_FLOW: Range<usize> = 0..4;
    pub const LENGTH: Range<usize> = 4..6;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC_ADDR: Range<usize> = 8..24;
    pub const DST_ADDR: Range<usize> = 24..40;
}

/// A view of an IPv6 packet.
///
/// After [`check_len`](Self::check_len) the buffer holds the fixed header and
/// `payload_len` bytes; bytes after them (Ethernet padding) are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv6Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Ipv6Packet<T> {
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

    /// [`Error::Truncated`] if the buffer is shorter than the fixed header plus
    /// `payload_len`. The version is not checked. (Jumbograms are not supported: a zero
    /// `payload_len` means an empty payload.)
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN || len < HEADER_LEN + usize::from(self.payload_len()) {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// The wrapped buffer.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    fn first_word(&self) -> u32 {
        let b = &self.buffer.as_ref()[field::VER_TC_FLOW];
        u32::from_be_bytes([b[0], b[1], b[2], b[3]])
    }

    /// The version field (6 for IPv6).
    pub fn version(&self) -> u8 {
        (self.first_word() >> 28) as u8
    }

    /// The traffic class (DSCP and ECN).
    pub fn traffic_class(&self) -> u8 {
        (self.first_word() >> 20) as u8
    }

    /// The 20-bit flow label.
    pub fn flow_label(&self) -> u32 {
        self.first_word() & 0x000f_ffff
    }

    /// Length of what follows the fixed header, extension headers included.
    pub fn payload_len(&self) -> u16 {
        let b = &self.buffer.as_ref()[field::LENGTH];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The first extension header or upper-layer protocol.
    pub fn next_header(&self) -> IpProtocol {
        IpProtocol(self.buffer.as_ref()[field::NXT_HDR])
    }

    /// The hop limit.
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// The source address.
    pub fn src_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read16(&self.buffer.as_ref()[field::SRC_ADDR]))
    }

    /// The destination address.
    pub fn dst_addr(&self) -> Ipv6Addr {
        Ipv6Addr::from(read16(&self.buffer.as_ref()[field::DST_ADDR]))
    }

    /// The `payload_len` bytes after the fixed header (extension headers included).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + usize::from(self.payload_len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv6Packet<T> {
    fn set_first_word(&mut self, value: u32) {
        self.buffer.as_mut()[field::VER_TC_FLOW].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the version field.
    pub fn set_version(&mut self, value: u8) {
        self.set_first_word((self.first_word() & 0x0fff_ffff) | (u32::from(value) << 28));
    }

    /// Sets the traffic class.
    pub fn set_traffic_class(&mut self, value: u8) {
        self.set_first_word((self.first_word() & 0xf00f_ffff) | (u32::from(value) << 20));
    }

    /// Sets the flow label (low 20 bits used).
    pub fn set_flow_label(&mut self, value: u32) {
        self.set_first_word((self.first_word() & 0xfff0_0000) | (value & 0x000f_ffff));
    }

    /// Sets the payload length.
    pub fn set_payload_len(&mut self, value: u16) {
        self.buffer.as_mut()[field::LENGTH].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the next header.
    pub fn set_next_header(&mut self, value: IpProtocol) {
        self.buffer.as_mut()[field::NXT_HDR] = value.0;
    }

    /// Sets the hop limit.
    pub fn set_hop_limit(&mut self, value: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = value;
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&value.octets());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv6Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&value.octets());
    }

    /// The `payload_len` bytes after the fixed header, mutably.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + usize::from(self.payload_len());
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Ipv6Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

fn read16(b: &[u8]) -> [u8; 16] {
    let mut out = [0u8; 16];
    out.copy_from_slice(&b[..16]);
    out
}

/// The fields of an IPv6 header that a stack acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Ipv6Repr {
    /// Source address.
    pub src_addr: Ipv6Addr,
    /// Destination address.
    pub dst_addr: Ipv6Addr,
    /// The next header (first extension header or upper layer).
    pub next_header: IpProtocol,
    /// Payload length in bytes, extension headers included.
    pub payload_len: usize,
    /// Hop limit.
    pub hop_limit: u8,
}

impl Ipv6Repr {
    /// Validates and reads the fixed header: [`check_len`](Ipv6Packet::check_len), then
    /// version 6 ([`Error::Malformed`]). Traffic class and flow label are not kept.
    pub fn parse<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Self> {
        packet.check_len()?;
        if packet.version() != 6 {
            return Err(Error::Malformed);
        }
        Ok(Self {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            next_header: packet.next_header(),
            payload_len: usize::from(packet.payload_len()),
            hop_limit: packet.hop_limit(),
        })
    }

    /// Bytes of header [`emit`](Self::emit) writes: [`HEADER_LEN`].
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the fixed header (traffic class and flow label 0). `payload_len` must be
    /// at most 65535.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Ipv6Packet<T>) {
        packet.set_first_word(6 << 28);
        packet.set_payload_len(self.payload_len as u16);
        packet.set_next_header(self.next_header);
        packet.set_hop_limit(self.hop_limit);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
    }
}

fn is_extension(next: IpProtocol) -> bool {
    matches!(next, IpProtocol::HOPOPT | IpProtocol::IPV6_ROUTE | IpProtocol::IPV6_OPTS | IpProtocol::IPV6_FRAG)
}

/// Walks hop-by-hop, routing, destination-options and fragment headers and returns the
/// upper-layer protocol and the offset of its header from the start of the IPv6 header.
///
/// Every read is bounded by `payload_len` ([`Error::Truncated`] otherwise). Errors:
/// hop-by-hop anywhere but first is [`Error::Malformed`]; a fragment with a non-zero
/// offset, or more than [`MAX_EXT_HEADERS`] extension headers, is
/// [`Error::Unsupported`]. A first fragment (offset 0) is walked through, so its upper
/// layer is incomplete when "more fragments" is set: callers that need whole datagrams
/// look for [`IpProtocol::IPV6_FRAG`] themselves. Other protocols (including
/// [`IpProtocol::IPV6_NONXT`], AH and ESP) end the walk.
pub fn upper_layer<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<(IpProtocol, usize)> {
    match walk(packet, false)? {
        Transport { later_fragment: true, .. } => Err(Error::Unsupported),
        t => Ok((t.protocol, t.offset)),
    }
}

/// Where a filter finds an IPv6 packet's transport: its protocol, the offset of its
/// header, and whether this is a fragment other than the first (whose bytes after the
/// fragment header are no header at all: ports and ICMP types are unknown).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transport {
    /// The upper-layer protocol (for a later fragment, the fragment header's next header).
    pub protocol: IpProtocol,
    /// Offset from the start of the IPv6 header: of the upper-layer header, or of the
    /// fragment's data.
    pub offset: usize,
    /// A fragment with a non-zero offset.
    pub later_fragment: bool,
}

/// As [`upper_layer`], for packet filters and for deciding whether a packet is itself an
/// ICMPv6 error: the Authentication Header is walked through too (its length counts
/// 4-byte units), and a later fragment ends the walk with
/// [`Transport::later_fragment`] set instead of an error. A filter must look behind
/// every header a host would skip to reach the transport, or a header in front of it
/// (hop-by-hop, destination options, an atomic fragment, AH) hides the ports.
/// Errors: [`Error::Truncated`], [`Error::Malformed`] (hop-by-hop after the first),
/// [`Error::Unsupported`] (a chain longer than [`MAX_EXT_HEADERS`]).
pub fn transport<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>) -> Result<Transport> {
    walk(packet, true)
}

/// As [`transport`], over what is at hand of a packet: `ip` starts with the IPv6
/// header and holds the packet or its beginning (the first segment of a chain whose
/// payload continues in other buffers). The walk is bounded by `payload_len` and by
/// `ip`'s length; a header that does not end within both is [`Error::Truncated`].
pub fn transport_at_hand(ip: &[u8]) -> Result<Transport> {
    let packet = Ipv6Packet::new_unchecked(ip);
    if ip.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let end = ip.len().min(HEADER_LEN + usize::from(packet.payload_len()));
    walk_from(&ip[..end], packet.next_header(), true)
}

fn walk<T: AsRef<[u8]>>(packet: &Ipv6Packet<T>, through_ah: bool) -> Result<Transport> {
    packet.check_len()?;
    let data = &packet.buffer.as_ref()[..HEADER_LEN + usize::from(packet.payload_len())];
    walk_from(data, packet.next_header(), through_ah)
}

/// The walk over `data` (the IPv6 header and the bytes to walk), starting with `next`.
fn walk_from(data: &[u8], mut next: IpProtocol, through_ah: bool) -> Result<Transport> {
    let mut offset = HEADER_LEN;
    let upper = |protocol, offset, later_fragment| Ok(Transport { protocol, offset, later_fragment });
    for index in 0..MAX_EXT_HEADERS {
        let len = match next {
            IpProtocol::HOPOPT if index > 0 => return Err(Error::Malformed),
            IpProtocol::HOPOPT | IpProtocol::IPV6_ROUTE | IpProtocol::IPV6_OPTS => {
                let header = data.get(offset..offset + 2).ok_or(Error::Truncated)?;
                (usize::from(header[1]) + 1) * 8
            }
            IpProtocol::AH if through_ah => {
                let header = data.get(offset..offset + 2).ok_or(Error::Truncated)?;
                (usize::from(header[1]) + 2) * 4
            }
            IpProtocol::IPV6_FRAG => {
                let header = data.get(offset..offset + 8).ok_or(Error::Truncated)?;
                if u16::from_be_bytes([header[2], header[3]]) & 0xfff8 != 0 {
                    return upper(IpProtocol(header[0]), offset + 8, true);
                }
                8
            }
            upper_protocol => return upper(upper_protocol, offset, false),
        };
        if data.len() - offset < len {
            return Err(Error::Truncated);
        }
        next = IpProtocol(data[offset]);
        offset += len;
    }
    if is_extension(next) || (through_ah && next == IpProtocol::AH) {
        return Err(Error::Unsupported);
    }
    upper(next, offset, false)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{hex, XorShift};

    const SRC: &str = "fe80 0000 0000 0000 5054 00ff fe12 3456";
    const DST: &str = "2001 0db8 0000 0000 0000 0000 0000 0002";

    /// An IPv6 header with the given next header and payload.
    fn packet(next: u8, payload: &str) -> Vec<u8> {
        let payload = hex(payload);
        let mut b = hex(&format!("6abcdef5 {:04x} {next:02x} 40 {SRC} {DST}", payload.len()));
        b.extend_from_slice(&payload);
        b
    }

    #[test]
    fn fields() {
        let b = packet(17, "0001 0002 0008 0000");
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xab);
        assert_eq!(p.flow_label(), 0xcdef5);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), IpProtocol::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "fe80::5054:ff:fe12:3456".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "2001:db8::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.payload(), &hex("0001 0002 0008 0000")[..]);
        assert_eq!(upper_layer(&p), Ok((IpProtocol::UDP, 40)));
    }

    #[test]
    fn setters() {
        let mut b = packet(17, "");
        let mut p = Ipv6Packet::new_unchecked(&mut b[..]);
        p.set_traffic_class(0x12);
        p.set_flow_label(0xfffff);
        p.set_version(6);
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0x12, 0xfffff));
        p.set_flow_label(0);
        assert_eq!((p.version(), p.traffic_class(), p.flow_label()), (6, 0x12, 0));
        assert!(p.payload_mut().is_empty());
    }

    #[test]
    fn repr_round_trip() {
        let repr = Ipv6Repr {
            src_addr: "fe80::1".parse().unwrap(),
            dst_addr: "ff02::1".parse().unwrap(),
            next_header: IpProtocol::ICMPV6,
            payload_len: 24,
            hop_limit: 255,
        };
        let mut b = vec![0xffu8; repr.buffer_len() + repr.payload_len];
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut b[..]));
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!((p.traffic_class(), p.flow_label()), (0, 0));
        assert_eq!(Ipv6Repr::parse(&p), Ok(repr));
        let mut b4 = b.clone();
        b4[0] = 0x40;
        assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&b4[..]).unwrap()), Err(Error::Malformed));
    }

    #[test]
    fn upper_layer_walks_extension_headers() {
        // Hop-by-hop (8 bytes) -> destination options (16 bytes) -> routing (8) ->
        // atomic fragment (8) -> TCP.
        let b = packet(
            0,
            "3c00 0104 0000 0000
             2b01 0104 0000 0000 0000 0000 0000 0000
             2c00 0000 0000 0000
             0600 0000 0000 0001
             0050 0050",
        );
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(upper_layer(&p), Ok((IpProtocol::TCP, 40 + 40)));
        for len in 40..b.len() - 4 {
            let mut t = b[..len].to_vec();
            t[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
            let p = Ipv6Packet::new_checked(&t[..]).unwrap();
            assert_eq!(upper_layer(&p), Err(Error::Truncated), "payload_len {}", len - 40);
        }
        // No next header: the walk ends there.
        let b = packet(60, "3b00 0000 0000 0000");
        assert_eq!(upper_layer(&Ipv6Packet::new_checked(&b[..]).unwrap()), Ok((IpProtocol::IPV6_NONXT, 48)));
    }

    #[test]
    fn upper_layer_rejects() {
        // A later fragment.
        let b = packet(44, "1100 0b91 0000 0001 0000 0000");
        assert_eq!(upper_layer(&Ipv6Packet::new_checked(&b[..]).unwrap()), Err(Error::Unsupported));
        // A first fragment with more to come is walked through.
        let b = packet(44, "1100 0001 0000 0001 0000 0000");
        assert_eq!(upper_layer(&Ipv6Packet::new_checked(&b[..]).unwrap()), Ok((IpProtocol::UDP, 48)));
        // Hop-by-hop after another header.
        let b = packet(60, "0000 0000 0000 0000 1100 0000 0000 0000");
        assert_eq!(upper_layer(&Ipv6Packet::new_checked(&b[..]).unwrap()), Err(Error::Malformed));
        // A chain of destination options longer than the bound.
        let chain = "3c00 0000 0000 0000 ".repeat(MAX_EXT_HEADERS);
        let b = packet(60, &chain);
        assert_eq!(upper_layer(&Ipv6Packet::new_checked(&b[..]).unwrap()), Err(Error::Unsupported));
        let chain = format!("{}3b00 0000 0000 0000", "3c00 0000 0000 0000 ".repeat(MAX_EXT_HEADERS - 1));
        let b = packet(60, &chain);
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        assert_eq!(upper_layer(&p), Ok((IpProtocol::IPV6_NONXT, 40 + 8 * MAX_EXT_HEADERS)));
    }

    #[test]
    fn truncation_never_panics() {
        let b = packet(17, "0001 0002 0008 0000");
        for len in 0..b.len() {
            assert_eq!(Ipv6Packet::new_checked(&b[..len]), Err(Error::Truncated));
            assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_unchecked(&b[..len])), Err(Error::Truncated));
            assert_eq!(upper_layer(&Ipv6Packet::new_unchecked(&b[..len])), Err(Error::Truncated));
        }
    }

    #[test]
    fn random_extension_chains_never_panic() {
        let mut rng = XorShift(0x6666);
        let protos = [0u8, 43, 44, 60, 59, 6, 17, 58];
        let mut walked = 0;
        for _ in 0..20_000 {
            let len = rng.index(120);
            let mut payload = rng.bytes(len);
            // Bias next-header bytes and lengths towards extension headers.
            for (i, b) in payload.iter_mut().enumerate() {
                if i % 8 == 0 {
                    *b = protos[rng.index(protos.len())];
                } else if i % 8 == 1 {
                    *b &= 3;
                }
            }
            let mut b = packet(protos[rng.index(protos.len())], "");
            b[4..6].copy_from_slice(&(len as u16).to_be_bytes());
            b.extend_from_slice(&payload);
            let p = Ipv6Packet::new_checked(&b[..]).unwrap();
            if let Ok((_, offset)) = upper_layer(&p) {
                assert!(offset <= b.len());
                walked += 1;
            }
        }
        assert!(walked > 2_000, "only {walked} chains walked");
    }

    #[test]
    fn transport_walks_ah_and_stops_at_later_fragments() {
        // Destination options -> AH (12 bytes of ICV: length 4) -> UDP.
        let b = packet(
            60,
            "3300 0000 0000 0000
             1104 0000 0000 0100 0000 0001 0000 0000 0000 0000 0000 0000
             0035 0035 0008 0000",
        );
        let p = Ipv6Packet::new_checked(&b[..]).unwrap();
        let t = transport(&p).unwrap();
        assert_eq!((t.protocol, t.offset, t.later_fragment), (IpProtocol::UDP, 40 + 8 + 24, false));
        // upper_layer stops at AH.
        assert_eq!(upper_layer(&p), Ok((IpProtocol::AH, 48)));
        // A later fragment of UDP: its protocol, no header after it.
        let b = packet(44, "1100 0b91 0000 0001 0000 0000");
        let t = transport(&Ipv6Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!((t.protocol, t.offset, t.later_fragment), (IpProtocol::UDP, 48, true));
        // An atomic fragment (offset 0, no more fragments) is walked through.
        let b = packet(44, "1100 0000 0000 0001 0035 0035");
        let t = transport(&Ipv6Packet::new_checked(&b[..]).unwrap()).unwrap();
        assert_eq!((t.protocol, t.offset, t.later_fragment), (IpProtocol::UDP, 48, false));
        // Every truncation of the AH chain is an error, never a panic.
        let b = packet(60, "3300 0000 0000 0000 1104 0000 0000 0100 0000 0001 0000 0000 0000 0000 0000 0000");
        for len in 40..b.len() {
            let mut t = b[..len].to_vec();
            t[4..6].copy_from_slice(&((len - 40) as u16).to_be_bytes());
            assert_eq!(transport(&Ipv6Packet::new_checked(&t[..]).unwrap()), Err(Error::Truncated), "{len}");
        }
        // A chain of AH headers longer than the bound.
        let chain = "3300 0000 0000 0000 ".repeat(MAX_EXT_HEADERS);
        let b = packet(51, &chain);
        assert_eq!(transport(&Ipv6Packet::new_checked(&b[..]).unwrap()), Err(Error::Unsupported));
    }
}
