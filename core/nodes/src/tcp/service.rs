//! A connection's turn: its application polled, what is due sent, its timer
//! re-armed; listeners' backlogs and completed transmissions handled.

use super::*;

impl TcpNode {
    /// Runs the application of `slot`, sends what is due, re-arms its timer. Returns
    /// false if the output burst filled before everything was sent.
    pub(super) fn service(&mut self, cx: &NodeCx<'_>, now: Time, slot: u32, out: &mut Out<'_>) -> bool {
        let plimit = self.mem_cap();
        let Some(e) = self.slots[slot as usize].as_mut() else { return true };
        self.env.now = now;
        // A peer over its share, or all connections over the budget: the application
        // takes no new work while it has some.
        self.env.held_back = self.peers.held(e.peer) >= plimit || self.rx_held + self.heap_held >= self.mem_limit;
        let read_before = self.env.stats.bytes_in;
        if let Some(io) = self.env.io.as_mut() {
            super::file_io::owner_before(io, e, slot, &self.peers, self.peer_io_limit);
        }
        e.app.poll(&mut e.conn, &mut self.env);
        let wire = &self.wire;
        let ip_id = &mut e.ip_id;
        let limit = self.cfg.tx_inflight_limit;
        let (inflight, blocked, id) = (&mut e.inflight, &mut e.tsq_blocked, e.id);
        let pending = &mut self.pending;
        let mut sent_data = false;
        let mut emit = |s: Segment<Chunk>| {
            let data = s.payload.is_some();
            if limit == 0 {
                wire.emit(out, s, *ip_id)?;
            } else {
                if s.payload.is_some() && *inflight >= limit {
                    // Like TCP Small Queues: wait for completions (they wake us).
                    *blocked = true;
                    return Err(());
                }
                let mut t = None;
                wire.emit_tracked(out, s, *ip_id, Some(&mut t))?;
                if let Some((m, bytes)) = t {
                    *inflight += bytes;
                    pending.push_back(Pending { slot, id, bytes, m });
                }
            }
            *ip_id = ip_id.wrapping_add(1).max(1);
            sent_data |= data;
            Ok::<(), ()>(())
        };
        let mut complete = e.conn.dispatch(now, &mut emit).is_ok();
        if complete {
            // Sending may have freed room the application can fill at once.
            e.app.poll(&mut e.conn, &mut self.env);
            complete = e.conn.dispatch(now, &mut emit).is_ok();
        }
        if let Some(io) = self.env.io.as_mut() {
            super::file_io::owner_after(io, e, slot, &mut self.peers, &mut self.io_waiters);
        }
        if e.tsq_blocked {
            // Not a full burst: completions, not the next poll, bring it back.
            cx.count(TcpCounter::TsqThrottled, 1);
            complete = true;
        }
        if sent_data && complete && !out.pkts.is_empty() {
            // The connection sent what it could and now waits (for ACKs, a window, or
            // completions): nothing it sends later can join these segments, so they go
            // out with this burst rather than wait for `tx_batch`'s timer (a download
            // limited by tx_inflight_limit sat out flush_us every few segments). The
            // last packet of the burst is this connection's last segment.
            let last = out.pkts.len() - 1;
            out.pkts.header_mut(last).ol_flags |= ironpath_eal::TX_PUSH;
        }
        sync_counters(cx, e);
        count_state(&mut self.states, e);
        account_rx(&mut self.rx_held, &mut self.peers, e);
        account_heap(&mut self.heap_held, &mut self.peers, e);
        let una = e.conn.snd_una();
        if una != e.una || self.env.stats.bytes_in != read_before {
            e.una = una;
            e.progress_at = now;
        }
        if e.conn.state() == State::TimeWait {
            // Nothing more to send or read for 2 MSL: the connection leaves the table
            // for the compact TIME-WAIT one, its slot and buffers to the next
            // connections (short connections keep tens of thousands in TIME-WAIT).
            if let Some(tw) = e.conn.time_wait() {
                self.enter_time_wait(cx, slot, tw);
                return complete;
            }
            if e.conn.recv_queue() == 0 && !matches!(e.app, App::Discard) {
                // Not settled yet (an ACK owed, say): it stays, without its
                // application and its queues' memory, and moves at its next service.
                e.app = App::Discard;
                e.conn.release_buffers();
                account_heap(&mut self.heap_held, &mut self.peers, e);
            }
        }
        let at = e.conn.poll_at();
        if e.conn.state() == State::Closed && at.is_none() {
            self.remove(cx, slot);
            return complete;
        }
        // The application's own deadline (an HTTP timeout) counts as a timer too.
        let at = match (at, e.app.deadline()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        if let Some(t) = at {
            if t <= now && e.tsq_blocked {
                // Due only for data the limit holds back: a completion wakes it.
                e.armed = None;
            } else if t <= now {
                // Due now (e.g. the burst filled): the next poll comes back to it.
                e.armed = None;
                return false;
            } else if e.armed != Some(t) {
                // A deadline that moved later waits for the entry already armed: when
                // that fires the connection is serviced and the later time armed. (A
                // send timeout or a keep-alive deadline 60-75 s away alternating with
                // each request's retransmission timer left an entry in the heap per
                // request for that long.)
                let later = e.armed.is_some_and(|a| a > now && a < t);
                if !later {
                    e.armed = Some(t);
                    self.timers.push(Reverse((t, slot)));
                }
            }
        } else {
            e.armed = None;
        }
        complete
    }

    pub(super) fn service_listeners(&mut self, cx: &NodeCx<'_>, now: Time, out: &mut Out<'_>) {
        let wire = &self.wire;
        let mut complete = true;
        for (lis, _, _) in &mut self.listeners {
            complete &= lis.dispatch(now, |s| wire.emit(out, s, 0)).is_ok();
        }
        for li in 0..self.listeners.len() {
            self.accept(cx, now, li, out);
        }
        self.listeners_due = !complete;
        self.listeners_armed = self.listeners.iter().filter_map(|(l, _, _)| l.poll_at()).min();
    }

    /// Frames the driver (and any completion policy) released: their connections'
    /// in-flight bytes go down, and a connection stopped by the limit is woken.
    pub(super) fn completions(&mut self) {
        while let Some(p) = self.pending.front() {
            if p.m.refcnt() != 1 {
                break; // in order: a later frame's completion waits for this one
            }
            let p = self.pending.pop_front().expect("front exists");
            let Some(Some(e)) = self.slots.get_mut(p.slot as usize) else { continue };
            if e.id != p.id {
                continue;
            }
            e.inflight -= p.bytes;
            if e.tsq_blocked && e.inflight < self.cfg.tx_inflight_limit {
                e.tsq_blocked = false;
                self.touch(p.slot);
            }
        }
    }
}
