//! Arbitrary frames, from arbitrary ports, at arbitrary times, through a `vlan` push and
//! a `vlan` pop (a frame that comes back out of both is the frame that went in), an
//! `acl` of 200
//! rules (its lookup checked against a first-match scan of the frame's key), a
//! `handoff` of four workers, then an `l2_bridge` of three ports with a table of 8 entries (so that
//! learning evicts) and a short aging time (so that entries age between bursts); VLAN-aware
//! for even input lengths, and then, for lengths divisible by four, port 0 carries only
//! VLANs 0, 5-9 and 100.
//!
//! Input: bursts, each a byte of count n (at most 64) and a byte of time step, then
//! n frames, each a port byte (ids 0..=3: 3 is not on the bridge), a little-endian
//! u16 length and its bytes (cut to 256 and to what is left).
//!
//! No panic; the handoff sends every frame to one of its workers, the same one for the
//! same bytes; no frame goes out of the bridge port it came in on, nor out of a port that
//! does not carry its VLAN; the table never holds more than its bound; once the nodes
//! are gone no mbuf is left in use.
#![no_main]
use ironpath_eal::{Burst, Mbuf, MemPolicy, Mempool, MempoolConfig};
use ironpath_graph::testing::{call, idle};
use ironpath_graph::{Dispatch, Node, NodeStats, DROP};
use ironpath_nodes::acl::sample::{random_rules, Lcg};
use ironpath_nodes::acl::{key_of, Classifier, Rule};
use ironpath_nodes::handoff::Handoff;
use ironpath_nodes::l2_bridge::{parse_vlans, L2Bridge};
use ironpath_nodes::vlan::{Action, Untagged, Vlan, VlanConfig};
use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

const PORTS: [u16; 3] = [0, 1, 2];
const MAX_ENTRIES: usize = 8;

fn pool() -> &'static Mempool {
    static POOL: OnceLock<Mempool> = OnceLock::new();
    POOL.get_or_init(|| {
        Mempool::create(&MempoolConfig::new("fuzz-bridge", 1024).cache_size(0).policy(MemPolicy::NoHuge))
            .expect("create mempool")
    })
}

fn rules() -> &'static (Vec<Rule>, Classifier) {
    static RULES: OnceLock<(Vec<Rule>, Classifier)> = OnceLock::new();
    RULES.get_or_init(|| {
        let r = random_rules(&mut Lcg(11), 200, true);
        (r.clone(), Classifier::new(r))
    })
}

/// Free the packets a node's call dropped, keep the others in order.
fn keep(b: &mut Burst, c: &ironpath_graph::testing::Call) {
    if let Dispatch::Each = c.dispatch {
        let mut i = 0;
        b.retain(|_, _| {
            let k = c.next[i] != DROP;
            i += 1;
            k
        });
    }
}

fuzz_target!(|data: &[u8]| {
    let (linear, acl) = rules();
    let p = pool();
    let vcfg = |action| VlanConfig { action, match_vid: None, untagged: Untagged::Pass };
    let mut push = Vlan::new(vcfg(Action::Push { tpid: 0x88a8, tci: 0x2064 }), p.clone());
    let mut pop = Vlan::new(vcfg(Action::Pop), p.clone());
    let (pst, vst) = (NodeStats::new(push.counters()), NodeStats::new(pop.counters()));
    let mut br =
        L2Bridge::new(&PORTS, &[((0, [0x02, 0, 0, 0, 0, 0x99]), 1)], MAX_ENTRIES, 100, data.len() % 2 == 0, [3; 16]);
    let members = data.len() % 4 == 0;
    if members {
        br = br.with_members(0, parse_vlans("0,5-9,100").expect("vlans"));
    }
    // The VLAN id the bridge sees: the outermost tag's, else 0.
    let vid = |f: &[u8]| match f.get(12..16) {
        Some(&[0x81, 0x00, hi, lo] | &[0x88, 0xa8, hi, lo]) => u16::from_be_bytes([hi, lo]) & 0x0fff,
        _ => 0,
    };
    let st = NodeStats::new(br.counters()).with_gauges(br.gauges());
    let mut ho = Handoff::new(&[0, 3, 7, 9], true, [5; 16]);
    let hst = NodeStats::new(ho.counters());
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
            let port = u16::from(rest[0] % 4);
            let len = (usize::from(u16::from_le_bytes([rest[1], rest[2]])) % 257).min(rest.len() - 3);
            let mut m = Mbuf::from_slice(p, &rest[3..3 + len]).expect("mbuf");
            m.header_mut().port = port;
            rest = &rest[3 + len..];
            if b.push(m).is_err() {
                break;
            }
        }
        if b.is_empty() {
            idle(&mut br, &st, now);
            continue;
        }
        // Push, then pop: the frames that went through both are unchanged.
        let before: Vec<Vec<u8>> = (0..b.len()).map(|i| b.data(i).to_vec()).collect();
        let c = call(&mut push, &pst, &mut b, now);
        let kept: Vec<bool> =
            (0..b.len()).map(|i| !matches!(c.dispatch, Dispatch::Each) || c.next[i] != DROP).collect();
        keep(&mut b, &c);
        let c = call(&mut pop, &vst, &mut b, now);
        keep(&mut b, &c);
        let survivors: Vec<&Vec<u8>> = before.iter().zip(&kept).filter(|x| *x.1).map(|x| x.0).collect();
        if survivors.len() == b.len() {
            for (i, f) in survivors.iter().enumerate() {
                assert_eq!(b.data(i), &f[..b.data(i).len().min(f.len())], "push then pop changed frame {i}");
            }
        }
        for i in 0..b.len() {
            if let Ok(k) = key_of(b.data(i)) {
                let want =
                    linear.iter().position(|r| r.ranges.iter().zip(&k).all(|(&(lo, hi), &x)| lo <= x && x <= hi));
                assert_eq!(acl.lookup(&k), want, "key {k:x?}");
            }
        }
        let h = call(&mut ho, &hst, &mut b, now);
        assert!(matches!(h.dispatch, Dispatch::Each));
        let mut seen: std::collections::HashMap<Vec<u8>, u16> = Default::default();
        for i in 0..b.len() {
            assert!([0, 3, 7, 9].contains(&h.next[i]), "handoff to {}", h.next[i]);
            let w = *seen.entry(b.data(i).to_vec()).or_insert(h.next[i]);
            assert_eq!(w, h.next[i], "the same frame to two workers");
        }
        let c = call(&mut br, &st, &mut b, now);
        assert!(matches!(c.dispatch, Dispatch::Each));
        // Packets may have been rebuilt (floods): compare each packet's own port.
        for i in 0..b.len() {
            let next = c.next[i];
            if next != DROP {
                assert!(usize::from(next) < PORTS.len(), "next {next}");
                assert_ne!(PORTS[usize::from(next)], b.header(i).port, "a frame went back out of its port");
                if members && next == 0 {
                    let v = vid(b.data(i));
                    assert!(v == 0 || (5..=9).contains(&v) || v == 100, "VLAN {v} out of port 0");
                }
            }
        }
        assert!(br.entries() <= MAX_ENTRIES);
        b.free_all();
    }
    drop((br, ho, push, pop));
    assert_eq!(p.stats().in_use, 0, "mbufs left in use");
});
