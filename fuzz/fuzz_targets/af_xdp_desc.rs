//! What net_af_xdp trusts the kernel for: the RX descriptors and completion addresses
//! it reads from shared rings. The UMEM arithmetic of `pmds/af_xdp/src/umem.rs`
//! (included as it is) is fed a pool geometry and a stream of operations: post a
//! buffer to the fill ring, take an RX descriptor with an arbitrary address and length
//! (as a hostile or broken kernel could write it), check a TX address.
//!
//! Input: 8 bytes of geometry (object count, buffer length, stride padding), then
//! operations of 13 bytes each (kind, object or address, length).
//!
//! No panic; a descriptor is accepted only for a buffer that was posted and not yet
//! taken, and then the frame lies inside that buffer; a buffer is never taken twice;
//! a TX address accepted lies inside one buffer of the pool.
#![no_main]
use libfuzzer_sys::fuzz_target;

#[path = "../../pmds/af_xdp/src/umem.rs"]
#[allow(dead_code)]
mod umem;

use umem::{Layout, Posted, ADDR_MASK};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let count = u32::from(u16::from_le_bytes([data[0], data[1]])) % 4096 + 1;
    let buf_len = u32::from(u16::from_le_bytes([data[2], data[3]])) % 10_000;
    let hdr = 128u64;
    let stride = (hdr + u64::from(buf_len)).div_ceil(64) * 64 + u64::from(data[4] % 4) * 64;
    let region = stride * u64::from(count) + u64::from(u16::from_le_bytes([data[5], data[6]]));
    let Ok(l) = Layout::new(region, stride, count, hdr, buf_len) else { return };
    assert!(l.chunk >= umem::MIN_CHUNK && l.chunk <= umem::MAX_CHUNK && l.chunk <= l.buf_len);
    let mut posted = Posted::new(count);
    let mut model = vec![false; count as usize];
    for op in data[8..].chunks_exact(13) {
        let v = u64::from_le_bytes(op[1..9].try_into().unwrap());
        let len = u32::from_le_bytes(op[9..13].try_into().unwrap());
        match op[0] % 3 {
            0 => {
                // Mostly an object of the pool; now and then one past its end.
                let idx = (v % (u64::from(count) + 70)) as u32;
                let fresh = posted.set(idx);
                if idx >= count {
                    assert!(!fresh, "object {idx} of {count} posted");
                    assert!(!posted.take(idx));
                    continue;
                }
                assert_eq!(fresh, !model[idx as usize]);
                model[idx as usize] = true;
                assert_eq!(l.index_of(l.fill_addr(idx)), Some(idx));
            }
            1 => {
                // Half the time a plausible descriptor: a buffer's base, the frame 256 on.
                let addr = if op[0] & 0x80 != 0 { l.fill_addr((v % u64::from(count)) as u32) | 256 << 48 } else { v };
                if let Some((idx, off)) = l.rx_desc(addr, len) {
                    assert_eq!(l.fill_addr(idx), addr & ADDR_MASK);
                    assert!(len > 0 && u64::from(off) + u64::from(len) <= u64::from(l.buf_len));
                    let took = posted.take(idx);
                    assert_eq!(took, model[idx as usize], "taken only if posted");
                    model[idx as usize] = false;
                }
            }
            _ => {
                if let Some(a) = l.tx_addr(v, len) {
                    let rel = a - l.hdr;
                    assert!(rel / l.stride < u64::from(count));
                    assert!(rel % l.stride + u64::from(len) <= u64::from(l.buf_len) && len <= l.chunk && len > 0);
                }
            }
        }
        assert_eq!(posted.len(), model.iter().filter(|x| **x).count());
    }
    let left = posted.drain();
    assert_eq!(left.len(), model.iter().filter(|x| **x).count());
});
