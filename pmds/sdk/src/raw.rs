//! Raw packet access for drivers that hand packets to hardware or to the kernel by
//! address (e1000 descriptors, af_packet and tap scatter lists). Drivers that only
//! copy or move packets use the safe API of [`crate::packet`] instead.

use ironpath_abi::Mbuf;

/// Release packets the driver owns (after transmission, or on drop), to whatever
/// pool each belongs.
///
/// # Safety
/// Each pointer is a packet from a host pool that the caller owns a reference to.
#[inline(always)]
pub unsafe fn free_bulk(pkts: &[*mut Mbuf]) {
    let Some(&first) = pkts.first() else { return };
    // SAFETY: a host mbuf's `pool` points at a live host pool whose ops table is valid.
    unsafe {
        if let Some(f) = (*(*(*first).pool).ops).free_bulk {
            f(pkts.as_ptr(), pkts.len() as u32);
        }
    }
}

/// Total length of a packet.
///
/// # Safety
/// `m` is a valid packet.
#[inline(always)]
pub unsafe fn pkt_len(m: *const Mbuf) -> u32 {
    // SAFETY: caller's contract.
    unsafe { (*m).pkt_len }
}

/// Write `data` as the whole content of a fresh one-segment packet (truncated to the
/// buffer); returns the length written.
///
/// # Safety
/// `m` is a valid, freshly allocated packet owned by the caller.
#[inline(always)]
pub unsafe fn set_data(m: *mut Mbuf, data: &[u8]) -> usize {
    // SAFETY: caller's contract; we write inside the buffer after the headroom.
    unsafe {
        let r = &mut *m;
        let room = (r.buf_len - r.data_off) as usize;
        let n = data.len().min(room);
        std::ptr::copy_nonoverlapping(data.as_ptr(), r.buf_addr.add(r.data_off as usize), n);
        r.data_len = n as u16;
        r.pkt_len = n as u32;
        n
    }
}

/// Write the concatenation of `parts` into `segs` (fresh one-segment packets from one
/// pool, each filled to its data room in turn) and link them into one packet, the
/// first segment its head. Returns the packet's length, or `None` (nothing linked)
/// when the bytes do not fit the segments.
///
/// # Safety
/// Every pointer of `segs` is a valid, freshly allocated packet owned by the caller.
pub unsafe fn fill_chain(segs: &[*mut Mbuf], parts: &[&[u8]]) -> Option<usize> {
    let total: usize = parts.iter().map(|p| p.len()).sum();
    // SAFETY: caller's contract: valid fresh packets.
    let room: usize = segs.iter().map(|&m| unsafe { usize::from((*m).buf_len - (*m).data_off) }).sum();
    if segs.is_empty() || total > room {
        return None;
    }
    let (mut i, mut at) = (0, 0usize);
    for part in parts {
        let mut rest = *part;
        while !rest.is_empty() {
            // SAFETY: `i` < segs.len() (the bytes fit, checked above); we write inside
            // the segment's buffer after its data, within its room.
            unsafe {
                let r = &mut *segs[i];
                let cap = usize::from(r.buf_len - r.data_off);
                if at == cap {
                    i += 1;
                    at = 0;
                    continue;
                }
                let n = rest.len().min(cap - at);
                std::ptr::copy_nonoverlapping(rest.as_ptr(), r.buf_addr.add(usize::from(r.data_off) + at), n);
                at += n;
                r.data_len = at as u16;
                rest = &rest[n..];
            }
        }
    }
    // SAFETY: as above; segments after the `i + 1` used (none when sized right) stay
    // empty and unlinked, for the caller to free.
    unsafe {
        for k in 0..i {
            (*segs[k]).next = segs[k + 1];
        }
        let h = &mut *segs[0];
        h.pkt_len = total as u32;
        h.nb_segs = (i + 1) as u16;
    }
    Some(total)
}

/// The first segment's data of a packet.
///
/// # Safety
/// `m` is a valid packet and the returned slice is not used after it is freed.
#[inline(always)]
pub unsafe fn data<'a>(m: *const Mbuf) -> &'a [u8] {
    // SAFETY: caller's contract; data lies inside the buffer.
    unsafe {
        let r = &*m;
        std::slice::from_raw_parts(r.buf_addr.add(r.data_off as usize), r.data_len as usize)
    }
}
