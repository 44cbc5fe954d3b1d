//! What connections make the node hold, and what it does about too much: each
//! connection's charge (received data and its application's heap) kept in the node's
//! total and its peer's; the checks a new connection passes; under pressure, the
//! holders that block reset before a newcomer is refused (see docs/tcp.md, "Per-peer
//! accounting").

use super::*;

/// How long a connection must have made no progress to be reset under memory pressure.
const STALLED: std::time::Duration = std::time::Duration::from_secs(1);
/// Looks for connections to reset under memory pressure are this far apart at least.
const RECLAIM_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Brings `total` (memory all connections' received data holds) and `e`'s peer up
/// to date with what `e`'s connection holds now.
#[inline]
pub(super) fn account_rx(total: &mut u64, peers: &mut Peers, e: &mut Entry) {
    let held = e.conn.recv_mem() as u64;
    if held != e.rx_held {
        *total = *total + held - e.rx_held;
        peers.recharge(e.peer, e.rx_held, held);
        e.rx_held = held;
    }
}

/// Brings `total` (heap all connections' applications hold) and `e`'s peer up to date
/// with what `e`'s application holds now.
#[inline]
pub(super) fn account_heap(total: &mut u64, peers: &mut Peers, e: &mut Entry) {
    let heap = e.app.heap() as u64;
    if heap != e.heap {
        *total = *total + heap - e.heap;
        peers.recharge(e.peer, e.heap, heap);
        e.heap = heap;
    }
}

impl TcpNode {
    /// Takes what `e` (leaving the table) was charged off the totals and its peer.
    pub(super) fn uncharge(&mut self, e: &Entry) {
        self.rx_held -= e.rx_held;
        self.heap_held -= e.heap;
        self.peers.recharge(e.peer, e.held(), 0);
        self.peers.detach(e.peer);
    }

    /// Memory all connections hold.
    pub(super) fn held(&self) -> u64 {
        self.rx_held + self.heap_held
    }

    /// Under memory pressure (at most every 100 ms): resets the connections holding
    /// the most that made no progress for a second (the peer acknowledged nothing and
    /// the application read nothing), largest first, until all hold 1/8 less than
    /// `mem_limit`, so that pressure costs the holders that block, never the next
    /// newcomer. Returns whether any was reset.
    pub(super) fn reclaim(&mut self, cx: &NodeCx<'_>, now: Time) -> bool {
        self.pressure = false;
        if now < self.reclaim_at || self.held() < self.mem_limit {
            return false;
        }
        self.reclaim_at = now + RECLAIM_EVERY;
        let mut cand = std::mem::take(&mut self.reclaim_scratch);
        cand.clear();
        for (slot, e) in self.slots.iter().enumerate() {
            if let Some(e) = e {
                if e.held() > 0 && now - e.progress_at >= STALLED && e.conn.state() != State::Closed {
                    cand.push((e.held(), slot as u32));
                }
            }
        }
        cand.sort_unstable_by(|a, b| b.cmp(a));
        let target = self.mem_limit - self.mem_limit / 8;
        let mut any = false;
        for &(_, slot) in &cand {
            if self.held() <= target {
                break;
            }
            let Some(Some(e)) = self.slots.get_mut(slot as usize) else { continue };
            e.conn.abort();
            e.app = App::Discard;
            account_rx(&mut self.rx_held, &mut self.peers, e);
            account_heap(&mut self.heap_held, &mut self.peers, e);
            cx.count(TcpCounter::MemReclaimed, 1);
            any = true;
            self.touch(slot);
        }
        self.reclaim_scratch = cand;
        any
    }

    /// Whether a new connection from `addr` may be held: the connection table, the
    /// peer's connections and memory, all connections' memory (after a reclaim).
    /// Counts the refusal.
    pub(super) fn admit(&mut self, cx: &NodeCx<'_>, now: Time, addr: IpAddress) -> bool {
        if self.flows.len() >= self.cfg.max_connections {
            cx.count(TcpCounter::SynDropped, 1);
            return false;
        }
        let (conns, held) = self.peers.usage(addr);
        let cap = self.cfg.limits.max_per_peer;
        if cap > 0 && conns >= cap {
            cx.count(TcpCounter::PeerCapped, 1);
            return false;
        }
        if held >= self.peer_limit {
            cx.count(TcpCounter::PeerMemRefused, 1);
            return false;
        }
        if self.held() >= self.mem_limit && !(self.reclaim(cx, now) && self.held() < self.mem_limit) {
            cx.count(TcpCounter::MemRefused, 1);
            return false;
        }
        true
    }

}
