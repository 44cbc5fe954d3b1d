//! Types shared by IPv4, IPv6 and the layers above them.
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An IP protocol number (IPv4 "protocol", IPv6 "next header").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IpProtocol(pub u8);

impl IpProtocol {
    /// IPv6 hop-by-hop options.
    pub const HOPOPT: Self = Self(0);
    /// ICMP for IPv4.
    pub const ICMP: Self = Self(1);
    /// TCP.
    pub const TCP: Self = Self(6);
    /// UDP.
    pub const UDP: Self = Self(17);
    /// IPv6 routing header.
    pub const IPV6_ROUTE: Self = Self(43);
    /// IPv6 fragment header.
    pub const IPV6_FRAG: Self = Self(44);
    /// IPsec Authentication Header.
    pub const AH: Self = Self(51);
    /// ICMP for IPv6.
    pub const ICMPV6: Self = Self(58);
    /// IPv6 "no next header".
    pub const IPV6_NONXT: Self = Self(59);
    /// IPv6 destination options.
    pub const IPV6_OPTS: Self = Self(60);
}

impl From<u8> for IpProtocol {
    fn from(value: u8) -> Self {
        Self(value)
    }
}

impl From<IpProtocol> for u8 {
    fn from(value: IpProtocol) -> Self {
        value.0
    }
}

impl fmt::Display for IpProtocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::HOPOPT => f.write_str("HOPOPT"),
            Self::ICMP => f.write_str("ICMP"),
            Self::TCP => f.write_str("TCP"),
            Self::UDP => f.write_str("UDP"),
            Self::IPV6_ROUTE => f.write_str("IPv6-Route"),
            Self::IPV6_FRAG => f.write_str("IPv6-Frag"),
            Self::AH => f.write_str("AH"),
            Self::ICMPV6 => f.write_str("ICMPv6"),
            Self::IPV6_NONXT => f.write_str("IPv6-NoNxt"),
            Self::IPV6_OPTS => f.write_str("IPv6-Opts"),
            Self(other) => write!(f, "proto {other}"),
        }
    }
}

/// An IPv4 or IPv6 address, as the TCP and UDP pseudo-headers need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IpAddress {
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 address.
    V6(Ipv6Addr),
}

impl IpAddress {
    /// The address as IPv6 (an IPv4 address becomes `::ffff:a.b.c.d`).
    pub fn to_ipv6(&self) -> Ipv6Addr {
        match self {
            IpAddress::V4(a) => a.to_ipv6_mapped(),
            IpAddress::V6(a) => *a,
        }
    }
}

impl From<Ipv4Addr> for IpAddress {
    fn from(a: Ipv4Addr) -> Self {
        IpAddress::V4(a)
    }
}

impl From<Ipv6Addr> for IpAddress {
    fn from(a: Ipv6Addr) -> Self {
        IpAddress::V6(a)
    }
}

impl From<IpAddr> for IpAddress {
    fn from(a: IpAddr) -> Self {
        match a {
            IpAddr::V4(a) => IpAddress::V4(a),
            IpAddr::V6(a) => IpAddress::V6(a),
        }
    }
}

impl From<IpAddress> for IpAddr {
    fn from(a: IpAddress) -> Self {
        match a {
            IpAddress::V4(a) => IpAddr::V4(a),
            IpAddress::V6(a) => IpAddr::V6(a),
        }
    }
}

impl fmt::Display for IpAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IpAddress::V4(a) => a.fmt(f),
            IpAddress::V6(a) => a.fmt(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_numbers_and_display() {
        assert_eq!(IpProtocol::from(6), IpProtocol::TCP);
        assert_eq!(u8::from(IpProtocol::ICMPV6), 58);
        assert_eq!(IpProtocol::UDP.to_string(), "UDP");
        assert_eq!(IpProtocol(200).to_string(), "proto 200");
    }

    #[test]
    fn address_conversions() {
        let v4 = Ipv4Addr::new(10, 1, 2, 3);
        let a = IpAddress::from(IpAddr::V4(v4));
        assert_eq!(a, IpAddress::V4(v4));
        assert_eq!(IpAddr::from(a), IpAddr::V4(v4));
        assert_eq!(a.to_string(), "10.1.2.3");
        assert_eq!(a.to_ipv6(), "::ffff:10.1.2.3".parse::<Ipv6Addr>().unwrap());
        let v6: Ipv6Addr = "2001:db8::1".parse().unwrap();
        assert_eq!(IpAddress::from(v6).to_string(), "2001:db8::1");
    }
}
