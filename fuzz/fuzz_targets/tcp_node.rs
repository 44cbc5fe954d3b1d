//! Frames and virtual time through the `tcp` node: an `http` listener on port 80
//! (objects `/empty` and `/obj`, and a web root whose one file, `/nothing`, is
//! 300,000 bytes: cached, or streamed in small mode) and an `echo` listener on port 7,
//! on 198.18.0.2 and fd00::2, talking to a peer the input describes. The node's file
//! I/O runs inline (`file_threads: 0`): each request made at a poll completes at the
//! next, on this thread, so that a run depends on its input only.
//!
//! Input: byte 0 holds flags (bit 0: the NIC verified IP checksums, bit 1: it verified
//! L4 checksums, bit 2: structured records, bit 3: small buffers (and `/nothing` streamed), bit 4: no TCP
//! options, bit 5: no delayed ACK and no Nagle, bit 6: room for 2 connections and a
//! backlog of 1, bit 7: short keep-alive, idle and FIN-WAIT-2 timers). Then records, at most 512, each a time step (little-endian u16:
//! below 0x8000 in µs, from 0x8000 on `t - 0x8000` ms) and a frame. Frames arriving
//! with no time step between them share a burst. A raw frame is a little-endian u16
//! length and its bytes (cut to 4096 and to what is left). A structured frame is
//! built with valid headers and checksums from small fields relative to what the
//! node last sent on its connection (see [`Peer::frame`]), so that the search gets
//! through the handshake into established, closing and TIME-WAIT states; in
//! structured mode a record whose first frame byte has bit 7 set holds a raw frame
//! after that byte. Raw frames longer than a buffer (2048 bytes) arrive chained.
//! After the records the node is polled for ~8 virtual seconds while it holds a
//! connection or a handshake, then dropped.
//!
//! No panic; every frame the node sends is Ethernet + IPv4/IPv6 + TCP from our MAC
//! and one of our addresses, with exact lengths, a valid IPv4 header checksum, a
//! valid TCP checksum and options, and at most an MSS of payload; with no connection
//! left, no memory is charged to any; and once the node is gone no mbuf may be left in
//! use.
#![no_main]
use ironpath_eal::abi;
use ironpath_eal::{Burst, Mbuf, MemPolicy, Mempool, MempoolConfig};
use ironpath_graph::testing::call;
use ironpath_graph::{Node, NodeStats};
use ironpath_nodes::tcp::{ListenCfg, ServerApp, TcpConfig, TcpLimits, TcpNode};
use ironpath_wire::ethernet::HEADER_LEN as ETH_LEN;
use ironpath_wire::{IpAddress, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpPacket, TcpRepr};
use libfuzzer_sys::fuzz_target;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

const MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const US4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
const PEER4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
const US6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 2);
const PEER6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1);
/// The peer's ports in structured frames: `PEER_PORT + 0..4`.
const PEER_PORT: u16 = 40000;
const MSS: u16 = 1460;
/// TSC ticks per second: one tick per µs.
const HZ: u64 = 1_000_000;
const MAX_FRAME: usize = 4096;
const MAX_RECORDS: usize = 512;

/// The web root (made once per process; written beside and renamed, for parallel jobs).
fn www() -> &'static PathBuf {
    static WWW: OnceLock<PathBuf> = OnceLock::new();
    WWW.get_or_init(|| {
        let dir = std::env::temp_dir().join("ironpath-fuzz-tcp-node");
        let file = dir.join("nothing");
        if std::fs::metadata(&file).map(|m| m.len()).ok() != Some(FILE_LEN as u64) {
            std::fs::create_dir_all(&dir).expect("web root");
            let tmp = dir.join(format!(".nothing.{}", std::process::id()));
            std::fs::write(&tmp, (0..FILE_LEN).map(|i| (i % 253) as u8).collect::<Vec<u8>>()).expect("file");
            std::fs::rename(&tmp, &file).expect("file");
        }
        dir
    })
}

/// Bytes of `/nothing`: two pieces of the file cache.
const FILE_LEN: usize = 300_000;

fn pool() -> &'static Mempool {
    static POOL: OnceLock<Mempool> = OnceLock::new();
    POOL.get_or_init(|| {
        Mempool::create(&MempoolConfig::new("fuzz-tcp-node", 4096).cache_size(0).policy(MemPolicy::NoHuge))
            .expect("create mempool")
    })
}

/// The node's settings; `flags` is byte 0 of the input.
fn config(flags: u8) -> TcpConfig {
    let small = flags & 8 != 0;
    let plain = flags & 16 != 0;
    let eager = flags & 32 != 0;
    let tight = flags & 64 != 0;
    let timers = flags & 128 != 0;
    let tcp = ironpath_tcp::Config {
        keepalive: timers.then_some(ironpath_tcp::Keepalive {
            idle: Duration::from_secs(1),
            interval: Duration::from_millis(200),
            probes: 2,
        }),
        idle_timeout: timers.then_some(Duration::from_secs(3)),
        fin_wait2_timeout: Some(Duration::from_secs(if timers { 1 } else { 60 })),
        mss: MSS,
        send_buffer: if small { 4096 } else { 64 * 1024 },
        recv_buffer: if small { 2048 } else { 64 * 1024 },
        window_scaling: !plain,
        timestamps: !plain,
        sack: !plain,
        nagle: !eager,
        ack_delay: if eager { Duration::ZERO } else { Duration::from_millis(40) },
        max_ooo_segments: if small { 4 } else { 64 },
        ..ironpath_tcp::Config::default()
    };
    let backlog = if tight { 1 } else { 4 };
    TcpConfig {
        mac: MAC,
        addresses: vec![IpAddress::V4(US4), IpAddress::V6(US6)],
        tcp,
        listen: vec![
            ListenCfg {
                port: 80,
                app: ServerApp::Http,
                backlog,
                bytes: 0,
                root: Some(www().clone()),
                objects: "/empty=0,/obj=5000".into(),
                congestion: None,
                dotfiles: false,
            },
            ListenCfg {
                port: 7,
                app: ServerApp::Echo,
                backlog,
                bytes: 0,
                root: None,
                objects: String::new(),
                congestion: None,
                dotfiles: false,
            },
        ],
        connect: Vec::new(),
        max_connections: if tight { 2 } else { 8 },
        tsc_hz: HZ,
        isn_secret: [0x5a; 16],
        tx_inflight_limit: if tight { 4096 } else { 0 },
        memory_limit: if small { 8192 } else { 0 },
        max_time_wait: if small { 2 } else { 262_144 },
        limits: TcpLimits { file_threads: 0, file_cache: if small { 0 } else { 1 << 20 }, ..Default::default() },
    }
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }

    fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }

    fn bytes(&mut self, n: usize) -> &[u8] {
        let (head, rest) = self.0.split_at(n.min(self.0.len()));
        self.0 = rest;
        head
    }

    /// A raw frame: u16 length and bytes.
    fn frame(&mut self) -> Option<Vec<u8>> {
        let len = usize::from(self.u16()?).min(MAX_FRAME);
        Some(self.bytes(len).to_vec())
    }
}

/// Payloads worth more than random bytes to the `http` application.
const CANNED: [&[u8]; 10] = [
    b"GET /obj HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET /empty HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n",
    b"HEAD /obj HTTP/1.0\r\n\r\n",
    b"GET /obj HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    b"GET /nothing HTTP/1.1\r\n\r\n",
    b"GET /obj HTTP/1.1\r\n",
    b"Host: a\r\n\r\n",
    b"POST /obj HTTP/1.1\r\nContent-Length: 5\r\n\r\nhelloGET /empty HTTP/1.1\r\n\r\n",
    b"DELETE /obj HTTP/1.1\r\n\r\n",
    b"GET /obj HTTP/1.1\r\nX: 1\r\n\r\nGET /obj HTTP/1.1\r\n\r\nGET /empty HTTP/1.1\r\n\r\n",
];

/// A header line long enough to fill a segment (toward the 8 KiB head limit).
fn padding() -> Vec<u8> {
    let mut v = b"X-Pad: ".to_vec();
    v.resize(1400, b'p');
    v.extend_from_slice(b"\r\n");
    v
}

/// `a` after `b` in sequence space.
fn seq_gt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

/// What the peer knows of one of its connections to the node.
#[derive(Clone, Copy, Default)]
struct Flow {
    /// Our next sequence number.
    snd_nxt: u32,
    /// The node's last acknowledgment number (its `rcv_nxt`).
    node_ack: Option<u32>,
    /// Past the last byte (or SYN/FIN) the node sent.
    node_nxt: u32,
    /// The node's last timestamp value, echoed in ours.
    node_tsval: u32,
}

/// The peer of structured mode: 16 connections, by family, our port (80 or 7) and
/// the peer's port (`PEER_PORT + 0..4`).
struct Peer {
    flows: [Flow; 16],
}

impl Peer {
    fn new() -> Peer {
        let mut flows = [Flow::default(); 16];
        for (i, f) in flows.iter_mut().enumerate() {
            f.snd_nxt = 0x1000_0000u32.wrapping_mul(i as u32 + 1);
        }
        Peer { flows }
    }

    fn index(v6: bool, our_port: u16, peer_port: u16) -> Option<usize> {
        let port7 = match our_port {
            80 => 0,
            7 => 1,
            _ => return None,
        };
        let k = peer_port.checked_sub(PEER_PORT).filter(|&k| k < 4)?;
        Some(usize::from(v6) << 3 | port7 << 2 | usize::from(k))
    }

    /// Learns from a frame the node sent (already checked).
    fn learn(&mut self, v6: bool, repr: &TcpRepr) {
        let Some(i) = Peer::index(v6, repr.src_port, repr.dst_port) else { return };
        let f = &mut self.flows[i];
        let end = repr.seq_number.wrapping_add(repr.segment_len() as u32);
        match repr.control {
            ironpath_wire::TcpControl::Syn => f.node_nxt = end,
            ironpath_wire::TcpControl::Rst => {}
            _ if seq_gt(end, f.node_nxt) => f.node_nxt = end,
            _ => {}
        }
        if let Some(a) = repr.ack_number {
            f.node_ack = Some(a);
        }
        if let Some((tsval, _)) = repr.timestamp {
            f.node_tsval = tsval;
        }
    }

    /// A structured frame:
    /// * `ctl`: bits 0-1 the peer port (`PEER_PORT + n`), bit 2 to port 7 (else 80),
    ///   bit 3 IPv6, bit 4 sequence number from the node's last ACK (else from what we
    ///   sent), bit 5 options (on a SYN: MSS 1460, window scale 7, SACK-permitted and
    ///   timestamps; else a timestamp), bit 6 a SACK block (two more bytes: its start
    ///   past our ACK and its length, in 64-byte units);
    /// * the TCP flags byte as sent;
    /// * sequence and acknowledgment offsets (i16), the acknowledgment relative to
    ///   the end of what the node sent;
    /// * the window, in units of 256 bytes;
    /// * the payload length: below 0xc0 that many bytes follow, else a canned HTTP
    ///   request or a padding header line.
    fn frame(&mut self, input: &mut Input<'_>, now_ms: u32) -> Option<Vec<u8>> {
        let ctl = input.u8()?;
        let flags = input.u8()?;
        let seq_off = input.u16()? as i16;
        let ack_off = input.u16()? as i16;
        let window = u16::from(input.u8()?) << 8;
        let sack = if ctl & 0x40 != 0 { Some((input.u8()?, input.u8()?)) } else { None };
        let len = input.u8()?;
        let payload = match len {
            0..=0xbf => input.bytes(usize::from(len)).to_vec(),
            _ => match usize::from(len - 0xc0) % (CANNED.len() + 1) {
                k if k < CANNED.len() => CANNED[k].to_vec(),
                _ => padding(),
            },
        };
        let v6 = ctl & 8 != 0;
        let our_port = if ctl & 4 != 0 { 7 } else { 80 };
        let peer_port = PEER_PORT + u16::from(ctl & 3);
        let i = Peer::index(v6, our_port, peer_port).expect("a structured flow");
        let f = &mut self.flows[i];
        let base = if ctl & 0x10 != 0 { f.node_ack.unwrap_or(f.snd_nxt) } else { f.snd_nxt };
        let seq = base.wrapping_add(i32::from(seq_off) as u32);
        let ack = f.node_nxt.wrapping_add(i32::from(ack_off) as u32);
        let syn = flags & 0x02 != 0;
        let options = ctl & 0x20 != 0;
        let repr = TcpRepr {
            src_port: peer_port,
            dst_port: our_port,
            seq_number: seq,
            ack_number: Some(ack),
            control: ironpath_wire::TcpControl::None,
            window_len: window,
            max_seg_size: (syn && options).then_some(MSS),
            window_scale: (syn && options).then_some(7),
            sack_permitted: syn && options,
            sack_ranges: [
                sack.map(|(a, b)| {
                    let l = ack.wrapping_add(u32::from(a) * 64);
                    (l, l.wrapping_add(u32::from(b) * 64))
                }),
                None,
                None,
            ],
            timestamp: options.then_some((now_ms, f.node_tsval)),
            payload_len: payload.len(),
        };
        // Our sequence space: a SYN without ACK starts over; otherwise what we sent
        // furthest (an offset ahead leaves a hole for a later segment to fill).
        if flags & 0x04 == 0 {
            let end = seq.wrapping_add(payload.len() as u32 + u32::from(syn) + u32::from(flags & 0x01));
            if syn && flags & 0x10 == 0 || seq_gt(end, f.snd_nxt) {
                f.snd_nxt = end;
            }
        }

        let tcp_len = repr.buffer_len();
        let mut tcp = vec![0u8; tcp_len];
        tcp[repr.header_len()..].copy_from_slice(&payload);
        let (src, dst) =
            if v6 { (IpAddress::V6(PEER6), IpAddress::V6(US6)) } else { (IpAddress::V4(PEER4), IpAddress::V4(US4)) };
        let mut p = TcpPacket::new_unchecked(&mut tcp[..]);
        repr.emit(&mut p, &src, &dst);
        p.set_flags_raw(flags);
        p.fill_checksum(&src, &dst);

        let ip_len = if v6 { 40 } else { 20 };
        let mut d = vec![0u8; ETH_LEN + ip_len];
        d[..6].copy_from_slice(&MAC);
        d[6..12].copy_from_slice(&PEER_MAC);
        if v6 {
            d[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
            Ipv6Repr {
                src_addr: PEER6,
                dst_addr: US6,
                next_header: IpProtocol::TCP,
                payload_len: tcp_len,
                hop_limit: 64,
            }
            .emit(&mut Ipv6Packet::new_unchecked(&mut d[ETH_LEN..]));
        } else {
            d[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
            Ipv4Repr {
                src_addr: PEER4,
                dst_addr: US4,
                next_header: IpProtocol::TCP,
                payload_len: tcp_len,
                hop_limit: 64,
            }
            .emit(&mut Ipv4Packet::new_unchecked(&mut d[ETH_LEN..]));
        }
        d.extend_from_slice(&tcp);
        Some(d)
    }
}

/// Checks a frame the node sent and returns its family and TCP header.
fn check_output(d: &[u8]) -> (bool, TcpRepr) {
    assert!(d.len() >= ETH_LEN, "a frame shorter than Ethernet: {d:02x?}");
    assert_eq!(&d[6..12], &MAC, "source MAC");
    let (v6, src, dst, l4) = match u16::from_be_bytes([d[12], d[13]]) {
        0x0800 => {
            let ip = Ipv4Packet::new_checked(&d[ETH_LEN..]).expect("IPv4 header parses");
            assert_eq!(ip.version(), 4);
            assert!(ip.verify_checksum(), "IPv4 header checksum");
            assert_eq!(usize::from(ip.total_len()), d.len() - ETH_LEN, "IPv4 total length is the frame's");
            assert!(!ip.is_fragment());
            assert_eq!(ip.next_header(), IpProtocol::TCP);
            assert_eq!(ip.src_addr(), US4, "IPv4 source");
            (false, IpAddress::V4(ip.src_addr()), IpAddress::V4(ip.dst_addr()), ETH_LEN + usize::from(ip.header_len()))
        }
        0x86dd => {
            let ip = Ipv6Packet::new_checked(&d[ETH_LEN..]).expect("IPv6 header parses");
            assert_eq!(ip.version(), 6);
            assert_eq!(usize::from(ip.payload_len()) + 40, d.len() - ETH_LEN, "IPv6 payload length is the frame's");
            assert_eq!(ip.next_header(), IpProtocol::TCP);
            assert_eq!(ip.src_addr(), US6, "IPv6 source");
            (true, IpAddress::V6(ip.src_addr()), IpAddress::V6(ip.dst_addr()), ETH_LEN + 40)
        }
        t => panic!("the tcp node sent ethertype {t:#06x}"),
    };
    let tcp = TcpPacket::new_checked(&d[l4..]).expect("TCP header parses");
    let repr = TcpRepr::parse(&tcp, &src, &dst, true).expect("TCP header and checksum valid");
    assert!(repr.payload_len <= usize::from(MSS), "{} bytes of payload, more than the MSS", repr.payload_len);
    (v6, repr)
}

/// Runs the node on `pkts` at `now`, checks what it sent, teaches it to `peer`, frees it.
fn poll(node: &mut TcpNode, st: &NodeStats, pkts: &mut Burst, now: u64, peer: &mut Peer) {
    call(node, st, pkts, now);
    for m in pkts.drain() {
        let d: Vec<u8> = m.segments().flatten().copied().collect();
        assert_eq!(d.len(), m.pkt_len());
        let (v6, repr) = check_output(&d);
        peer.learn(v6, &repr);
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let Some(flags) = input.u8() else { return };
    let pool = pool();
    let mut ol = 0;
    if flags & 1 != 0 {
        ol |= abi::RX_IP_CKSUM_GOOD;
    }
    if flags & 2 != 0 {
        ol |= abi::RX_L4_CKSUM_GOOD;
    }
    let structured = flags & 4 != 0;

    {
        let mut node = TcpNode::new(config(flags), pool.clone()).expect("tcp node");
        let st = NodeStats::new(node.counters());
        let mut peer = Peer::new();
        let mut now: u64 = 1;
        let mut pkts = Burst::new();
        for _ in 0..MAX_RECORDS {
            let Some(dt) = input.u16() else { break };
            if dt != 0 {
                poll(&mut node, &st, &mut pkts, now, &mut peer);
                now += if dt < 0x8000 { u64::from(dt) } else { u64::from(dt - 0x8000) * 1000 };
            }
            let frame = if structured && input.0.first().is_some_and(|&c| c & 0x80 == 0) {
                peer.frame(&mut input, (now / 1000) as u32)
            } else {
                if structured {
                    input.u8(); // the raw-frame marker
                }
                input.frame()
            };
            let Some(frame) = frame else { break };
            let Ok(mut m) = Mbuf::from_slice(pool, &frame) else { break };
            m.header_mut().ol_flags |= ol;
            let _ = pkts.push(m);
            if pkts.room() == 0 {
                poll(&mut node, &st, &mut pkts, now, &mut peer);
            }
        }
        poll(&mut node, &st, &mut pkts, now, &mut peer);
        // Timers: delayed ACKs, retransmissions and their backoff, persist probes
        // (while a connection or a handshake is left to have them).
        for k in 0..18u64 {
            if node.connections() == 0 && node.handshakes() == 0 {
                break;
            }
            now += if k < 5 { 10_000 } else { 600_000 };
            poll(&mut node, &st, &mut Burst::new(), now, &mut peer);
        }
        // The memory charged to connections and peers is what they hold: nothing once
        // none is left.
        if node.connections() == 0 {
            assert_eq!(node.memory_held(), 0, "memory charged to no connection");
        }
    }
    assert_eq!(pool.stats().in_use, 0, "mbufs leaked");
});
