//! The receive side's buffers: in-order data for the application, the out-of-order
//! queue with reassembly, and the SACK blocks it implies (RFC 2018).
use std::collections::VecDeque;

use crate::{Payload, SeqNum};

/// What [`RecvBuffer::insert`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Inserted {
    /// `rcv_nxt` after the insert.
    pub(crate) rcv_nxt: SeqNum,
    /// New bytes stored (in order or not).
    pub(crate) stored: usize,
    /// Bytes dropped because the out-of-order queue is full.
    pub(crate) dropped: usize,
    /// The data started beyond `rcv_nxt`.
    pub(crate) out_of_order: bool,
    /// In-order data that also took pieces off the out-of-order queue (a hole filled).
    pub(crate) filled_hole: bool,
}

/// What [`RecvBuffer::collapse`] and [`RecvBuffer::prune_ooo`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Reclaimed {
    /// Pieces copied into compact ones (collapse) or dropped (prune).
    pub(crate) pieces: usize,
    /// Payload bytes copied (collapse) or dropped (prune).
    pub(crate) bytes: usize,
}

/// Pieces collapsed into one hold at most this many bytes.
const COLLAPSE_MAX: usize = 64 << 10;

/// Whether a piece wastes enough memory to be worth copying: it pins more than
/// twice its length (a small segment in a packet buffer).
fn wasteful<P: Payload>(p: &P) -> bool {
    p.truesize() > 2 * p.len()
}

/// Received data: `ready` is in order (from the application's read position up to
/// `rcv_nxt`); `ooo` holds pieces beyond `rcv_nxt`, sorted, disjoint, each non-empty.
/// Lengths are kept in payload bytes and in memory ([`Payload::truesize`]).
#[derive(Debug, Clone)]
pub(crate) struct RecvBuffer<P> {
    ready: VecDeque<P>,
    ready_len: usize,
    ready_mem: usize,
    ooo: VecDeque<(SeqNum, P)>,
    ooo_len: usize,
    ooo_mem: usize,
    max_ooo: usize,
    /// Starts of the latest out-of-order arrivals, newest first: the first SACK block
    /// reports the newest (RFC 2018 §4).
    recent: [Option<SeqNum>; 3],
}

impl<P: Payload> RecvBuffer<P> {
    pub(crate) fn new(max_ooo: usize) -> Self {
        RecvBuffer {
            ready: VecDeque::new(),
            ready_len: 0,
            ready_mem: 0,
            ooo: VecDeque::new(),
            ooo_len: 0,
            ooo_mem: 0,
            max_ooo,
            recent: [None; 3],
        }
    }

    /// In-order bytes the application has not taken.
    pub(crate) fn ready_len(&self) -> usize {
        self.ready_len
    }

    /// Bytes held out of order.
    pub(crate) fn ooo_len(&self) -> usize {
        self.ooo_len
    }

    /// Memory the in-order data pins.
    pub(crate) fn ready_mem(&self) -> usize {
        self.ready_mem
    }

    /// Memory all held data pins (in order and out of order).
    pub(crate) fn mem(&self) -> usize {
        self.ready_mem + self.ooo_mem
    }

    /// Whether the out-of-order queue is empty.
    pub(crate) fn ooo_is_empty(&self) -> bool {
        self.ooo.is_empty()
    }

    /// Takes the oldest in-order payload.
    pub(crate) fn pop(&mut self) -> Option<P> {
        let p = self.ready.pop_front()?;
        self.ready_len -= p.len();
        self.ready_mem -= p.truesize();
        Some(p)
    }

    /// Copies runs of wasteful pieces (each pinning more than twice its length) into
    /// compact payloads of up to 64 KiB: the in-order queue as one stream, the
    /// out-of-order queue run by run of adjacent pieces. Nothing changes for a payload
    /// type that cannot copy.
    pub(crate) fn collapse(&mut self) -> Reclaimed {
        let mut done = Reclaimed::default();
        if self.ready.iter().any(wasteful) {
            let old = std::mem::take(&mut self.ready);
            let mut run: Vec<P> = Vec::new();
            let mut run_len = 0;
            for p in old {
                if wasteful(&p) && run_len + p.len() <= COLLAPSE_MAX {
                    run_len += p.len();
                    run.push(p);
                    continue;
                }
                self.flush_ready_run(&mut run, &mut done);
                run_len = 0;
                if wasteful(&p) {
                    run_len = p.len();
                    run.push(p);
                } else {
                    self.ready.push_back(p);
                }
            }
            self.flush_ready_run(&mut run, &mut done);
            self.ready_mem = self.ready.iter().map(P::truesize).sum();
        }
        if self.ooo.iter().any(|(_, p)| wasteful(p)) {
            let old = std::mem::take(&mut self.ooo);
            let mut run: Vec<P> = Vec::new();
            let (mut run_start, mut run_len) = (SeqNum(0), 0);
            for (s, p) in old {
                let joins = !run.is_empty() && run_start + run_len == s && run_len + p.len() <= COLLAPSE_MAX;
                if wasteful(&p) && (joins || run.is_empty()) {
                    if run.is_empty() {
                        run_start = s;
                    }
                    run_len += p.len();
                    run.push(p);
                    continue;
                }
                self.flush_ooo_run(run_start, &mut run, &mut done);
                run_len = 0;
                if wasteful(&p) {
                    (run_start, run_len) = (s, p.len());
                    run.push(p);
                } else {
                    self.ooo.push_back((s, p));
                }
            }
            self.flush_ooo_run(run_start, &mut run, &mut done);
            self.ooo_mem = self.ooo.iter().map(|(_, p)| p.truesize()).sum();
        }
        done
    }

    fn flush_ready_run(&mut self, run: &mut Vec<P>, done: &mut Reclaimed) {
        match P::compact(run) {
            Some(c) if !run.is_empty() => {
                done.pieces += run.len();
                done.bytes += c.len();
                self.ready.push_back(c);
                run.clear();
            }
            _ => self.ready.extend(run.drain(..)),
        }
    }

    fn flush_ooo_run(&mut self, start: SeqNum, run: &mut Vec<P>, done: &mut Reclaimed) {
        match P::compact(run) {
            Some(c) if !run.is_empty() => {
                done.pieces += run.len();
                done.bytes += c.len();
                self.ooo.push_back((start, c));
                run.clear();
            }
            _ => {
                let mut s = start;
                for p in run.drain(..) {
                    let len = p.len();
                    self.ooo.push_back((s, p));
                    s = s + len;
                }
            }
        }
    }

    /// Drops out-of-order pieces from the highest sequence number down (what the
    /// peer sent last, as Linux prunes) while more than `target` bytes of memory are
    /// held, keeping pieces that start at or before `keep_below`.
    pub(crate) fn prune_ooo(&mut self, keep_below: SeqNum, target: usize) -> Reclaimed {
        let mut done = Reclaimed::default();
        while self.mem() > target {
            match self.ooo.back() {
                Some((s, _)) if *s > keep_below => {}
                _ => break,
            }
            let Some((_, p)) = self.ooo.pop_back() else { break };
            self.ooo_len -= p.len();
            self.ooo_mem -= p.truesize();
            done.pieces += 1;
            done.bytes += p.len();
        }
        if done.pieces > 0 {
            let blocks: Vec<_> = self.blocks().collect();
            for r in &mut self.recent {
                if r.is_some_and(|seq| !blocks.iter().any(|(l, rt)| *l <= seq && seq < *rt)) {
                    *r = None;
                }
            }
        }
        done
    }

    /// Drops the out-of-order queue (it lies beyond a FIN just taken); returns its bytes.
    /// Gives the queues' memory back once they are empty.
    pub(crate) fn release(&mut self) {
        if self.ready.is_empty() {
            self.ready = VecDeque::new();
        }
        if self.ooo.is_empty() {
            self.ooo = VecDeque::new();
        }
    }

    pub(crate) fn clear_ooo(&mut self) -> usize {
        let dropped = self.ooo_len;
        self.ooo.clear();
        self.ooo_len = 0;
        self.ooo_mem = 0;
        self.recent = [None; 3];
        dropped
    }

    /// Drops everything (reset or abort).
    pub(crate) fn clear(&mut self) {
        self.ready.clear();
        self.ready_len = 0;
        self.ready_mem = 0;
        self.ooo.clear();
        self.ooo_len = 0;
        self.ooo_mem = 0;
        self.recent = [None; 3];
    }

    /// Stores `data` received at `seq` when `rcv_nxt` is expected. The caller has cut
    /// it to the receive window; bytes before `rcv_nxt` and bytes already held are
    /// skipped (the first copy wins).
    pub(crate) fn insert(&mut self, rcv_nxt: SeqNum, seq: SeqNum, data: P) -> Inserted {
        let mut out = Inserted { rcv_nxt, stored: 0, dropped: 0, out_of_order: false, filled_hole: false };
        let len = data.len();
        let end = seq + len;
        if len == 0 || end <= rcv_nxt {
            return out;
        }
        if seq > rcv_nxt {
            out.out_of_order = true;
            self.insert_ooo(seq, data, &mut out);
            return out;
        }
        let skip = rcv_nxt.distance(seq) as usize;
        let data = if skip > 0 { data.slice(skip, len - skip) } else { data };
        out.stored = data.len();
        self.push_ready(data);
        out.rcv_nxt = end;
        while let Some((start, _)) = self.ooo.front() {
            if *start > out.rcv_nxt {
                break;
            }
            let Some((start, piece)) = self.ooo.pop_front() else { break };
            self.ooo_len -= piece.len();
            self.ooo_mem -= piece.truesize();
            let piece_end = start + piece.len();
            if piece_end <= out.rcv_nxt {
                continue;
            }
            let skip = out.rcv_nxt.distance(start) as usize;
            let piece = if skip > 0 { piece.slice(skip, piece.len() - skip) } else { piece };
            self.push_ready(piece);
            out.rcv_nxt = piece_end;
            out.filled_hole = true;
        }
        out
    }

    fn push_ready(&mut self, data: P) {
        self.ready_len += data.len();
        self.ready_mem += data.truesize();
        self.ready.push_back(data);
    }

    /// Stores the parts of `[seq, seq + len)` not held yet, in order.
    fn insert_ooo(&mut self, seq: SeqNum, data: P, out: &mut Inserted) {
        let end = seq + data.len();
        let mut cur = seq;
        // The first piece that ends after `seq` (pieces are disjoint, so ends are sorted).
        let mut i = self.ooo.partition_point(|(s, p)| *s + p.len() <= seq);
        while cur < end {
            if let Some((s, p)) = self.ooo.get(i) {
                if *s <= cur {
                    cur = cur.max(*s + p.len());
                    i += 1;
                    continue;
                }
            }
            let gap_end = self.ooo.get(i).map_or(end, |(s, _)| s.min(end));
            let gap = gap_end.distance(cur) as usize;
            if self.ooo.len() >= self.max_ooo {
                out.dropped += gap;
            } else {
                let piece = data.slice(cur.distance(seq) as usize, gap);
                self.ooo_mem += piece.truesize();
                self.ooo.insert(i, (cur, piece));
                self.ooo_len += gap;
                out.stored += gap;
                i += 1;
            }
            cur = gap_end;
        }
        if !self.recent.contains(&Some(seq)) {
            self.recent = [Some(seq), self.recent[0], self.recent[1]];
        }
    }

    /// The out-of-order data as maximal contiguous blocks `(left, right)`, ascending.
    fn blocks(&self) -> impl Iterator<Item = (SeqNum, SeqNum)> + '_ {
        let mut pieces = self.ooo.iter().map(|(s, p)| (*s, *s + p.len())).peekable();
        std::iter::from_fn(move || {
            let (left, mut right) = pieces.next()?;
            while let Some(&(s, e)) = pieces.peek() {
                if s != right {
                    break;
                }
                right = e;
                pieces.next();
            }
            Some((left, right))
        })
    }

    /// Up to three SACK blocks: those holding the latest arrivals first, then the
    /// others in ascending order.
    pub(crate) fn sack_blocks(&self) -> [Option<(u32, u32)>; 3] {
        let mut out = [None; 3];
        if self.ooo.is_empty() {
            return out; // the usual case: every segment this connection sends asks
        }
        let mut n = 0;
        let mut add = |block: (SeqNum, SeqNum), out: &mut [Option<(u32, u32)>; 3]| {
            let block = Some((block.0 .0, block.1 .0));
            if n < 3 && !out.contains(&block) {
                out[n] = block;
                n += 1;
            }
        };
        for seq in self.recent.iter().flatten() {
            if let Some(block) = self.blocks().find(|(l, r)| l <= seq && seq < r) {
                add(block, &mut out);
            }
        }
        for block in self.blocks() {
            add(block, &mut out);
        }
        out
    }

    /// Checks the queue's shape: sorted, disjoint, non-empty, beyond `rcv_nxt`,
    /// lengths consistent.
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn check(&self, rcv_nxt: SeqNum) -> Result<(), String> {
        let mut prev_end = rcv_nxt;
        let mut total = 0;
        for (s, p) in &self.ooo {
            if p.is_empty() || *s <= prev_end && !(*s == prev_end && prev_end != rcv_nxt) {
                return Err(format!("out-of-order piece at {s} (len {}) after {prev_end}", p.len()));
            }
            prev_end = *s + p.len();
            total += p.len();
        }
        if total != self.ooo_len || self.ready.iter().map(P::len).sum::<usize>() != self.ready_len {
            return Err("receive buffer lengths out of sync".into());
        }
        let ooo_mem: usize = self.ooo.iter().map(|(_, p)| p.truesize()).sum();
        if ooo_mem != self.ooo_mem || self.ready.iter().map(P::truesize).sum::<usize>() != self.ready_mem {
            return Err("receive buffer memory out of sync".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{Bytes, XorShift};

    fn drain(buf: &mut RecvBuffer<Bytes>) -> Vec<u8> {
        let mut out = vec![];
        while let Some(p) = buf.pop() {
            p.copy_into(&mut out);
        }
        out
    }

    #[test]
    fn reassembles_any_order_with_overlaps() {
        let mut rng = XorShift(7);
        for round in 0..300 {
            let total = 1 + rng.below(3000) as usize;
            let stream = rng.bytes(total);
            let base = SeqNum(u32::MAX - 1500 + round); // wraps in the middle
            let mut buf = RecvBuffer::<Bytes>::new(1000);
            let mut rcv_nxt = base;
            let mut got = vec![];
            let mut guard = 0;
            while (rcv_nxt.distance(base) as usize) < total {
                guard += 1;
                assert!(guard < 100_000);
                let off = rng.below(total as u64) as usize;
                let len = (1 + rng.below(300) as usize).min(total - off);
                let r = buf.insert(rcv_nxt, base + off, Bytes::from(&stream[off..off + len]));
                assert_eq!(r.out_of_order, base + off > rcv_nxt);
                rcv_nxt = r.rcv_nxt;
                buf.check(rcv_nxt).unwrap();
                if rng.below(4) == 0 {
                    got.extend(drain(&mut buf));
                }
            }
            got.extend(drain(&mut buf));
            assert_eq!(got, stream);
            assert_eq!(buf.ooo_len(), 0);
        }
    }

    #[test]
    fn sack_blocks_newest_first() {
        let mut buf = RecvBuffer::<Bytes>::new(100);
        let d = |n: usize| Bytes::from(vec![0u8; n]);
        let base = SeqNum(1000);
        buf.insert(base, SeqNum(2000), d(100));
        buf.insert(base, SeqNum(3000), d(100));
        buf.insert(base, SeqNum(2100), d(100)); // extends the first block
        buf.insert(base, SeqNum(4000), d(10));
        buf.insert(base, SeqNum(5000), d(10));
        assert_eq!(buf.sack_blocks(), [Some((5000, 5010)), Some((4000, 4010)), Some((2000, 2200))]);
        buf.insert(base, SeqNum(3100), d(50));
        assert_eq!(buf.sack_blocks(), [Some((3000, 3150)), Some((5000, 5010)), Some((4000, 4010))]);
        // Filling the hole up to 2000 merges and delivers the first block.
        let r = buf.insert(base, base, d(1000));
        assert!(r.filled_hole && !r.out_of_order);
        assert_eq!(r.rcv_nxt, SeqNum(2200));
        assert_eq!(buf.sack_blocks(), [Some((3000, 3150)), Some((5000, 5010)), Some((4000, 4010))]);
        assert_eq!(buf.ready_len(), 1200);
    }

    #[test]
    fn full_ooo_queue_drops() {
        let mut buf = RecvBuffer::<Bytes>::new(2);
        let d = |n: usize| Bytes::from(vec![0u8; n]);
        let base = SeqNum(0);
        assert_eq!(buf.insert(base, SeqNum(10), d(5)).stored, 5);
        assert_eq!(buf.insert(base, SeqNum(20), d(5)).stored, 5);
        let r = buf.insert(base, SeqNum(30), d(5));
        assert_eq!((r.stored, r.dropped), (0, 5));
        // Overlapping data only fills gaps; duplicates store nothing.
        assert_eq!(buf.insert(base, SeqNum(10), d(5)).stored, 0);
        assert_eq!(buf.insert(base, base, d(2)).rcv_nxt, SeqNum(2));
        assert_eq!(buf.clear_ooo(), 10);
        assert_eq!(buf.sack_blocks(), [None; 3]);
        buf.clear();
        assert_eq!((buf.ready_len(), buf.ooo_len()), (0, 0));
        assert!(buf.ooo_is_empty());
    }
}
