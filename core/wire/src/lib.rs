//! `ironpath-wire`: zero-copy views of packet headers and their representations.
//!
//! It owns the byte layout of the protocols ironpath parses and builds, in the style of
//! smoltcp's `wire` module:
//! * [`ethernet`]: Ethernet II frames, [`EthernetAddress`], [`EtherType`] and
//!   [`ethernet::l3_offset`] (skips up to two VLAN tags);
//! * [`vlan`]: 802.1Q / 802.1ad tags;
//! * [`arp`]: ARP for Ethernet/IPv4;
//! * [`ip`]: [`IpProtocol`] and [`IpAddress`], shared by the layers above IP;
//! * [`ipv4`] and [`ipv6`] (with [`ipv6::upper_layer`], a bounded extension-header walk);
//! * [`icmpv4`] and [`icmpv6`] (echo and neighbour discovery);
//! * [`tcp`] (with its options) and [`udp`];
//! * [`checksum`]: the Internet checksum, pseudo-headers and RFC 1624 incremental updates;
//! * [`describe`]: one text line per header of a frame (for traces).
//!
//! Each protocol has a `…Packet<T: AsRef<[u8]>>` (or `…Frame`/`…Header`) view over a byte
//! buffer and a `…Repr` that holds the fields a stack acts on:
//! * `new_unchecked` wraps any buffer (for emission into a buffer you sized yourself);
//! * `new_checked` calls `check_len`; after it succeeds no accessor panics, whatever the
//!   bytes are (option and extension-header walks return errors instead);
//! * getters need `T: AsRef<[u8]>`, setters and `payload_mut` need `T: AsMut<[u8]>`;
//! * `Repr::parse` validates a view, `Repr::buffer_len` says how many bytes `Repr::emit`
//!   writes.
//!
//! Nothing here allocates, logs or uses `unsafe`. Errors are the four-variant [`Error`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;

pub mod arp;
pub mod checksum;
pub mod describe;
pub mod ethernet;
pub mod icmpv4;
pub mod icmpv6;
pub mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod tcp;
pub mod udp;
pub mod vlan;

pub use arp::{ArpOperation, ArpPacket, ArpRepr};
pub use ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
pub use icmpv4::{Icmpv4Message, Icmpv4Packet, Icmpv4Repr};
pub use icmpv6::{Icmpv6Message, Icmpv6Packet, Icmpv6Repr, NdiscOption, NdiscOptions, NeighborFlags};
pub use ip::{IpAddress, IpProtocol};
pub use ipv4::{Ipv4Packet, Ipv4Repr};
pub use ipv6::{Ipv6Packet, Ipv6Repr};
pub use tcp::{TcpControl, TcpOption, TcpOptions, TcpPacket, TcpRepr};
pub use udp::{UdpPacket, UdpRepr};
pub use vlan::{VlanHeader, VlanRepr};

/// Why bytes could not be read as a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Error {
    /// The buffer is shorter than the header, or than a length field says.
    Truncated,
    /// A field holds a value the protocol forbids (bad version, length or option).
    Malformed,
    /// The checksum does not verify.
    Checksum,
    /// Valid on the wire but not handled here (other hardware type, later fragment...).
    Unsupported,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated packet",
            Error::Malformed => "malformed packet",
            Error::Checksum => "checksum mismatch",
            Error::Unsupported => "unsupported packet",
        })
    }
}

impl std::error::Error for Error {}

/// The result of parsing wire data.
pub type Result<T> = core::result::Result<T, Error>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display() {
        assert_eq!(Error::Truncated.to_string(), "truncated packet");
        assert_eq!(Error::Malformed.to_string(), "malformed packet");
        assert_eq!(Error::Checksum.to_string(), "checksum mismatch");
        assert_eq!(Error::Unsupported.to_string(), "unsupported packet");
    }
}

/// Helpers shared by the unit tests of every module.
#[cfg(test)]
pub(crate) mod testutil {
    /// Decodes a hex string, ignoring whitespace.
    pub fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        assert_eq!(digits.len() % 2, 0, "odd number of hex digits");
        digits.chunks(2).map(|p| u8::from_str_radix(std::str::from_utf8(p).unwrap(), 16).expect("hex digit")).collect()
    }

    /// The workspace's seeded test generator.
    pub use ironpath_util::testing::XorShift;
}
