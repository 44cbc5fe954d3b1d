//! A keyed hash for the nodes' tables (the tcp node's flows, neighbours, listening
//! ports and a site's objects; the bridge's MAC table), in place of std's SipHash-1-3,
//! and the random key of tables fed from the wire.
//!
//! Every segment looks its flow up and every frame sent looks its neighbour up; with
//! SipHash each lookup cost ~400 instructions (a 4-tuple is hashed field by field, and
//! each `write` runs SipHash's buffering), ~6% of an HTTP request. Here each field is
//! mixed in with one 64 x 64 -> 128-bit multiply whose halves are xored (the "folded
//! multiply" of aHash's fallback and of wyhash), starting from a per-table random key.
//! The flow table's keys come from the wire: an attacker who cannot learn the key
//! cannot aim many flows at one bucket (hashbrown also keeps probe sequences short).
//! This is not a cryptographic MAC; nothing else relies on it.

use crate::kind::NodeError;
use std::hash::{BuildHasher, Hasher};

/// Folded multiply: the xor of the two halves of the 128-bit product.
#[inline(always)]
fn fold_mul(a: u64, b: u64) -> u64 {
    let p = u128::from(a) * u128::from(b);
    (p as u64) ^ ((p >> 64) as u64)
}

/// Odd constants (digits of pi) that spread a key's bits.
const PI0: u64 = 0x243f_6a88_85a3_08d3;
const PI1: u64 = 0x1319_8a2e_0370_7344;

/// Builds [`KeyedHasher`]s from a 128-bit key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct KeyedState {
    k0: u64,
    k1: u64,
}

impl KeyedState {
    /// A state keyed by `key` (16 secret bytes for tables fed from the wire).
    pub(crate) fn new(key: [u8; 16]) -> KeyedState {
        let (a, b) = key.split_at(8);
        let a = u64::from_le_bytes(a.try_into().unwrap_or_default());
        let b = u64::from_le_bytes(b.try_into().unwrap_or_default());
        // Never a zero multiplier, whatever the key.
        KeyedState { k0: a ^ PI0, k1: (b ^ PI1) | 1 }
    }
}

impl Default for KeyedState {
    /// A fixed key: for tables whose contents an attacker does not choose.
    fn default() -> KeyedState {
        KeyedState::new([0; 16])
    }
}

impl BuildHasher for KeyedState {
    type Hasher = KeyedHasher;

    #[inline]
    fn build_hasher(&self) -> KeyedHasher {
        KeyedHasher { h: self.k0, k: self.k1 }
    }
}

/// The hasher: one folded multiply per field (per 8 bytes of a byte string).
pub(crate) struct KeyedHasher {
    h: u64,
    k: u64,
}

impl KeyedHasher {
    #[inline(always)]
    fn mix(&mut self, v: u64) {
        self.h = fold_mul(self.h ^ v, self.k);
    }
}

impl Hasher for KeyedHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.mix(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let rest = chunks.remainder();
        let mut last = [0u8; 8];
        last[..rest.len()].copy_from_slice(rest);
        // The length goes in with the tail, so "a" and "a\0" differ.
        self.mix(u64::from_le_bytes(last) ^ ((rest.len() as u64) << 59));
    }

    #[inline]
    fn write_u8(&mut self, v: u8) {
        self.mix(u64::from(v));
    }

    #[inline]
    fn write_u16(&mut self, v: u16) {
        self.mix(u64::from(v));
    }

    #[inline]
    fn write_u32(&mut self, v: u32) {
        self.mix(u64::from(v));
    }

    #[inline]
    fn write_u64(&mut self, v: u64) {
        self.mix(v);
    }

    #[inline]
    fn write_usize(&mut self, v: usize) {
        self.mix(v as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // A last round so that the final field's bits reach the low bits hashbrown
        // uses for the bucket and the high bits it uses for the control byte.
        fold_mul(self.h, self.k ^ PI0)
    }
}

/// Fills `secret` from the kernel's random source (`getrandom(2)`, blocking only
/// until the kernel's pool is first seeded, at boot).
pub(crate) fn random_secret(secret: &mut [u8]) -> Result<(), NodeError> {
    let mut got = 0;
    while got < secret.len() {
        match rustix::rand::getrandom(&mut secret[got..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(NodeError::Random(e.into())),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::hash::Hash;

    fn h<T: Hash>(s: &KeyedState, v: T) -> u64 {
        s.hash_one(v)
    }

    #[test]
    fn keys_fields_and_lengths_all_change_the_hash() {
        let a = KeyedState::new([1; 16]);
        let b = KeyedState::new([2; 16]);
        assert_ne!(h(&a, (1u32, 2u16)), h(&b, (1u32, 2u16)), "another key");
        assert_ne!(h(&a, (1u32, 2u16)), h(&a, (2u32, 1u16)), "fields swapped");
        assert_ne!(h(&a, &b"a"[..]), h(&a, &b"a\0"[..]), "a trailing zero byte");
        assert_eq!(h(&a, "/empty"), h(&a, "/empty"));
    }

    #[test]
    fn neighbouring_flows_spread_over_buckets() {
        // 65,536 source ports of one client: the low 12 bits (4096 buckets) of their
        // hashes take nearly every value, and the top 7 bits (the control byte) vary.
        let s = KeyedState::new(*b"0123456789abcdef");
        let hashes: Vec<u64> =
            (0..=u16::MAX).map(|p| h(&s, ([198u8, 18, 0, 1], p, [198u8, 18, 0, 2], 80u16))).collect();
        let low: HashSet<u64> = hashes.iter().map(|x| x & 4095).collect();
        let top: HashSet<u64> = hashes.iter().map(|x| x >> 57).collect();
        assert!(low.len() > 4000, "{} of 4096 buckets", low.len());
        assert_eq!(top.len(), 128);
    }
}
