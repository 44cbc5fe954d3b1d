//! Untrusted frames through the Ethernet, VLAN and ARP views of `ironpath-wire` and
//! `l3_offset`: no accessor may panic once `new_checked` succeeds, and every repr that
//! parses must emit the same bytes and parse back to itself.
#![no_main]
use ironpath_wire::ethernet::{self, l3_offset, EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use ironpath_wire::vlan::{self, VlanHeader, VlanRepr};
use ironpath_wire::{arp, ArpPacket, ArpRepr};
use libfuzzer_sys::fuzz_target;

fn check_arp(data: &[u8]) {
    let Ok(packet) = ArpPacket::new_checked(data) else { return };
    let _ = (packet.hardware_type(), packet.protocol_type(), packet.operation());
    let _ = (packet.source_hardware_addr(), packet.source_protocol_addr());
    let _ = (packet.target_hardware_addr(), packet.target_protocol_addr());
    if let Ok(repr) = ArpRepr::parse(&packet) {
        let mut out = vec![0u8; repr.buffer_len()];
        repr.emit(&mut ArpPacket::new_unchecked(&mut out[..]));
        assert_eq!(out[..], data[..arp::LEN], "ARP emit differs from its input");
        assert_eq!(ArpRepr::parse(&ArpPacket::new_checked(&out[..]).unwrap()), Ok(repr));
    }
}

fn check_vlan(data: &[u8]) {
    let Ok(tag) = VlanHeader::new_checked(data) else { return };
    let _ = (tag.pcp(), tag.dei(), tag.vid(), tag.payload());
    let repr = VlanRepr::parse(&tag).expect("a checked tag always parses");
    let mut out = [0u8; vlan::HEADER_LEN];
    repr.emit(&mut VlanHeader::new_unchecked(&mut out[..]));
    assert_eq!(out[..], data[..vlan::HEADER_LEN]);
}

fuzz_target!(|data: &[u8]| {
    if let Ok(frame) = EthernetFrame::new_checked(data) {
        let _ = (frame.dst_addr().is_multicast(), frame.src_addr().is_broadcast(), frame.payload());
        let repr = EthernetRepr::parse(&frame).expect("a checked frame always parses");
        let mut out = [0u8; ethernet::HEADER_LEN];
        repr.emit(&mut EthernetFrame::new_unchecked(&mut out[..]));
        assert_eq!(out[..], data[..ethernet::HEADER_LEN]);
        check_vlan(frame.payload());
    }
    if let Ok((ethertype, offset)) = l3_offset(data) {
        assert!(offset <= data.len() && !ethertype.is_vlan());
        if ethertype == EtherType::ARP {
            check_arp(&data[offset..]);
        }
    }
    check_arp(data);
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(addr) = text.parse::<EthernetAddress>() {
            assert_eq!(addr.to_string().parse(), Ok(addr));
        }
    }
});
