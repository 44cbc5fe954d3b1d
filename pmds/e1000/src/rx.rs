//! The receive queue: a ring of legacy RX descriptors (8254x SDM 3.2.3), each holding
//! one mbuf of the queue's pool.
//!
//! Ownership of descriptors: `[next, tail)` (modulo the ring) belong to the NIC and
//! hold empty buffers; `[tail, next)` are empty slots waiting for a refill. RDT is
//! `tail`. At least one slot always stays empty (RDH == RDT means "the NIC owns
//! nothing"). A burst takes finished descriptors (DD set) from `next`; when at least
//! `free_thresh` slots are empty it refills them from the pool with bulk allocations
//! and writes RDT once.
//!
//! Wake-up (rx modes `adaptive` and `interrupt`): the queue's wake-up source is the
//! device's interrupt eventfd ([`crate::irq`]). Armed, the RX causes are unmasked in
//! IMS (pending ones cleared first by reading ICR) and VFIO's INTx mask is lifted;
//! disarmed, every cause is masked again (IMC), so the device interrupts at most once
//! per sleep, and no faster than ITR allows.

use crate::nic::{DmaMem, Nic};
use crate::regs::{self, icr, rxd, DESC_SIZE};
use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::{free_bulk, PmdError, Pool, QueueStats, RxBurst, RxQueue};
use std::sync::atomic::{fence, Ordering};
use std::sync::Arc;

/// Most mbufs allocated per `alloc_bulk` call when refilling.
const REFILL_CHUNK: usize = 64;
/// What wakes a sleeping queue: a frame written back, the ring running low, a frame
/// lost for want of descriptors.
const WAKE_CAUSES: u32 = icr::RXT0 | icr::RXDMT0 | icr::RXO;

/// Offload flags for a received packet from its descriptor's status and errors.
pub fn rx_flags(status: u8, errors: u8) -> u64 {
    if status & rxd::IXSM != 0 {
        return 0;
    }
    let mut f = 0;
    if status & rxd::IPCS != 0 {
        f |= if errors & rxd::ERR_IPE != 0 { abi::RX_IP_CKSUM_BAD } else { abi::RX_IP_CKSUM_GOOD };
    }
    if status & rxd::TCPCS != 0 {
        f |= if errors & rxd::ERR_TCPE != 0 { abi::RX_L4_CKSUM_BAD } else { abi::RX_L4_CKSUM_GOOD };
    }
    f
}

/// RX queue 0 of an e1000.
pub struct E1000Rx {
    nic: Arc<Nic>,
    ring: DmaMem,
    /// The mbuf of each descriptor (NULL for an empty slot).
    sw: Box<[*mut Mbuf]>,
    n: usize,
    next: usize,
    tail: usize,
    free_thresh: usize,
    pool: Pool,
    stats: Arc<QueueStats>,
    /// An unmask failed (reported once; the queue then wakes its sleeper itself).
    unmask_failed: bool,
}

// SAFETY: the mbufs in `sw` are owned by the queue, which one thread at a time uses;
// the ring memory and the NIC handle have no thread affinity.
unsafe impl Send for E1000Rx {}

impl E1000Rx {
    /// Allocate a ring of `n` descriptors, fill it from `pool` and point the NIC at it
    /// (RX must be disabled: the port is stopped during queue setup).
    pub fn new(
        nic: &Arc<Nic>,
        n: usize,
        free_thresh: usize,
        pool: Pool,
        stats: Arc<QueueStats>,
    ) -> Result<E1000Rx, PmdError> {
        let ring = DmaMem::new(&nic.f, n * DESC_SIZE, "RX descriptor ring")?;
        let mut q = E1000Rx {
            nic: nic.clone(),
            ring,
            sw: vec![std::ptr::null_mut(); n].into_boxed_slice(),
            n,
            next: 0,
            tail: 0,
            free_thresh: free_thresh.clamp(1, n - 1),
            pool,
            stats,
            unmask_failed: false,
        };
        if q.refill() < n - 1 {
            return Err(PmdError::new(
                abi::errno::ENOBUFS,
                format!("the mempool has fewer than {} free mbufs for the RX ring ({n} descriptors)", n - 1),
            ));
        }
        let r = &nic.regs;
        let iova = q.ring.iova();
        r.write(regs::RDBAL, iova as u32);
        r.write(regs::RDBAH, (iova >> 32) as u32);
        r.write(regs::RDLEN, (n * DESC_SIZE) as u32);
        r.write(regs::RDTR, 0);
        r.write(regs::RDH, 0);
        r.write(regs::RDT, q.tail as u32);
        Ok(q)
    }

    /// Pointer to descriptor `i`.
    #[inline(always)]
    fn desc(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.n);
        // SAFETY: i < n and the ring is n * DESC_SIZE bytes.
        unsafe { self.ring.ptr().add(i * DESC_SIZE) }
    }

    /// Descriptors the NIC owns (`[next, tail)`).
    #[inline(always)]
    fn owned(&self) -> usize {
        (self.tail + self.n - self.next) % self.n
    }

    /// Give the empty slots but one new buffers, in bulk; writes RDT once. Returns
    /// how many slots were filled.
    fn refill(&mut self) -> usize {
        let want = self.n - 1 - self.owned();
        let mut done = 0;
        let mut bufs = [std::ptr::null_mut(); REFILL_CHUNK];
        while done < want {
            let k = (want - done).min(REFILL_CHUNK);
            if !self.pool.alloc_bulk(&mut bufs[..k]) {
                self.stats.nombuf.add(1);
                break;
            }
            for &m in &bufs[..k] {
                let d = self.desc(self.tail);
                // SAFETY: `m` is a fresh mbuf we own; `d` is an empty slot the NIC does
                // not own (outside [next, tail)), 16 bytes inside the ring.
                unsafe {
                    let addr = (*m).buf_iova + u64::from((*m).data_off);
                    std::ptr::write_volatile(d.cast::<u64>(), addr);
                    std::ptr::write_volatile(d.add(8).cast::<u64>(), 0);
                }
                self.sw[self.tail] = m;
                self.tail = (self.tail + 1) % self.n;
            }
            done += k;
        }
        if done > 0 {
            // Descriptor writes before the tail write that hands them to the NIC.
            fence(Ordering::SeqCst);
            self.nic.regs.write(regs::RDT, self.tail as u32);
        }
        done
    }
}

impl RxQueue for E1000Rx {
    fn rx_burst(&mut self, burst: &mut RxBurst<'_>) {
        let port = burst.port_id();
        // SAFETY: `receive` fills the front of the rest with packets it gives up and
        // returns how many.
        unsafe {
            let n = self.receive(burst.raw_rest(), port);
            burst.set_filled(n);
        }
    }

    fn wake_fd(&self) -> Option<std::os::fd::RawFd> {
        self.nic.irq.as_ref().map(|i| i.fd())
    }

    fn wake_arm(&mut self, on: bool) -> bool {
        let Some(irq) = &self.nic.irq else { return false };
        let r = &self.nic.regs;
        if !on {
            r.write(regs::IMC, u32::MAX);
            return true;
        }
        // Causes from before (the packets of an earlier interrupt, already taken)
        // must not fire now: the host polls once more after arming anyway.
        let _ = r.read(regs::ICR);
        r.write(regs::IMS, WAKE_CAUSES);
        if let Err(e) = irq.unmask() {
            // Sleeping on an interrupt that cannot come could leave packets waiting:
            // refuse (the host keeps polling and tries again later).
            if !std::mem::replace(&mut self.unmask_failed, true) {
                ironpath_pmd_sdk::log(
                    0,
                    &format!("net_e1000 {}: unmasking the {} interrupt failed: {e}", self.nic.addr, irq.kind()),
                );
            }
            r.write(regs::IMC, u32::MAX);
            return false;
        }
        true
    }
}

impl E1000Rx {
    /// Take the packets of the descriptors the NIC has written back, in order, into
    /// `pkts`, stamped with `port`; returns how many.
    fn receive(&mut self, pkts: &mut [*mut Mbuf], port: u16) -> usize {
        let mut got = 0;
        let mut bytes = 0u64;
        let mut bad = [std::ptr::null_mut(); 8];
        let mut nbad = 0;
        while got < pkts.len() && self.next != self.tail {
            let d = self.desc(self.next);
            // SAFETY: `d` is a descriptor inside the ring; the status byte is written by
            // the NIC (volatile read).
            let status = unsafe { std::ptr::read_volatile(d.add(12)) };
            if status & rxd::DD == 0 {
                break;
            }
            // The rest of the descriptor and the packet data after DD.
            fence(Ordering::Acquire);
            // SAFETY: as above; the NIC is done with this descriptor (DD).
            let (len, errors) =
                unsafe { (std::ptr::read_volatile(d.add(8).cast::<u16>()), std::ptr::read_volatile(d.add(13))) };
            let m = std::mem::replace(&mut self.sw[self.next], std::ptr::null_mut());
            self.next = (self.next + 1) % self.n;
            if m.is_null() {
                continue;
            }
            if status & rxd::EOP == 0 || errors & rxd::ERR_FRAME != 0 || usize::from(len) > regs::RX_BUF_SIZE {
                // A frame error, or a frame longer than one buffer (it cannot be, with
                // long packets off): drop it.
                self.stats.errors.add(1);
                bad[nbad] = m;
                nbad += 1;
                if nbad == bad.len() {
                    // SAFETY: we own these mbufs and give each back once.
                    unsafe { free_bulk(&bad) };
                    nbad = 0;
                }
                continue;
            }
            // SAFETY: we own `m` (taken from its slot); the NIC wrote `len` bytes at its
            // data offset.
            unsafe {
                let r = &mut *m;
                r.data_len = len;
                r.pkt_len = u32::from(len);
                r.port = port;
                r.ol_flags = rx_flags(status, errors);
                r.packet_type = abi::ptype::L2_ETHER;
            }
            bytes += u64::from(len);
            pkts[got] = m;
            got += 1;
        }
        if nbad > 0 {
            // SAFETY: as above.
            unsafe { free_bulk(&bad[..nbad]) };
        }
        if self.n - 1 - self.owned() >= self.free_thresh {
            self.refill();
        }
        self.stats.packets.add(got as u64);
        self.stats.bytes.add(bytes);
        got
    }
}

impl Drop for E1000Rx {
    fn drop(&mut self) {
        // The port is stopped (RX disabled) before queues are released; make sure the
        // NIC owns no descriptor anyway before its buffers go back to the pool.
        let r = &self.nic.regs;
        let rctl = r.read(regs::RCTL);
        if rctl & regs::RCTL_EN != 0 {
            r.write(regs::RCTL, rctl & !regs::RCTL_EN);
        }
        r.write(regs::RDLEN, 0);
        r.write(regs::RDH, 0);
        r.write(regs::RDT, 0);
        let held: Vec<*mut Mbuf> = self.sw.iter().copied().filter(|m| !m.is_null()).collect();
        for chunk in held.chunks(64) {
            // SAFETY: the queue owns every non-NULL slot's mbuf; each is freed once.
            unsafe { free_bulk(chunk) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_flags() {
        assert_eq!(rx_flags(rxd::DD | rxd::EOP | rxd::IXSM | rxd::IPCS, 0), 0, "QEMU: ignore checksum");
        assert_eq!(rx_flags(rxd::DD | rxd::EOP, 0), 0);
        assert_eq!(rx_flags(rxd::DD | rxd::IPCS | rxd::TCPCS, 0), abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD);
        assert_eq!(
            rx_flags(rxd::DD | rxd::IPCS | rxd::TCPCS, rxd::ERR_IPE | rxd::ERR_TCPE),
            abi::RX_IP_CKSUM_BAD | abi::RX_L4_CKSUM_BAD
        );
        assert_eq!(rx_flags(rxd::DD | rxd::TCPCS, rxd::ERR_TCPE), abi::RX_L4_CKSUM_BAD);
    }
}
