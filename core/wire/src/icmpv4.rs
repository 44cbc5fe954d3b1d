//! ICMP for IPv4 (RFC 792). [`Icmpv4Repr`] covers echo request and reply.
use crate::checksum;
use crate::{Error, Result};

/// Length of the ICMP header (type, code, checksum, four message-specific bytes).
pub const HEADER_LEN: usize = 8;

mod field {
    use std::ops::{Range, RangeFrom};
    pub const TYPE: usize = 0;
    pub const CODE: usize = 1;
    pub const CHECKSUM: Range<usize> = 2..4;
    pub const ECHO_IDENT: Range<usize> = 4..6;
    pub const ECHO_SEQNO: Range<usize> = 6..8;
    pub const DATA: RangeFrom<usize> = 8..;
}

/// An ICMPv4 message type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Message {
    /// 0.
    EchoReply,
    /// 3.
    DstUnreachable,
    /// 5.
    Redirect,
    /// 8.
    EchoRequest,
    /// 11.
    TimeExceeded,
    /// 12.
    ParamProblem,
    /// 13.
    Timestamp,
    /// 14.
    TimestampReply,
    /// Any other type.
    Unknown(u8),
}

impl From<u8> for Icmpv4Message {
    fn from(value: u8) -> Self {
        match value {
            0 => Self::EchoReply,
            3 => Self::DstUnreachable,
            5 => Self::Redirect,
            8 => Self::EchoRequest,
            11 => Self::TimeExceeded,
            12 => Self::ParamProblem,
            13 => Self::Timestamp,
            14 => Self::TimestampReply,
            other => Self::Unknown(other),
        }
    }
}

impl From<Icmpv4Message> for u8 {
    fn from(value: Icmpv4Message) -> Self {
        match value {
            Icmpv4Message::EchoReply => 0,
            Icmpv4Message::DstUnreachable => 3,
            Icmpv4Message::Redirect => 5,
            Icmpv4Message::EchoRequest => 8,
            Icmpv4Message::TimeExceeded => 11,
            Icmpv4Message::ParamProblem => 12,
            Icmpv4Message::Timestamp => 13,
            Icmpv4Message::TimestampReply => 14,
            Icmpv4Message::Unknown(other) => other,
        }
    }
}

/// A view of an ICMPv4 message. The buffer is the whole message (the IPv4 payload); the
/// checksum covers all of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Icmpv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Icmpv4Packet<T> {
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

    /// [`Error::Truncated`] if the buffer is shorter than the 8-byte header every
    /// ICMPv4 message has.
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

    fn u16_at(&self, r: std::ops::Range<usize>) -> u16 {
        let b = &self.buffer.as_ref()[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    /// The message type.
    pub fn msg_type(&self) -> Icmpv4Message {
        Icmpv4Message::from(self.buffer.as_ref()[field::TYPE])
    }

    /// The code.
    pub fn code(&self) -> u8 {
        self.buffer.as_ref()[field::CODE]
    }

    /// The checksum field.
    pub fn checksum(&self) -> u16 {
        self.u16_at(field::CHECKSUM)
    }

    /// The echo identifier (bytes 4..6, meaningful for echo messages).
    pub fn echo_ident(&self) -> u16 {
        self.u16_at(field::ECHO_IDENT)
    }

    /// The echo sequence number (bytes 6..8, meaningful for echo messages).
    pub fn echo_seq_no(&self) -> u16 {
        self.u16_at(field::ECHO_SEQNO)
    }

    /// The bytes after the 8-byte header (echo data, or the offending datagram of an
    /// error message).
    pub fn data(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA]
    }

    /// Whether the checksum over the whole buffer verifies.
    pub fn verify_checksum(&self) -> bool {
        checksum::data(self.buffer.as_ref()) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Icmpv4Packet<T> {
    fn set_u16_at(&mut self, r: std::ops::Range<usize>, value: u16) {
        self.buffer.as_mut()[r].copy_from_slice(&value.to_be_bytes());
    }

    /// Sets the message type.
    pub fn set_msg_type(&mut self, value: Icmpv4Message) {
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

    /// Computes and stores the checksum over the whole buffer.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let cksum = !checksum::data(self.buffer.as_ref());
        self.set_checksum(cksum);
    }

    /// The bytes after the header, mutably.
    pub fn data_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA]
    }

    /// The bytes after the header, mutably (alias of [`data_mut`](Self::data_mut)).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        self.data_mut()
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Icmpv4Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// An ICMPv4 echo message. The data is not held: it stays in the packet buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Icmpv4Repr {
    /// Type 8.
    EchoRequest {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Bytes of data after the header.
        data_len: usize,
    },
    /// Type 0.
    EchoReply {
        /// Identifier.
        ident: u16,
        /// Sequence number.
        seq_no: u16,
        /// Bytes of data after the header.
        data_len: usize,
    },
}

impl Icmpv4Repr {
    /// Reads an echo request or reply: the checksum if `verify_checksum`
    /// ([`Error::Checksum`]), code 0 ([`Error::Malformed`]); other types are
    /// [`Error::Unsupported`].
    pub fn parse<T: AsRef<[u8]>>(packet: &Icmpv4Packet<T>, verify_checksum: bool) -> Result<Self> {
        packet.check_len()?;
        if verify_checksum && !packet.verify_checksum() {
            return Err(Error::Checksum);
        }
        let (ident, seq_no, data_len) = (packet.echo_ident(), packet.echo_seq_no(), packet.data().len());
        let repr = match packet.msg_type() {
            Icmpv4Message::EchoRequest => Self::EchoRequest { ident, seq_no, data_len },
            Icmpv4Message::EchoReply => Self::EchoReply { ident, seq_no, data_len },
            _ => return Err(Error::Unsupported),
        };
        if packet.code() != 0 {
            return Err(Error::Malformed);
        }
        Ok(repr)
    }

    /// Bytes of the whole message: header plus `data_len`.
    pub const fn buffer_len(&self) -> usize {
        match self {
            Self::EchoRequest { data_len, .. } | Self::EchoReply { data_len, .. } => HEADER_LEN + *data_len,
        }
    }

    /// Writes the header and the checksum over the whole buffer, so **write the data
    /// first** (through [`Icmpv4Packet::data_mut`]), or call
    /// [`Icmpv4Packet::fill_checksum`] again after. The buffer should be exactly
    /// [`buffer_len`](Self::buffer_len) long.
    ///
    /// # Panics
    /// If the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Icmpv4Packet<T>) {
        let (msg_type, ident, seq_no) = match *self {
            Self::EchoRequest { ident, seq_no, .. } => (Icmpv4Message::EchoRequest, ident, seq_no),
            Self::EchoReply { ident, seq_no, .. } => (Icmpv4Message::EchoReply, ident, seq_no),
        };
        packet.set_msg_type(msg_type);
        packet.set_code(0);
        packet.set_echo_ident(ident);
        packet.set_echo_seq_no(seq_no);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::{tests::PING, Ipv4Packet};
    use crate::testutil::hex;

    #[test]
    fn parse_real_echo_request() {
        let bytes = hex(PING);
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        let p = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(p.msg_type(), Icmpv4Message::EchoRequest);
        assert_eq!(p.code(), 0);
        assert_eq!(p.checksum(), 0x2588);
        assert!(p.verify_checksum());
        assert_eq!((p.echo_ident(), p.echo_seq_no()), (1234, 1));
        assert_eq!(p.data().len(), 56);
        assert_eq!(Icmpv4Repr::parse(&p, true), Ok(Icmpv4Repr::EchoRequest { ident: 1234, seq_no: 1, data_len: 56 }));
    }

    #[test]
    fn answer_in_place_matches_emit() {
        let bytes = hex(PING);
        let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
        let request = Icmpv4Packet::new_checked(ip.payload()).unwrap();
        let Icmpv4Repr::EchoRequest { ident, seq_no, data_len } = Icmpv4Repr::parse(&request, true).unwrap() else {
            panic!("not a request")
        };
        let reply = Icmpv4Repr::EchoReply { ident, seq_no, data_len };

        let mut out = vec![0u8; reply.buffer_len()];
        let mut p = Icmpv4Packet::new_unchecked(&mut out[..]);
        p.data_mut().copy_from_slice(request.data());
        reply.emit(&mut p);
        assert!(p.verify_checksum());
        assert_eq!(Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).unwrap(), true), Ok(reply));

        // Turning the request around in place with an incremental update gives the same.
        let mut in_place = ip.payload().to_vec();
        let mut q = Icmpv4Packet::new_unchecked(&mut in_place[..]);
        let cksum = checksum::update16(q.checksum(), 0x0800, 0x0000);
        q.set_msg_type(Icmpv4Message::EchoReply);
        q.set_checksum(cksum);
        assert_eq!(in_place, out);
    }

    #[test]
    fn message_types() {
        for t in 0..=255u8 {
            assert_eq!(u8::from(Icmpv4Message::from(t)), t);
        }
        assert_eq!(Icmpv4Message::from(3), Icmpv4Message::DstUnreachable);
    }

    #[test]
    fn rejects() {
        let bytes = hex(PING);
        let mut icmp = bytes[20..].to_vec();
        icmp[0] = 3;
        let mut p = Icmpv4Packet::new_unchecked(&mut icmp[..]);
        p.fill_checksum();
        assert_eq!(Icmpv4Repr::parse(&p, true), Err(Error::Unsupported));
        p.set_msg_type(Icmpv4Message::EchoRequest);
        p.set_code(1);
        p.fill_checksum();
        assert_eq!(Icmpv4Repr::parse(&p, true), Err(Error::Malformed));
        p.set_code(0);
        assert_eq!(Icmpv4Repr::parse(&p, true), Err(Error::Checksum));
        assert!(Icmpv4Repr::parse(&p, false).is_ok());
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = hex(PING);
        let icmp = &bytes[20..];
        for len in 0..icmp.len() {
            let b = &icmp[..len];
            let err = Icmpv4Repr::parse(&Icmpv4Packet::new_unchecked(b), true);
            assert!(err.is_err(), "len {len}");
            if len < HEADER_LEN {
                assert_eq!(Icmpv4Packet::new_checked(b), Err(Error::Truncated));
                assert_eq!(err, Err(Error::Truncated));
            }
        }
    }
}
