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
//!   A device that cannot take a packet whole (`ethtool -K IF tso off`) needs the
//!   kernel's software segmentation, which the qdisc bypass does not do (it drops the
//!   packet): the first such refusal moves the queue's TSO socket behind the qdisc
//!   (xstat `tx_gso_qdisc`) and the packet is sent again.
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
mod rxq;
mod sys;
mod txq;

pub use rxq::AfRx;
pub use txq::AfTx;
use txq::TxOffloads;

use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::vnet::VnetHdr;
use ironpath_pmd_sdk::{export_pmd, DevArgs, KernelFlowHash, Pmd, PmdError, Pool, ProbeCtx, QueueStats};
use std::ffi::CStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use sys::Fd;

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
    rx_socks: Vec<Option<(Fd, Arc<Drops>)>>,
    tx_socks: Vec<Option<Fd>>,
    /// Per queue, the `PACKET_VNET_HDR` socket TSO packets go through (`tso=1`).
    gso_socks: Vec<Option<Fd>>,
    tso: bool,
    qdisc_bypass: bool,
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
            rx_socks: Vec::new(),
            tx_socks: Vec::new(),
            gso_socks: Vec::new(),
            tso,
            qdisc_bypass,
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
            recv: if g.rx_frames { AfRx::rx_frames } else { AfRx::rx_blocks },
            framesz: g.framesz as usize,
            // (`ring_v2` rounds the ring up to whole blocks.)
            nframes: (g.framecnt.div_ceil(g.blocksz / g.framesz) * (g.blocksz / g.framesz)) as usize,
            frame: 0,
            pool,
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
                    gso_bypass: self.qdisc_bypass,
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
        ironpath_pmd_sdk::linux::link(&self.iface)
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
            ("tx_gso_qdisc".to_string(), self.tx_offloads.iter().map(|o| o.gso_qdisc.get()).sum()),
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
