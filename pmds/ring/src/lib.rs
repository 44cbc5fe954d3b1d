//! `net_ring`: ports backed by in-process rings, for tests and pipelines.
//!
//! * `net_ring0` alone is a loopback: what TX queue *q* sends, RX queue *q* receives.
//! * Two ports with the same `link=NAME` are cross-connected: what one sends on TX
//!   queue *q*, the other receives on RX queue *q*. A third port on a link is refused.
//!
//! Each direction of each queue is a lock-free SPSC ring (`ringbuf`) of `size=` slots
//! (default 1024). A full ring makes `tx_burst` return fewer than asked (the caller
//! keeps and usually frees the rest), like a NIC with a full descriptor ring.
//!
//! Like DPDK's net_ring, the fast path does not touch the packets: it moves pointers
//! and counts packets. With `bytes=1` it also counts bytes and stamps the receiving
//! port into each mbuf (one cache line per packet more).
//!
//! Device arguments: `link=<name>`, `size=<16..=1048576>`, `bytes=0|1`,
//! `mac=aa:bb:cc:dd:ee:ff`.

#![forbid(unsafe_code)]

use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, PacketRing, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RingConsumer, RingProducer, RxBurst,
    RxQueue, SoftState, TxBurst, TxQueue,
};
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::{Arc, Mutex, MutexGuard};

const KEYS: &[&str] = &["link", "size", "bytes", "mac"];
const MAX_QUEUES: u16 = 16;

/// The two ends of one ring while no queue holds them.
#[derive(Default)]
struct Slot {
    prod: Option<RingProducer>,
    cons: Option<RingConsumer>,
}

/// A link: up to two ports; rings keyed by (sending end, queue).
struct Link {
    ends: [Option<String>; 2],
    loopback: bool,
    size: usize,
    rings: HashMap<(usize, u16), Slot>,
}

impl Link {
    fn slot(&mut self, end: usize, qid: u16) -> &mut Slot {
        let size = self.size;
        self.rings.entry((end, qid)).or_insert_with(|| {
            let (p, c) = PacketRing::with_capacity(size);
            Slot { prod: Some(p), cons: Some(c) }
        })
    }
}

static LINKS: Mutex<Option<HashMap<String, Link>>> = Mutex::new(None);

fn links() -> MutexGuard<'static, Option<HashMap<String, Link>>> {
    // A poisoned lock only means another thread panicked while holding it; the map
    // itself stays consistent (every update is a single insert/remove).
    LINKS.lock().unwrap_or_else(|e| e.into_inner())
}

fn with_link<R>(name: &str, f: impl FnOnce(&mut Link) -> R) -> Option<R> {
    links().get_or_insert_with(HashMap::new).get_mut(name).map(f)
}

/// A ring device.
pub struct RingPmd {
    name: String,
    bytes: bool,
    link: String,
    end: usize,
    soft: SoftState,
}

/// Receive queue: consumer end of the peer's ring.
pub struct RingRx {
    link: String,
    key: (usize, u16),
    cons: Option<RingConsumer>,
    bytes: bool,
    stats: Arc<QueueStats>,
}

/// Transmit queue: producer end of our ring.
pub struct RingTx {
    link: String,
    key: (usize, u16),
    prod: Option<RingProducer>,
    bytes: bool,
    stats: Arc<QueueStats>,
}

impl Drop for RingRx {
    fn drop(&mut self) {
        let c = self.cons.take();
        with_link(&self.link, |l| l.rings.entry(self.key).or_default().cons = c);
    }
}

impl Drop for RingTx {
    fn drop(&mut self) {
        let p = self.prod.take();
        with_link(&self.link, |l| l.rings.entry(self.key).or_default().prod = p);
    }
}

impl Drop for RingPmd {
    fn drop(&mut self) {
        let mut g = links();
        let map = g.get_or_insert_with(HashMap::new);
        let Some(l) = map.get_mut(&self.link) else { return };
        l.ends[self.end] = None;
        if l.ends.iter().all(Option::is_none) {
            // Dropping the rings frees the packets still in them.
            map.remove(&self.link);
        }
        if map.is_empty() {
            *g = None;
        }
    }
}

/// The device arguments: ring size, byte counting, link name, MAC.
fn parse_args(ctx: &ProbeCtx<'_>) -> Result<(usize, bool, Option<String>, [u8; 6]), PmdError> {
    let a = DevArgs::parse(ctx.args, KEYS)?;
    let size = a.get_u64("size", 1024, 16, 1 << 20)? as usize;
    let bytes = a.get_bool("bytes", false)?;
    let named = a.get_name("link", 64)?;
    let mac = a.get_mac("mac")?.unwrap_or_else(|| SoftState::mac_from_name(0x01, ctx.name));
    Ok((size, bytes, named, mac))
}

impl Pmd for RingPmd {
    const NAME: &'static CStr = c"net_ring";
    const DEVARGS_HELP: &'static CStr =
        c"link=<name>,size=<16..1048576, default 1024>,bytes=0|1 (count bytes, stamp port),mac=<aa:bb:cc:dd:ee:ff>";
    type Rx = RingRx;
    type Tx = RingTx;

    const CHECKS_ARGS: bool = true;

    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        parse_args(ctx).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let (size, bytes, named, mac) = parse_args(ctx)?;
        let (link, loopback) = match named {
            Some(n) => (format!("link:{n}"), false),
            None => (format!("loop:{}", ctx.name), true),
        };
        let mut g = links();
        let map = g.get_or_insert_with(HashMap::new);
        let l = map.entry(link.clone()).or_insert_with(|| Link {
            ends: [None, None],
            loopback,
            size,
            rings: HashMap::new(),
        });
        if l.size != size {
            return Err(PmdError::invalid(format!(
                "size={size} differs from size={} of the other port on link `{}`",
                l.size,
                link.trim_start_matches("link:")
            )));
        }
        let end = if loopback {
            if l.ends[0].is_some() {
                return Err(PmdError::new(abi::errno::EEXIST, format!("{} exists already", ctx.name)));
            }
            0
        } else {
            match l.ends.iter().position(Option::is_none) {
                Some(e) => e,
                None => {
                    return Err(PmdError::new(
                        abi::errno::EBUSY,
                        format!(
                            "link `{}` already connects {} and {}; a link joins two ports",
                            link.trim_start_matches("link:"),
                            l.ends[0].as_deref().unwrap_or("?"),
                            l.ends[1].as_deref().unwrap_or("?")
                        ),
                    ))
                }
            }
        };
        l.ends[end] = Some(ctx.name.to_string());
        Ok(Self { name: ctx.name.to_string(), bytes, link, end, soft: SoftState::new(mac, 65000) })
    }

    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: MAX_QUEUES,
            max_tx_queues: MAX_QUEUES,
            min_desc: 0,
            max_desc: u16::MAX,
            min_mtu: 68,
            max_mtu: 65000,
            mtu: self.soft.mtu,
            max_rx_pktlen: 65535,
            ..Default::default()
        }
    }

    fn rx_queue_setup(
        &mut self,
        qid: u16,
        _nb_desc: u16,
        _pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<RingRx, PmdError> {
        let (name, end) = (self.name.clone(), self.end);
        let r = with_link(&self.link, |l| {
            let from = if l.loopback { end } else { 1 - end };
            let key = (from, qid);
            l.slot(from, qid).cons.take().map(|c| (c, key))
        })
        .flatten();
        let Some((cons, key)) = r else {
            return Err(PmdError::new(abi::errno::EBUSY, format!("{name}: RX queue {qid} is already in use")));
        };
        Ok(RingRx { link: self.link.clone(), key, cons: Some(cons), bytes: self.bytes, stats })
    }

    fn tx_queue_setup(&mut self, qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<RingTx, PmdError> {
        let (name, end) = (self.name.clone(), self.end);
        let r = with_link(&self.link, |l| l.slot(end, qid).prod.take()).flatten();
        let Some(prod) = r else {
            return Err(PmdError::new(abi::errno::EBUSY, format!("{name}: TX queue {qid} is already in use")));
        };
        Ok(RingTx { link: self.link.clone(), key: (end, qid), prod: Some(prod), bytes: self.bytes, stats })
    }

    fn link(&self) -> abi::Link {
        let up = with_link(&self.link, |l| l.loopback || l.ends.iter().all(Option::is_some)).unwrap_or(false);
        abi::Link { speed_mbps: 100_000, up: u8::from(up), full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    fn soft(&self) -> Option<&SoftState> {
        Some(&self.soft)
    }

    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        Some(&mut self.soft)
    }
}

impl RxQueue for RingRx {
    #[inline]
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let Some(c) = self.cons.as_mut() else { return };
        let n = c.pop_into(burst);
        if self.bytes {
            let port = burst.port_id();
            let mut bytes = 0u64;
            for p in burst.packets_mut() {
                p.set_port(port);
                bytes += u64::from(p.len());
            }
            self.stats.bytes.add(bytes);
        }
        self.stats.packets.add(n as u64);
    }
}

impl TxQueue for RingTx {
    #[inline]
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let Some(p) = self.prod.as_mut() else { return };
        if self.bytes {
            // Only we produce, so the free space can only grow before the push. Sum the
            // lengths first: once pushed, the consumer may free the packets.
            let k = burst.len().min(p.vacant());
            let bytes: u64 = burst.packets()[..k].iter().map(|m| u64::from(m.len())).sum();
            self.stats.bytes.add(bytes);
        }
        let n = p.push_from(burst);
        self.stats.packets.add(n as u64);
    }
}

export_pmd!(RingPmd);
