//! A received segment through the node: parsed, matched to its connection (or its
//! listener, or TIME-WAIT), fed to the engine; new connections accepted.

use super::*;

/// Whether `seg`, arriving for a connection in TIME-WAIT that expects `rcv_nxt`, is
/// a new SYN beyond what it received: it then starts a new connection in its place (as
/// Linux does; RFC 9293 §3.10.7.4 allows it).
fn syn_replaces(seg: &TcpRepr, rcv_nxt: ironpath_tcp::SeqNum) -> bool {
    seg.control == TcpControl::Syn && seg.ack_number.is_none() && ironpath_tcp::SeqNum(seg.seq_number) > rcv_nxt
}

impl TcpNode {
    pub(super) fn input(&mut self, cx: &NodeCx<'_>, now: Time, m: Mbuf, out: &mut Out<'_>) {
        let rx = match parse_frame(&m, &self.cfg.addresses) {
            Ok(rx) => rx,
            Err(Refused::Malformed) => return cx.count(TcpCounter::Malformed, 1),
            Err(Refused::Checksum) => return cx.count(TcpCounter::BadChecksum, 1),
            Err(Refused::NotOurs) => return cx.count(TcpCounter::NotOurs, 1),
        };
        cx.count(TcpCounter::SegsIn, 1);
        let plen = rx.repr.payload_len;
        let payload = (plen > 0).then(|| Chunk::from_mbuf(m, rx.off, plen));
        let key = (Endpoint::new(rx.dst, rx.repr.dst_port), Endpoint::new(rx.src, rx.repr.src_port));
        if let Some(&slot) = self.flows.get(&key) {
            let plimit = self.mem_cap();
            let e = self.slots[slot as usize].as_mut().expect("flow table points at a live slot");
            let reuse = e.conn.state() == State::TimeWait && syn_replaces(&rx.repr, e.conn.info().rcv_nxt);
            if !reuse {
                let limit = self.mem_limit;
                if payload.is_some() && (self.rx_held + self.heap_held >= limit || self.peers.held(e.peer) >= plimit) {
                    // Under memory pressure this connection's small pieces are copied
                    // into compact buffers first (Linux's collapse); then out-of-order
                    // data goes (it cannot be read until the hole fills); well over the
                    // limit, all data. The peer sends it again. A peer over its own
                    // share meets the same, before the others do.
                    e.conn.collapse_recv();
                    account_rx(&mut self.rx_held, &mut self.peers, e);
                    let in_order = e.conn.in_order(ironpath_tcp::SeqNum(rx.repr.seq_number));
                    // A segment that fills a hole is taken up to 1/4 beyond the limit:
                    // it turns held out-of-order data into data the application reads.
                    let fills_hole = in_order && e.conn.recv_held() > e.conn.recv_queue();
                    let room = |held: u64, limit: u64| match () {
                        _ if held < limit => true,
                        _ if held < limit + limit / 8 => in_order,
                        _ => fills_hole && held < limit + limit / 4,
                    };
                    if plimit < limit && !room(self.peers.held(e.peer), plimit) {
                        cx.count(TcpCounter::PeerMemDropped, 1);
                        self.touch(slot);
                        return;
                    }
                    if !room(self.rx_held + self.heap_held, limit) {
                        cx.count(TcpCounter::MemDropped, 1);
                        self.pressure = true;
                        self.touch(slot);
                        return;
                    }
                }
                let reply = e.conn.process(now, &rx.repr, payload, rx.segs);
                account_rx(&mut self.rx_held, &mut self.peers, e);
                let accepted = e.conn.accepted();
                self.learn(cx, rx.src, rx.src_mac, accepted);
                if let Some(r) = reply {
                    if self.wire.reply(out, r, rx.src_mac).is_err() {
                        cx.count(TcpCounter::TxFull, 1);
                    }
                }
                self.touch(slot);
                return;
            }
            cx.count(TcpCounter::TimeWaitReused, 1);
            self.remove(cx, slot);
        } else if let Some(tw) = self.time_wait.get_mut(&key) {
            let reuse = syn_replaces(&rx.repr, tw.rcv_nxt());
            let over = tw.expires() <= now;
            if !reuse && !over {
                let challenges = tw.challenge_acks();
                let reply = tw.process::<Chunk>(now, &rx.repr, plen);
                cx.count(TcpCounter::ChallengeAcks, u64::from(tw.challenge_acks() - challenges));
                match reply {
                    TimeWaitReply::None => {}
                    TimeWaitReply::Ack(r) => {
                        if self.wire.reply(out, r, rx.src_mac).is_err() {
                            cx.count(TcpCounter::TxFull, 1);
                        }
                    }
                    TimeWaitReply::Closed => {
                        self.time_wait.remove(&key);
                        cx.count(TcpCounter::ConnsClosed, 1);
                    }
                }
                return;
            }
            // Its 2 MSL are over (the expiry queue gets to it later) or a new SYN
            // replaces it: the segment goes on as if it were gone.
            if !over {
                cx.count(TcpCounter::TimeWaitReused, 1);
            }
            cx.count(TcpCounter::ConnsClosed, 1);
            self.time_wait.remove(&key);
        }
        let Some(&li) = self.by_port.get(&rx.repr.dst_port) else {
            if let Some(r) = rst_reply::<Chunk>(rx.src, rx.dst, &rx.repr, plen) {
                cx.count(TcpCounter::RstSent, 1);
                if self.wire.reply(out, r, rx.src_mac).is_err() {
                    cx.count(TcpCounter::TxFull, 1);
                }
            }
            return;
        };
        if rx.repr.control == TcpControl::Syn {
            if !self.admit(cx, now, rx.src) {
                return;
            }
            // A SYN may name the MAC of an address without connections (the SYN-ACK
            // and its retransmissions go there); never that of one with connections.
            self.learn(cx, rx.src, rx.src_mac, false);
        }
        let lis = &mut self.listeners[li].0;
        let before = *lis.counters();
        let reply = lis.process(now, rx.src, rx.dst, &rx.repr, payload, rx.segs);
        let after = *lis.counters();
        if after.backlog_drops != before.backlog_drops {
            cx.count(TcpCounter::SynDropped, 1);
        }
        if after.cookies_sent != before.cookies_sent {
            cx.count(TcpCounter::SynCookiesSent, 1);
        }
        if after.cookies_valid != before.cookies_valid {
            cx.count(TcpCounter::SynCookiesValid, 1);
        }
        if let Some(r) = reply {
            if r.repr.control == TcpControl::Rst {
                cx.count(TcpCounter::RstSent, 1);
            }
            if self.wire.reply(out, r, rx.src_mac).is_err() {
                cx.count(TcpCounter::TxFull, 1);
            }
        }
        self.listeners_due = true;
        self.accept(cx, now, li, out);
        if self.flows.contains_key(&key) {
            // This segment completed a valid handshake (or carried a valid cookie).
            self.learn(cx, rx.src, rx.src_mac, true);
        }
    }

    pub(super) fn learn(&mut self, cx: &NodeCx<'_>, ip: IpAddress, mac: [u8; 6], accepted: bool) {
        let done = self.wire.learn(ip, mac, accepted);
        if done.evicted > 0 {
            cx.count(TcpCounter::NeighEvicted, done.evicted);
        }
        if done.refused {
            cx.count(TcpCounter::NeighRefused, 1);
        }
    }

    /// Takes the connections listener `li` completed into the table: each passes the
    /// limits a SYN passes (a handshake completed by a SYN cookie was never checked,
    /// and the limits may have changed since the SYN); a refused one is reset.
    pub(super) fn accept(&mut self, cx: &NodeCx<'_>, now: Time, li: usize, out: &mut Out<'_>) {
        while let Some(mut conn) = self.listeners[li].0.accept() {
            if !self.admit(cx, now, conn.remote().addr) {
                conn.abort();
                let wire = &self.wire;
                if conn.dispatch(now, |s| wire.emit(out, s, 0)).is_err() {
                    cx.count(TcpCounter::TxFull, 1);
                }
                continue;
            }
            let (_, l, site) = &self.listeners[li];
            let app = App::server(l.app, l.bytes, *site);
            cx.count(TcpCounter::ConnsOpened, 1);
            self.insert(now, conn, app);
        }
    }
}
