//! Arbitrary frames, from arbitrary ports, at arbitrary times, through an `ip_router`
//! of two interfaces (IPv4 and IPv6 each, static, unreachable, prohibit and
//! blackhole routes) with small neighbour tables, hold queues and ICMP budget (so
//! that every bound bites).
//!
//! Input: bursts, each a byte of count n (at most 64) and a byte of time step, then
//! n frames, each a flags byte (bits 0-1: the port, 3 is not an interface; bit 2:
//! address the frame to the router's MAC and fix its IPv4 header checksum, so that
//! most frames get past the checks; bit 3: flagged as a GSO aggregate), a
//! little-endian u16 length and its bytes (cut to 1600 and to what is left).
//!
//! No panic; everything the router sends goes to an interface or to `local`, and
//! what leaves by an interface carries that interface's MAC as source; every ICMP
//! error fits in 576 (IPv4) or 1280 (IPv6) bytes; the ICMP budget holds; once the
//! router has forgotten what it holds no mbuf is left in use. (The router is built
//! once per process and forgets between inputs: its FIB's build would cost more
//! than an input.)
#![no_main]
use ironpath_eal::{abi, Burst, Mbuf, MemPolicy, Mempool, MempoolConfig};
use ironpath_graph::testing::call;
use ironpath_graph::{Dispatch, Node, NodeStats, DROP};
use ironpath_nodes::router::config::{IfaceCfg, RouterCfg};
use ironpath_nodes::router::neigh::NeighConfig;
use ironpath_nodes::router::{Router, Tuning};
use libfuzzer_sys::fuzz_target;
use std::cell::RefCell;
use std::sync::OnceLock;

const MACS: [[u8; 6]; 2] = [[0x02, 0, 0, 0, 1, 0], [0x02, 0, 0, 0, 1, 1]];
const LOCAL: u16 = 2;
const BURST: u64 = 4;
const TICKS: u64 = 100;

fn pool() -> &'static Mempool {
    static POOL: OnceLock<Mempool> = OnceLock::new();
    POOL.get_or_init(|| {
        Mempool::create(&MempoolConfig::new("fuzz-router", 2048).cache_size(0).policy(MemPolicy::NoHuge))
            .expect("create mempool")
    })
}

fn cfg() -> &'static RouterCfg {
    static CFG: OnceLock<RouterCfg> = OnceLock::new();
    CFG.get_or_init(|| {
        let ifaces = vec![
            IfaceCfg::new("p0", &["198.18.1.1/24", "fd00:1::1/64"]).expect("iface"),
            IfaceCfg { mtu: 1280, ..IfaceCfg::new("p1", &["198.18.2.1/24", "fd00:2::1/64"]).expect("iface") },
        ];
        let routes = [
            "198.18.0.0/15 via 198.18.2.2",
            "0.0.0.0/0 via 198.18.1.9",
            "fd00::/8 via fd00:2::2",
            "198.18.9.0/24 unreachable",
            "198.18.10.0/24 blackhole",
            "198.18.11.0/24 prohibit",
            "fd00:9::/32 unreachable",
        ];
        RouterCfg::new(ifaces, &routes).expect("routes")
    })
}

fn fix(f: &mut [u8], port: u16) {
    if f.len() >= 14 && port < 2 {
        f[0..6].copy_from_slice(&MACS[usize::from(port)]);
    }
    if f.len() >= 34 && f[12..14] == [0x08, 0x00] && f[14] >> 4 == 4 {
        let hl = (usize::from(f[14] & 0x0f) * 4).max(20).min(f.len() - 14);
        f[24..26].fill(0);
        let mut sum = 0u32;
        for w in f[14..14 + hl].chunks(2) {
            sum += u32::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)]));
        }
        while sum > 0xffff {
            sum = (sum & 0xffff) + (sum >> 16);
        }
        f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    }
}

thread_local! {
    /// The router, built once per process (its FIB takes far longer to build than an
    /// input to run); each input starts from it as just built ([`Router::forget`]), so
    /// a crash reproduces.
    static ROUTER: RefCell<Option<Router>> = const { RefCell::new(None) };
}

fn router() -> Router {
    let tune = Tuning {
        neigh: NeighConfig { max_entries: 4, max_pending: 3, hold: 2, retry_tsc: 50, max_tries: 2, reachable_tsc: 400 },
        icmp_rate: 1,
        icmp_burst: BURST,
        icmp_peer_rate: 1,
        icmp_peer_burst: 2,
        tsc_hz: TICKS,
        max_plies: 1 << 12,
        hash_key: [9; 16],
    };
    Router::new(cfg(), &[(0, 0, MACS[0]), (1, 1, MACS[1])], Some(LOCAL), tune, pool().clone()).expect("router")
}

fuzz_target!(|data: &[u8]| {
    let p = pool();
    let mut r = ROUTER.with(|c| c.borrow_mut().take()).unwrap_or_else(router);
    r.forget();
    let st = NodeStats::new(r.counters());
    let mut rest = data;
    let mut now = 1u64;
    while rest.len() >= 2 {
        let (n, step) = (usize::from(rest[0] % 65), u64::from(rest[1]));
        rest = &rest[2..];
        now += step;
        let mut b = Burst::new();
        for _ in 0..n {
            if rest.len() < 3 {
                break;
            }
            let flags = rest[0];
            let port = u16::from(flags & 3);
            let len = (usize::from(u16::from_le_bytes([rest[1], rest[2]])) % 1601).min(rest.len() - 3);
            let mut f = rest[3..3 + len].to_vec();
            rest = &rest[3 + len..];
            if flags & 4 != 0 {
                fix(&mut f, port);
            }
            let mut m = Mbuf::from_slice(p, &f).expect("mbuf");
            m.header_mut().port = port;
            if flags & 8 != 0 {
                m.header_mut().ol_flags |= abi::RX_AGGREGATED;
            }
            if b.push(m).is_err() {
                break;
            }
        }
        let c = call(&mut r, &st, &mut b, now);
        assert!(matches!(c.dispatch, Dispatch::Each));
        for i in 0..b.len() {
            let (next, d) = (c.next[i], b.data(i));
            if next == DROP || next == LOCAL {
                continue;
            }
            assert!(next < 2, "next {next}");
            assert_eq!(&d[6..12], &MACS[usize::from(next)], "source MAC of what leaves interface {next}");
            // An ICMP error from one of the router's addresses fits its size.
            let ours4 = |a: &[u8]| (a[..3] == [198, 18, 1] || a[..3] == [198, 18, 2]) && a[3] == 1;
            if d.len() > 34 && d[12..14] == [0x08, 0x00] && d[23] == 1 && ours4(&d[26..30]) && matches!(d[34], 3 | 11) {
                assert!(d.len() <= 14 + 576, "ICMP error of {} bytes", d.len());
            }
            if d.len() > 54 && d[12..14] == [0x86, 0xdd] && d[20] == 58 && d[22..24] == [0xfd, 0] && d[54] < 128 {
                assert!(d.len() <= 14 + 1280, "ICMPv6 error of {} bytes", d.len());
            }
        }
        let sent = st.extra_by_name("icmp_sent").unwrap_or(0);
        assert!(sent <= BURST + now / TICKS + 1, "ICMP budget: {sent} errors by {now}");
        b.free_all();
    }
    r.forget();
    assert_eq!(p.stats().in_use, 0, "mbufs left in use");
    ROUTER.with(|c| *c.borrow_mut() = Some(r));
});
