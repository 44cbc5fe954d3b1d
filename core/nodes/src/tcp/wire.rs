//! Frames out: the pool, our MAC and the neighbours' (learned from what arrives).

use super::*;

/// Frames built during one poll.
pub(super) struct Out<'a> {
    pub(super) pkts: &'a mut Burst,
    pub(super) sent: u64,
    pub(super) alloc_failed: u64,
    pub(super) tso: u64,
}

/// What building a frame needs: the pool, our MAC, the peers' MACs.
pub(super) struct Wire {
    pub(super) pool: Mempool,
    pub(super) mac: [u8; 6],
    /// Neighbours: the MAC each peer address is reached at. Set by segments that a
    /// connection or a handshake accepted; other segments may only fill in an address
    /// that has no connection (see [`Wire::learn`]).
    pub(super) neigh: HashMap<IpAddress, [u8; 6], KeyedState>,
    /// Connections (established or closing) per peer address: their neighbour entries
    /// stay, and `max_per_peer` caps them.
    pub(super) peers: HashMap<IpAddress, u32, KeyedState>,
    pub(super) max_neigh: usize,
}

/// What [`Wire::learn`] did that the node counts.
#[derive(Default)]
pub(super) struct Learned {
    pub(super) evicted: u64,
    pub(super) refused: bool,
}

impl Wire {
    /// Builds and queues the frame of `seg`; `Err` when the burst is full or the pool
    /// is empty (the engine keeps the segment for the next dispatch).
    pub(super) fn emit(&self, out: &mut Out<'_>, seg: Segment<Chunk>, ip_id: u16) -> Result<(), ()> {
        self.emit_tracked(out, seg, ip_id, None)
    }

    /// As [`Wire::emit`] for a reply to a received frame from `src_mac`: to the
    /// neighbour entry of the address if there is one (a forged source never
    /// redirects a reply to a known peer), else back to where the frame came from.
    pub(super) fn reply(&self, out: &mut Out<'_>, seg: Segment<Chunk>, src_mac: [u8; 6]) -> Result<(), ()> {
        let dst_mac = self.neigh.get(&seg.dst_addr).copied().unwrap_or(src_mac);
        self.emit_frame(out, seg, 0, dst_mac, None)
    }

    /// As [`Wire::emit`]; a data frame to a known neighbour also leaves a reference in
    /// `track` (with its length) so that its completion can be seen.
    pub(super) fn emit_tracked(
        &self,
        out: &mut Out<'_>,
        seg: Segment<Chunk>,
        ip_id: u16,
        track: Option<&mut Option<(Mbuf, u64)>>,
    ) -> Result<(), ()> {
        let dst_mac = self.neigh.get(&seg.dst_addr).copied().unwrap_or([0; 6]);
        self.emit_frame(out, seg, ip_id, dst_mac, track)
    }

    pub(super) fn emit_frame(
        &self,
        out: &mut Out<'_>,
        seg: Segment<Chunk>,
        ip_id: u16,
        dst_mac: [u8; 6],
        track: Option<&mut Option<(Mbuf, u64)>>,
    ) -> Result<(), ()> {
        if out.pkts.room() == 0 {
            return Err(());
        }
        let known = (dst_mac != [0; 6]).then_some(dst_mac);
        let data = seg.payload.is_some();
        let push = seg.repr.control != TcpControl::None;
        match build_frame(&self.pool, self.mac, dst_mac, &seg, ip_id) {
            Some(mut m) => {
                out.sent += 1;
                out.tso += u64::from(seg.tso_segsz > 0);
                if push {
                    m.header_mut().ol_flags |= ironpath_eal::TX_PUSH;
                }
                // A frame whose MAC the arp node fills must stay writable: not tracked.
                if let (Some(t), true, Some(_)) = (track, data, known) {
                    *t = Some((m.share(), m.pkt_len() as u64));
                }
                out.pkts.push(m).map_err(drop)
            }
            None => {
                out.alloc_failed += 1;
                Err(())
            }
        }
    }

    /// Records that `ip` sent from `mac`. A segment a connection or a handshake
    /// `accepted` sets the entry; any other (a SYN, a segment no connection wants, a
    /// forgery) only for an address without connections, so that a forged source
    /// cannot redirect a connection's frames. Makes room by evicting every entry of an
    /// address without connections when `max_neigh` is reached.
    pub(super) fn learn(&mut self, ip: IpAddress, mac: [u8; 6], accepted: bool) -> Learned {
        let mut done = Learned::default();
        match self.neigh.get_mut(&ip) {
            Some(m) if *m == mac => {}
            Some(m) => {
                if accepted || !self.peers.contains_key(&ip) {
                    *m = mac;
                } else {
                    done.refused = true;
                }
            }
            None => {
                if self.neigh.len() >= self.max_neigh {
                    let before = self.neigh.len();
                    let peers = &self.peers;
                    self.neigh.retain(|a, _| peers.contains_key(a));
                    done.evicted = (before - self.neigh.len()) as u64;
                }
                self.neigh.insert(ip, mac);
            }
        }
        done
    }

    /// Counts a connection of peer `ip` (opened: `+1`, gone: `-1`).
    pub(super) fn peer_conns(&mut self, ip: IpAddress, opened: bool) {
        if opened {
            *self.peers.entry(ip).or_insert(0) += 1;
        } else if let Some(n) = self.peers.get_mut(&ip) {
            *n -= 1;
            if *n == 0 {
                self.peers.remove(&ip);
            }
        }
    }
}
