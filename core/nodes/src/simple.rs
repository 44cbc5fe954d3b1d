//! Small nodes: `macswap`, `counter`, `drop`.

use crate::kind::NodeKind;
use ironpath_config::{Nexts, NodeSpec};
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};

/// Swap destination and source MAC addresses in place (testpmd's `macswap`).
/// Packets whose data is shared are sent on unchanged; frames shorter than the
/// two addresses (12 bytes) are dropped and counted (`short`).
#[derive(Default)]
pub struct MacSwap;

ironpath_graph::counters! {
    /// What `macswap` counts.
    pub enum MacSwapCounter {
        Short("short", "packets dropped (< 12 bytes)"),
    }
}

impl Node for MacSwap {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        if pkts.swap_mac_addresses() > 0 {
            drop_runts(cx, pkts);
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        MacSwapCounter::SPECS
    }
}

/// Free frames too short for an Ethernet header (kept out of the hot function:
/// `retain` needs a 2 KiB frame on the stack).
#[cold]
#[inline(never)]
fn drop_runts(cx: &NodeCx<'_>, pkts: &mut Burst) {
    cx.count(MacSwapCounter::Short, pkts.retain(|_, d| d.len() >= 12) as u64);
}

/// Count packets and bytes passing through.
#[derive(Default)]
pub struct CounterNode;

ironpath_graph::counters! {
    /// What `counter` counts.
    pub enum CounterCounter {
        Packets("packets", "packets"),
        Bytes("bytes", "bytes"),
    }
}

impl Node for CounterNode {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let bytes: u64 = (0..pkts.len()).map(|i| pkts.pkt_len(i) as u64).sum();
        cx.count(CounterCounter::Packets, pkts.len() as u64);
        cx.count(CounterCounter::Bytes, bytes);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        CounterCounter::SPECS
    }
}

/// Free every packet. The engine counts what arrives on each incoming edge, so
/// `show runtime` lists drops by reason (the edge they came from).
#[derive(Default)]
pub struct DropNode;

ironpath_graph::counters! {
    /// What `drop` counts.
    pub enum DropCounter {
        Dropped("dropped", "packets"),
    }
}

impl Node for DropNode {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        cx.count(DropCounter::Dropped, pkts.len() as u64);
        cx.dropped(pkts.len() as u64);
        pkts.free_all();
        Dispatch::Consumed
    }

    fn counters(&self) -> &'static [CounterSpec] {
        DropCounter::SPECS
    }
}

/// `macswap`.
pub const MACSWAP: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "macswap",
        doc: "swap source and destination MAC addresses (testpmd's macswap)",
        nexts: Nexts::Fixed(&["out"]),
        ..NodeSpec::DEFAULT
    },
    build: |_, _| Ok(Box::new(MacSwap)),
};

/// `drop`.
pub const DROP: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "drop",
        doc: "free every packet; `show runtime` counts them by the edge they came from",
        ..NodeSpec::DEFAULT
    },
    build: |_, _| Ok(Box::new(DropNode)),
};

/// `counter`.
pub const COUNTER: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "counter",
        doc: "count packets and bytes passing through",
        nexts: Nexts::Fixed(&["out"]),
        ..NodeSpec::DEFAULT
    },
    build: |_, _| Ok(Box::new(CounterNode)),
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::*;
    use ironpath_eal::Mbuf;
    use ironpath_graph::DROP;

    fn frame(dst: [u8; 6], src: [u8; 6], len: usize) -> Vec<u8> {
        let mut f = eth(dst, src, 0x0800, &vec![0; len - 14]);
        for (k, b) in f[14..].iter_mut().enumerate() {
            *b = k as u8;
        }
        f
    }

    #[test]
    fn macswap_swaps_and_drops_runts() {
        let pool = pool(16);
        let mut n = MacSwap;
        let st = stats(&n);
        let a = frame(US_MAC, PEER_MAC, 60);
        let b = frame([0xff; 6], [2, 3, 4, 5, 6, 7], 1514);
        let twelve = [US_MAC, PEER_MAC].concat();
        let mut pkts = burst(&pool, &[a.clone(), vec![1; 11], b.clone(), twelve, vec![]]);
        let c = call(&mut n, &st, &mut pkts, 0);
        let out = outputs(&c, &mut pkts);
        let swapped = |f: &[u8]| [&f[6..12], &f[0..6], &f[12..]].concat();
        assert_eq!(
            out,
            [(0, swapped(&a)), (0, swapped(&b)), (0, [PEER_MAC, US_MAC].concat())],
            "runts (< 12 bytes) dropped, the rest swapped in order"
        );
        assert_eq!(counter(&st, "short"), 2);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn macswap_leaves_shared_packets_alone() {
        let pool = pool(4);
        let mut n = MacSwap;
        let st = stats(&n);
        let a = frame(US_MAC, PEER_MAC, 60);
        let m = Mbuf::from_slice(&pool, &a).expect("mbuf");
        let mut pkts = ironpath_eal::Burst::new();
        assert!(pkts.push(m.share()).is_ok());
        let c = call(&mut n, &st, &mut pkts, 0);
        assert_eq!(outputs(&c, &mut pkts), [(0, a.clone())]);
        assert_eq!(m.data(), &a[..]);
        drop(m);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn counter_counts_packets_and_bytes_of_all_segments() {
        let pool = pool(16);
        let mut n = CounterNode;
        let st = stats(&n);
        // 5000 bytes do not fit one mbuf: a chained packet counts whole.
        let frames = [frame(US_MAC, PEER_MAC, 60), frame(US_MAC, PEER_MAC, 1514), frame(US_MAC, PEER_MAC, 5000)];
        let mut pkts = burst(&pool, &frames);
        assert!(pkts.header(2).nb_segs > 1);
        let c = call(&mut n, &st, &mut pkts, 0);
        assert_eq!(c.dispatch, Dispatch::All(0));
        assert_eq!(pkts.len(), 3, "passed on");
        assert_eq!(pkts.data(0), &frames[0][..]);
        let c = call(&mut n, &st, &mut pkts, 0);
        assert_eq!((counter(&st, "packets"), counter(&st, "bytes")), (6, 2 * (60 + 1514 + 5000)));
        drop(c);
        pkts.free_all();
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn drop_frees_everything() {
        let pool = pool(16);
        let mut n = DropNode;
        let st = stats(&n);
        let frames: Vec<_> = (0..5).map(|k| frame(US_MAC, PEER_MAC, 60 + k)).collect();
        let mut pkts = burst(&pool, &frames);
        assert_eq!(pool.stats().in_use, 5);
        let c = call(&mut n, &st, &mut pkts, 0);
        assert_eq!(c.dispatch, Dispatch::Consumed);
        assert!(pkts.is_empty());
        assert_eq!(counter(&st, "dropped"), 5);
        assert_eq!(pool.stats().in_use, 0);
        assert!(outputs(&c, &mut pkts).iter().all(|(k, _)| *k == DROP));
    }
}
