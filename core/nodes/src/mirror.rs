//! `mirror`: every packet goes on to `out`, and a copy of it to `copy` (a capture, a
//! monitoring port: VPP's SPAN, a switch's port mirror).
//!
//! `mode: share` (the default) sends a second reference to the same packet (its
//! reference count goes up; nothing is copied), so both branches see the data
//! read-only: a node that writes to packets (`macswap`) passes shared ones on
//! unchanged, and the buffer returns to its pool when the last branch is done with
//! it. `mode: copy` sends a copy in buffers of its own (`mempool`), with the offload
//! requests and header lengths, for a branch that rewrites. Copies that find no
//! room in the burst or no buffer are not made, and counted; the original always
//! goes on.

use crate::kind::{NodeKind, MEMPOOL};
use ironpath_config::{Choice, Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, Mempool, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};

ironpath_config::choice! {
    /// `mirror`'s `mode`.
    pub enum MirrorMode {
        /// A second reference to the same packet.
        Share = "share",
        /// A copy in buffers of its own.
        Copy = "copy",
    }
}

ironpath_graph::counters! {
    /// What `mirror` counts.
    pub enum MirrorCounter {
        Mirrored("mirrored", "copies sent to `copy`"),
        NoRoom("no_room", "copies not made: the burst was full"),
        NoMbuf("no_mbuf", "copies not made: the mempool was empty (mode copy)"),
    }
}

/// Next edge of the originals.
pub const OUT: u16 = 0;
/// Next edge of the copies.
pub const COPY: u16 = 1;

/// The node.
pub struct Mirror {
    mode: MirrorMode,
    pool: Mempool,
}

impl Node for Mirror {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let n = pkts.len();
        let k = n.min(pkts.room());
        if k < n {
            cx.count(MirrorCounter::NoRoom, (n - k) as u64);
        }
        next[..n].fill(OUT);
        let mut made = 0;
        let mut no_mbuf = 0;
        for i in 0..k {
            let c = match self.mode {
                MirrorMode::Share => pkts.share(i),
                MirrorMode::Copy => match pkts.share(i).deep_copy(&self.pool) {
                    Ok(c) => c,
                    Err(_) => {
                        no_mbuf += 1;
                        continue;
                    }
                },
            };
            // Room was checked above: `k` copies at most.
            if pkts.push(c).is_ok() {
                next[n + made] = COPY;
                made += 1;
            }
        }
        cx.count(MirrorCounter::Mirrored, made as u64);
        if no_mbuf > 0 {
            cx.count(MirrorCounter::NoMbuf, no_mbuf);
        }
        Dispatch::Each
    }

    fn counters(&self) -> &'static [CounterSpec] {
        MirrorCounter::SPECS
    }
}

/// `mirror`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "mirror",
        doc: "send every packet on `out` and a copy of it on `copy` (a shared reference, or a copy of its own)",
        params: &[
            ParamSpec::new("mode", ParamKind::Enum(MirrorMode::NAMES))
                .default("share")
                .doc("share: a second reference, read-only on both branches; copy: buffers of its own from `mempool`"),
            MEMPOOL,
        ],
        nexts: Nexts::Fixed(&["out", "copy"]),
        ..NodeSpec::DEFAULT
    },
    build: |b, env| {
        let p = b.params();
        Ok(Box::new(Mirror { mode: p.choice("mode")?, pool: env.mempool(p.raw().mempool("mempool"), None)? }))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{burst, call, counter, eth, outputs, pool, stats, PEER_MAC, US_MAC};
    use ironpath_eal::Burst;

    fn frames(n: usize) -> Vec<Vec<u8>> {
        (0..n).map(|i| eth(US_MAC, PEER_MAC, 0x0800, &[i as u8; 50])).collect()
    }

    #[test]
    fn share_sends_each_packet_on_and_a_reference_to_copy() {
        let p = pool(64);
        let mut node = Mirror { mode: MirrorMode::Share, pool: p.clone() };
        let st = stats(&node);
        let f = frames(3);
        let mut b = burst(&p, &f);
        let c = call(&mut node, &st, &mut b, 0);
        assert_eq!(p.stats().in_use, 3, "references, not copies");
        let out = outputs(&c, &mut b);
        let want: Vec<(u16, Vec<u8>)> =
            f.iter().map(|x| (OUT, x.clone())).chain(f.iter().map(|x| (COPY, x.clone()))).collect();
        assert_eq!(out, want);
        assert_eq!(counter(&st, "mirrored"), 3);
        assert_eq!(p.stats().in_use, 0, "the last reference frees the buffer");
    }

    #[test]
    fn copy_mode_copies_are_writable_and_counted_when_the_pool_is_empty() {
        let p = pool(64);
        let mut node = Mirror { mode: MirrorMode::Copy, pool: p.clone() };
        let st = stats(&node);
        let f = frames(2);
        let mut b = burst(&p, &f);
        let c = call(&mut node, &st, &mut b, 0);
        assert_eq!(b.len(), 4);
        assert_eq!(p.stats().in_use, 4, "copies of their own");
        assert!(b.data_mut(2).is_some() && b.data_mut(0).is_some(), "both writable");
        assert_eq!(outputs(&c, &mut b).iter().filter(|(k, _)| *k == COPY).count(), 2);

        let tiny = pool(2);
        let mut node = Mirror { mode: MirrorMode::Copy, pool: tiny.clone() };
        let st = stats(&node);
        let _hold = (ironpath_eal::Mbuf::alloc(&tiny).unwrap(), ironpath_eal::Mbuf::alloc(&tiny).unwrap());
        let mut b = burst(&p, &f);
        let c = call(&mut node, &st, &mut b, 0);
        assert_eq!(outputs(&c, &mut b), f.iter().map(|x| (OUT, x.clone())).collect::<Vec<_>>());
        assert_eq!(counter(&st, "no_mbuf"), 2);
        assert_eq!(counter(&st, "mirrored"), 0);
    }

    #[test]
    fn a_full_burst_sends_originals_and_counts_the_copies_it_could_not_make() {
        let p = pool(512);
        let mut node = Mirror { mode: MirrorMode::Share, pool: p.clone() };
        let st = stats(&node);
        let f = frames(200);
        let mut b: Burst = burst(&p, &f);
        let c = call(&mut node, &st, &mut b, 0);
        assert_eq!(b.len(), MAX_BURST);
        assert_eq!(counter(&st, "mirrored"), (MAX_BURST - 200) as u64);
        assert_eq!(counter(&st, "no_room"), (200 - (MAX_BURST - 200)) as u64);
        let out = outputs(&c, &mut b);
        assert_eq!(out.iter().filter(|(k, _)| *k == OUT).count(), 200, "every original goes on");
        assert_eq!(p.stats().in_use, 0);
    }
}
