//! `net_pcap`: a PMD on capture files, like DPDK's net_pcap.
//!
//! * `rx_pcap=FILE` replays a pcap or pcapng file (microsecond or nanosecond
//!   timestamps, read with the `pcap-parser` crate). The whole file is checked and
//!   loaded at probe: a truncated or corrupt file is refused with the number of the
//!   record where it breaks. Packets larger than an mbuf are received as chains.
//!   `infinite_rx=1` starts over at the end; `rate=recorded` replays at the recorded
//!   pace, `rate=<pps>` at a fixed rate, default as fast as asked.
//! * `tx_pcap=FILE` writes every packet sent to a pcap file (microsecond timestamps,
//!   or nanosecond with `tx_ns=1`) from a thread of its own (`ironpath_pcapfile::Spool`):
//!   a TX queue copies each packet into a ring of 4 MiB and makes no system call, since
//!   a write to a file waits for the disk and an lcore must never wait. A packet
//!   that finds the ring full is not written: it counts as a TX error and in the
//!   `tx_pcap_ring_full` xstat. The file is complete at stop and close. Without
//!   `tx_pcap`, transmitted packets are counted and dropped.
//!
//! Device arguments: `rx_pcap=`, `tx_pcap=`, `infinite_rx=0|1`, `rate=recorded|<pps>`,
//! `tx_ns=0|1`.

#![forbid(unsafe_code)]

use ironpath_pcapfile::{self as file, Packet, Spool, SpoolFeed};
use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::packet::PushError;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, SoftState, TxBurst, TxQueue,
};
use std::ffi::CStr;
use std::sync::Arc;
use std::time::Instant;

const KEYS: &[&str] = &["rx_pcap", "tx_pcap", "infinite_rx", "rate", "tx_ns"];

/// Bytes of records a TX queue may have waiting for the writer thread.
const TX_RING_BYTES: usize = 4 << 20;

/// Replay pace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// As fast as the application polls.
    Unlimited,
    /// Following the recorded timestamps.
    Recorded,
    /// A fixed number of packets per second.
    Pps(u64),
}

/// A device.
pub struct PcapPmd {
    rx: Option<Arc<Vec<Packet>>>,
    infinite: bool,
    rate: Rate,
    tx: Option<Spool>,
    soft: SoftState,
}

/// Receive queue: replays the loaded packets.
pub struct PcapRx {
    pkts: Arc<Vec<Packet>>,
    next: usize,
    infinite: bool,
    rate: Rate,
    start: Option<Instant>,
    /// Packets handed out since `start` (for `Rate::Pps`) and loops done.
    sent: u64,
    loops: u64,
    pool: Pool,
    stats: Arc<QueueStats>,
}

/// Transmit queue: hands its packets to the capture file's writer thread, or drops.
pub struct PcapTx {
    out: Option<SpoolFeed>,
    stats: Arc<QueueStats>,
}

/// `rx_pcap` and `tx_pcap`: at least one.
fn parse_paths(a: &DevArgs) -> Result<(Option<String>, Option<String>), PmdError> {
    let rx_path = a.get_name("rx_pcap", 4096)?;
    let tx_path = a.get_name("tx_pcap", 4096)?;
    if rx_path.is_none() && tx_path.is_none() {
        return Err(PmdError::invalid("give rx_pcap=FILE, tx_pcap=FILE or both"));
    }
    Ok((rx_path, tx_path))
}

fn parse_rate(a: &DevArgs) -> Result<Rate, PmdError> {
    match a.get("rate") {
        None => Ok(Rate::Unlimited),
        Some("recorded") => Ok(Rate::Recorded),
        Some(_) => Ok(Rate::Pps(
            a.get_u64("rate", 0, 1, 1_000_000_000)
                .map_err(|e| PmdError::invalid(format!("{}; or `recorded`", e.msg)))?,
        )),
    }
}

impl Pmd for PcapPmd {
    const NAME: &'static CStr = c"net_pcap";
    const DEVARGS_HELP: &'static CStr = c"rx_pcap=<file>,tx_pcap=<file>,infinite_rx=0|1,rate=recorded|<pps>,tx_ns=0|1";
    type Rx = PcapRx;
    type Tx = PcapTx;

    const CHECKS_ARGS: bool = true;

    /// The arguments; the files are not opened (nor created).
    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        parse_paths(&a)?;
        a.get_bool("infinite_rx", false)?;
        parse_rate(&a)?;
        a.get_bool("tx_ns", false)?;
        Ok(())
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        let (rx_path, tx_path) = parse_paths(&a)?;
        let infinite = a.get_bool("infinite_rx", false)?;
        let rate = parse_rate(&a)?;
        let rx = match &rx_path {
            Some(p) => {
                let pkts =
                    file::read(std::path::Path::new(p)).map_err(|e| PmdError::invalid(format!("rx_pcap={p}: {e}")))?;
                if pkts.is_empty() && infinite {
                    return Err(PmdError::invalid(format!("rx_pcap={p}: no packets to replay with infinite_rx=1")));
                }
                Some(Arc::new(pkts))
            }
            None => None,
        };
        let tx = match &tx_path {
            Some(p) => Some(
                Spool::create(std::path::Path::new(p), a.get_bool("tx_ns", false)?)
                    .map_err(|e| PmdError::invalid(format!("tx_pcap={p}: {e}")))?,
            ),
            None => None,
        };
        Ok(PcapPmd { rx, infinite, rate, tx, soft: SoftState::new(SoftState::mac_from_name(0x70, ctx.name), 65535) })
    }

    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: 1,
            max_tx_queues: 1,
            max_desc: u16::MAX,
            min_mtu: 68,
            max_mtu: 65535,
            mtu: self.soft.mtu,
            max_rx_pktlen: 262_144,
            ..Default::default()
        }
    }

    fn rx_queue_setup(
        &mut self,
        _qid: u16,
        _nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<PcapRx, PmdError> {
        let pkts = self.rx.clone().unwrap_or_default();
        Ok(PcapRx {
            pkts,
            next: 0,
            infinite: self.infinite,
            rate: self.rate,
            start: None,
            sent: 0,
            loops: 0,
            pool,
            stats,
        })
    }

    fn tx_queue_setup(&mut self, _qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<PcapTx, PmdError> {
        Ok(PcapTx { out: self.tx.as_ref().map(|s| s.feed(TX_RING_BYTES)), stats })
    }

    fn stop(&mut self) -> Result<(), PmdError> {
        self.flush()
    }

    fn link(&self) -> abi::Link {
        abi::Link { speed_mbps: 10_000, up: 1, full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    fn xstats(&self) -> Vec<(String, u64)> {
        let mut v = vec![("rx_pcap_packets_in_file".to_string(), self.rx.as_ref().map_or(0, |p| p.len() as u64))];
        if let Some(w) = &self.tx {
            v.push(("tx_pcap_packets_written".to_string(), w.captured()));
            v.push(("tx_pcap_ring_full".to_string(), w.dropped()));
        }
        v
    }

    fn soft(&self) -> Option<&SoftState> {
        Some(&self.soft)
    }

    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        Some(&mut self.soft)
    }
}

impl PcapPmd {
    fn flush(&self) -> Result<(), PmdError> {
        if let Some(w) = &self.tx {
            w.flush().map_err(|e| PmdError::new(abi::errno::EIO, format!("tx_pcap: {e}")))?;
        }
        Ok(())
    }
}

impl Drop for PcapPmd {
    fn drop(&mut self) {
        let _ = self.flush();
    }
}

impl PcapRx {
    /// How many packets the pace allows now.
    fn allowed(&mut self, want: usize) -> usize {
        if matches!(self.rate, Rate::Unlimited) {
            return want;
        }
        let now = Instant::now();
        let start = *self.start.get_or_insert(now);
        match self.rate {
            Rate::Unlimited => want,
            Rate::Pps(pps) => {
                let due = (now.duration_since(start).as_nanos() as u64).saturating_mul(pps) / 1_000_000_000;
                (due.saturating_sub(self.sent) as usize).min(want)
            }
            Rate::Recorded => {
                let Some(first) = self.pkts.first().map(|p| p.ts_ns) else { return 0 };
                let span = self.pkts.last().map_or(0, |p| p.ts_ns.saturating_sub(first)).max(1);
                let elapsed = now.duration_since(start).as_nanos() as u64;
                let mut n = 0;
                let mut i = self.next;
                let mut loops = self.loops;
                while n < want {
                    let due = loops * span + self.pkts[i].ts_ns.saturating_sub(first);
                    if due > elapsed {
                        break;
                    }
                    n += 1;
                    i += 1;
                    if i == self.pkts.len() {
                        if !self.infinite {
                            break;
                        }
                        i = 0;
                        loops += 1;
                    }
                }
                n
            }
        }
    }
}

impl RxQueue for PcapRx {
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        if self.pkts.is_empty() || (self.next == self.pkts.len() && !self.infinite) {
            return;
        }
        let n = self.allowed(burst.room());
        let port = burst.port_id();
        let (mut k, mut bytes) = (0, 0u64);
        while k < n {
            if self.next == self.pkts.len() {
                if !self.infinite {
                    break;
                }
                self.next = 0;
                self.loops += 1;
            }
            // A run of packets that fit one buffer each: allocated together, copied in.
            let room = usize::from(self.pool.buf_len().saturating_sub(self.pool.headroom()));
            let end = self.pkts.len().min(self.next + (n - k));
            let fit = self.pkts[self.next..end].iter().take_while(|p| p.data.len() <= room).count();
            if fit > 0 {
                let Some(fresh) = burst.alloc(&self.pool, fit) else {
                    self.stats.nombuf.add(1);
                    break;
                };
                for (f, p) in fresh.iter_mut().zip(&self.pkts[self.next..self.next + fit]) {
                    bytes += f.set_data(&p.data) as u64;
                    f.set_port(port);
                }
                k += fit;
                self.next += fit;
                self.sent += fit as u64;
                continue;
            }
            let data = &self.pkts[self.next].data;
            match burst.push_bytes(&self.pool, data) {
                Ok(p) => p.set_port(port),
                Err(PushError::NoMbuf) => {
                    self.stats.nombuf.add(1);
                    break;
                }
                Err(PushError::Full) => break,
                Err(PushError::TooLong) => {
                    self.stats.errors.add(1);
                    self.next += 1;
                    continue;
                }
            }
            k += 1;
            bytes += data.len() as u64;
            self.next += 1;
            self.sent += 1;
        }
        self.stats.packets.add(k as u64);
        self.stats.bytes.add(bytes);
    }
}

impl TxQueue for PcapTx {
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let n = burst.len() as u64;
        let bytes = burst.packets().iter().map(|p| u64::from(p.len())).sum();
        if let Some(feed) = &mut self.out {
            let lost =
                burst.packets().iter().filter(|p| !feed.push(p.segments(), p.len() as usize, usize::MAX)).count();
            if lost > 0 {
                self.stats.errors.add(lost as u64);
            }
        }
        // Written (or dropped): free them all at once.
        burst.free_all();
        self.stats.packets.add(n);
        self.stats.bytes.add(bytes);
    }
}

export_pmd!(PcapPmd);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn check_args_creates_no_file() {
        let out = std::env::temp_dir().join(format!("ironpath-pcap-check-{}.pcap", std::process::id()));
        let args = format!("tx_pcap={}", out.display());
        assert!(PcapPmd::check_args(&ProbeCtx { name: "net_pcap0", args: &args }).is_ok());
        assert!(!out.exists(), "check_args created {}", out.display());
        let e = PcapPmd::check_args(&ProbeCtx { name: "net_pcap0", args: "" }).unwrap_err();
        assert!(e.msg.contains("give rx_pcap=FILE, tx_pcap=FILE or both"), "{}", e.msg);
        let e = PcapPmd::check_args(&ProbeCtx { name: "net_pcap0", args: "tx_pcap=/x,rate=fast" }).unwrap_err();
        assert!(e.msg.contains("or `recorded`"), "{}", e.msg);
    }
}
