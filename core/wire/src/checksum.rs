//! The Internet checksum (RFC 1071), pseudo-headers and incremental updates (RFC 1624).
//!
//! Vocabulary: a *sum* is the ones-complement sum of big-endian 16-bit words (not
//! inverted); the *checksum* stored in a header is the inverted folded sum. A header
//! verifies when the folded sum over it, checksum field included, is `0xffff`.
//!
//! Partial sums may only be added when each covers a span starting at an even offset of
//! the checksummed data (a trailing odd byte counts as the high byte of a word).
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::ip::{IpAddress, IpProtocol};

/// Bytes summed per block: even (so only the last block can end on an odd byte) and small
/// enough that no accumulator of [`sum_block`] can overflow.
const BLOCK: usize = 1 << 30;

/// The ones-complement sum of `data` as big-endian 16-bit words, a trailing odd byte
/// padded with a zero low byte.
///
/// The result is already folded (at most `0xffff`, and `0` only when every byte is zero),
/// so thousands of partial sums can be added in a `u32` before [`fold`].
pub fn sum(data: &[u8]) -> u32 {
    let mut total: u64 = 0;
    for block in data.chunks(BLOCK) {
        total = fold64(total) + sum_block(block);
    }
    u32::from(fold64(total) as u16)
}

/// Sums `data` (at most [`BLOCK`] bytes) as plain integers over 32-bit words, four
/// accumulators wide. This equals the 16-bit ones-complement sum modulo `0xffff` because
/// `2^16 ≡ 1 (mod 0xffff)`; [`fold64`] does the reduction.
fn sum_block(data: &[u8]) -> u64 {
    let mut acc = [0u64; 4];
    let mut chunks = data.chunks_exact(16);
    for c in &mut chunks {
        acc[0] += u64::from(u32::from_be_bytes([c[0], c[1], c[2], c[3]]));
        acc[1] += u64::from(u32::from_be_bytes([c[4], c[5], c[6], c[7]]));
        acc[2] += u64::from(u32::from_be_bytes([c[8], c[9], c[10], c[11]]));
        acc[3] += u64::from(u32::from_be_bytes([c[12], c[13], c[14], c[15]]));
    }
    let mut total = acc.iter().sum::<u64>();
    let mut words = chunks.remainder().chunks_exact(2);
    for w in &mut words {
        total += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        total += u64::from(*last) << 8;
    }
    total
}

/// Folds a 64-bit integer sum to 16 bits with end-around carries; non-zero stays non-zero.
fn fold64(mut x: u64) -> u64 {
    while x > 0xffff {
        x = (x & 0xffff) + (x >> 16);
    }
    x
}

/// Folds a 32-bit sum to 16 bits with end-around carries (not inverted).
pub fn fold(mut sum: u32) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Adds folded sums (for example a pseudo-header sum and a payload sum) and folds.
pub fn combine(sums: &[u16]) -> u16 {
    fold64(sums.iter().map(|&s| u64::from(s)).sum()) as u16
}

/// The folded ones-complement sum of `data` (not inverted). `data(header) == 0xffff`
/// when the header's checksum verifies.
pub fn data(data: &[u8]) -> u16 {
    sum(data) as u16
}

fn sum_words(bytes: &[u8]) -> u32 {
    bytes.chunks_exact(2).map(|w| u32::from(u16::from_be_bytes([w[0], w[1]]))).sum()
}

/// The unfolded sum of the IPv4 pseudo-header (RFC 793): addresses, protocol and the
/// upper-layer length. Add it to the [`sum`] of the upper-layer bytes, then [`fold`].
pub fn pseudo_header_v4(src: &Ipv4Addr, dst: &Ipv4Addr, proto: IpProtocol, len: u16) -> u32 {
    sum_words(&src.octets()) + sum_words(&dst.octets()) + u32::from(proto.0) + u32::from(len)
}

/// The unfolded sum of the IPv6 pseudo-header (RFC 8200 §8.1): addresses, 32-bit
/// upper-layer length and next header.
pub fn pseudo_header_v6(src: &Ipv6Addr, dst: &Ipv6Addr, proto: IpProtocol, len: u32) -> u32 {
    sum_words(&src.octets()) + sum_words(&dst.octets()) + (len >> 16) + (len & 0xffff) + u32::from(proto.0)
}

/// The pseudo-header sum for either IP version.
///
/// Over IPv4 `len` is truncated to the 16 bits the pseudo-header holds. A mix of an IPv4
/// and an IPv6 address (a caller bug) is summed as IPv6 with the IPv4 address mapped.
pub fn pseudo_header(src: &IpAddress, dst: &IpAddress, proto: IpProtocol, len: u32) -> u32 {
    match (src, dst) {
        (IpAddress::V4(s), IpAddress::V4(d)) => pseudo_header_v4(s, d, proto, len as u16),
        _ => pseudo_header_v6(&src.to_ipv6(), &dst.to_ipv6(), proto, len),
    }
}

/// RFC 1624 equation 3: the checksum after a 16-bit word of the covered data changes
/// from `old` to `new`, computed as `HC' = ~(~HC + ~m + m')`.
///
/// Unlike equation 2 this never yields `0xffff` where a full recomputation gives
/// `0x0000`: the two agree whenever the covered data is not all zeros. (A UDP checksum
/// of `0`, meaning "none", must be left alone by the caller; a computed UDP checksum of
/// `0` is sent as `0xffff`.)
pub fn update16(old_cksum: u16, old: u16, new: u16) -> u16 {
    !fold(u32::from(!old_cksum) + u32::from(!old) + u32::from(new))
}

/// [`update16`] for a word known to decrease by `by` (not below zero), such as an IPv4
/// header's (TTL, protocol) word when the TTL is decremented (`by` = `0x0100`): then
/// `~m + m'` is `~by` whatever `m`, and `HC' = ~(~HC + ~by)`, where two 16-bit terms
/// need one fold. Equal to [`update16`] for every such `m`.
///
/// One's complement sums do not depend on byte order (RFC 1071 §2.B): `old_cksum` and
/// `by` may both be given byte-swapped (a little-endian load of big-endian bytes), and
/// the result is then byte-swapped too.
#[inline]
pub fn update16_decrement(old_cksum: u16, by: u16) -> u16 {
    let sum = u32::from(!old_cksum) + u32::from(!by);
    !(((sum & 0xffff) + (sum >> 16)) as u16)
}

/// Whether an option-less IPv4 header (20 bytes) verifies, summed as five 32-bit
/// words in the machine's byte order (one's complement sums do not depend on it).
/// The plain sum is the one's complement sum modulo `0xffff` (`2^16` is 1 there), and
/// a header verifies when that sum folds to `0xffff`: a nonzero multiple of `0xffff`.
/// Equal to `data(header) == 0xffff`, in fewer instructions.
#[inline]
pub fn verify20(header: &[u8; 20]) -> bool {
    let word = |at: usize| u64::from(u32::from_ne_bytes([header[at], header[at + 1], header[at + 2], header[at + 3]]));
    let sum = word(0) + word(4) + word(8) + word(12) + word(16);
    sum != 0 && sum % 0xffff == 0
}

/// [`update16`] for a 32-bit field at an even offset, such as an IPv4 address.
pub fn update32(old_cksum: u16, old: u32, new: u32) -> u16 {
    let sum =
        u32::from(!old_cksum) + u32::from(!(old >> 16) as u16) + u32::from(!old as u16) + (new >> 16) + (new & 0xffff);
    !fold(sum)
}

/// [`update16`] for a span of bytes starting at an even offset of the covered data (an
/// odd length is allowed only when the span ends the data).
///
/// # Panics
/// If `old` and `new` differ in length.
pub fn update_bytes(old_cksum: u16, old: &[u8], new: &[u8]) -> u16 {
    assert_eq!(old.len(), new.len(), "update_bytes: spans differ in length");
    !fold(u32::from(!old_cksum) + u32::from(!data(old)) + sum(new))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::XorShift;

    /// RFC 1071 as written: 16-bit words into a 32-bit accumulator.
    fn naive(data: &[u8]) -> u16 {
        let mut acc: u64 = 0;
        for pair in data.chunks(2) {
            let hi = u64::from(pair[0]) << 8;
            let lo = pair.get(1).map_or(0, |&b| u64::from(b));
            acc += hi | lo;
        }
        while acc > 0xffff {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        acc as u16
    }

    #[test]
    fn sum_matches_naive_on_random_lengths_and_alignments() {
        let mut rng = XorShift(0x1234_5678_9abc_def1);
        for _ in 0..2000 {
            let len = rng.index(1600);
            let buf = rng.bytes(len + 8);
            let start = rng.index(8);
            let slice = &buf[start..start + len];
            assert_eq!(data(slice), naive(slice), "len {len} start {start}");
        }
    }

    #[test]
    fn sum_edge_values() {
        assert_eq!(sum(&[]), 0);
        assert_eq!(data(&[0; 37]), 0);
        assert_eq!(data(&[0xff; 64]), 0xffff);
        assert_eq!(data(&[0xff; 63]), naive(&[0xff; 63]));
        assert_eq!(data(&[0x12]), 0x1200);
        // RFC 1071 §3 example.
        assert_eq!(data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]), 0xddf2);
    }

    #[test]
    fn fold_and_combine() {
        assert_eq!(fold(0), 0);
        assert_eq!(fold(0xffff), 0xffff);
        assert_eq!(fold(0x1_0000), 1);
        assert_eq!(fold(0xffff_ffff), 0xffff);
        assert_eq!(combine(&[0xffff, 0x0001]), 0x0001);
        assert_eq!(combine(&[0x8000; 70_000]), naive(&[0x80, 0x00].repeat(70_000)));
        let mut rng = XorShift(99);
        let buf = rng.bytes(300);
        assert_eq!(combine(&[data(&buf[..100]), data(&buf[100..])]), data(&buf));
    }

    #[test]
    fn pseudo_headers() {
        let s = Ipv4Addr::new(192, 168, 0, 1);
        let d = Ipv4Addr::new(10, 0, 0, 2);
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&s.octets());
        bytes.extend_from_slice(&d.octets());
        bytes.extend_from_slice(&[0, 6, 0x01, 0x23]);
        assert_eq!(fold(pseudo_header_v4(&s, &d, IpProtocol::TCP, 0x123)), naive(&bytes));
        assert_eq!(
            pseudo_header(&s.into(), &d.into(), IpProtocol::TCP, 0x123),
            pseudo_header_v4(&s, &d, IpProtocol::TCP, 0x123)
        );

        let s6: Ipv6Addr = "fe80::1".parse().unwrap();
        let d6: Ipv6Addr = "ff02::1:ff00:2".parse().unwrap();
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&s6.octets());
        bytes.extend_from_slice(&d6.octets());
        bytes.extend_from_slice(&0x0001_0020u32.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 58]);
        assert_eq!(fold(pseudo_header_v6(&s6, &d6, IpProtocol::ICMPV6, 0x1_0020)), naive(&bytes));
    }

    /// The checksum field a sender would store for `data` (not all zero).
    fn full(data: &[u8]) -> u16 {
        !naive(data)
    }

    #[test]
    fn rfc1624_corner_case() {
        // RFC 1624 §3: the other words sum to 0xCD7A, m = 0x5555 becomes m' = 0x3285.
        let before = [0xcd, 0x7a, 0x55, 0x55];
        let after = [0xcd, 0x7a, 0x32, 0x85];
        assert_eq!(full(&before), 0xdd2f);
        assert_eq!(full(&after), 0x0000);
        assert_eq!(update16(0xdd2f, 0x5555, 0x3285), 0x0000, "equation 3, not equation 2's 0xffff");
        assert_eq!(update_bytes(0xdd2f, &[0x55, 0x55], &[0x32, 0x85]), 0x0000);
        assert_eq!(update32(0xdd2f, 0xcd7a_5555, 0xcd7a_3285), 0x0000);
    }

    #[test]
    fn incremental_equals_full_recomputation() {
        let mut rng = XorShift(0xdead_beef_cafe_f00d);
        for round in 0..5000 {
            let len = 2 * (2 + rng.index(40));
            let mut buf = rng.bytes(len);
            // Mostly small values, so that sums near 0xffff (the corner case) come up.
            if round % 3 == 0 {
                for b in buf.iter_mut() {
                    *b &= 0x81;
                }
            }
            if buf.iter().all(|&b| b == 0) {
                buf[0] = 1;
            }
            let cksum = full(&buf);
            let mut edited = buf.clone();
            let result = match round % 3 {
                0 => {
                    let at = 2 * rng.index(len / 2);
                    let old = u16::from_be_bytes([buf[at], buf[at + 1]]);
                    let new = rng.next_u64() as u16;
                    edited[at..at + 2].copy_from_slice(&new.to_be_bytes());
                    update16(cksum, old, new)
                }
                1 => {
                    let at = 2 * rng.index(len / 2 - 1);
                    let old = u32::from_be_bytes(buf[at..at + 4].try_into().unwrap());
                    let new = rng.next_u64() as u32;
                    edited[at..at + 4].copy_from_slice(&new.to_be_bytes());
                    update32(cksum, old, new)
                }
                _ => {
                    let at = 2 * rng.index(len / 2);
                    let span = 2 * (1 + rng.index((len - at) / 2));
                    let new = rng.bytes(span);
                    edited[at..at + span].copy_from_slice(&new);
                    update_bytes(cksum, &buf[at..at + span], &new)
                }
            };
            if edited.iter().all(|&b| b == 0) {
                continue; // All-zero data has no non-zero representation to agree on.
            }
            assert_eq!(result, full(&edited), "round {round}: {buf:02x?} -> {edited:02x?}");
        }
    }

    #[test]
    fn a_decrement_equals_the_general_update_in_either_byte_order() {
        let mut rng = XorShift(0x0123_4567_89ab_cdef);
        for round in 0..20_000 {
            let len = 2 * (2 + rng.index(20));
            let mut buf = rng.bytes(len);
            if round % 4 == 0 {
                buf.iter_mut().for_each(|b| *b &= 0x81);
            }
            buf[0] |= 1;
            let at = 2 * rng.index(len / 2);
            let old = u16::from_be_bytes([buf[at], buf[at + 1]]);
            let by = [0x0100, 1, rng.next_u64() as u16][round % 3] % (old.max(1));
            let new = old - by;
            let cksum = full(&buf);
            let mut edited = buf.clone();
            edited[at..at + 2].copy_from_slice(&new.to_be_bytes());
            let got = update16_decrement(cksum, by);
            assert_eq!(got, update16(cksum, old, new), "round {round}");
            assert_eq!(got, full(&edited), "round {round}");
            assert_eq!(update16_decrement(cksum.swap_bytes(), by.swap_bytes()), got.swap_bytes(), "round {round}");
        }
        // A TTL of 2 going to 1 in the RFC 1624 corner: a result of 0x0000, never 0xffff.
        assert_eq!(full(&[0x03, 0x00, 0xfd, 0xff]), 0xfeff);
        assert_eq!(full(&[0x02, 0x00, 0xfd, 0xff]), 0x0000);
        assert_eq!(update16_decrement(0xfeff, 0x0100), 0x0000);
    }

    #[test]
    fn verify20_agrees_with_the_full_sum() {
        let mut rng = XorShift(0xfeed_f00d_1234_5678);
        let mut verified = 0;
        for round in 0..20_000 {
            let mut h: [u8; 20] = rng.bytes(20).try_into().unwrap();
            match round % 4 {
                0 => h.iter_mut().for_each(|b| *b &= 0x03),
                1 => {
                    h[10..12].fill(0);
                    let c = !data(&h);
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                }
                2 => {
                    h[10..12].fill(0);
                    let c = !data(&h);
                    h[10..12].copy_from_slice(&c.to_be_bytes());
                    h[rng.index(20)] ^= 1 << rng.below(8);
                }
                _ => {}
            }
            verified += usize::from(verify20(&h));
            assert_eq!(verify20(&h), data(&h) == 0xffff, "round {round}: {h:02x?}");
        }
        assert!(verified >= 5000, "{verified}");
        assert!(!verify20(&[0; 20]), "all zero sums to 0, not 0xffff");
        assert!(verify20(&[0xff; 20]));
    }
}
