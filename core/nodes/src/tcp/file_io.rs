//! The node's side of its file I/O: the threads started with the node (when a site
//! serves a directory), each completion handed to its site and then to the
//! connection that waits for it, the connections that wait for progress woken, and
//! each peer charged for the requests it has outstanding.

use super::files::{Delivery, Io, Owner};
use super::io_threads::FileIo;
use super::*;

/// The file I/O of a node whose sites are `sites` (none if no site has a root): its
/// threads started, each site attached to them.
pub(super) fn start(sites: &mut [Site], limits: &TcpLimits) -> Result<Option<Io>, String> {
    if !sites.iter().any(|s| s.files.has_root()) {
        return Ok(None);
    }
    // Room in the close ring for every descriptor the sites may hold, and more.
    let closes = sites.iter().map(|s| s.files.max_descriptors()).sum::<usize>() + limits.file_io_queue;
    let exec = FileIo::new(limits.file_threads, limits.file_io_queue, closes)
        .map_err(|e| format!("cannot start the file-I/O threads: {e}"))?;
    for (i, s) in sites.iter_mut().enumerate() {
        s.files.attach(i, exec.closer(), limits.file_check);
    }
    Ok(Some(Io::new(exec)))
}

/// Marks `e` (in `slot`) to be serviced.
fn mark(e: &mut Entry, slot: u32, dirty: &mut Vec<u32>) {
    if !e.dirty {
        e.dirty = true;
        dirty.push(slot);
    }
}

impl TcpNode {
    /// Runs inline requests (no thread) and takes in the completions: each goes to its
    /// site, then to its connection if it still waits (else it is dropped here, with
    /// its buffer); its peer is charged one request less. Any completion wakes the
    /// connections waiting for progress.
    pub(super) fn file_completions(&mut self, now: Time) {
        let Some(io) = self.env.io.as_mut() else { return };
        io.exec.run_inline();
        let mut any = false;
        while let Some((done, ticket)) = io.exec.poll() {
            any = true;
            let token = done.token;
            let owner = ticket.owner;
            let d = match self.env.sites.get_mut(ticket.site) {
                Some(site) => site.files.complete(done, ticket.what, owner, io, now),
                None => Delivery::Nothing,
            };
            let Some(o) = owner else { continue };
            if !matches!(d, Delivery::Retried(_)) {
                // A retry goes on with the charge of the request it repeats.
                self.peers.end_io(o.peer);
            }
            if let Some(Some(e)) = self.slots.get_mut(o.slot as usize) {
                if e.id == o.id {
                    e.app.io_done(token, d);
                    mark(e, o.slot, &mut self.dirty);
                }
            }
        }
        // Whatever `complete` asked for belongs to no connection being polled.
        io.blocked = false;
        if any {
            for (slot, id) in self.io_waiters.drain(..) {
                if let Some(Some(e)) = self.slots.get_mut(slot as usize) {
                    if e.id == id {
                        e.io_wait = false;
                        mark(e, slot, &mut self.dirty);
                    }
                }
            }
        }
    }
}

/// Before the application of `e` (in `slot`) is polled: the requests it makes are its
/// own and its peer's (`peer_limit` outstanding at most).
pub(super) fn owner_before(io: &mut Io, e: &Entry, slot: u32, peers: &Peers, peer_limit: u32) {
    io.owner = Some(Owner { slot, id: e.id, peer: e.peer });
    io.peer_room = peer_limit.saturating_sub(peers.io(e.peer));
    io.started = 0;
    io.blocked = false;
}

/// After it was polled: its peer charged for what it started, and the connection among
/// the waiters if it waits for progress.
pub(super) fn owner_after(io: &mut Io, e: &mut Entry, slot: u32, peers: &mut Peers, waiters: &mut Vec<(u32, u64)>) {
    io.owner = None;
    let started = std::mem::take(&mut io.started);
    if started > 0 {
        peers.start_io(e.peer, started);
    }
    if std::mem::take(&mut io.blocked) && !e.io_wait {
        e.io_wait = true;
        waiters.push((slot, e.id));
    }
}
