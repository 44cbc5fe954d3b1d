//! What goes in and out: [`Endpoint`], [`Segment`], and the RST for a segment no
//! connection wants ([`rst_reply`]).
use std::fmt;

use ironpath_wire::{IpAddress, TcpControl, TcpRepr};

use crate::SeqNum;

/// An IP address and a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Endpoint {
    /// The address.
    pub addr: IpAddress,
    /// The port.
    pub port: u16,
}

impl Endpoint {
    /// `addr:port`.
    pub const fn new(addr: IpAddress, port: u16) -> Self {
        Endpoint { addr, port }
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.addr {
            IpAddress::V4(a) => write!(f, "{a}:{}", self.port),
            IpAddress::V6(a) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// A segment to transmit: the header fields, the IP addresses and the payload.
///
/// `repr.payload_len` equals the payload's length. Emit it with
/// [`TcpRepr::emit`] after writing (or chaining) the payload.
#[derive(Debug, Clone, PartialEq)]
pub struct Segment<P> {
    /// Source IP address (the connection's local address).
    pub src_addr: IpAddress,
    /// Destination IP address.
    pub dst_addr: IpAddress,
    /// Header fields, options included.
    pub repr: TcpRepr,
    /// The payload, `None` for a segment without data.
    pub payload: Option<P>,
    /// Non-zero: the payload is longer than one segment ([`Config::tso_max`]), to be cut
    /// into segments of this many payload bytes by the NIC (TSO) or the kernel (GSO),
    /// each with the same header (the last carries PSH/FIN). Zero: one segment.
    ///
    /// [`Config::tso_max`]: crate::Config::tso_max
    pub tso_segsz: u16,
}

/// A bare header: ports, sequence number, optional ACK, one control flag, no options.
pub(crate) fn bare_repr(local: u16, remote: u16, seq: SeqNum, ack: Option<SeqNum>, control: TcpControl) -> TcpRepr {
    TcpRepr {
        src_port: local,
        dst_port: remote,
        seq_number: seq.0,
        ack_number: ack.map(|a| a.0),
        control,
        window_len: 0,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload_len: 0,
    }
}

/// The RST that answers `seg` (sent from `src` to `dst`, carrying `payload_len` bytes)
/// when no connection exists for it (RFC 9293 §3.10.7.1, "CLOSED"): none for a RST;
/// `<SEQ=SEG.ACK><CTL=RST>` if it carries an ACK; else
/// `<SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>`. The reply goes from `dst` to `src`.
pub fn rst_reply<P>(src: IpAddress, dst: IpAddress, seg: &TcpRepr, payload_len: usize) -> Option<Segment<P>> {
    if seg.control == TcpControl::Rst {
        return None;
    }
    let repr = match seg.ack_number {
        Some(ack) => bare_repr(seg.dst_port, seg.src_port, SeqNum(ack), None, TcpControl::Rst),
        None => {
            let seg_len = payload_len + seg.control.len();
            let ack = SeqNum(seg.seq_number) + seg_len;
            bare_repr(seg.dst_port, seg.src_port, SeqNum(0), Some(ack), TcpControl::Rst)
        }
    };
    Some(Segment { src_addr: dst, dst_addr: src, repr, payload: None, tso_segsz: 0 })
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, Ipv6Addr};

    use super::*;

    #[test]
    fn rst_for_closed_port() {
        let a = IpAddress::from(Ipv4Addr::new(10, 0, 0, 1));
        let b = IpAddress::from(Ipv4Addr::new(10, 0, 0, 2));
        let mut syn = bare_repr(4000, 80, SeqNum(100), None, TcpControl::Syn);
        let rst: Segment<()> = rst_reply(a, b, &syn, 0).unwrap();
        assert_eq!((rst.src_addr, rst.dst_addr), (b, a));
        assert_eq!((rst.repr.src_port, rst.repr.dst_port), (80, 4000));
        assert_eq!((rst.repr.seq_number, rst.repr.ack_number, rst.repr.control), (0, Some(101), TcpControl::Rst));
        syn.control = TcpControl::Psh;
        syn.ack_number = Some(555);
        let rst: Segment<()> = rst_reply(a, b, &syn, 10).unwrap();
        assert_eq!((rst.repr.seq_number, rst.repr.ack_number), (555, None));
        syn.control = TcpControl::Rst;
        assert!(rst_reply::<()>(a, b, &syn, 0).is_none());
        let e = Endpoint::new(IpAddress::from(Ipv6Addr::LOCALHOST), 80);
        assert_eq!(e.to_string(), "[::1]:80");
        assert_eq!(Endpoint::new(a, 1).to_string(), "10.0.0.1:1");
    }
}
