//! `net_null`: like DPDK's net_null. RX allocates real mbufs from the queue's mempool
//! and sets their length (`size=`, default 64); with `copy=1` it also copies a template
//! packet (a valid Ethernet/IPv4/UDP frame) into each. TX counts and frees what it is
//! given to its pool. Nothing is recycled behind the pool's back, so the figures
//! measure the real mempool and mbuf paths.
//!
//! Device arguments: `size=<14..=9000>`, `copy=0|1`, `no_rx=0|1` (RX returns nothing),
//! `mac=aa:bb:cc:dd:ee:ff`.

#![forbid(unsafe_code)]

use ironpath_pmd_sdk::abi;
use ironpath_pmd_sdk::{
    export_pmd, DevArgs, Pmd, PmdError, Pool, ProbeCtx, QueueStats, RxBurst, RxQueue, SoftState, TxBurst, TxQueue,
};
use std::ffi::CStr;
use std::sync::Arc;

const KEYS: &[&str] = &["size", "copy", "no_rx", "mac"];
const MAX_QUEUES: u16 = 64;

/// A null device.
pub struct NullPmd {
    size: u16,
    copy: bool,
    no_rx: bool,
    soft: SoftState,
    template: Arc<[u8]>,
}

/// Receive queue: a packet generator.
pub struct NullRx {
    pool: Pool,
    size: u16,
    copy: bool,
    no_rx: bool,
    template: Arc<[u8]>,
    stats: Arc<QueueStats>,
}

/// Transmit queue: a sink.
pub struct NullTx {
    stats: Arc<QueueStats>,
}

/// The Internet checksum of `data` (for the template's IPv4 header).
fn csum(data: &[u8]) -> u16 {
    let mut s: u32 = data.chunks(2).map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))).sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// A broadcast Ethernet / IPv4 / UDP frame of `size` bytes from 198.18.0.1:9 to
/// 198.18.255.255:9 (RFC 2544 range), payload zero; shorter sizes are truncated.
fn template(size: u16, mac: [u8; 6]) -> Arc<[u8]> {
    let size = size as usize;
    let mut f = vec![0u8; size.max(42)];
    f[0..6].copy_from_slice(&[0xff; 6]);
    f[6..12].copy_from_slice(&mac);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip_len = (f.len() - 14) as u16;
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[198, 18, 0, 1]);
    ip[16..20].copy_from_slice(&[198, 18, 255, 255]);
    let c = csum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&9u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f.truncate(size);
    f.into()
}

impl Pmd for NullPmd {
    const NAME: &'static CStr = c"net_null";
    const DEVARGS_HELP: &'static CStr = c"size=<14..9000, default 64>,copy=0|1,no_rx=0|1,mac=<aa:bb:cc:dd:ee:ff>";
    type Rx = NullRx;
    type Tx = NullTx;

    const CHECKS_ARGS: bool = true;

    /// The probe creates nothing: the check is the probe.
    fn check_args(ctx: &ProbeCtx<'_>) -> Result<(), PmdError> {
        Self::probe(ctx).map(drop)
    }

    fn probe(ctx: &ProbeCtx<'_>) -> Result<Self, PmdError> {
        let a = DevArgs::parse(ctx.args, KEYS)?;
        let size = a.get_u64("size", 64, 14, 9000)? as u16;
        let copy = a.get_bool("copy", false)?;
        let no_rx = a.get_bool("no_rx", false)?;
        // Default MAC: locally administered, derived from the instance name.
        let mac = a.get_mac("mac")?.unwrap_or_else(|| SoftState::mac_from_name(0x00, ctx.name));
        Ok(Self { size, copy, no_rx, soft: SoftState::new(mac, 9000), template: template(size, mac) })
    }

    fn info(&self) -> abi::DevInfo {
        abi::DevInfo {
            max_rx_queues: MAX_QUEUES,
            max_tx_queues: MAX_QUEUES,
            min_desc: 0,
            max_desc: u16::MAX,
            min_mtu: 68,
            max_mtu: 9000,
            mtu: self.soft.mtu,
            max_rx_pktlen: 9000 + 18,
            // It discards what it is given: any offload a packet asks for is done.
            tx_offload_capa: abi::TX_TCP_SEG | abi::TX_TCP_CKSUM | abi::TX_UDP_CKSUM,
            ..Default::default()
        }
    }

    fn rx_queue_setup(
        &mut self,
        _qid: u16,
        _nb_desc: u16,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<NullRx, PmdError> {
        let room = pool.buf_len().saturating_sub(pool.headroom());
        if self.size > room {
            return Err(PmdError::invalid(format!(
                "size={} does not fit the mempool's mbufs ({room} bytes of data room after headroom)",
                self.size
            )));
        }
        Ok(NullRx { pool, size: self.size, copy: self.copy, no_rx: self.no_rx, template: self.template.clone(), stats })
    }

    fn tx_queue_setup(&mut self, _qid: u16, _nb_desc: u16, stats: Arc<QueueStats>) -> Result<NullTx, PmdError> {
        Ok(NullTx { stats })
    }

    fn link(&self) -> abi::Link {
        abi::Link { speed_mbps: 10_000, up: 1, full_duplex: 1, autoneg: 0, reserved: 0 }
    }

    fn soft(&self) -> Option<&SoftState> {
        Some(&self.soft)
    }

    fn soft_mut(&mut self) -> Option<&mut SoftState> {
        Some(&mut self.soft)
    }

    // DPDK's net_null has no operation for the following: its ports stay
    // promiscuous and all-multicast (asking for what is already on succeeds, as
    // ethdev answers without calling the driver), and the rest is refused with
    // ENOTSUP, which scripts written against DPDK's testpmd expect to see.

    fn set_promiscuous(&mut self, on: bool) -> Result<(), PmdError> {
        if on {
            Ok(())
        } else {
            Err(PmdError::not_supported("leaving promiscuous mode"))
        }
    }

    fn set_allmulticast(&mut self, on: bool) -> Result<(), PmdError> {
        if on {
            Ok(())
        } else {
            Err(PmdError::not_supported("leaving all-multicast mode"))
        }
    }

    fn add_mac(&mut self, _mac: [u8; 6]) -> Result<(), PmdError> {
        Err(PmdError::not_supported("adding a MAC address"))
    }

    fn remove_mac(&mut self, _mac: [u8; 6]) -> Result<(), PmdError> {
        Err(PmdError::not_supported("removing a MAC address"))
    }

    fn set_link(&mut self, _up: bool) -> Result<(), PmdError> {
        Err(PmdError::not_supported("setting the link up or down"))
    }
}

impl RxQueue for NullRx {
    #[inline]
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let n = burst.room();
        if self.no_rx || n == 0 {
            return;
        }
        let size = self.size;
        // `size` fits the data room (checked at queue setup).
        let Some(fresh) = burst.alloc_len(&self.pool, n, size) else {
            self.stats.nombuf.add(n as u64);
            return;
        };
        if self.copy {
            for p in fresh.iter_mut() {
                p.room_mut()[..self.template.len()].copy_from_slice(&self.template);
            }
        }
        self.stats.packets.add(n as u64);
        self.stats.bytes.add(n as u64 * u64::from(size));
    }
}

impl TxQueue for NullTx {
    #[inline]
    fn tx_burst(&mut self, burst: &mut TxBurst<'_>) {
        let bytes: u64 = burst.packets().iter().map(|p| u64::from(p.len())).sum();
        self.stats.packets.add(burst.len() as u64);
        self.stats.bytes.add(bytes);
        burst.free_all();
    }
}

export_pmd!(NullPmd);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_is_a_valid_ipv4_udp_frame() {
        let t = template(64, [2, 0, 0, 0, 0, 1]);
        assert_eq!(t.len(), 64);
        assert_eq!(&t[12..14], &[0x08, 0x00]);
        // The header, worked by hand: 4500 0032 0000 0000 4011 (checksum) c612 0001
        // c612 ffff sums to 0x31167, folds to 0x116a, and complements to 0xee95.
        assert_eq!(&t[24..26], &[0xee, 0x95], "IPv4 header checksum");
        assert_eq!(u16::from_be_bytes([t[16], t[17]]), 50);
        assert_eq!(u16::from_be_bytes([t[38], t[39]]), 30);
    }

    #[test]
    fn checksum_matches_rfc_1071s_worked_example() {
        // RFC 1071 section 3: these eight bytes sum to 0xddf2 (one's complement), so
        // their checksum is 0x220d.
        assert_eq!(csum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0x220d);
        // An odd length is padded with a zero byte: 0x0001 + 0xf200 = 0xf201, complemented.
        assert_eq!(csum(&[0x00, 0x01, 0xf2]), 0x0dfe);
    }

    /// Every packet RX makes is one segment of `size` bytes (`pkt_len` and `data_len`),
    /// stamped with the port, untagged, with the template when `copy=1`; RX counts.
    #[test]
    fn rx_makes_whole_packets_of_the_size_asked() {
        use ironpath_pmd_sdk::testing::{run_rx, TestPool};
        for (args, size, copy) in [("size=64", 64, false), ("size=1514,copy=1", 1514, true), ("size=14", 14, false)] {
            let tp = TestPool::new(64, 2048, 128);
            let mut dev = NullPmd::probe(&ProbeCtx { name: "net_null0", args }).unwrap();
            let stats = Arc::new(QueueStats::default());
            let mut q = dev.rx_queue_setup(0, 0, tp.pool(), stats.clone()).unwrap();
            // (The packets of a round go back to the pool and are reused by the next.)
            for room in [1, 5, 32] {
                let pkts = run_rx(&mut q, room, 7);
                assert_eq!(pkts.len(), room, "{args}");
                for p in &pkts {
                    let m = p.mbuf();
                    assert_eq!(
                        (m.pkt_len, m.data_len, m.nb_segs, m.port, m.vlan_tci),
                        (size, size as u16, 1, 7, 0),
                        "{args}"
                    );
                    assert_eq!(p.data().len(), size as usize, "{args}");
                    if copy {
                        assert_eq!(p.data(), &dev.template[..], "{args}");
                    }
                }
            }
            assert_eq!((stats.packets.get(), stats.bytes.get()), (38, 38 * u64::from(size)), "{args}");
        }
    }

    #[test]
    fn bad_arguments_name_themselves() {
        let e = NullPmd::probe(&ProbeCtx { name: "net_null0", args: "size=5" }).err().unwrap();
        assert!(e.msg.contains("`size=5` is out of range"), "{}", e.msg);
        let e = NullPmd::probe(&ProbeCtx { name: "net_null0", args: "bogus=1" }).err().unwrap();
        assert!(e.msg.contains("unknown device argument `bogus`"), "{}", e.msg);
    }
}
