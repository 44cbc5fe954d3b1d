//! Initial sequence numbers (RFC 6528) and timestamp offsets from a keyed hash.
//!
//! `ISN = M + F(localip, localport, remoteip, remoteport, secretkey)` where `M` is a
//! 4 µs clock and `F` is SipHash-2-4 under the 128-bit secret the caller passes in
//! (the engine has no source of randomness). The same hash with another domain byte
//! gives the per-connection offset of the timestamp clock (RFC 7323 §5.4).
use crate::{Endpoint, SeqNum, Time};

const DOMAIN_ISN: u8 = 1;
const DOMAIN_TS: u8 = 2;
const DOMAIN_COOKIE: u8 = 3;

/// The peer MSS values a SYN cookie can carry (3 bits): the largest not above the
/// peer's MSS is kept.
pub(crate) const COOKIE_MSS: [u16; 8] = [536, 1200, 1360, 1400, 1440, 1460, 4312, 8960];

/// A SYN cookie stays valid for this many 64-second periods after the one it was made in.
const COOKIE_PERIODS: u32 = 1;

/// Computes ISNs and timestamp offsets for connections under one secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct IsnGenerator {
    k0: u64,
    k1: u64,
}

impl std::fmt::Debug for IsnGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IsnGenerator { .. }")
    }
}

impl IsnGenerator {
    /// A generator keyed by `secret` (take it from a CSPRNG once per process).
    pub fn new(secret: [u8; 16]) -> Self {
        let (lo, hi) = secret.split_at(8);
        IsnGenerator {
            k0: u64::from_le_bytes(lo.try_into().expect("8 bytes")),
            k1: u64::from_le_bytes(hi.try_into().expect("8 bytes")),
        }
    }

    /// The ISN for a connection between `local` and `remote` opened at `now`.
    pub fn isn(&self, now: Time, local: &Endpoint, remote: &Endpoint) -> SeqNum {
        let m = (now.micros() / 4) as u32;
        SeqNum(m.wrapping_add(self.hash(DOMAIN_ISN, local, remote) as u32))
    }

    /// The offset added to this connection's timestamp clock.
    pub(crate) fn ts_offset(&self, local: &Endpoint, remote: &Endpoint) -> u32 {
        self.hash(DOMAIN_TS, local, remote) as u32
    }

    /// A SYN cookie (RFC 4987 §3.6): the ISS of a SYN-ACK sent without keeping state.
    /// Bits 31..27: a 64-second period counter, 26..24: the index of the peer's MSS in
    /// [`COOKIE_MSS`], 23..0: a keyed hash of the 4-tuple, the period and the peer's ISN.
    pub(crate) fn cookie(&self, now: Time, local: &Endpoint, remote: &Endpoint, peer_isn: u32, mss_idx: u8) -> u32 {
        let period = (now.micros() / 64_000_000) as u32 & 0x1f;
        let idx = mss_idx & 7;
        (period << 27) | (u32::from(idx) << 24) | self.cookie_hash(local, remote, period, peer_isn, idx)
    }

    /// The MSS index a valid `cookie` carries (made at most one period before `now`, for
    /// this 4-tuple and peer ISN), or `None`.
    pub(crate) fn check_cookie(
        &self,
        now: Time,
        local: &Endpoint,
        remote: &Endpoint,
        peer_isn: u32,
        cookie: u32,
    ) -> Option<u8> {
        let period = cookie >> 27;
        let current = (now.micros() / 64_000_000) as u32 & 0x1f;
        let age = current.wrapping_sub(period) & 0x1f;
        let idx = ((cookie >> 24) & 7) as u8;
        (age <= COOKIE_PERIODS && cookie & 0xff_ffff == self.cookie_hash(local, remote, period, peer_isn, idx))
            .then_some(idx)
    }

    fn cookie_hash(&self, local: &Endpoint, remote: &Endpoint, period: u32, peer_isn: u32, mss_idx: u8) -> u32 {
        let mut msg = [0u8; 46];
        msg[..37].copy_from_slice(&Self::tuple(DOMAIN_COOKIE, local, remote));
        msg[37..41].copy_from_slice(&period.to_le_bytes());
        msg[41..45].copy_from_slice(&peer_isn.to_le_bytes());
        msg[45] = mss_idx;
        (siphash24(self.k0, self.k1, &msg) & 0xff_ffff) as u32
    }

    fn tuple(domain: u8, local: &Endpoint, remote: &Endpoint) -> [u8; 37] {
        let mut msg = [0u8; 37];
        msg[0] = domain;
        msg[1..17].copy_from_slice(&local.addr.to_ipv6().octets());
        msg[17..19].copy_from_slice(&local.port.to_be_bytes());
        msg[19..35].copy_from_slice(&remote.addr.to_ipv6().octets());
        msg[35..37].copy_from_slice(&remote.port.to_be_bytes());
        msg
    }

    fn hash(&self, domain: u8, local: &Endpoint, remote: &Endpoint) -> u64 {
        siphash24(self.k0, self.k1, &Self::tuple(domain, local, remote))
    }
}

/// SipHash-2-4 (Aumasson and Bernstein) of `data` under the key `(k0, k1)`.
fn siphash24(k0: u64, k1: u64, data: &[u8]) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    fn round(v: &mut [u64; 4]) {
        v[0] = v[0].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(13) ^ v[0];
        v[0] = v[0].rotate_left(32);
        v[2] = v[2].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(16) ^ v[2];
        v[0] = v[0].wrapping_add(v[3]);
        v[3] = v[3].rotate_left(21) ^ v[0];
        v[2] = v[2].wrapping_add(v[1]);
        v[1] = v[1].rotate_left(17) ^ v[2];
        v[2] = v[2].rotate_left(32);
    }
    let compress = |v: &mut [u64; 4], m: u64| {
        v[3] ^= m;
        round(v);
        round(v);
        v[0] ^= m;
    };
    let mut words = data.chunks_exact(8);
    for word in words.by_ref() {
        compress(&mut v, u64::from_le_bytes(word.try_into().expect("8 bytes")));
    }
    let mut last = [0u8; 8];
    let rest = words.remainder();
    last[..rest.len()].copy_from_slice(rest);
    last[7] = data.len() as u8;
    compress(&mut v, u64::from_le_bytes(last));
    v[2] ^= 0xff;
    for _ in 0..4 {
        round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn siphash_reference_vectors() {
        // From the SipHash paper's reference implementation: key 00..0f, message 00..len-1.
        let key: Vec<u8> = (0..16).collect();
        let gen = IsnGenerator::new(key.try_into().unwrap());
        assert_eq!(siphash24(gen.k0, gen.k1, &[]), 0x726f_db47_dd0e_0e31);
        let msg: Vec<u8> = (0..15).collect();
        assert_eq!(siphash24(gen.k0, gen.k1, &msg), 0xa129_ca61_49be_45e5);
        let msg: Vec<u8> = (0..8).collect();
        assert_eq!(siphash24(gen.k0, gen.k1, &msg), 0x93f5_f579_9a93_2462);
    }

    #[test]
    fn isn_depends_on_tuple_secret_and_clock() {
        let a = Endpoint::new(Ipv4Addr::new(10, 0, 0, 1).into(), 1000);
        let b = Endpoint::new(Ipv4Addr::new(10, 0, 0, 2).into(), 80);
        let g = IsnGenerator::new([7; 16]);
        let t = Time::from_secs(5);
        let isn = g.isn(t, &a, &b);
        assert_eq!(g.isn(t, &a, &b), isn);
        assert_ne!(g.isn(t, &b, &a), isn);
        assert_ne!(IsnGenerator::new([8; 16]).isn(t, &a, &b), isn);
        // The clock part advances by one every 4 µs.
        assert_eq!(g.isn(t + std::time::Duration::from_micros(400), &a, &b), isn + 100u32);
        assert_ne!(g.ts_offset(&a, &b), isn.0.wrapping_sub(1_250_000));
        assert_eq!(format!("{g:?}"), "IsnGenerator { .. }");
    }

    #[test]
    fn syn_cookies_carry_the_mss_and_expire() {
        let a = Endpoint::new(Ipv4Addr::new(198, 18, 0, 2).into(), 80);
        let b = Endpoint::new(Ipv4Addr::new(198, 18, 0, 1).into(), 40000);
        let g = IsnGenerator::new([9; 16]);
        let t = Time::from_secs(1000);
        let c = g.cookie(t, &a, &b, 12345, 5);
        assert_eq!(g.check_cookie(t, &a, &b, 12345, c), Some(5));
        assert_eq!(g.check_cookie(t + std::time::Duration::from_secs(70), &a, &b, 12345, c), Some(5));
        assert_eq!(g.check_cookie(t + std::time::Duration::from_secs(140), &a, &b, 12345, c), None, "expired");
        assert_eq!(g.check_cookie(t, &a, &b, 12346, c), None, "another peer ISN");
        assert_eq!(g.check_cookie(t, &b, &a, 12345, c), None, "another tuple");
        assert_eq!(g.check_cookie(t, &a, &b, 12345, c ^ 1), None, "a forged hash");
        assert_eq!(g.check_cookie(t, &a, &b, 12345, c ^ (1 << 24)), None, "a changed MSS index");
        assert_eq!(IsnGenerator::new([10; 16]).check_cookie(t, &a, &b, 12345, c), None, "another secret");
    }
}
