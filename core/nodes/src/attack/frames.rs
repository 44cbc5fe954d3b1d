//! Frame builders for tests and the attack corpus: each emits a valid header with
//! `core/wire`'s representations (checksums filled in) around the given payload.

use ironpath_wire::arp::{ArpOperation, ArpPacket, ArpRepr};
use ironpath_wire::ethernet::{EtherType, EthernetAddress, EthernetFrame, EthernetRepr};
use ironpath_wire::icmpv4::{Icmpv4Packet, Icmpv4Repr};
use ironpath_wire::icmpv6::{Icmpv6Packet, Icmpv6Repr};
use ironpath_wire::ipv4::{Ipv4Packet, Ipv4Repr};
use ironpath_wire::ipv6::{Ipv6Packet, Ipv6Repr};
use ironpath_wire::tcp::{TcpControl, TcpPacket, TcpRepr};
use ironpath_wire::udp::{UdpPacket, UdpRepr};
use ironpath_wire::{IpAddress, IpProtocol};
use std::net::{Ipv4Addr, Ipv6Addr};

/// An Ethernet frame.
pub fn eth(dst: [u8; 6], src: [u8; 6], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; 14 + payload.len()];
    EthernetRepr { dst_addr: EthernetAddress(dst), src_addr: EthernetAddress(src), ethertype: EtherType(ethertype) }
        .emit(&mut EthernetFrame::new_unchecked(&mut f[..]));
    f[14..].copy_from_slice(payload);
    f
}

/// `frame` with a VLAN tag (`tpid`, `vid`) inserted after its MAC addresses.
pub fn tagged(frame: &[u8], tpid: u16, vid: u16) -> Vec<u8> {
    let mut f = frame[..12].to_vec();
    f.extend_from_slice(&tpid.to_be_bytes());
    f.extend_from_slice(&(vid & 0x0fff).to_be_bytes());
    f.extend_from_slice(&frame[12..]);
    f
}

/// An ARP packet (28 bytes, no Ethernet header).
pub fn arp(op: ArpOperation, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr) -> Vec<u8> {
    let mut p = vec![0u8; 28];
    ArpRepr {
        operation: op,
        source_hardware_addr: EthernetAddress(sha),
        source_protocol_addr: spa,
        target_hardware_addr: EthernetAddress(tha),
        target_protocol_addr: tpa,
    }
    .emit(&mut ArpPacket::new_unchecked(&mut p[..]));
    p
}

/// An IPv4 packet (20-byte header, valid checksum, TTL `ttl`).
pub fn ipv4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, ttl: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 20 + payload.len()];
    Ipv4Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol(proto),
        payload_len: payload.len(),
        hop_limit: ttl,
    }
    .emit(&mut Ipv4Packet::new_unchecked(&mut p[..]));
    p[20..].copy_from_slice(payload);
    p
}

/// An ICMP echo request (`reply`: an echo reply) with a valid checksum.
pub fn icmp4_echo(reply: bool, ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 8 + data.len()];
    p[8..].copy_from_slice(data);
    let data_len = data.len();
    let repr = if reply {
        Icmpv4Repr::EchoReply { ident, seq_no, data_len }
    } else {
        Icmpv4Repr::EchoRequest { ident, seq_no, data_len }
    };
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut p[..]));
    p
}

/// A UDP datagram with a valid checksum for these addresses.
pub fn udp(src: IpAddress, dst: IpAddress, sport: u16, dport: u16, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 8 + payload.len()];
    p[8..].copy_from_slice(payload);
    UdpRepr { src_port: sport, dst_port: dport, payload_len: payload.len() }.emit(
        &mut UdpPacket::new_unchecked(&mut p[..]),
        &src,
        &dst,
    );
    p
}

/// A TCP segment with a valid checksum: `control`, ACK `ack` if any, the options a
/// SYN carries (MSS, window scale, SACK permitted, timestamps) when `options`.
pub fn tcp(
    (src, dst): (IpAddress, IpAddress),
    (sport, dport): (u16, u16),
    (seq, ack): (u32, Option<u32>),
    control: TcpControl,
    options: bool,
    payload: &[u8],
) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: sport,
        dst_port: dport,
        seq_number: seq,
        ack_number: ack,
        control,
        window_len: 65535,
        max_seg_size: options.then_some(1460),
        window_scale: options.then_some(7),
        sack_permitted: options,
        sack_ranges: [None; 3],
        timestamp: options.then_some((1, 0)),
        payload_len: payload.len(),
    };
    let mut p = vec![0u8; repr.buffer_len()];
    let h = repr.header_len();
    p[h..].copy_from_slice(payload);
    repr.emit(&mut TcpPacket::new_unchecked(&mut p[..]), &src, &dst);
    p
}

/// An IPv6 packet whose payload (extension headers included) is `payload`.
pub fn ipv6(src: Ipv6Addr, dst: Ipv6Addr, next: u8, hop: u8, payload: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; 40 + payload.len()];
    Ipv6Repr {
        src_addr: src,
        dst_addr: dst,
        next_header: IpProtocol(next),
        payload_len: payload.len(),
        hop_limit: hop,
    }
    .emit(&mut Ipv6Packet::new_unchecked(&mut p[..]));
    p[40..].copy_from_slice(payload);
    p
}

/// An ICMPv6 message for `repr` (echo `data` after the header) with a valid checksum.
pub fn icmp6(repr: Icmpv6Repr, src: Ipv6Addr, dst: Ipv6Addr, data: &[u8]) -> Vec<u8> {
    let mut p = vec![0u8; repr.buffer_len().max(8 + data.len())];
    p[8..8 + data.len()].copy_from_slice(data);
    repr.emit(&mut Icmpv6Packet::new_unchecked(&mut p[..]), &src, &dst);
    p
}

/// Where the IP header of `frame` starts (after up to three VLAN tags), and its
/// ethertype.
pub fn l3(frame: &[u8]) -> Option<(usize, u16)> {
    let mut at = 12;
    for _ in 0..4 {
        let t = u16::from_be_bytes([*frame.get(at)?, *frame.get(at + 1)?]);
        if matches!(t, 0x8100 | 0x88a8 | 0x9100) {
            at += 4;
        } else {
            return Some((at + 2, t));
        }
    }
    None
}

/// Make the IP length fields of `frame` (IPv4 total length and header checksum, or
/// IPv6 payload length) agree with its length: a frame cut short that still looks
/// whole to a parser that trusts the header.
pub fn fix_ip_lengths(frame: &mut [u8]) {
    let Some((at, ethertype)) = l3(frame) else { return };
    let len = frame.len().saturating_sub(at);
    match ethertype {
        0x0800 if len >= 20 => {
            let ihl = (usize::from(frame[at] & 0x0f) * 4).clamp(20, len);
            frame[at + 2..at + 4].copy_from_slice(&(len as u16).to_be_bytes());
            frame[at + 10..at + 12].fill(0);
            let sum = !ironpath_wire::checksum::data(&frame[at..at + ihl]);
            frame[at + 10..at + 12].copy_from_slice(&sum.to_be_bytes());
        }
        0x86dd if len >= 40 => frame[at + 4..at + 6].copy_from_slice(&((len - 40) as u16).to_be_bytes()),
        _ => {}
    }
}
