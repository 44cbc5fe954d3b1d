//! Byte compares in one SIMD register, for the classifiers of the nodes (whose crate
//! holds no `unsafe`): SSE2 on x86_64, where every CPU has it; a loop elsewhere.

/// Which of the 16 bytes of `bytes` (byte `i` is `bytes[i / 8] >> 8 * (i % 8)`) are
/// greater than `v`, both read as signed bytes: bit `i` of the result for byte `i`.
#[inline(always)]
pub fn signed_bytes_above(bytes: [u64; 2], v: u8) -> u32 {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    {
        use std::arch::x86_64::{_mm_cmpgt_epi8, _mm_movemask_epi8, _mm_set1_epi8, _mm_set_epi64x};
        // SAFETY: these intrinsics need only SSE2, which this build's target has
        // (`target_feature = "sse2"`), and they read or write no memory.
        unsafe {
            _mm_movemask_epi8(_mm_cmpgt_epi8(_mm_set_epi64x(bytes[1] as i64, bytes[0] as i64), _mm_set1_epi8(v as i8)))
                as u32
        }
    }
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    {
        signed_bytes_above_portable(bytes, v)
    }
}

/// [`signed_bytes_above`] one byte at a time (the fallback, tested against it).
#[inline]
pub fn signed_bytes_above_portable(bytes: [u64; 2], v: u8) -> u32 {
    let b = (u128::from(bytes[1]) << 64 | u128::from(bytes[0])).to_le_bytes();
    b.iter().enumerate().fold(0, |m, (i, &x)| m | u32::from(x as i8 > v as i8) << i)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_simd_compare_and_the_loop_agree() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let bytes = [x, x.rotate_left(29) ^ 0x8080_7f7f_0001_ff00];
            for v in [0u8, 1, 0x7f, 0x80, 0x81, 0xff, x as u8] {
                let want = signed_bytes_above_portable(bytes, v);
                assert_eq!(signed_bytes_above(bytes, v), want, "{bytes:x?} above {v:#x}");
                let b = (u128::from(bytes[1]) << 64 | u128::from(bytes[0])).to_le_bytes();
                assert_eq!(want.count_ones() as usize, b.iter().filter(|&&c| c as i8 > v as i8).count());
            }
        }
    }
}
