//! Untrusted bytes through the IPv4, ICMPv4 and UDP views of `ironpath-wire`: no
//! accessor may panic once `new_checked` succeeds, filled checksums verify, an RFC 1624
//! update of a header word keeps the checksum valid, and every repr that parses must
//! emit and parse back to itself. The first input byte picks options.
#![no_main]
use std::net::Ipv4Addr;

use ironpath_wire::{checksum, IpAddress, IpProtocol};
use ironpath_wire::{Icmpv4Packet, Icmpv4Repr, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr};
use libfuzzer_sys::fuzz_target;

fn check_icmp(data: &[u8], verify: bool) {
    let Ok(packet) = Icmpv4Packet::new_checked(data) else { return };
    let _ = (packet.msg_type(), packet.code(), packet.echo_ident(), packet.echo_seq_no(), packet.data());
    let mut copy = data.to_vec();
    let mut filled = Icmpv4Packet::new_unchecked(&mut copy[..]);
    filled.fill_checksum();
    assert!(filled.verify_checksum());
    if let Ok(repr) = Icmpv4Repr::parse(&packet, verify) {
        let mut out = vec![0u8; repr.buffer_len()];
        let mut emitted = Icmpv4Packet::new_unchecked(&mut out[..]);
        emitted.data_mut().copy_from_slice(packet.data());
        repr.emit(&mut emitted);
        assert_eq!(Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&out[..]).unwrap(), true), Ok(repr));
    }
}

fn check_udp(data: &[u8], src: &IpAddress, dst: &IpAddress, verify: bool) {
    let Ok(packet) = UdpPacket::new_checked(data) else { return };
    let _ = (packet.src_port(), packet.dst_port(), packet.payload(), packet.verify_checksum(src, dst));
    let mut copy = data.to_vec();
    let mut filled = UdpPacket::new_unchecked(&mut copy[..]);
    filled.fill_checksum(src, dst);
    assert!(filled.verify_checksum(src, dst) && filled.checksum() != 0);
    if let Ok(repr) = UdpRepr::parse(&packet, src, dst, verify) {
        let mut out = vec![0u8; repr.buffer_len()];
        out[repr.header_len()..].copy_from_slice(packet.payload());
        repr.emit(&mut UdpPacket::new_unchecked(&mut out[..]), src, dst);
        assert_eq!(UdpRepr::parse(&UdpPacket::new_checked(&out[..]).unwrap(), src, dst, true), Ok(repr));
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&options, data)) = input.split_first() else { return };
    let verify = options & 1 != 0;
    if let Ok(packet) = Ipv4Packet::new_checked(data) {
        let _ = (packet.version(), packet.dscp(), packet.ecn(), packet.ident(), packet.dont_frag());
        let _ = (packet.more_frags(), packet.frag_offset(), packet.ttl(), packet.checksum(), packet.options());
        if let Ok(repr) = Ipv4Repr::parse(&packet, verify) {
            let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
            out[repr.buffer_len()..].copy_from_slice(packet.payload());
            repr.emit(&mut Ipv4Packet::new_unchecked(&mut out[..]));
            assert_eq!(Ipv4Repr::parse(&Ipv4Packet::new_checked(&out[..]).unwrap(), true), Ok(repr));
        }

        // Fill the checksum, then change one 16-bit word (not version/IHL, so the header
        // never becomes all zeros, and not the checksum) with an incremental update.
        let mut copy = data.to_vec();
        let mut header = Ipv4Packet::new_unchecked(&mut copy[..]);
        header.fill_checksum();
        assert!(header.verify_checksum());
        let words = usize::from(header.header_len()) / 2;
        let at = 2 * (1 + usize::from(options >> 1) % (words - 1));
        if at != 10 {
            let old = u16::from_be_bytes([copy[at], copy[at + 1]]);
            let new = old.rotate_left(u32::from(options)) ^ u16::from(options);
            copy[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let cksum = checksum::update16(u16::from_be_bytes([copy[10], copy[11]]), old, new);
            copy[10..12].copy_from_slice(&cksum.to_be_bytes());
            assert!(Ipv4Packet::new_unchecked(&copy[..]).verify_checksum(), "RFC 1624 update broke the checksum");
        }

        let (src, dst) = (IpAddress::V4(packet.src_addr()), IpAddress::V4(packet.dst_addr()));
        match packet.next_header() {
            IpProtocol::ICMP => check_icmp(packet.payload(), verify),
            IpProtocol::UDP => check_udp(packet.payload(), &src, &dst, verify),
            _ => {}
        }
    }
    check_icmp(data, verify);
    let fixed = (IpAddress::V4(Ipv4Addr::new(10, 0, 0, 1)), IpAddress::V4(Ipv4Addr::new(10, 0, 0, 2)));
    check_udp(data, &fixed.0, &fixed.1, verify);
});
