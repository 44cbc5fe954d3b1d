//! `net_af_packet`: a PMD on a Linux network interface through AF_PACKET sockets with
//! PACKET_MMAP rings, like DPDK's net_af_packet.
//!
//! * RX: one socket per queue with a TPACKET_V3 block ring (`rx_ring=blocks`, the
//!   default). The kernel fills whole blocks (or retires a partly filled one after
//!   `tov` ms); each burst copies the frames of the current block into mbufs and hands
//!   finished blocks back. A frame therefore waits until its block is full or `tov`
//!   has passed: up to 1 ms at low rates, which a TCP sender waiting for ACKs feels
//!   as round-trip time. `rx_ring=frames` uses a TPACKET_V2 frame ring instead (as
//!   DPDK's net_af_packet): each frame is handed over as soon as it is written, at
//!   the cost of a status word per frame (and no kernel flow hash in `rss_hash`). With
//!   `qpairs=N` the N RX sockets join one PACKET_FANOUT group (hash fanout), so flows
//!   spread over queues. Outgoing packets are ignored (PACKET_IGNORE_OUTGOING).
//! * TX: one socket per queue with a TPACKET_V2 frame ring; a burst copies packets into
//!   free frames, marks them for sending and kicks the kernel once (`send`). Frames
//!   come back as the kernel transmits them. `qdisc_bypass=1` skips the qdisc layer.
//!   The socket has `PACKET_VNET_HDR`: each frame starts with a `virtio_net_hdr`
//!   whose `hdr_len` is the whole packet, so the kernel copies the frame into a
//!   linear skb (else the skb points into the ring's pages, and a veth copies those
//!   into newly allocated pages before passing the packet on), and a packet whose
//!   checksum is still partial (`TX_TCP_CKSUM`, `TX_UDP_CKSUM`, or received so) goes
//!   out with NEEDS_CSUM for the kernel to complete.
//! * TX completion: each packet stays with its frame until the kernel hands the frame
//!   back (after the qdisc dequeued it and the device took it), so a packet is freed
//!   when it was really sent, as a NIC frees on its descriptor's done bit. Frames are
//!   reclaimed in `tx_burst` once `tx_free_thresh` are in flight (or the ring is
//!   full), and on every `tx_done_cleanup` request.
//! * TSO (`tso=1`, the default with `qdisc_bypass=1`): a packet flagged `TX_TCP_SEG` (with `tso_segsz`,
//!   `l2_len`, `l3_len`, `l4_len`, the TCP checksum field holding the pseudo-header
//!   sum) goes out whole through a second socket with `PACKET_VNET_HDR`: a
//!   `virtio_net_hdr` asks the kernel to segment it (or a veth to pass it on as one
//!   GSO packet, which the peer's stack takes as if GRO had merged it). It is copied by
//!   `sendmsg`, so it is freed at once (frames waiting in the ring are kicked first,
//!   so the order holds). `tx_offload_capa` then has `TX_TCP_SEG | TX_TCP_CKSUM`.
//! * The kernel's offload state is kept (`rx.rs`). With `vnet=1` (the default) the RX
//!   sockets have `PACKET_VNET_HDR`: each frame comes with a `virtio_net_hdr`, so a
//!   frame whose checksum is only partial (veth's CHECKSUM_PARTIAL: the field holds
//!   the pseudo-header sum) becomes `RX_L4_CKSUM_NONE` with `l2_len`/`l3_len` saying
//!   where the checksum starts, and a GSO frame (a sender with TSO or GSO on: up to
//!   64 KiB) arrives whole, chained over several mbufs, as `RX_AGGREGATED` with its
//!   segment size in `tso_segsz` (TCP over IPv4 or IPv6, or UDP). Forwarded to an
//!   af_packet or tap port as it is, such a packet goes out with the same offloads: the
//!   kernel completes the checksum or cuts the segments. With `vnet=0`,
//!   `TP_STATUS_CSUMNOTREADY` still marks a partial checksum, without its offsets. A
//!   VLAN tag the kernel took off is put back into the frame, as it was on the wire
//!   (`vlan_strip=1`: it stays in `vlan_tci` with `RX_VLAN_STRIPPED`); the kernel's flow
//!   hash goes to `rss_hash`.
//! * A frame longer than a ring frame arrives cut short; it is counted in `ierrors`
//!   (xstat `rx_cut`) and not delivered. Blocks are 128 KiB by default, so a block
//!   ring takes GSO frames whole; a frame ring (`rx_ring=frames`) holds frames of
//!   `framesz` (2048) and cuts them: it is the choice for latency, not for taking
//!   kernel GSO traffic.
//! * Kernel drops (PACKET_STATISTICS) are reported as `imissed`; MAC, MTU, link and
//!   promiscuous mode come from the interface.
//!
//! Device arguments: `iface=<name>` (required), `qpairs=<1..16>`, `blocksz=<bytes>`,
//! `framesz=<bytes>`, `framecnt=<n>`, `tov=<ms>`, `qdisc_bypass=0|1`, `tx_free_thresh=<n>`,
//! `tso=0|1`, `rx_ring=blocks|frames`, `sndbuf=<bytes>` (the TSO socket's send buffer,
//! 4 MiB: SO_SNDBUFFORCE when allowed, else SO_SNDBUF up to `net.core.wmem_max`),
//! `kernel_rx=0|1` (below).
//! * `kernel_rx=0`: the kernel's own stack no longer receives what arrives on the
//!   interface. AF_PACKET hands us a copy of each frame and the kernel goes on to
//!   process the original itself: an IPv4 packet to an address the kernel does not
//!   own costs a route lookup, a route entry freed through RCU and maybe an ICMP
//!   error, per frame (~2,400 of the ~40,000 cycles an HTTP request cost at a paced
//!   load here), and an address it does own would get its own TCP's resets. With `kernel_rx=0` a
//!   two-instruction tc program at the interface's tcx ingress hook (after the
//!   AF_PACKET taps, before IP) drops every frame; it is detached when the port closes
//!   or the process exits. tcpdump on the interface still sees everything. Needs Linux
//!   6.6 and root; the interface is then ours alone, as a NIC bound to a DPDK driver.

#![deny(clippy::undocumented_unsafe_blocks)]

mod rx;
mod sys;

use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::tpacket;
use ironpath_pmd_sdk::vnet::VnetHdr;
use ironpath_pmd_sdk::{
    export_pmd, free_bulk, Counter, DevArgs, KernelFlowHash, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxQueue,
    TxQueue,
};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use sys::{Fd, Mmap};

const KEYS: &[&str] = &[
    "iface",
    "qpairs",
    "blocksz",
    "framesz",
    "framecnt",
    "tov",
    "qdisc_bypass",
    "tx_free_thresh",
    "tso",
    "rx_ring",
    "sndbuf",
    "kernel_rx",
    "vnet",
    "vlan_strip",
];

/// Default send buffer of the TSO socket: Linux's largest TCP send buffer
/// (`tcp_wmem`'s maximum), so that a burst of 64 KiB TSO packets released by a batch
/// of ACKs is queued, not refused.
const DEFAULT_SNDBUF: u64 = 4 << 20;

/// Ring geometry and options from the device arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// RX block size (bytes; a power of two, multiple of the page size).
    pub blocksz: u32,
    /// Frame size (bytes; multiple of 16). RX frames are a V3 hint; TX frames are real.
    pub framesz: u32,
    /// Frames per ring; the RX ring holds `framecnt * framesz` bytes in blocks.
    pub framecnt: u32,
    /// RX block retire timeout in milliseconds.
    pub tov: u32,
    /// RX through a TPACKET_V2 frame ring (`rx_ring=frames`) rather than V3 blocks.
    pub rx_frames: bool,
    /// SO_SNDBUF of the TSO socket (bytes).
    pub sndbuf: u32,
}

/// One RX socket's kernel drop counter, shared with the device for `imissed`
/// (PACKET_STATISTICS resets on every read, so reads accumulate here).
#[derive(Default)]
struct Drops(AtomicU64);

/// A device.
pub struct AfPacket {
    iface: String,
    ifindex: i32,
    qpairs: u16,
    geo: Geometry,
    port_id: u16,
    rx_socks: Vec<Option<(Fd, Arc<Drops>)>>,
    tx_socks: Vec<Option<Fd>>,
    /// Per queue, the `PACKET_VNET_HDR` socket TSO packets go through (`tso=1`).
    gso_socks: Vec<Option<Fd>>,
    tso: bool,
    drops: Vec<(Arc<Fd>, Arc<Drops>)>,
    promisc: bool,
    tx_free_thresh: u32,
    /// `kernel_rx=0`: the tcx link of the program that keeps received frames from the
    /// kernel's own stack (detached when this closes).
    _kernel_drop: Option<Fd>,
    /// `vnet=1`: the RX sockets have `PACKET_VNET_HDR`.
    vnet: bool,
    vlan_strip: bool,
    /// Each RX queue's offload counters (xstats).
    rx_offloads: Vec<Arc<rx::RxOffloads>>,
    /// Each TX queue's.
    tx_offloads: Vec<Arc<TxOffloads>>,
}

/// Receive queue.
pub struct AfRx {
    /// Kept open while the queue lives (the device holds another reference for its
    /// drop counter); the ring is unmapped before the socket closes (field order).
    ring: Mmap,
    _fd: Arc<Fd>,
    blocksz: usize,
    nblocks: usize,
    block: usize,
    /// Packets left in the current block and the offset of the next one.
    left: u32,
    next_off: usize,
    /// `rx_ring=frames`: the ring is `nframes` V2 frames of `framesz` bytes (the
    /// block fields are unused), `frame` the next one to look at.
    frames: bool,
    framesz: usize,
    nframes: usize,
    frame: usize,
    pool: Pool,
    port_id: u16,
    stats: Arc<QueueStats>,
    /// The socket has `PACKET_VNET_HDR`: a `virtio_net_hdr` precedes each frame.
    vnet: bool,
    /// `vlan_strip=1`: a tag the kernel took off stays in `vlan_tci`.
    vlan_strip: bool,
    offloads: Arc<rx::RxOffloads>,
}

/// Transmit queue.
pub struct AfTx {
    ring: Mmap,
    fd: Fd,
    framesz: usize,
    nframes: usize,
    head: usize,
    /// Oldest frame still in flight (== head when none).
    tail: usize,
    /// Frames in flight (sent, not yet reclaimed).
    inflight: usize,
    /// The packet of each in-flight frame (NULL for one dropped as too long).
    held: Vec<*mut Mbuf>,
    free_thresh: usize,
    /// The `PACKET_VNET_HDR` socket for TSO packets.
    gso: Option<Fd>,
    stats: Arc<QueueStats>,
    offloads: Arc<TxOffloads>,
}

/// Offload events of a queue's transmit side (xstats).
#[derive(Default)]
struct TxOffloads {
    /// Packets sent whole for the kernel to segment (TSO, forwarded GSO frames).
    gso: Counter,
    /// Packets whose checksum the kernel completed (`NEEDS_CSUM`).
    csum: Counter,
}

// SAFETY: the held packets are owned by the queue, which one thread uses at a time.
unsafe impl Send for AfTx {}

fn geometry(a: &DevArgs) -> Result<Geometry, PmdError> {
    let page = 4096;
    // 128 KiB: a block holds a whole GSO frame (64 KiB, from a sender with TSO or GSO
    // on), which `vnet=1` delivers as one packet; with smaller blocks it arrives cut
    // (an RX error). (DPDK's net_af_packet uses 4 KiB blocks.)
    let blocksz = a.get_u64("blocksz", 128 << 10, page, 1 << 24)? as u32;
    if !blocksz.is_power_of_two() {
        return Err(PmdError::invalid(format!("blocksz={blocksz} must be a power of two (4096..=16777216)")));
    }
    let framesz = a.get_u64("framesz", 2048, 128, u64::from(blocksz))? as u32;
    if !framesz.is_multiple_of(16) || !blocksz.is_multiple_of(framesz) {
        return Err(PmdError::invalid(format!(
            "framesz={framesz} must be a multiple of 16 that divides blocksz={blocksz}"
        )));
    }
    // 4096 (DPDK's default is 512): an 8 MiB receive ring. With 512, 10,000 keep-alive
    // connections answered at once overflowed it (imissed) and every loss cost the
    // peer a retransmission timeout.
    let framecnt = a.get_u64("framecnt", 4096, 16, 1 << 20)? as u32;
    if (u64::from(framecnt) * u64::from(framesz)) < u64::from(blocksz) {
        return Err(PmdError::invalid(format!(
            "framecnt={framecnt} x framesz={framesz} is smaller than one block (blocksz={blocksz})"
        )));
    }
    let tov = a.get_u64("tov", 1, 1, 1000)? as u32;
    let rx_frames = match a.get("rx_ring") {
        None | Some("blocks") => false,
        Some("frames") => true,
        Some(v) => {
            return Err(PmdError::invalid(format!(
                "device argument `rx_ring={v}` is not a ring kind: accepted blocks (TPACKET_V3) or frames (TPACKET_V2)"
            )))
        }
    };
    let sndbuf = a.get_u64("sndbuf", DEFAULT_SNDBUF, 4096, 1 << 30)? as u32;
    Ok(Geometry { blocksz, framesz, framecnt, tov, rx_frames, sndbuf })
}

/// The device arguments, checked.
struct Args {
    iface: String,
    qpairs: u16,
    geo: Geometry,
    qdisc_bypass: bool,
    tso: bool,
    tx_free_thresh: u32,
    kernel_rx: bool,
    vnet: bool,
    vlan_strip: bool,
}

fn parse_args(a: &DevArgs) -> Result<Args, PmdError> {
    let iface = a
        .get_name("iface", 15)?
        .ok_or_else(|| PmdError::invalid("device argument `iface` is required (e.g. iface=veth0)"))?;
    let qpairs = a.get_u64("qpairs", 1, 1, 16)? as u16;
    let geo = geometry(a)?;
    // On by default, as in DPDK: af_packet TX skips the qdisc layer.
    let qdisc_bypass = a.get_bool("qdisc_bypass", true)?;
    // TSO packets are copied by sendmsg, so they complete at once: right when the
    // qdisc is bypassed (the device takes them in that call), too early behind a
    // qdisc (they would queue there unseen by a sender limiting what it has in
    // flight). So the default follows qdisc_bypass.
    let tso = a.get_bool("tso", qdisc_bypass)?;
    let tx_free_thresh =
        a.get_u64("tx_free_thresh", 32.min(u64::from(geo.framecnt)), 1, u64::from(geo.framecnt))? as u32;
    let kernel_rx = a.get_bool("kernel_rx", true)?;
    let vnet = a.get_bool("vnet", true)?;
    let vlan_strip = a.get_bool("vlan_strip", false)?;
    Ok(Args { iface, qpairs, geo, qdisc_bypass, tso, tx_free_thresh, kernel_rx, vnet, vlan_strip })
}

impl Pmd for AfPacket {
    const NAME: &'static CStr = c"net_af_packet";
    const DEVARGS_HELP: &'static CStr =
        c"iface=<ifname>,qpairs=<1..16>,blocksz=<4096..16M pow2, 131072>,framesz=<2048>,framecnt=<4096>,tov=<ms, 1>,qdisc_bypass=0|1 (default 1),tx_free_thresh=<1..framecnt, 32>,tso=0|1 (default: qdisc_bypass),rx_ring=blocks|frames (default blocks),sndbuf=<TSO socket send buffer, bytes, 4194304>,kernel_rx=0|1 (default 1; 0: a tcx program keeps received frames from the kernel's own stack),vnet=0|1 (default 1: the kernel's offload state with each received frame, GSO frames whole),vlan_strip=0|1 (default 0: a VLAN tag the kernel took off is put back into the frame)";
    type Rx = AfRx;
    type Tx = AfTx;

    const CHECKS_ARGS: bool = true;

    /// The arguments; the interface is not looked up (it may not exist where the
    /// file is checked).
    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        parse_args(&DevArgs::parse(ctx.args, KEYS)?).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        let Args { iface, qpairs, geo, qdisc_bypass, tso, tx_free_thresh, kernel_rx, vnet, vlan_strip } =
            parse_args(&a)?;
        let ifindex = sys::ifindex(&iface)
            .map_err(|e| PmdError::new(abi::errno::ENODEV, format!("iface={iface}: {e} (see `ip link`)")))?;
        let mut dev = AfPacket {
            iface,
            ifindex,
            qpairs,
            geo,
            port_id: u16::MAX,
            rx_socks: Vec::new(),
            tx_socks: Vec::new(),
            gso_socks: Vec::new(),
            tso,
            drops: Vec::new(),
            promisc: false,
            tx_free_thresh,
            _kernel_drop: None,
            vnet,
            vlan_strip,
            rx_offloads: Vec::new(),
            tx_offloads: Vec::new(),
        };
        // Open the sockets now so a missing permission or interface shows at probe.
        let fanout_id = (std::process::id() as u16) ^ (ifindex as u16).rotate_left(8);
        for _ in 0..qpairs {
            let rx = sys::packet_socket(ifindex, true).map_err(|e| dev.os_err("cannot open the RX socket", e))?;
            sys::set_int(&rx, libc::PACKET_IGNORE_OUTGOING, 1).map_err(|e| dev.os_err("PACKET_IGNORE_OUTGOING", e))?;
            if vnet {
                // Each frame then carries the kernel's offload state (a checksum to
                // complete, GSO type and size) and GSO frames arrive whole.
                sys::set_int(&rx, libc::PACKET_VNET_HDR, 1).map_err(|e| dev.os_err("PACKET_VNET_HDR (RX ring)", e))?;
            }
            if qpairs > 1 {
                let arg = i32::from(fanout_id) | (libc::PACKET_FANOUT_HASH as i32) << 16;
                sys::set_int(&rx, libc::PACKET_FANOUT, arg).map_err(|e| dev.os_err("PACKET_FANOUT", e))?;
            }
            let tx = sys::packet_socket(ifindex, false).map_err(|e| dev.os_err("cannot open the TX socket", e))?;
            // A virtio_net_hdr in front of every TX ring frame (set before the ring
            // exists): its `hdr_len` makes the kernel copy the whole frame into the
            // skb's linear part (see `tx_burst`).
            sys::set_int(&tx, libc::PACKET_VNET_HDR, 1).map_err(|e| dev.os_err("PACKET_VNET_HDR (TX ring)", e))?;
            if qdisc_bypass {
                sys::set_int(&tx, libc::PACKET_QDISC_BYPASS, 1).map_err(|e| dev.os_err("PACKET_QDISC_BYPASS", e))?;
            }
            let gso = if tso {
                let g = sys::packet_socket(ifindex, false).map_err(|e| dev.os_err("cannot open the TSO socket", e))?;
                sys::set_int(&g, libc::PACKET_VNET_HDR, 1).map_err(|e| dev.os_err("PACKET_VNET_HDR", e))?;
                // The default (`wmem_default`, ~208 KiB) holds three 64 KiB packets: a
                // burst of them (a batch of ACKs opening the window) was refused with
                // EAGAIN, dropped by the TX node and resent after a timeout.
                sys::set_sndbuf(&g, geo.sndbuf as i32).map_err(|e| dev.os_err("SO_SNDBUF", e))?;
                if qdisc_bypass {
                    sys::set_int(&g, libc::PACKET_QDISC_BYPASS, 1).map_err(|e| dev.os_err("PACKET_QDISC_BYPASS", e))?;
                }
                Some(g)
            } else {
                None
            };
            dev.rx_socks.push(Some((rx, Arc::new(Drops::default()))));
            dev.tx_socks.push(Some(tx));
            dev.gso_socks.push(gso);
        }
        if !kernel_rx {
            // After the sockets: they are bound, so no frame is lost between the two.
            let link = sys::drop_kernel_ingress(ifindex).map_err(|e| {
                dev.os_err("kernel_rx=0: cannot attach the tcx ingress program (Linux 6.6+, CAP_BPF)", e)
            })?;
            dev._kernel_drop = Some(link);
        }
        Ok(dev)
    }

    fn info(&self) -> abi::DevInfo {
        let mtu = sys::mtu(&self.iface).unwrap_or(1500);
        abi::DevInfo {
            max_rx_queues: self.qpairs,
            max_tx_queues: self.qpairs,
            min_desc: 0,
            max_desc: u16::MAX,
            min_mtu: 68,
            max_mtu: (self.geo.framesz as usize - sys::TX_DATA_OFF - VnetHdr::LEN - 14).min(65535) as u16,
            mtu: mtu.min(65535) as u16,
            // A frame ring holds frames of `framesz`; a block ring a frame as large as a
            // block (less the block's and the frame's headers).
            max_rx_pktlen: if self.geo.rx_frames {
                self.geo.framesz - 32
            } else {
                (self.geo.blocksz - 128).min(u32::from(u16::MAX) + 18)
            },
            // Every TX ring frame carries a virtio_net_hdr: the kernel completes
            // checksums; the TSO socket takes packets to segment.
            tx_offload_capa: abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM | if self.tso { abi::TX_TCP_SEG } else { 0 },
            rx_offload_capa: abi::RX_L4_CKSUM_GOOD
                | abi::RX_L4_CKSUM_NONE
                | abi::RX_RSS_HASH
                | abi::RX_VLAN_STRIPPED
                | if self.vnet { abi::RX_AGGREGATED } else { 0 },
            ..Default::default()
        }
    }

    fn configure(&mut self, conf: &abi::DevConf) -> Result<(), PmdError> {
        self.port_id = conf.port_id;
        Ok(())
    }

    fn rx_queue_setup(
        &mut self,
        qid: u16,
        _nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<AfRx, PmdError> {
        let (fd, drops) = self.rx_socks.get_mut(qid as usize).and_then(Option::take).ok_or_else(|| {
            PmdError::new(abi::errno::EBUSY, format!("RX queue {qid} is in use or beyond qpairs={}", self.qpairs))
        })?;
        let g = self.geo;
        let nblocks = (u64::from(g.framecnt) * u64::from(g.framesz) / u64::from(g.blocksz)) as u32;
        let (ring, what) = if g.rx_frames {
            (sys::rx_ring_v2(&fd, g.blocksz, g.framesz, g.framecnt), "cannot set up the TPACKET_V2 RX ring")
        } else {
            (sys::rx_ring_v3(&fd, g.blocksz, nblocks, g.framesz, g.tov), "cannot set up the TPACKET_V3 RX ring")
        };
        let ring = match ring {
            Ok(r) => r,
            Err(e) => {
                let err = self.os_err(what, e);
                self.rx_socks[qid as usize] = Some((fd, drops));
                return Err(err);
            }
        };
        let fd = Arc::new(fd);
        self.drops.push((fd.clone(), drops));
        let offloads = Arc::new(rx::RxOffloads::default());
        self.rx_offloads.push(offloads.clone());
        Ok(AfRx {
            ring,
            _fd: fd,
            blocksz: g.blocksz as usize,
            nblocks: nblocks as usize,
            block: 0,
            left: 0,
            next_off: 0,
            frames: g.rx_frames,
            framesz: g.framesz as usize,
            // (`ring_v2` rounds the ring up to whole blocks.)
            nframes: (g.framecnt.div_ceil(g.blocksz / g.framesz) * (g.blocksz / g.framesz)) as usize,
            frame: 0,
            pool,
            port_id: self.port_id,
            stats,
            vnet: self.vnet,
            vlan_strip: self.vlan_strip,
            offloads,
        })
    }

    fn tx_queue_setup(&mut self, qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<AfTx, PmdError> {
        let fd = self.tx_socks.get_mut(qid as usize).and_then(Option::take).ok_or_else(|| {
            PmdError::new(abi::errno::EBUSY, format!("TX queue {qid} is in use or beyond qpairs={}", self.qpairs))
        })?;
        let g = self.geo;
        match sys::tx_ring_v2(&fd, g.blocksz, g.framesz, g.framecnt) {
            Ok(ring) => {
                let nframes = g.framecnt as usize;
                Ok(AfTx {
                    ring,
                    fd,
                    framesz: g.framesz as usize,
                    nframes,
                    head: 0,
                    tail: 0,
                    inflight: 0,
                    held: vec![std::ptr::null_mut(); nframes],
                    free_thresh: self.tx_free_thresh as usize,
                    gso: self.gso_socks.get_mut(qid as usize).and_then(Option::take),
                    stats,
                    offloads: {
                        let o = Arc::new(TxOffloads::default());
                        self.tx_offloads.push(o.clone());
                        o
                    },
                })
            }
            Err(e) => {
                let err = self.os_err("cannot set up the TPACKET_V2 TX ring", e);
                self.tx_socks[qid as usize] = Some(fd);
                Err(err)
            }
        }
    }

    fn link(&self) -> abi::Link {
        let up = sys::is_running(&self.iface);
        let speed = std::fs::read_to_string(format!("/sys/class/net/{}/speed", self.iface))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .filter(|s| *s > 0)
            .unwrap_or(0) as u32;
        abi::Link { speed_mbps: speed, up: u8::from(up), full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    fn extra_stats(&self, s: &mut abi::Stats) {
        s.imissed += self.kernel_drops();
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let sum = |f: fn(&rx::RxOffloads) -> u64| self.rx_offloads.iter().map(|o| f(o)).sum::<u64>();
        vec![
            ("kernel_drops".to_string(), self.kernel_drops()),
            ("rx_csum_partial".to_string(), sum(|o| o.csum_partial.get())),
            ("rx_gso".to_string(), sum(|o| o.gso.get())),
            ("rx_vlan_reinserted".to_string(), sum(|o| o.vlan_reinserted.get())),
            ("rx_cut".to_string(), sum(|o| o.cut.get())),
            ("tx_gso".to_string(), self.tx_offloads.iter().map(|o| o.gso.get()).sum()),
            ("tx_csum_offload".to_string(), self.tx_offloads.iter().map(|o| o.csum.get()).sum()),
        ]
    }

    fn mac(&self) -> Result<[u8; 6], PmdError> {
        sys::hwaddr(&self.iface).map_err(|e| self.os_err("SIOCGIFHWADDR", e))
    }

    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        sys::set_mtu(&self.iface, mtu).map_err(|e| self.os_err("SIOCSIFMTU", e))
    }

    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        // Membership on the first RX socket (open for the device's lifetime) makes the
        // kernel count one promiscuous user for us, undone when the socket closes.
        let fd = self
            .drops
            .first()
            .map(|(fd, _)| fd.clone())
            .ok_or_else(|| PmdError::invalid("set up an RX queue first"))?;
        if on != self.promisc {
            sys::promisc(&fd, self.ifindex, on).map_err(|e| self.os_err("PACKET_MR_PROMISC", e))?;
            self.promisc = on;
        }
        Ok(())
    }

    fn promiscuous(&self) -> Result<bool, PmdError> {
        Ok(self.promisc || sys::iface_flags(&self.iface).is_ok_and(|f| f & libc::IFF_PROMISC != 0))
    }

    /// The kernel interface's `IFF_ALLMULTI`.
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        sys::set_iface_flag(&self.iface, libc::IFF_ALLMULTI, on).map_err(|e| self.os_err("SIOCSIFFLAGS", e))
    }

    fn allmulticast(&self) -> Result<bool, PmdError> {
        sys::iface_flags(&self.iface).map(|f| f & libc::IFF_ALLMULTI != 0).map_err(|e| self.os_err("SIOCGIFFLAGS", e))
    }

    /// A unicast filter on the interface (PACKET_MR_UNICAST), held by the first
    /// RX socket: the kernel's device receives frames for `mac` too.
    fn add_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        let fd = self
            .drops
            .first()
            .map(|(fd, _)| fd.clone())
            .ok_or_else(|| PmdError::invalid("set up an RX queue first"))?;
        sys::unicast(&fd, self.ifindex, mac, true).map_err(|e| self.os_err("PACKET_MR_UNICAST", e))
    }

    fn remove_mac(&mut self, mac: [u8; 6]) -> Result<(), PmdError> {
        let fd = self
            .drops
            .first()
            .map(|(fd, _)| fd.clone())
            .ok_or_else(|| PmdError::invalid("set up an RX queue first"))?;
        sys::unicast(&fd, self.ifindex, mac, false).map_err(|e| self.os_err("PACKET_MR_UNICAST", e))
    }

    /// With more than one queue, the kernel's flow hash ([`KernelFlowHash`]).
    fn rss_hash(&self) -> Result<(u64, u64), PmdError> {
        Ok(KernelFlowHash::rss_hash(self.qpairs))
    }

    fn set_rss_hash(&mut self, rss_hf: u64) -> Result<(), PmdError> {
        KernelFlowHash::set_rss_hash(self.qpairs, rss_hf)
    }

    /// The kernel interface's `IFF_UP` (`ip link set IFACE up|down`).
    fn set_link(&mut self, up: bool) -> Result<(), PmdError> {
        sys::set_iface_flag(&self.iface, libc::IFF_UP, up).map_err(|e| self.os_err("SIOCSIFFLAGS", e))
    }
}

impl AfPacket {
    fn os_err(&self, what: &str, e: std::io::Error) -> PmdError {
        let hint = if e.raw_os_error() == Some(libc::EPERM) { " (needs root or CAP_NET_RAW)" } else { "" };
        PmdError::new(e.raw_os_error().unwrap_or(abi::errno::EIO), format!("iface={}: {what}: {e}{hint}", self.iface))
    }

    fn kernel_drops(&self) -> u64 {
        self.drops
            .iter()
            .map(|(fd, d)| {
                if let Ok(n) = sys::take_drops(fd) {
                    d.0.fetch_add(n, Ordering::Relaxed);
                }
                d.0.load(Ordering::Relaxed)
            })
            .sum()
    }
}

impl RxQueue for AfRx {
    fn rx_burst(&mut self, pkts: &mut [*mut Mbuf]) -> usize {
        if self.frames {
            return self.rx_frames(pkts);
        }
        let mut n = 0;
        while n < pkts.len() {
            if self.left == 0 && !self.open_block() {
                break;
            }
            // Allocate what this block can still give, up to the room left.
            let want = (self.left as usize).min(pkts.len() - n);
            if !self.pool.alloc_bulk(&mut pkts[n..n + want]) {
                self.stats.nombuf.add(want as u64);
                break;
            }
            let got = self.fill(&mut pkts[n..n + want]);
            n += got;
            if self.left == 0 {
                self.close_block();
            }
        }
        self.stats.packets.add(n as u64);
        n
    }
}

impl AfRx {
    fn block_ptr(&self) -> *mut u8 {
        // SAFETY: block < nblocks and the ring maps nblocks * blocksz bytes.
        unsafe { self.ring.ptr().add(self.block * self.blocksz) }
    }

    /// Take the current block if the kernel handed it to us (an empty retired block
    /// is handed straight back).
    fn open_block(&mut self) -> bool {
        let b = self.block_ptr();
        // SAFETY: the block descriptor lies at the start of the block; its status is
        // written by the kernel, read with acquire so the block's frames are visible.
        let status = unsafe { sys::load_acquire_u32(b.add(sys::BLK_STATUS)) };
        if status & libc::TP_STATUS_USER == 0 {
            return false;
        }
        // The header through checked offsets: a count no block can hold is cut to
        // what fits (the frames' own checks end the walk early).
        let Some(h) = tpacket::block_header(self.block_bytes()) else { return false };
        self.left = h.num_pkts;
        self.next_off = h.first;
        if self.left == 0 {
            self.close_block();
            return false;
        }
        true
    }

    /// The current block's bytes. Only while the kernel has handed it to us (status
    /// USER): it writes none of them until `close_block` hands it back.
    fn block_bytes(&self) -> &[u8] {
        // SAFETY: block < nblocks, the ring maps nblocks * blocksz bytes, and the
        // block is ours (see above): nothing else writes it while the slice lives.
        unsafe { std::slice::from_raw_parts(self.block_ptr(), self.blocksz) }
    }

    /// Give the current block back to the kernel and move to the next.
    fn close_block(&mut self) {
        let b = self.block_ptr();
        // SAFETY: we own the block until this release store hands it back.
        unsafe { sys::store_release_u32(b.add(sys::BLK_STATUS), libc::TP_STATUS_KERNEL) };
        self.block = (self.block + 1) % self.nblocks;
        self.left = 0;
    }

    fn frame_ptr(&self, i: usize) -> *mut u8 {
        // SAFETY: i < nframes and the ring maps nframes * framesz bytes (blocks are
        // whole multiples of framesz: the frames are contiguous).
        unsafe { self.ring.ptr().add(i * self.framesz) }
    }

    /// Whether the kernel handed V2 frame `i` to us (acquire: its bytes are visible).
    fn frame_ready(&self, i: usize) -> bool {
        // SAFETY: the frame header lies at the frame's start; its status is written by
        // the kernel.
        unsafe { sys::load_acquire_u32(self.frame_ptr(i).add(sys::H2_STATUS)) & libc::TP_STATUS_USER != 0 }
    }

    /// `rx_burst` on a V2 frame ring: the ready frames in ring order, each copied
    /// into an mbuf and handed back at once.
    fn rx_frames(&mut self, pkts: &mut [*mut Mbuf]) -> usize {
        let mut ready = 0;
        while ready < pkts.len() && self.frame_ready((self.frame + ready) % self.nframes) {
            ready += 1;
        }
        if ready == 0 {
            return 0;
        }
        if !self.pool.alloc_bulk(&mut pkts[..ready]) {
            self.stats.nombuf.add(ready as u64);
            return 0;
        }
        let mut k = 0;
        let mut bytes = 0u64;
        let mut spare: Vec<*mut Mbuf> = Vec::new();
        for i in 0..ready {
            let f = self.frame_ptr(self.frame);
            // SAFETY: the kernel handed this frame to us (status USER, checked above
            // with acquire); its header fields are stable until we hand it back.
            let (snap, mac, status, tci, tpid, wire_len) = unsafe {
                (
                    std::ptr::read_volatile(f.add(sys::H2_SNAPLEN).cast::<u32>()) as usize,
                    std::ptr::read_volatile(f.add(sys::H2_MAC).cast::<u16>()) as usize,
                    std::ptr::read_volatile(f.add(sys::H2_STATUS).cast::<u32>()),
                    std::ptr::read_volatile(f.add(sys::H2_VLAN_TCI).cast::<u16>()),
                    std::ptr::read_volatile(f.add(sys::H2_VLAN_TPID).cast::<u16>()),
                    std::ptr::read_volatile(f.add(sys::H2_LEN).cast::<u32>()) as usize,
                )
            };
            let m = pkts[i];
            // The frame's bytes (and the vnet header before them) must lie inside the
            // frame: a header saying otherwise is an error, not an address to follow.
            let vnet = self.vnet && mac >= sys::H2_HDR_LEN + VnetHdr::LEN;
            if mac.checked_add(snap).is_none_or(|end| end > self.framesz) || mac < sys::H2_HDR_LEN {
                self.stats.errors.add(1);
                spare.push(m);
            } else {
                // SAFETY: the frame is ours until handed back; `mac + snap <= framesz`
                // and the vnet header lies between the frame header and `mac`.
                let (bytes_in, vnet_bytes) = unsafe {
                    (
                        std::slice::from_raw_parts(f.add(mac), snap),
                        vnet.then(|| std::slice::from_raw_parts(f.add(mac - VnetHdr::LEN), VnetHdr::LEN)),
                    )
                };
                let kf = rx::KernelFrame {
                    bytes: bytes_in,
                    wire_len,
                    status,
                    vlan_tci: tci,
                    vlan_tpid: tpid,
                    vnet: vnet_bytes,
                };
                // SAFETY: `m` is a fresh mbuf from our pool, owned by us.
                match unsafe { rx::deliver(&self.pool, m, &kf, self.vlan_strip, self.port_id, &self.offloads) } {
                    Ok(len) => {
                        // SAFETY: as above.
                        unsafe { (*m).rss_hash = 0 };
                        bytes += len as u64;
                        pkts[k] = m;
                        k += 1;
                    }
                    Err(why) => {
                        match why {
                            rx::Refused::Cut => self.stats.errors.add(1),
                            rx::Refused::NoMbuf => self.stats.nombuf.add(1),
                        }
                        spare.push(m);
                    }
                }
            }
            // SAFETY: we own the frame until this release store hands it back.
            unsafe { sys::store_release_u32(f.add(sys::H2_STATUS), libc::TP_STATUS_KERNEL) };
            self.frame = (self.frame + 1) % self.nframes;
        }
        if !spare.is_empty() {
            // SAFETY: fresh mbufs we own and did not hand out.
            unsafe { free_bulk(&spare) };
        }
        self.stats.bytes.add(bytes);
        self.stats.packets.add(k as u64);
        k
    }

    /// Copy frames of the current block into the fresh mbufs `out`; returns how many
    /// were filled (the rest are freed: oversized frames are counted as errors).
    fn fill(&mut self, out: &mut [*mut Mbuf]) -> usize {
        let mut k = 0;
        let mut bytes = 0u64;
        let mut spare: Vec<*mut Mbuf> = Vec::new();
        for i in 0..out.len() {
            if self.left == 0 {
                spare.extend_from_slice(&out[i..]);
                break;
            }
            // Each header through checked offsets: one that points outside the block
            // (or back into it) ends the block, counted, instead of being followed.
            let f = match tpacket::frame_at(self.block_bytes(), self.next_off, self.left == 1) {
                Ok(f) => f,
                Err(_) => {
                    self.stats.errors.add(1);
                    self.left = 0;
                    spare.extend_from_slice(&out[i..]);
                    break;
                }
            };
            self.left -= 1;
            self.next_off = f.next;
            let m = out[i];
            let block = self.block_bytes();
            let kf = rx::KernelFrame {
                bytes: &block[f.data..f.data + f.snap],
                wire_len: f.wire_len,
                status: f.status,
                vlan_tci: f.vlan_tci,
                vlan_tpid: f.vlan_tpid,
                vnet: if self.vnet { tpacket::vnet_before(block, &f) } else { None },
            };
            // SAFETY: `m` is a fresh mbuf from our pool, owned by us.
            match unsafe { rx::deliver(&self.pool, m, &kf, self.vlan_strip, self.port_id, &self.offloads) } {
                Ok(len) => {
                    // SAFETY: as above.
                    unsafe {
                        (*m).rss_hash = f.rxhash;
                        (*m).ol_flags |= abi::RX_RSS_HASH;
                    }
                    bytes += len as u64;
                    out[k] = m;
                    k += 1;
                }
                Err(why) => {
                    // A frame cut to the ring's frame size is not delivered truncated:
                    // it is an RX error.
                    match why {
                        rx::Refused::Cut => self.stats.errors.add(1),
                        rx::Refused::NoMbuf => self.stats.nombuf.add(1),
                    }
                    spare.push(m);
                }
            }
        }
        if !spare.is_empty() {
            // SAFETY: fresh mbufs we own and did not hand out.
            unsafe { free_bulk(&spare) };
        }
        self.stats.bytes.add(bytes);
        k
    }
}

/// The virtio_net_hdr of a TX ring frame holding `m` (`len` bytes): the checksum
/// offload `m` asks for, no segmentation (TSO packets go through the TSO socket), and
/// `hdr_len` = the whole packet, so that the kernel copies it into the skb's linear
/// part. Without it the skb's data are page fragments of the ring, which a veth (or
/// anything that orphans or clones the skb) must copy into freshly allocated pages
/// first (`skb_copy_ubufs`): a page allocation per packet.
fn ring_vnet_hdr(m: &Mbuf, len: usize) -> VnetHdr {
    let mut h = VnetHdr::from_mbuf(m);
    h.gso_type = 0;
    h.gso_size = 0;
    h.hdr_len = len.min(usize::from(u16::MAX)) as u16;
    h
}

/// Whether `m` goes out whole for the kernel to segment: a TSO packet (`TX_TCP_SEG`),
/// or a GSO frame received from the kernel (or a TAP) and forwarded as it came
/// (`RX_AGGREGATED` with its checksum still partial; an aggregate made here, whose
/// checksums are complete, is not one: a `gso` node splits those).
#[inline(always)]
fn needs_gso(m: &Mbuf) -> bool {
    let f = m.ol_flags;
    f & abi::TX_TCP_SEG != 0
        || (f & (abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE) == abi::RX_AGGREGATED | abi::RX_L4_CKSUM_NONE
            && m.tso_segsz > 0)
}

/// Most segments of a TSO packet (a 64 KiB payload in 2 KiB mbufs, its headers).
const MAX_GSO_SEGS: usize = 64;

impl AfTx {
    /// Send TSO packet `m` whole with a `virtio_net_hdr` through the GSO socket and
    /// free it (the kernel copied it). `Ok(true)` sent, `Ok(false)` dropped (refused
    /// or too many segments, counted by the caller), `Err` the socket is full: `m`
    /// is still the caller's.
    fn send_gso(&mut self, m: *mut Mbuf) -> Result<bool, ()> {
        let Some(fd) = self.gso.as_ref() else { return Ok(false) };
        // SAFETY: the caller hands us a valid packet.
        let hdr = VnetHdr::from_mbuf(unsafe { &*m }).to_bytes();
        let mut iov = [libc::iovec { iov_base: std::ptr::null_mut(), iov_len: 0 }; MAX_GSO_SEGS + 1];
        iov[0] = libc::iovec { iov_base: hdr.as_ptr() as *mut libc::c_void, iov_len: hdr.len() };
        let mut n = 1;
        let mut seg = m;
        let mut fits = true;
        while !seg.is_null() {
            if n == iov.len() {
                fits = false;
                break;
            }
            // SAFETY: `seg` is a segment of the packet we hold.
            let s = unsafe { &*seg };
            if s.data_len > 0 {
                // SAFETY: data_off + data_len lies inside the segment's buffer.
                let base = unsafe { s.buf_addr.add(s.data_off as usize) };
                iov[n] = libc::iovec { iov_base: base.cast(), iov_len: s.data_len as usize };
                n += 1;
            }
            seg = if seg == m && s.nb_segs == 1 { std::ptr::null_mut() } else { s.next };
        }
        let ok = if fits {
            match sys::send_iov(fd, &iov[..n]) {
                Ok(_) => true,
                Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::ENOBUFS)) => return Err(()),
                Err(_) => false,
            }
        } else {
            false
        };
        // SAFETY: sent (copied by the kernel) or dropped: either way the packet is ours to free.
        unsafe { free_bulk(&[m]) };
        Ok(ok)
    }

    /// Free the packets of frames the kernel has handed back, oldest first, up to
    /// `max` (0 = all); returns how many frames were reclaimed.
    fn reclaim(&mut self, max: usize) -> usize {
        let mut done: [*mut Mbuf; 64] = [std::ptr::null_mut(); 64];
        let mut nd = 0;
        let mut n = 0;
        while self.inflight > 0 && (max == 0 || n < max) {
            // SAFETY: tail < nframes; the ring maps nframes * framesz bytes.
            let f = unsafe { self.ring.ptr().add(self.tail * self.framesz) };
            // SAFETY: the frame's status word is shared with the kernel.
            let st = unsafe { sys::load_acquire_u32(f.add(sys::H2_STATUS)) };
            if st != libc::TP_STATUS_AVAILABLE && st != libc::TP_STATUS_WRONG_FORMAT {
                break; // still queued or being sent
            }
            if st == libc::TP_STATUS_WRONG_FORMAT {
                self.stats.errors.add(1);
                // SAFETY: as above; hand the frame back as available.
                unsafe { sys::store_release_u32(f.add(sys::H2_STATUS), libc::TP_STATUS_AVAILABLE) };
            }
            let m = std::mem::replace(&mut self.held[self.tail], std::ptr::null_mut());
            if !m.is_null() {
                done[nd] = m;
                nd += 1;
                if nd == done.len() {
                    // SAFETY: packets this queue owned, taken out of `held`.
                    unsafe { free_bulk(&done) };
                    nd = 0;
                }
            }
            self.tail = (self.tail + 1) % self.nframes;
            self.inflight -= 1;
            n += 1;
        }
        if nd > 0 {
            // SAFETY: as above.
            unsafe { free_bulk(&done[..nd]) };
        }
        n
    }
}

impl Drop for AfTx {
    fn drop(&mut self) {
        let left: Vec<*mut Mbuf> = self.held.iter().copied().filter(|m| !m.is_null()).collect();
        if !left.is_empty() {
            // SAFETY: packets this queue still owns; the ring goes away with it.
            unsafe { free_bulk(&left) };
        }
    }
}

impl TxQueue for AfTx {
    const HOLDS_PACKETS: bool = true;

    fn tx_burst(&mut self, pkts: &mut [*mut Mbuf]) -> usize {
        if self.inflight >= self.free_thresh || self.inflight + pkts.len() > self.nframes {
            self.reclaim(0);
        }
        // Each frame holds a virtio_net_hdr, then the packet.
        let data = sys::TX_DATA_OFF + VnetHdr::LEN;
        let room = self.framesz - data;
        let mut sent = 0;
        let mut bytes = 0u64;
        let mut dropped = 0u64;
        let mut too_long: [*mut Mbuf; 8] = [std::ptr::null_mut(); 8];
        let mut ntl = 0;
        let mut queued = false; // ring frames marked since the last kick
        for &m in pkts.iter() {
            if self.inflight == self.nframes {
                break; // ring full: the rest stays with the caller
            }
            // SAFETY: the caller hands us valid packets.
            let (len, tso) = unsafe { ((*m).pkt_len as usize, needs_gso(&*m)) };
            if tso && self.gso.is_some() {
                if queued {
                    sys::kick(&self.fd); // what the ring holds goes first
                    queued = false;
                }
                match self.send_gso(m) {
                    Ok(true) => {
                        bytes += len as u64;
                        sent += 1;
                        self.offloads.gso.add(1);
                    }
                    Ok(false) => {
                        dropped += 1;
                        sent += 1;
                    }
                    Err(()) => break, // the socket is full: the rest stays with the caller
                }
                continue;
            }
            if len > room {
                dropped += 1;
                if ntl == too_long.len() {
                    // SAFETY: packets we took and will not send.
                    unsafe { free_bulk(&too_long) };
                    ntl = 0;
                }
                too_long[ntl] = m;
                ntl += 1;
                sent += 1;
                continue;
            }
            // SAFETY: head < nframes; the ring maps nframes * framesz bytes.
            let f = unsafe { self.ring.ptr().add(self.head * self.framesz) };
            // SAFETY: the caller hands us valid packets.
            let vh = ring_vnet_hdr(unsafe { &*m }, len);
            if vh.flags & ironpath_pmd_sdk::vnet::F_NEEDS_CSUM != 0 {
                self.offloads.csum.add(1);
            }
            let hdr = vh.to_bytes();
            // SAFETY: copy the header and each segment into the frame's data area
            // (VnetHdr::LEN + len <= framesz - TX_DATA_OFF); the frame is ours (in
            // flight frames are counted, this one is past them).
            unsafe {
                std::ptr::copy_nonoverlapping(hdr.as_ptr(), f.add(sys::TX_DATA_OFF), hdr.len());
                let mut off = 0;
                let mut seg = m;
                while !seg.is_null() && off < len {
                    let s = &*seg;
                    let k = (s.data_len as usize).min(len - off);
                    std::ptr::copy_nonoverlapping(s.buf_addr.add(s.data_off as usize), f.add(data + off), k);
                    off += k;
                    seg = if s.nb_segs == 1 && seg == m { std::ptr::null_mut() } else { s.next };
                }
                std::ptr::write_volatile(f.add(sys::H2_LEN).cast::<u32>(), (VnetHdr::LEN + len) as u32);
                sys::store_release_u32(f.add(sys::H2_STATUS), libc::TP_STATUS_SEND_REQUEST);
            }
            self.held[self.head] = m;
            self.inflight += 1;
            bytes += len as u64;
            self.head = (self.head + 1) % self.nframes;
            sent += 1;
            queued = true;
        }
        if ntl > 0 {
            // SAFETY: as above.
            unsafe { free_bulk(&too_long[..ntl]) };
        }
        if queued {
            // One kick per burst; the kernel sends every SEND_REQUEST frame.
            sys::kick(&self.fd);
        }
        self.stats.packets.add(sent as u64 - dropped);
        self.stats.bytes.add(bytes);
        self.stats.errors.add(dropped);
        sent
    }

    fn tx_done_cleanup(&mut self, max: usize) -> usize {
        self.reclaim(max)
    }

    fn tx_inflight(&self) -> usize {
        self.inflight
    }
}

export_pmd!(AfPacket);

#[cfg(test)]
mod tests {
    use super::*;

    fn geo(args: &str) -> Result<Geometry, PmdError> {
        geometry(&DevArgs::parse(args, KEYS).unwrap())
    }

    #[test]
    fn geometry_defaults_and_checks() {
        assert_eq!(
            geo("").unwrap(),
            Geometry { blocksz: 128 << 10, framesz: 2048, framecnt: 4096, tov: 1, rx_frames: false, sndbuf: 4 << 20 }
        );
        assert_eq!(geo("sndbuf=65536").unwrap().sndbuf, 65536);
        assert!(geo("sndbuf=100").unwrap_err().msg.contains("`sndbuf=100` is out of range"));
        assert!(geo("rx_ring=frames").unwrap().rx_frames);
        assert!(!geo("rx_ring=blocks").unwrap().rx_frames);
        assert!(geo("rx_ring=v2").unwrap_err().msg.contains("`rx_ring=v2` is not a ring kind: accepted blocks"));
        assert!(geo("blocksz=5000").unwrap_err().msg.contains("power of two"));
        assert!(geo("framesz=100").unwrap_err().msg.contains("`framesz=100` is out of range"));
        assert!(geo("framesz=2050").unwrap_err().msg.contains("multiple of 16"));
        assert!(geo("framecnt=16,framesz=2048,blocksz=65536").unwrap_err().msg.contains("smaller than one block"));
    }

    #[test]
    fn check_args_checks_arguments_and_touches_nothing() {
        let ctx = |args| ProbeCtx { name: "net_af_packet0", args };
        // The interface need not exist where a file is checked.
        assert!(AfPacket::check_args(&ctx("iface=nosuchif0,qpairs=4")).is_ok());
        let e = AfPacket::check_args(&ctx("iface=x,qpairs=99")).unwrap_err();
        assert!(e.msg.contains("`qpairs=99` is out of range"), "{}", e.msg);
        assert!(AfPacket::check_args(&ctx("")).unwrap_err().msg.contains("`iface` is required"));
        assert!(AfPacket::check_args(&ctx("iface=x,blocksz=5000")).unwrap_err().msg.contains("power of two"));
    }

    #[test]
    fn probe_names_missing_and_unknown_interfaces() {
        let e = AfPacket::probe(&ProbeCtx { name: "net_af_packet0", args: "" }).err().unwrap();
        assert!(e.msg.contains("`iface` is required"), "{}", e.msg);
        let e = AfPacket::probe(&ProbeCtx { name: "net_af_packet0", args: "iface=nosuchif0" }).err().unwrap();
        assert!(e.msg.contains("iface=nosuchif0: "), "{}", e.msg);
        let e = AfPacket::probe(&ProbeCtx { name: "net_af_packet0", args: "ifase=lo" }).err().unwrap();
        assert!(e.msg.contains("did you mean `iface`"), "{}", e.msg);
    }
}
