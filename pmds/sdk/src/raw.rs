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

/// Copy `n` bytes from `src` to `dst`, with copies up to 256 bytes done inline
/// instead of by a call to `memcpy` (what a driver copying small packets and headers
/// between shared memory and mbufs spends its time in): from 4 to 64 bytes two
/// fixed-size copies whose ranges overlap, longer 16 bytes at a time, the last 16
/// overlapping. The
/// memory is read and written as plain bytes (no reference is made to it): `src`
/// may be memory another process writes.
///
/// # Safety
/// `src` is readable and `dst` writable for `n` bytes; the ranges do not overlap.
#[inline(always)]
pub unsafe fn copy_bytes(dst: *mut u8, src: *const u8, n: usize) {
    /// Copy `N` bytes at offset `at`.
    #[inline(always)]
    unsafe fn chunk<const N: usize>(dst: *mut u8, src: *const u8, at: usize) {
        // SAFETY: the caller's bounds (`at + N <= n`).
        unsafe {
            let v = std::ptr::read_unaligned(src.add(at).cast::<[u8; N]>());
            std::ptr::write_unaligned(dst.add(at).cast::<[u8; N]>(), v);
        }
    }
    // SAFETY: every chunk lies inside `0..n` (the caller's bounds).
    unsafe {
        match n {
            0..=3 => {
                for i in 0..n {
                    *dst.add(i) = *src.add(i);
                }
            }
            4..=7 => {
                chunk::<4>(dst, src, 0);
                chunk::<4>(dst, src, n - 4);
            }
            8..=15 => {
                chunk::<8>(dst, src, 0);
                chunk::<8>(dst, src, n - 8);
            }
            257.. => std::ptr::copy_nonoverlapping(src, dst, n),
            16..=32 => {
                chunk::<16>(dst, src, 0);
                chunk::<16>(dst, src, n - 16);
            }
            33..=64 => {
                chunk::<32>(dst, src, 0);
                chunk::<32>(dst, src, n - 32);
            }
            _ => {
                let mut i = 0;
                while i + 16 <= n {
                    chunk::<16>(dst, src, i);
                    i += 16;
                }
                if i < n {
                    chunk::<16>(dst, src, n - 16);
                }
            }
        }
    }
}

#[cfg(test)]
mod copy_tests {
    #[test]
    fn copy_bytes_copies_every_length_exactly() {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for n in 0..300 {
            let mut dst = vec![0xeeu8; 300];
            // SAFETY: both vectors hold 300 bytes.
            unsafe { super::copy_bytes(dst.as_mut_ptr(), src.as_ptr(), n) };
            assert_eq!(&dst[..n], &src[..n], "{n}");
            assert!(dst[n..].iter().all(|&b| b == 0xee), "{n}");
        }
    }
}
