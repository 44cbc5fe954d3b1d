//! Byte compares in one SIMD register, for the classifiers of the nodes (whose crate
//! holds no `unsafe`): SSE2 on x86_64, where every CPU has it; a loop elsewhere; and
//! [`with_avx2`], which runs a loop compiled for AVX2 where the CPU has it.

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

/// A hot loop to run through [`with_avx2`]. `run` must be `#[inline(always)]`, and
/// so must what it calls in the loop: it is then compiled into each variant (an
/// ordinary closure would be one function both variants call).
pub trait Kernel {
    /// What the loop gives.
    type Output;
    /// The loop.
    fn run(self) -> Self::Output;
}

/// Runs `k` in code compiled for AVX2 and BMI1/2 where the CPU has them (detected at
/// run time, once), else as the build's target has it (SSE2 on x86_64). The same
/// source then takes one-instruction byte broadcasts (`vpbroadcastb`), three-operand
/// SIMD and BMI's bit operations. The result must not depend on the choice (callers
/// test both ways).
#[inline(always)]
pub fn with_avx2<K: Kernel>(k: K) -> K::Output {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2")
        && std::arch::is_x86_feature_detected!("bmi1")
        && std::arch::is_x86_feature_detected!("bmi2")
    {
        // SAFETY: the CPU has every feature `avx2_body` is compiled for (detected
        // just above); `k.run()` itself is safe code.
        return unsafe { avx2_body(k) };
    }
    k.run()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,bmi1,bmi2")]
fn avx2_body<K: Kernel>(k: K) -> K::Output {
    k.run()
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

    struct Above([u64; 2], u8);

    impl Kernel for Above {
        type Output = u32;
        #[inline(always)]
        fn run(self) -> u32 {
            signed_bytes_above(self.0, self.1)
        }
    }

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
                assert_eq!(with_avx2(Above(bytes, v)), want, "AVX2: {bytes:x?} above {v:#x}");
                let b = (u128::from(bytes[1]) << 64 | u128::from(bytes[0])).to_le_bytes();
                assert_eq!(want.count_ones() as usize, b.iter().filter(|&&c| c as i8 > v as i8).count());
            }
        }
    }
}
