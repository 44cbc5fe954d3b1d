//! What connections make the node hold, and what it does about too much: each
//! connection's charge (received data and its application's heap) kept in the node's
//! total and its peer's; the checks a new connection passes; under pressure, the
//! holders that block reset before a newcomer is refused, and peers held to a fair
//! part of what is left (see docs/tcp.md, "Per-peer accounting").
//!
//! **Fair parts.** Under pressure (7/8 of the memory budget held, or of the connection
//! table used), the n peers that hold connections may each hold at most 1/n of those
//! 7/8 (and never more than `peer_share` and `max_per_peer` say): the last eighth is
//! left to newcomers, so a few peers, however many connections each opens and however
//! steadily each makes progress, cannot together hold what a newcomer needs. When the
//! table or the budget is full (the parts shrink as peers come), the peers over their
//! part lose their excess connections (the idlest first for the table, the largest
//! first for memory) before a newcomer is refused, at most every 100 ms.

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

    /// What one peer may hold now: `peer_share` of the budget, and under pressure
    /// (7/8 of the budget held) no more than a fair part of those 7/8 ([`fair`]).
    #[inline]
    pub(super) fn mem_cap(&self) -> u64 {
        let reserve = self.mem_limit / 8;
        if self.held() < self.mem_limit - reserve {
            return self.peer_limit;
        }
        self.peer_limit.min(fair(self.mem_limit - reserve, self.peers.len()))
    }

    /// How many connections one peer may hold now: `max_per_peer`, and under pressure
    /// (7/8 of the table used) no more than a fair part of those 7/8 ([`fair`]).
    pub(super) fn conn_cap(&self) -> u32 {
        let cap = match self.cfg.limits.max_per_peer {
            0 => u32::MAX,
            c => c,
        };
        let max = self.cfg.max_connections as u64;
        let reserve = max / 8;
        if (self.flows.len() as u64) < max - reserve {
            return cap;
        }
        cap.min(u32::try_from(fair(max - reserve, self.peers.len())).unwrap_or(u32::MAX))
    }

    /// The connection table is full: the peers over their fair part ([`conn_cap`])
    /// lose their excess connections, the idlest (longest without progress) first,
    /// dropped at once (their peers get a reset at their next segment). At most every
    /// 100 ms. Returns whether any was dropped.
    ///
    /// [`conn_cap`]: TcpNode::conn_cap
    pub(super) fn reclaim_table(&mut self, cx: &NodeCx<'_>, now: Time) -> bool {
        if now < self.table_reclaim_at {
            return false;
        }
        self.table_reclaim_at = now + RECLAIM_EVERY;
        let cap = self.conn_cap();
        let mut cand = std::mem::take(&mut self.reclaim_scratch);
        cand.clear();
        for (slot, e) in self.slots.iter().enumerate() {
            if let Some(e) = e {
                if self.peers.conns(e.peer) > cap {
                    // Sorted by peer, then idlest first (the key's low bits are the slot).
                    let idle =
                        u64::try_from((now - e.progress_at).as_millis()).unwrap_or(u64::MAX).min(u64::from(u32::MAX));
                    cand.push((u64::from(e.peer) << 32 | (u64::from(u32::MAX) - idle), slot as u32));
                }
            }
        }
        cand.sort_unstable();
        let mut any = false;
        for &(key, slot) in &cand {
            let peer = (key >> 32) as u32;
            if self.peers.conns(peer) <= cap {
                continue;
            }
            if let Some(Some(e)) = self.slots.get_mut(slot as usize) {
                e.conn.abort();
            }
            self.remove(cx, slot);
            cx.count(TcpCounter::ConnsReclaimed, 1);
            any = true;
        }
        self.reclaim_scratch = cand;
        any
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
        let stalled = cand.len();
        // Then the connections of the peers over their fair part, the largest peer's
        // largest first (they make progress, slowly, and would keep the budget full).
        let cap = self.mem_cap();
        for (slot, e) in self.slots.iter().enumerate() {
            if let Some(e) = e {
                let peer = self.peers.held(e.peer);
                if e.held() > 0 && peer > cap && now - e.progress_at < STALLED {
                    cand.push((peer.min(u64::from(u32::MAX)) << 32 | e.held().min(u64::from(u32::MAX)), slot as u32));
                }
            }
        }
        cand[stalled..].sort_unstable_by(|a, b| b.cmp(a));
        let mut any = false;
        for (k, &(_, slot)) in cand.iter().enumerate() {
            if self.held() <= target {
                break;
            }
            if k >= stalled {
                // A peer brought under its part keeps the rest of its connections.
                let over =
                    self.slots.get(slot as usize).and_then(Option::as_ref).map(|e| self.peers.held(e.peer) > cap);
                if over != Some(true) {
                    continue;
                }
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
        if self.flows.len() >= self.cfg.max_connections
            && !(self.reclaim_table(cx, now) && self.flows.len() < self.cfg.max_connections)
        {
            cx.count(TcpCounter::SynDropped, 1);
            return false;
        }
        let (conns, held) = self.peers.usage(addr);
        if conns >= self.conn_cap() {
            cx.count(TcpCounter::PeerCapped, 1);
            return false;
        }
        if held >= self.mem_cap() {
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

/// One of `n` equal parts of `total` (all of it when no peer holds any).
fn fair(total: u64, n: usize) -> u64 {
    (total / n.max(1) as u64).max(1)
}
