//! `net_af_xdp`: a PMD on a Linux network interface through AF_XDP sockets, like
//! DPDK's net_af_xdp, whose UMEM is the host's mempool.
//!
//! * One XDP socket per queue pair (`queue_count` of them, bound to the interface's
//!   queues `start_queue..`), made when the RX queue is set up: its UMEM is the RX
//!   queue's mempool region, registered as it is in unaligned-chunk mode, so a frame
//!   the kernel receives lands in an mbuf's own buffer (256 bytes into it, behind
//!   the kernel's XDP headroom) and becomes that mbuf with no copy. The fill ring
//!   (twice the RX ring's entries: the RX queue's descriptor count, at least 2048)
//!   holds buffers of
//!   fresh mbufs, refilled in bursts as frames are taken; which
//!   buffers the kernel holds is tracked one bit per object, and an RX descriptor that
//!   names any other address is counted (`rx_bad_desc`) and never used.
//! * TX posts a packet of that pool by the address of its data, and holds it until
//!   the address comes back on the completion ring (`tx_done_cleanup` and
//!   `tx_inflight`, as net_af_packet: `tx_batch` and the TCP node's in-flight limit
//!   work unchanged). A packet of another pool, or in several segments, is copied
//!   into a buffer of the pool first (`tx_copied`); one larger than a chunk is
//!   dropped (`tx_too_long`). In copy mode the kernel sends 32 frames per kick and
//!   answers EAGAIN when more wait: a burst kicks once, and again (at most 8 times)
//!   only on EAGAIN; `tx_done_cleanup` kicks only if the last kick left frames.
//! * The XDP program, `bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)`, sends
//!   the frames of each queue with a socket to it and everything else on to the
//!   kernel's stack. It is loaded with the port and attached through a BPF link, so
//!   it is detached when the port closes and when the process dies, however it dies:
//!   no program outlives ironpath. Native (driver) mode where the driver has it (veth
//!   does), else generic (`xdp_mode=skb` forces it).
//! * The loading path: six BPF instructions and one XSKMAP, written as raw `bpf(2)`
//!   calls in `sys.rs` like the af_packet PMD's tcx program, rather than a binding to
//!   libbpf/libxdp (a C library the plugin would link and every machine would need)
//!   or aya (a large dependency tree for one map and one program). The price is that
//!   `xdp_prog=` (DPDK's own program from an object file) is not offered.
//! * Offloads: none. A veth works in copy mode (its driver has no zero-copy): the
//!   kernel copies each frame into the UMEM and out of it, and checksums are not
//!   offloaded either way; attaching native XDP to a veth also turns TSO off on its
//!   peer, whose TCP then sends MTU-sized segments. Zero-copy drivers get zero-copy
//!   unless `force_copy=1`.
//! * Kernel drops (XDP_STATISTICS `rx_dropped`: no buffer in the fill ring, and
//!   `rx_ring_full`) are reported as `imissed`; every counter of the socket is also an
//!   xstat. MAC, MTU, link and promiscuous mode are the
//!   interface's.
//!
//! Device arguments: `iface=<name>` (required), `start_queue=<n>` (0),
//! `queue_count=<n>` (1), `busy_budget=<n>` (0: off; else preferred busy polling of
//! the device through the socket, that many frames per call, on every empty RX
//! burst; DPDK's default is 64, ours is off because a busy poll may spin in the
//! kernel for up to 20 µs, which the rest of the lcore's graph would wait for),
//! `force_copy=0|1`, `xdp_mode=native|skb`. Needs root (CAP_NET_ADMIN, CAP_BPF, CAP_NET_RAW) and a
//! mempool whose buffers hold at least 2048 bytes (the default's do).

#![deny(clippy::undocumented_unsafe_blocks)]

mod queues;
mod sys;
pub mod umem;
mod xsk;

pub use queues::{XdpRx, XdpTx};

use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::{export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats};
use std::ffi::CStr;
use std::sync::{Arc, Mutex};
use sys::Fd;
use xsk::{Setup, TxSide, Xsk};

const KEYS: &[&str] = &["iface", "start_queue", "queue_count", "busy_budget", "force_copy", "xdp_mode"];

/// Entries of each socket's TX and completion rings (fixed: they are sized before
/// the socket is bound, when the RX queue is set up).
const TX_RING: u32 = 2048;
/// Entries of the RX ring: the RX queue's descriptor count rounded up to a power of
/// two, at least `RX_RING` (DPDK's net_af_xdp default: with fewer, a receiver
/// descheduled for a few milliseconds lets the ring overflow at kernel rates).
const RX_RING: u32 = 2048;
const MIN_RING: u32 = 64;
const MAX_RING: u32 = 16384;

/// The device arguments, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Args {
    iface: String,
    start_queue: u32,
    queue_count: u16,
    busy_budget: u32,
    force_copy: bool,
    skb_mode: bool,
}

fn parse_args(a: &DevArgs) -> Result<Args, PmdError> {
    let iface = a
        .get_name("iface", 15)?
        .ok_or_else(|| PmdError::invalid("device argument `iface` is required (e.g. iface=veth0)"))?;
    let start_queue = a.get_u64("start_queue", 0, 0, 1023)? as u32;
    let queue_count = a.get_u64("queue_count", 1, 1, 64)? as u16;
    let busy_budget = a.get_u64("busy_budget", 0, 0, 1024)? as u32;
    let force_copy = a.get_bool("force_copy", false)?;
    let skb_mode = match a.get("xdp_mode") {
        None | Some("native") => false,
        Some("skb") => true,
        Some(v) => {
            return Err(PmdError::invalid(format!(
                "device argument `xdp_mode={v}` is not an XDP mode: accepted native (the driver's, generic where it has none) or skb (generic)"
            )))
        }
    };
    Ok(Args { iface, start_queue, queue_count, busy_budget, force_copy, skb_mode })
}

/// Number of RX queues of interface `iface` (its `queues/rx-N` entries).
fn rx_queues(iface: &str) -> u32 {
    std::fs::read_dir(format!("/sys/class/net/{iface}/queues"))
        .map(|d| d.filter_map(Result::ok).filter(|e| e.file_name().to_string_lossy().starts_with("rx-")).count() as u32)
        .unwrap_or(1)
}

/// A device.
pub struct AfXdp {
    /// The XDP program's link (first: dropping the device detaches it before the
    /// sockets go).
    _link: Fd,
    map: Arc<Fd>,
    a: Args,
    ifindex: i32,
    /// The attach mode in use (`native` or `skb`).
    mode: &'static str,
    /// Per queue pair: the socket (for statistics) and the TX half waiting for its queue.
    xsks: Vec<Option<Arc<Xsk>>>,
    tx_slots: Vec<Arc<Mutex<Option<TxSide>>>>,
    /// The AF_PACKET socket whose membership holds promiscuous mode (dropped by the
    /// kernel when it closes, however the process ends) and whether it is held.
    promisc: Option<(Fd, bool)>,
}

impl AfXdp {
    fn os_err(&self, what: &str, e: std::io::Error) -> PmdError {
        os_err(&self.a.iface, what, e)
    }

    /// The kernel counters of every socket, summed.
    fn kernel_stats(&self) -> libc::xdp_statistics {
        // SAFETY: an all-zero xdp_statistics is valid.
        let mut t: libc::xdp_statistics = unsafe { std::mem::zeroed() };
        for x in self.xsks.iter().flatten() {
            let s = x.stats();
            t.rx_dropped += s.rx_dropped;
            t.rx_invalid_descs += s.rx_invalid_descs;
            t.tx_invalid_descs += s.tx_invalid_descs;
            t.rx_ring_full += s.rx_ring_full;
            t.rx_fill_ring_empty_descs += s.rx_fill_ring_empty_descs;
            t.tx_ring_empty_descs += s.tx_ring_empty_descs;
        }
        t
    }
}

fn os_err(iface: &str, what: &str, e: std::io::Error) -> PmdError {
    let hint = match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => " (needs root: CAP_NET_ADMIN, CAP_BPF and CAP_NET_RAW)",
        Some(libc::ENOBUFS) if what.contains("UMEM") => {
            " (the UMEM's pages are locked in memory: raise RLIMIT_MEMLOCK, `ulimit -l`, or keep CAP_IPC_LOCK, which root has)"
        }
        Some(libc::EAFNOSUPPORT) => " (a kernel without AF_XDP sockets: CONFIG_XDP_SOCKETS)",
        _ => "",
    };
    PmdError::new(e.raw_os_error().unwrap_or(abi::errno::EIO), format!("iface={iface}: {what}: {e}{hint}"))
}

impl Pmd for AfXdp {
    const NAME: &'static CStr = c"net_af_xdp";
    const DEVARGS_HELP: &'static CStr = c"iface=<ifname>,start_queue=<first queue, 0>,queue_count=<1..64, 1>,busy_budget=<0..1024, 0 (off)>,force_copy=0|1 (default 0),xdp_mode=native|skb (default native: the driver's XDP, generic where it has none)";
    type Rx = XdpRx;
    type Tx = XdpTx;

    const CHECKS_ARGS: bool = true;

    /// The arguments; the interface is not looked up (it may not exist where the
    /// file is checked).
    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        parse_args(&DevArgs::parse(ctx.args, KEYS)?).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = parse_args(&DevArgs::parse(ctx.args, KEYS)?)?;
        let iface = a.iface.clone();
        let ifindex = sys::ifindex(&iface)
            .map_err(|e| PmdError::new(abi::errno::ENODEV, format!("iface={iface}: {e} (see `ip link`)")))?;
        let have = rx_queues(&iface);
        let end = a.start_queue + u32::from(a.queue_count);
        if end > have {
            return Err(PmdError::invalid(format!(
                "iface={iface} has {have} RX queue(s): start_queue={} and queue_count={} ask for queues up to {} \
                 (more queues: `ethtool -L {iface} combined N`)",
                a.start_queue,
                a.queue_count,
                end - 1
            )));
        }
        // AF_XDP at all (an unprivileged user or an old kernel stops here).
        drop(sys::xsk_socket().map_err(|e| os_err(&iface, "cannot open an AF_XDP socket", e))?);
        let map = Arc::new(sys::xskmap(end).map_err(|e| os_err(&iface, "cannot create the XSKMAP", e))?);
        let prog = sys::redirect_prog(&map).map_err(|e| os_err(&iface, "cannot load the XDP program", e))?;
        let mut mode = if a.skb_mode { "skb" } else { "native" };
        let flags = if a.skb_mode { sys::XDP_FLAGS_SKB_MODE } else { 0 };
        let link =
            match sys::xdp_link(&prog, ifindex, flags) {
                Ok(l) => l,
                Err(e) if e.raw_os_error() == Some(libc::EBUSY) => return Err(os_err(
                    &iface,
                    "another XDP program is attached to the interface (`ip link show`; `ip link set IFACE xdp off`)",
                    e,
                )),
                Err(e) if !a.skb_mode && !matches!(e.raw_os_error(), Some(libc::EPERM) | Some(libc::EACCES)) => {
                    // No native XDP in the driver (or not for this setting): generic mode.
                    mode = "skb";
                    sys::xdp_link(&prog, ifindex, sys::XDP_FLAGS_SKB_MODE).map_err(|e2| {
                        os_err(&iface, &format!("cannot attach the XDP program (native: {e}; generic)"), e2)
                    })?
                }
                Err(e) => return Err(os_err(&iface, "cannot attach the XDP program", e)),
            };
        let n = usize::from(a.queue_count);
        Ok(AfXdp {
            _link: link,
            map,
            a,
            ifindex,
            mode,
            xsks: vec![None; n],
            tx_slots: (0..n).map(|_| Arc::new(Mutex::new(None))).collect(),
            promisc: None,
        })
    }

    fn info(&self) -> abi::DevInfo {
        let mtu = sys::mtu(&self.a.iface).unwrap_or(1500);
        let max_frame = umem::MAX_CHUNK - umem::XDP_HEADROOM;
        abi::DevInfo {
            max_rx_queues: self.a.queue_count,
            max_tx_queues: self.a.queue_count,
            min_desc: MIN_RING as u16,
            max_desc: MAX_RING as u16,
            min_mtu: 68,
            max_mtu: (max_frame - 14) as u16,
            mtu: mtu.min(65535) as u16,
            max_rx_pktlen: max_frame,
            ..Default::default()
        }
    }

    fn rx_queue_setup(
        &mut self,
        qid: u16,
        nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<XdpRx, PmdError> {
        let q = usize::from(qid);
        if self.xsks.get(q).is_none_or(Option::is_some) {
            return Err(PmdError::new(
                abi::errno::EBUSY,
                format!("RX queue {qid} is in use or beyond queue_count={}", self.a.queue_count),
            ));
        }
        let rx_size = u32::from(nb_desc).clamp(RX_RING, MAX_RING).next_power_of_two();
        let setup = Setup {
            map: &self.map,
            ifindex: self.ifindex,
            queue: self.a.start_queue + u32::from(qid),
            pool,
            rx_size,
            tx_size: TX_RING,
            bind_flags: if self.a.force_copy { libc::XDP_COPY } else { 0 },
            busy_budget: self.a.busy_budget,
        };
        let (rx, tx) = xsk::open(&setup).map_err(|xsk::SetupError(what, e)| {
            let what = format!("queue {}: {what}", setup.queue);
            self.os_err(&what, e)
        })?;
        self.xsks[q] = Some(rx.xsk.clone());
        *self.tx_slots[q].lock().unwrap_or_else(|e| e.into_inner()) = Some(tx);
        Ok(XdpRx { side: rx, stats, busy: self.a.busy_budget > 0 })
    }

    fn tx_queue_setup(&mut self, qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<XdpTx, PmdError> {
        let slot = self.tx_slots.get(usize::from(qid)).cloned().ok_or_else(|| {
            PmdError::new(abi::errno::EINVAL, format!("TX queue {qid} is beyond queue_count={}", self.a.queue_count))
        })?;
        Ok(XdpTx { slot, side: None, stats })
    }

    fn link(&self) -> abi::Link {
        ironpath_pmd_sdk::linux::link(&self.a.iface)
    }

    /// Frames the kernel could not deliver: no buffer in the fill ring (or another
    /// drop), and the RX ring full.
    fn extra_stats(&self, s: &mut abi::Stats) {
        let k = self.kernel_stats();
        s.imissed += k.rx_dropped + k.rx_ring_full;
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let k = self.kernel_stats();
        let sum = |f: fn(&xsk::XskCounters) -> u64| self.xsks.iter().flatten().map(|x| f(&x.counters)).sum::<u64>();
        vec![
            ("xdp_native".to_string(), u64::from(self.mode == "native")),
            ("xdp_zero_copy".to_string(), self.xsks.iter().flatten().filter(|x| x.zero_copy).count() as u64),
            ("rx_dropped".to_string(), k.rx_dropped),
            ("rx_invalid_descs".to_string(), k.rx_invalid_descs),
            ("rx_ring_full".to_string(), k.rx_ring_full),
            ("rx_fill_ring_empty".to_string(), k.rx_fill_ring_empty_descs),
            ("tx_invalid_descs".to_string(), k.tx_invalid_descs),
            ("tx_ring_empty".to_string(), k.tx_ring_empty_descs),
            ("rx_bad_desc".to_string(), sum(|c| c.rx_bad_desc.get())),
            ("tx_copied".to_string(), sum(|c| c.tx_copied.get())),
            ("tx_too_long".to_string(), sum(|c| c.tx_too_long.get())),
            ("tx_bad_completion".to_string(), sum(|c| c.tx_bad_completion.get())),
        ]
    }

    fn mac(&self) -> Result<[u8; 6], PmdError> {
        sys::hwaddr(&self.a.iface).map_err(|e| self.os_err("SIOCGIFHWADDR", e))
    }

    fn set_mtu(&mut self, mtu: u16) -> Result<(), PmdError> {
        sys::set_mtu(&self.a.iface, mtu).map_err(|e| self.os_err("SIOCSIFMTU", e))
    }

    /// A promiscuous membership on the interface, held by an AF_PACKET socket that
    /// receives nothing: the kernel drops it when the port closes or the process dies.
    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        if self.promisc.is_none() {
            let fd = sys::membership_socket().map_err(|e| self.os_err("cannot open an AF_PACKET socket", e))?;
            self.promisc = Some((fd, false));
        }
        let (ifindex, iface) = (self.ifindex, self.a.iface.clone());
        if let Some((fd, held)) = self.promisc.as_mut() {
            if *held != on {
                sys::promisc_membership(fd, ifindex, on).map_err(|e| os_err(&iface, "PACKET_MR_PROMISC", e))?;
                *held = on;
            }
        }
        Ok(())
    }

    fn promiscuous(&self) -> Result<bool, PmdError> {
        let held = self.promisc.as_ref().is_some_and(|p| p.1);
        Ok(held || sys::iface_flags(&self.a.iface).is_ok_and(|f| f & libc::IFF_PROMISC != 0))
    }

    /// The kernel interface's `IFF_ALLMULTI`.
    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        sys::set_iface_flag(&self.a.iface, libc::IFF_ALLMULTI, on).map_err(|e| self.os_err("SIOCSIFFLAGS", e))
    }

    fn allmulticast(&self) -> Result<bool, PmdError> {
        sys::iface_flags(&self.a.iface).map(|f| f & libc::IFF_ALLMULTI != 0).map_err(|e| self.os_err("SIOCGIFFLAGS", e))
    }

    /// The kernel interface's `IFF_UP` (`ip link set IFACE up|down`).
    fn set_link(&mut self, up: bool) -> Result<(), PmdError> {
        sys::set_iface_flag(&self.a.iface, libc::IFF_UP, up).map_err(|e| self.os_err("SIOCSIFFLAGS", e))
    }
}

export_pmd!(AfXdp);

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Result<Args, PmdError> {
        parse_args(&DevArgs::parse(s, KEYS)?)
    }

    #[test]
    fn arguments_have_defaults_and_are_checked() {
        let a = args("iface=veth0").unwrap();
        assert_eq!(
            a,
            Args {
                iface: "veth0".into(),
                start_queue: 0,
                queue_count: 1,
                busy_budget: 0,
                force_copy: false,
                skb_mode: false
            }
        );
        let a = args("iface=eth1,start_queue=2,queue_count=4,busy_budget=64,force_copy=1,xdp_mode=skb").unwrap();
        assert_eq!((a.start_queue, a.queue_count, a.busy_budget, a.force_copy, a.skb_mode), (2, 4, 64, true, true));
        assert!(args("").unwrap_err().msg.contains("`iface` is required"));
        assert!(args("iface=x,queue_count=0").unwrap_err().msg.contains("`queue_count=0` is out of range"));
        assert!(args("iface=x,xdp_mode=hw").unwrap_err().msg.contains("accepted native"));
        assert!(args("iface=x,force_copy=2").unwrap_err().msg.contains("force_copy"));
        assert!(args("iface=x,queues=2").unwrap_err().msg.contains("queues"));
    }

    #[test]
    fn check_args_touches_nothing_and_probe_names_what_is_wrong() {
        let ctx = |args| ProbeCtx { name: "net_af_xdp0", args };
        assert!(AfXdp::check_args(&ctx("iface=nosuchif0,queue_count=4")).is_ok());
        let e = AfXdp::probe(&ctx("iface=nosuchif0")).err().unwrap();
        assert!(e.msg.contains("iface=nosuchif0: "), "{}", e.msg);
        // `lo` has one queue.
        let e = AfXdp::probe(&ctx("iface=lo,start_queue=1")).err().unwrap();
        assert!(e.msg.contains("has 1 RX queue(s)") && e.msg.contains("start_queue=1"), "{}", e.msg);
    }
}
