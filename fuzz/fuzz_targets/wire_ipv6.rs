//! Untrusted bytes through the IPv6 and ICMPv6 views of `ironpath-wire` and the
//! extension-header walk `upper_layer`: no accessor may panic once `new_checked`
//! succeeds, the walk stays inside the payload, filled checksums verify, and every repr
//! that parses must emit and parse back to itself. The first input byte picks options.
#![no_main]
use std::net::Ipv6Addr;

use ironpath_wire::ipv6::{self, upper_layer};
use ironpath_wire::{Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv6Packet, Ipv6Repr};
use libfuzzer_sys::fuzz_target;

fn check_icmp(data: &[u8], src: &Ipv6Addr, dst: &Ipv6Addr, verify: bool) {
    let Ok(packet) = Icmpv6Packet::new_checked(data) else { return };
    let _ = (packet.msg_type(), packet.code(), packet.echo_ident(), packet.echo_seq_no(), packet.data());
    let _ = (packet.neighbor_flags(), packet.target_addr(), packet.verify_checksum(src, dst));
    for option in packet.ndisc_options() {
        let Ok(option) = option else { break };
        let mut out = vec![0u8; option.buffer_len()];
        let _ = option.emit(&mut out);
    }
    let mut copy = data.to_vec();
    let mut filled = Icmpv6Packet::new_unchecked(&mut copy[..]);
    filled.fill_checksum(src, dst);
    assert!(filled.verify_checksum(src, dst));
    if let Ok(repr) = Icmpv6Repr::parse(&packet, src, dst, verify) {
        let mut out = vec![0u8; repr.buffer_len()];
        let mut emitted = Icmpv6Packet::new_unchecked(&mut out[..]);
        if let Icmpv6Repr::EchoRequest { .. } | Icmpv6Repr::EchoReply { .. } = repr {
            emitted.data_mut().copy_from_slice(packet.data());
        }
        repr.emit(&mut emitted, src, dst);
        assert_eq!(Icmpv6Repr::parse(&Icmpv6Packet::new_checked(&out[..]).unwrap(), src, dst, true), Ok(repr));
    }
}

fuzz_target!(|input: &[u8]| {
    let Some((&options, data)) = input.split_first() else { return };
    let verify = options & 1 != 0;
    if let Ok(packet) = Ipv6Packet::new_checked(data) {
        let _ = (packet.version(), packet.traffic_class(), packet.flow_label(), packet.hop_limit());
        if let Ok(repr) = Ipv6Repr::parse(&packet) {
            let mut out = vec![0u8; repr.buffer_len() + repr.payload_len];
            out[repr.buffer_len()..].copy_from_slice(packet.payload());
            repr.emit(&mut Ipv6Packet::new_unchecked(&mut out[..]));
            assert_eq!(Ipv6Repr::parse(&Ipv6Packet::new_checked(&out[..]).unwrap()), Ok(repr));
        }
        let end = ipv6::HEADER_LEN + usize::from(packet.payload_len());
        if let Ok((proto, offset)) = upper_layer(&packet) {
            assert!((ipv6::HEADER_LEN..=end).contains(&offset), "upper layer at {offset}, payload ends at {end}");
            if proto == IpProtocol::ICMPV6 {
                check_icmp(&data[offset..end], &packet.src_addr(), &packet.dst_addr(), verify);
            }
        }
    }
    let src = if options & 2 != 0 { Ipv6Addr::UNSPECIFIED } else { Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1) };
    let dst = if options & 4 != 0 { Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1) } else { Ipv6Addr::LOCALHOST };
    check_icmp(data, &src, &dst, verify);
});
