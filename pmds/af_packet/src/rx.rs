//! A received frame into a packet, whatever ring it came from: the kernel's VLAN tag
//! put back into the frame (as the wire had it; `vlan_strip=1` keeps it aside in
//! `vlan_tci`), a frame longer than a buffer copied into a chain, and the kernel's
//! offload state (`virtio_net_hdr` with `vnet=1`, else `tp_status`) into the mbuf's
//! flags: a checksum still partial (veth's CHECKSUM_PARTIAL) with where it starts,
//! a GSO frame (TSO/GSO on the sender: up to 64 KiB) with its type and segment size.
//! Forwarded on, such a packet goes out with the same offloads (`tx.rs`).

use ironpath_pmd_sdk::abi::{self, Mbuf};
use ironpath_pmd_sdk::vnet::VnetHdr;
use ironpath_pmd_sdk::{fill_chain, free_bulk, Counter, Pool};

/// What the kernel says about one received frame.
pub(crate) struct KernelFrame<'a> {
    /// The frame as captured.
    pub bytes: &'a [u8],
    /// Its length on the wire (more than `bytes` when cut to the ring's frame).
    pub wire_len: usize,
    /// `tp_status`.
    pub status: u32,
    pub vlan_tci: u16,
    pub vlan_tpid: u16,
    /// The `virtio_net_hdr` in front of the frame (`vnet=1`).
    pub vnet: Option<&'a [u8]>,
}

/// Offload events of a queue's receive side (xstats).
#[derive(Default)]
pub(crate) struct RxOffloads {
    /// Frames whose L4 checksum was partial (to be completed on the way out).
    pub csum_partial: Counter,
    /// GSO frames taken whole (more than one segment's worth of payload).
    pub gso: Counter,
    /// VLAN tags the kernel had taken off, put back into the frame.
    pub vlan_reinserted: Counter,
    /// Frames longer than a ring frame (cut by the kernel): dropped.
    pub cut: Counter,
}

/// Why a frame was not delivered.
pub(crate) enum Refused {
    /// Cut by the kernel to the ring's frame size.
    Cut,
    /// No mbufs for its chain.
    NoMbuf,
}

/// Segments of one packet at most (64 KiB in 2 KiB buffers, and headers).
const MAX_SEGS: usize = 48;

/// Builds `m` (fresh from `pool`) from frame `f`; on `Err` the caller still owns `m`
/// (unchanged but for its data).
///
/// # Safety
/// `m` is a fresh one-segment packet from `pool`, owned by the caller.
pub(crate) unsafe fn deliver(
    pool: &Pool,
    m: *mut Mbuf,
    f: &KernelFrame<'_>,
    vlan_strip: bool,
    port: u16,
    off: &RxOffloads,
) -> Result<usize, Refused> {
    if f.wire_len > f.bytes.len() {
        off.cut.add(1);
        return Err(Refused::Cut);
    }
    let tagged = f.status & libc::TP_STATUS_VLAN_VALID != 0;
    let reinsert = tagged && !vlan_strip && f.bytes.len() >= 12;
    let tpid = if f.vlan_tpid == 0 { 0x8100 } else { f.vlan_tpid };
    let mut tag = [0u8; 4];
    tag[..2].copy_from_slice(&tpid.to_be_bytes());
    tag[2..].copy_from_slice(&f.vlan_tci.to_be_bytes());
    let parts: [&[u8]; 3] = if reinsert { [&f.bytes[..12], &tag, &f.bytes[12..]] } else { [f.bytes, &[], &[]] };
    let total: usize = parts.iter().map(|p| p.len()).sum();
    // SAFETY: caller's contract: a valid fresh packet.
    let room = unsafe { usize::from((*m).buf_len - (*m).data_off) }.max(1);
    let nseg = total.div_ceil(room).max(1);
    let mut segs = [std::ptr::null_mut::<Mbuf>(); MAX_SEGS];
    if nseg > MAX_SEGS {
        off.cut.add(1);
        return Err(Refused::Cut);
    }
    segs[0] = m;
    if nseg > 1 && !pool.alloc_bulk(&mut segs[1..nseg]) {
        return Err(Refused::NoMbuf);
    }
    // SAFETY: fresh packets of one pool, ours; `nseg` buffers hold `total` bytes.
    if unsafe { fill_chain(&segs[..nseg], &parts) }.is_none() {
        if nseg > 1 {
            // SAFETY: the extra segments are ours and were not linked.
            unsafe { free_bulk(&segs[1..nseg]) };
        }
        off.cut.add(1);
        return Err(Refused::Cut);
    }
    // SAFETY: `m` is the head of the packet just built, ours.
    let r = unsafe { &mut *m };
    r.port = port;
    let shift = if reinsert { 4 } else { 0 };
    let mut fl = 0;
    match f.vnet.and_then(VnetHdr::parse) {
        Some(h) => {
            h.shifted(shift).to_mbuf_l2(r, 14 + shift);
            if f.status & libc::TP_STATUS_CSUM_VALID != 0 && r.ol_flags & abi::RX_L4_CKSUM_NONE == 0 {
                fl |= abi::RX_L4_CKSUM_GOOD;
            }
        }
        None => {
            if f.status & libc::TP_STATUS_CSUMNOTREADY != 0 {
                fl |= abi::RX_L4_CKSUM_NONE;
            } else if f.status & libc::TP_STATUS_CSUM_VALID != 0 {
                fl |= abi::RX_L4_CKSUM_GOOD;
            }
        }
    }
    if tagged && !reinsert {
        fl |= abi::RX_VLAN_STRIPPED;
        r.vlan_tci = f.vlan_tci;
    }
    r.ol_flags |= fl;
    if r.ol_flags & abi::RX_L4_CKSUM_NONE != 0 {
        off.csum_partial.add(1);
    }
    if r.ol_flags & abi::RX_AGGREGATED != 0 {
        off.gso.add(1);
    }
    if reinsert {
        off.vlan_reinserted.add(1);
    }
    Ok(total)
}
