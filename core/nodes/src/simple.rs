//! Small nodes: `macswap`, `counter`, `drop`.

use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};

/// Swap destination and source MAC addresses in place (testpmd's `macswap`).
/// Packets whose data is shared are sent on unchanged (and counted).
#[derive(Default)]
pub struct MacSwap;

static MACSWAP_COUNTERS: [CounterSpec; 1] = [CounterSpec { name: "short", unit: "packets dropped (< 14 bytes)" }];

impl Node for MacSwap {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let mut short = 0u64;
        pkts.for_each_data_mut(|d| match d.get_mut(..12) {
            Some(eth) => {
                // Fixed-size copies: the compiler keeps them in registers (a
                // variable-length overlapping copy would be a call to memmove).
                let mut h = [0u8; 12];
                h.copy_from_slice(eth);
                eth[..6].copy_from_slice(&h[6..]);
                eth[6..].copy_from_slice(&h[..6]);
            }
            None => short += 1,
        });
        if short > 0 {
            drop_runts(cx, pkts);
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &MACSWAP_COUNTERS
    }
}

/// Free frames too short for an Ethernet header (kept out of the hot function:
/// `retain` needs a 2 KiB frame on the stack).
#[cold]
#[inline(never)]
fn drop_runts(cx: &NodeCx<'_>, pkts: &mut Burst) {
    cx.count(0, pkts.retain(|_, d| d.len() >= 12) as u64);
}

/// Count packets and bytes passing through.
#[derive(Default)]
pub struct CounterNode;

static COUNTER_COUNTERS: [CounterSpec; 2] =
    [CounterSpec { name: "packets", unit: "packets" }, CounterSpec { name: "bytes", unit: "bytes" }];

impl Node for CounterNode {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        let bytes: u64 = (0..pkts.len()).map(|i| pkts.pkt_len(i) as u64).sum();
        cx.count(0, pkts.len() as u64);
        cx.count(1, bytes);
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &COUNTER_COUNTERS
    }
}

/// Free every packet. The engine counts what arrives on each incoming edge, so
/// `show runtime` lists drops by reason (the edge they came from).
#[derive(Default)]
pub struct DropNode;

static DROP_COUNTERS: [CounterSpec; 1] = [CounterSpec { name: "dropped", unit: "packets" }];

impl Node for DropNode {
    #[inline]
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        cx.count(0, pkts.len() as u64);
        pkts.free_all();
        Dispatch::Consumed
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &DROP_COUNTERS
    }
}
