//! How the runs of a flow grow and leave: appending a segment, joining runs when
//! a gap fills, the checks that keep an aggregate splittable, and flushing.

use super::*;

impl Aggregator {
    /// Whether run `b` may follow run `a` (contiguity already checked).
    pub(super) fn can_concat(&self, a: &Run, b: &Run) -> Result<(), Why> {
        if b.seg.payload != a.seg.payload
            || a.last_len < u32::from(a.seg.payload)
            || a.last_flags as u8 & END_MERGE != 0
        {
            // `a` must be all full-size segments and `b` start with one.
            return Err(Why::Mismatch);
        }
        if !a.seg.v6 && b.seg.ip_id != (a.last_id as u16).wrapping_add(1) {
            return Err(Why::Mismatch);
        }
        fits(a, a.segs + b.segs, a.bytes + b.bytes, u32::from(self.cfg.max_segments))
    }

    /// The most payload bytes a run of segments with `s`'s headers may hold:
    /// what `max_bytes` (TCP header and data), the IP total length (65535) and,
    /// for LRO, the large buffer (all headers and data) leave. Payloads are never
    /// empty, so a cap of 0 refuses every merge.
    pub(super) fn run_cap(&self, s: &Pkt) -> u32 {
        let (l2, l3, l4) = (u32::from(s.l2), u32::from(s.l3), u32::from(s.l4));
        let cap = self.cfg.max_bytes.saturating_sub(l4).min(65535u32.saturating_sub(l3 + l4));
        if self.cfg.mode == Mode::Lro {
            cap.min(self.lro_room.saturating_sub(l2 + l3 + l4))
        } else {
            cap
        }
    }

    pub(super) fn append(&mut self, i: usize, r: usize, m: Mbuf, s: &Pkt, out: &mut Out<'_>) {
        // (`prepare` has work only for a run's second segment, or LRO's first copy.)
        let run = &self.flows[i].runs[r];
        let work = !run.copied && (run.segs == 1 || self.cfg.mode == Mode::Lro);
        if work && !self.prepare(i, r) {
            self.flush_flow(i, Why::Mismatch, out);
            self.passthrough(m, out);
            return;
        }
        let mss = self.flows[i].runs[r].seg.payload;
        let run = &mut self.flows[i].runs[r];
        if push_seg(run, m, s) {
            self.held_segs += 1;
        } else {
            self.stats.malformed += 1;
        }
        let run = &self.flows[i].runs[r];
        let full = fits(run, run.segs + 1, run.bytes + u32::from(mss), u32::from(self.cfg.max_segments)).is_err();
        // A following held run may now join.
        let next = self.flows[i].runs[r].next;
        let f = &self.flows[i];
        if let Some(b) = f.runs[..f.nruns].iter().position(|x| x.start == next) {
            if self.can_concat(&self.flows[i].runs[r], &self.flows[i].runs[b]).is_ok() {
                self.concat(i, r, b, out);
                return;
            }
        }
        if s.flags & END_MERGE != 0 || s.payload < mss {
            self.flush_flow(i, Why::End, out);
        } else if full {
            self.flush_flow(i, Why::Limit, out);
        }
    }

    /// Make run `r` of flow `i` ready to take more payload: strip the padding of
    /// its first segment and, for LRO, copy it into a large buffer. False when
    /// that is impossible (no LRO buffer).
    pub(super) fn prepare(&mut self, i: usize, r: usize) -> bool {
        let run = &mut self.flows[i].runs[r];
        let Some(head) = run.head.as_mut() else { return false };
        if run.segs == 1 && !run.copied {
            let want = usize::from(run.seg.l2 + run.seg.l3 + run.seg.l4) + usize::from(run.seg.payload);
            let extra = head.pkt_len().saturating_sub(want);
            if extra > 0 && head.trim(extra).is_err() {
                return false;
            }
        }
        if self.cfg.mode == Mode::Lro && !run.copied {
            let Some(pool) = self.lro_pool.as_ref() else { return false };
            let Ok(mut big) = Mbuf::alloc(pool) else {
                self.stats.lro_alloc_failed += 1;
                return false;
            };
            let len = head.pkt_len();
            let Ok(d) = big.append(len) else { return false };
            head.copy_to(0, d);
            let (src, dst) = (head.header(), big.header_mut());
            dst.port = src.port;
            dst.ol_flags = src.ol_flags;
            dst.rss_hash = src.rss_hash;
            dst.vlan_tci = src.vlan_tci;
            dst.packet_type = src.packet_type;
            run.head = Some(big);
            run.copied = true;
        }
        true
    }

    /// Run `b` follows run `a` in flow `i`: move it into `a`.
    pub(super) fn concat(&mut self, i: usize, a: usize, b: usize, out: &mut Out<'_>) {
        if !self.prepare(i, a) {
            return;
        }
        let f = &mut self.flows[i];
        // Run `b`'s slot goes to the end of the held ones (the last held run takes
        // its place: follow `a` if it was that one).
        let last = f.nruns - 1;
        f.runs.swap(b, last);
        let a = if a == last { b } else { a };
        f.nruns = last;
        let (held, rest) = f.runs.split_at_mut(last);
        let (ra, rb) = (&mut held[a], &mut rest[0]);
        let odd = ra.bytes & 1;
        let hdr = usize::from(rb.seg.l2 + rb.seg.l3 + rb.seg.l4);
        let ok = match rb.head.take() {
            None => false,
            Some(head) if ra.copied => {
                // LRO: b's payload (all in its head, copied or a single segment) after a's.
                match ra.head.as_mut().map(|h| h.append(rb.bytes as usize)) {
                    Some(Ok(d)) => head.copy_to(hdr, d) == rb.bytes as usize,
                    _ => false,
                }
            }
            Some(mut head) => {
                let extra =
                    if rb.segs == 1 { head.pkt_len().saturating_sub(hdr + usize::from(rb.seg.payload)) } else { 0 };
                if (extra == 0 || head.trim(extra).is_ok()) && head.adj(hdr).is_ok() {
                    ra.tails.push(head).is_ok() && ra.tails.append(&mut rb.tails).is_ok()
                } else {
                    false
                }
            }
        };
        if ok {
            ra.acc += sum_at_offset(rb.head_sum + rb.acc, odd);
            ra.segs += rb.segs;
            ra.bytes += rb.bytes;
            ra.next = rb.next;
            ra.last_id = rb.last_id;
            ra.last_flags = rb.last_flags;
            ra.last_len = rb.last_len;
        } else {
            self.stats.malformed += u64::from(rb.segs);
            self.held_segs -= rb.segs as usize;
        }
        rb.tails.clear(); // (frees b's segments if they could not join)
        let mss = u32::from(ra.seg.payload);
        let ends = ra.last_flags as u8 & END_MERGE != 0 || ra.last_len < u32::from(ra.seg.payload);
        let ra = &self.flows[i].runs[a];
        let full = fits(ra, ra.segs + 1, ra.bytes + mss, u32::from(self.cfg.max_segments)).is_err();
        if ends {
            self.flush_flow(i, Why::End, out);
        } else if full {
            self.flush_flow(i, Why::Limit, out);
        }
    }

    pub(super) fn passthrough(&mut self, m: Mbuf, out: &mut Out<'_>) {
        self.stats.passed += 1;
        out.emit(m);
    }

    pub(super) fn flush_all(&mut self, why: Why, out: &mut Out<'_>) {
        while self.live > 0 {
            self.flush_flow(self.live - 1, why, out);
        }
    }

    /// Keeps what flows hold between bursts within `max_held` packets: the oldest
    /// flows leave early when a peer's segments (out-of-order runs in many flows)
    /// would hold more, so RX always finds buffers.
    pub(super) fn bound_held(&mut self, out: &mut Out<'_>) {
        while self.held_segs > self.cfg.max_held && self.live > 0 {
            let oldest = (0..self.live).min_by_key(|&i| self.first_tsc[i]).unwrap_or(0);
            self.stats.flush_held += 1;
            self.flush_flow(oldest, Why::Held, out);
        }
    }

    pub(super) fn flush_due(&mut self, now: u64, out: &mut Out<'_>) {
        let mut i = 0;
        while i < self.live {
            if now.wrapping_sub(self.first_tsc[i]) >= self.cfg.flush_tsc {
                self.flush_flow(i, Why::Timeout, out);
            } else {
                i += 1;
            }
        }
    }

    pub(super) fn flush_flow(&mut self, i: usize, why: Why, out: &mut Out<'_>) {
        let st = &mut self.stats;
        match why {
            Why::Burst => st.flush_burst += 1,
            Why::Timeout => st.flush_timeout += 1,
            Why::End => st.flush_end += 1,
            Why::Limit => st.flush_limit += 1,
            Why::Mismatch => st.flush_mismatch += 1,
            Why::Evict | Why::Held => {}
        }
        let f = &mut self.flows[i];
        let held = &mut f.runs[..f.nruns];
        if held.len() > 1 {
            let base = held.iter().map(|r| r.start).fold(held[0].start, |m, s| if seq_lt(s, m) { s } else { m });
            held.sort_by_key(|r| r.start.wrapping_sub(base));
        }
        for run in held {
            self.held_segs -= run.segs as usize;
            finish(&mut self.stats, run, out, self.cfg.tso);
        }
        f.nruns = 0;
        // The last held flow takes the slot (a no-op when flushing from the end).
        self.live -= 1;
        if i != self.live {
            self.flows.swap(i, self.live);
        }
        self.hashes.swap_remove(i);
        self.first_tsc.swap_remove(i);
    }
}

/// Send a held run on (its slot is left free): unchanged when it is one segment,
/// else as an aggregate (with `tso`, marked for the port to cut again).
pub(super) fn finish(stats: &mut AggrStats, run: &mut Run, out: &mut Out<'_>, tso: bool) {
    let Some(mut head) = run.head.take() else { return };
    if run.segs == 1 && run.tails.is_empty() {
        out.emit(head);
        return;
    }
    if let Ok(d) = head.data_mut() {
        finish_headers(d, &run.seg, run.bytes, run.last_flags as u8, run.head_sum, run.acc);
        if tso {
            tso_headers(d, &run.seg);
        }
    }
    if head.chain_list(&mut run.tails).is_err() {
        run.tails.clear();
    }
    let h = head.header_mut();
    h.ol_flags = (h.ol_flags & !(abi::RX_L4_CKSUM_NONE | abi::RX_L4_CKSUM_BAD | abi::RX_IP_CKSUM_BAD))
        | abi::RX_AGGREGATED
        | abi::RX_IP_CKSUM_GOOD
        | abi::RX_L4_CKSUM_GOOD;
    h.aggr_segs = run.segs as u16; // <= max_segments
    h.tso_segsz = run.seg.payload;
    h.l2_len = run.seg.l2 as u8;
    h.l3_len = run.seg.l3;
    h.l4_len = run.seg.l4 as u8;
    if tso {
        // The TCP checksum is now partial: what the port completes per segment.
        h.ol_flags = (h.ol_flags & !abi::RX_L4_CKSUM_GOOD)
            | abi::RX_L4_CKSUM_NONE
            | abi::TX_TCP_SEG
            | abi::TX_TCP_CKSUM
            | if run.seg.v6 { abi::TX_IPV6 } else { abi::TX_IPV4 };
    }
    stats.aggregates += 1;
    stats.merged += u64::from(run.segs);
    out.emit(head);
}

/// Whether `s` may be appended to `r` (contiguity already checked).
#[inline(always)]
pub(super) fn can_append(r: &Run, s: &Pkt, max_segs: u32) -> Result<(), Why> {
    let mss = r.seg.payload;
    // A run that ended (PSH/FIN or a short last segment, held out of order)
    // takes nothing more: those marks must stay on the last segment.
    let ended = r.last_flags as u8 & END_MERGE != 0 || r.last_len < u32::from(mss);
    if ended || s.payload > mss || (!s.v6 && s.ip_id != (r.last_id as u16).wrapping_add(1)) {
        return Err(Why::Mismatch);
    }
    fits(r, r.segs + 1, r.bytes + u32::from(s.payload), max_segs)
}

/// Whether `r` may hold `segs` segments of `bytes` payload bytes in all (always
/// two or more segments here).
#[inline(always)]
pub(super) fn fits(r: &Run, segs: u32, bytes: u32, max_segs: u32) -> Result<(), Why> {
    if segs > max_segs || bytes > r.cap {
        return Err(Why::Limit);
    }
    Ok(())
}

/// Whether a run's only segment carries bytes after its payload (Ethernet
/// padding) that must be cut before anything is appended.
#[inline(always)]
pub(super) fn head_padded(r: &Run) -> bool {
    let want = usize::from(r.seg.l2 + r.seg.l3 + r.seg.l4) + usize::from(r.seg.payload);
    r.head.as_ref().is_none_or(|h| h.pkt_len() != want)
}

/// Append segment `m` (headers described by `s`) to `run` and account for it:
/// GRO keeps its payload as a further segment (headers and padding cut), LRO
/// copies it into the large buffer. False (and the run unchanged) if the packet
/// could not be cut or copied.
#[inline(always)]
pub(super) fn push_seg(run: &mut Run, m: Mbuf, s: &Pkt) -> bool {
    let odd = run.bytes & 1;
    let hdr = usize::from(s.l2) + usize::from(s.l3) + usize::from(s.l4);
    let len = usize::from(s.payload);
    if run.copied {
        let copied = match run.head.as_mut().map(|h| h.append(len)) {
            Some(Ok(d)) => m.copy_to(hdr, d) == len,
            _ => false,
        };
        if !copied {
            return false;
        }
    } else if run.tails.push_part(m, hdr, len).is_err() {
        return false;
    }
    run.acc += at_offset(s.sum, odd);
    run.segs += 1;
    run.bytes += u32::from(s.payload);
    run.next = run.next.wrapping_add(u32::from(s.payload));
    run.last_id = u32::from(s.ip_id);
    run.last_flags = u32::from(s.flags);
    run.last_len = u32::from(s.payload);
    true
}

/// `m.is_writable()` for a one-segment packet (chained input is not aggregated),
/// from the header's first cache line only: `is_writable` follows `next`, in the
/// second line, which the fast path otherwise never touches (`next` is null when
/// `nb_segs` is 1). Acquire as in `is_writable`: a holder that just let go of the
/// packet has finished with its data.
#[inline(always)]
pub(super) fn writable_single(h: &abi::Mbuf) -> bool {
    h.nb_segs == 1 && h.refcnt.load(Ordering::Acquire) == 1 && h.ol_flags & (abi::IND_ATTACHED | abi::EXT_ATTACHED) == 0
}

/// Sequence-number order (RFC 1982 style, modulo 2^32).
#[inline(always)]
pub(super) fn seq_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// Whether `s` matches the flow's template in everything but sequence and ID.
#[inline(always)]
pub(crate) fn same_template(t: &Seg, s: &Seg) -> bool {
    t.ack == s.ack
        && t.window == s.window
        && t.ip_same == s.ip_same
        && t.l4 == s.l4
        && t.opt_len == s.opt_len
        && same_words(&t.opts, &s.opts) // zero after `opt_len` in both
        && t.flags & !END_MERGE == s.flags & !END_MERGE
}

/// Equality of two option arrays without early exit (no `memcmp` call).
#[inline(always)]
pub(super) fn same_words(a: &[u64; 5], b: &[u64; 5]) -> bool {
    ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4])) == 0
}
