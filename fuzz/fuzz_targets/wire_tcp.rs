//! Untrusted bytes through the TCP view, the option iterator and `TcpRepr` of
//! `ironpath-wire`, over IPv4 and IPv6 pseudo-headers: no accessor may panic once
//! `new_checked` succeeds, the option iterator yields at most one error and then stops,
//! filled checksums verify (also after an RFC 1624 update for a NAT-style IPv4 address
//! rewrite), and a repr that parses must emit and parse back to itself.
//! The first input byte picks the IP version, checksum verification and the new address.
#![no_main]
use std::net::{Ipv4Addr, Ipv6Addr};

use ironpath_wire::{checksum, IpAddress, TcpOptions, TcpPacket, TcpRepr};
use libfuzzer_sys::fuzz_target;

fn check_options(data: &[u8]) {
    let mut options = TcpOptions::new(data);
    for option in options.by_ref() {
        let Ok(option) = option else { break };
        let mut out = vec![0u8; option.buffer_len()];
        assert_eq!(option.emit(&mut out), out.len());
        assert_eq!(TcpOptions::new(&out).next(), Some(Ok(option)), "option does not re-parse");
    }
    assert!(options.next().is_none(), "iteration must stop after an error or the end");
}

fuzz_target!(|input: &[u8]| {
    let Some((&flags, data)) = input.split_first() else { return };
    let (src, dst) = if flags & 1 == 0 {
        (IpAddress::V4(Ipv4Addr::new(192, 168, 0, 1)), IpAddress::V4(Ipv4Addr::new(192, 168, 0, 2)))
    } else {
        (
            IpAddress::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 1)),
            IpAddress::V6(Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2)),
        )
    };
    let verify = flags & 2 != 0;
    check_options(data);
    let Ok(packet) = TcpPacket::new_checked(data) else { return };
    let _ = (packet.src_port(), packet.dst_port(), packet.seq_number(), packet.ack_number(), packet.flags_raw());
    let _ = (packet.window_len(), packet.urgent_at(), packet.segment_len(), packet.verify_checksum(&src, &dst));
    check_options(packet.options());

    let mut copy = data.to_vec();
    let mut filled = TcpPacket::new_unchecked(&mut copy[..]);
    filled.fill_checksum(&src, &dst);
    assert!(filled.verify_checksum(&src, &dst));
    if let (IpAddress::V4(old), IpAddress::V4(_)) = (src, dst) {
        // Rewrite the source address as a NAT would and update the checksum incrementally.
        let new = Ipv4Addr::from(u32::from(old) ^ (u32::from(flags) << 13) ^ u32::from(flags >> 2));
        let cksum = checksum::update32(filled.checksum(), old.into(), new.into());
        filled.set_checksum(cksum);
        assert!(filled.verify_checksum(&IpAddress::V4(new), &dst), "RFC 1624 update broke the checksum");
    }

    if let Ok(repr) = TcpRepr::parse(&packet, &src, &dst, verify) {
        let mut out = vec![0u8; repr.buffer_len()];
        out[repr.header_len()..].copy_from_slice(packet.payload());
        repr.emit(&mut TcpPacket::new_unchecked(&mut out[..]), &src, &dst);
        let emitted = TcpPacket::new_checked(&out[..]).expect("emitted header is well-formed");
        assert_eq!(emitted.payload(), packet.payload());
        assert_eq!(TcpRepr::parse(&emitted, &src, &dst, true), Ok(repr));
    }
});
