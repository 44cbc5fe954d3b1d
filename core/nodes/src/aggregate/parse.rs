//! Reading what receive aggregation needs from a TCP segment's headers: the flow
//! key, the fields that must match for a merge, and the payload's checksum sum.

use ironpath_eal::abi;
use ironpath_wire::checksum;
use ironpath_wire::ethernet::{l3_offset, EtherType};
use ironpath_wire::IpProtocol;
use std::net::Ipv6Addr;

/// Longest L2 header kept in a flow key (Ethernet + two VLAN tags).
pub const MAX_L2: usize = 22;
/// Bytes of a flow key (eight words).
pub const KEY_LEN: usize = 64;

/// TCP flags that forbid a merge.
pub const NO_MERGE: u8 = 0x02 | 0x04 | 0x20 | 0x40 | 0x80; // SYN RST URG ECE CWR
/// TCP flags that end a merge after the segment carrying them.
pub const END_MERGE: u8 = 0x01 | 0x08; // FIN PSH

/// A flow key: everything that names a TCP connection in one direction on one link,
/// as little-endian words read straight from the frame (no byte buffer to read
/// back, which would stall on store forwarding): words 0-2 the L2 header (up to
/// [`MAX_L2`] bytes, zero after it) with its length in the top byte of word 2,
/// words 3-6 the addresses (IPv4: word 3, the rest zero), word 7 the ports.
#[derive(Clone, Copy, Default)]
pub struct Key(pub [u64; KEY_LEN / 8]);

impl PartialEq for Key {
    /// Word by word without early exit: a few vector instructions, no `memcmp` call.
    /// (Written out: in the aggregator's large inlined loop, iterator adapters
    /// were left as calls.)
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (&self.0, &other.0);
        ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]))
            | ((a[4] ^ b[4]) | (a[5] ^ b[5]) | (a[6] ^ b[6]) | (a[7] ^ b[7]))
            == 0
    }
}

/// The little-endian word at byte `o` of `d`.
#[inline(always)]
fn le64(d: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&d[o..o + 8]);
    u64::from_le_bytes(w)
}

/// The low `n` bytes of a little-endian word (`n` <= 8).
#[inline(always)]
fn low_bytes(w: u64, n: usize) -> u64 {
    if n >= 8 {
        w
    } else {
        w & ((1u64 << (8 * n)) - 1)
    }
}

impl Eq for Key {}

/// Why a segment cannot be aggregated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Skip {
    /// Not TCP over IPv4/IPv6 without extension headers, or a fragment.
    NotTcp,
    /// Truncated or inconsistent headers.
    Malformed,
    /// A checksum is wrong.
    BadChecksum,
}

/// One TCP segment's aggregation view.
#[derive(Clone, Copy, Default)]
pub struct Seg {
    /// Flow key.
    pub key: Key,
    /// Hash of the key.
    pub hash: u32,
    /// L2 header length (Ethernet and VLAN tags).
    pub l2: u16,
    /// IP header length.
    pub l3: u16,
    /// TCP header length.
    pub l4: u16,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Sequence number.
    pub seq: u32,
    /// Acknowledgment number.
    pub ack: u32,
    /// TCP flags byte.
    pub flags: u8,
    /// Window field.
    pub window: u16,
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    /// Bytes that must be equal for a merge besides ACK and window: IPv4 TOS, TTL
    /// and flags (DF, reserved); IPv6 traffic class, flow label and hop limit; the
    /// TCP reserved bits and urgent pointer.
    pub ip_same: u64,
    /// TCP option bytes as little-endian words (compared as a whole), zero after
    /// `opt_len`.
    pub opts: [u64; 5],
    /// Length of the options.
    pub opt_len: u8,
    /// Payload bytes.
    pub payload: u16,
    /// Ones-complement sum of the payload (16-bit, folded).
    pub psum: u16,
    /// The TCP checksum field is the segment's full checksum (verified by the port
    /// or here), so an aggregate's can be derived from it by correction. False when
    /// the field holds only the pseudo-header sum (`RX_L4_CKSUM_NONE`).
    pub csum_ok: bool,
}

/// What a held run keeps of its first segment: header lengths, IP version, payload
/// length (the run's MSS), IPv4 ID, and whether its TCP checksum field is whole
/// (the aggregate's is then corrected from it at flush). A fraction of a [`Seg`],
/// cheap to move.
#[derive(Clone, Copy, Default)]
pub struct Hdr {
    /// L2 header length (Ethernet and VLAN tags).
    pub l2: u16,
    /// IP header length.
    pub l3: u16,
    /// TCP header length.
    pub l4: u16,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// Payload bytes.
    pub payload: u16,
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    /// The first segment's TCP checksum field is a full checksum ([`Seg::csum_ok`]).
    pub csum_ok: bool,
}

impl Seg {
    /// The part of the view a held run keeps.
    #[inline(always)]
    pub fn hdr(&self) -> Hdr {
        Hdr {
            l2: self.l2,
            l3: self.l3,
            l4: self.l4,
            v6: self.v6,
            payload: self.payload,
            ip_id: self.ip_id,
            csum_ok: self.csum_ok,
        }
    }
}

#[inline(always)]
fn be16(d: &[u8], o: usize) -> u16 {
    u16::from_be_bytes([d[o], d[o + 1]])
}

/// The TCP pseudo-header sum of IPv4 header `ip` for `tcp_len` bytes
/// ([`checksum::pseudo_header_v4`], from the header's bytes).
#[inline(always)]
fn pseudo_v4(ip: &[u8], tcp_len: u16) -> u32 {
    [12, 14, 16, 18].iter().map(|&o| u32::from(be16(ip, o))).sum::<u32>()
        + u32::from(IpProtocol::TCP.0)
        + u32::from(tcp_len)
}

/// The TCP pseudo-header sum of IPv6 header `ip` for `tcp_len` bytes.
#[inline]
fn pseudo_v6(ip: &[u8], tcp_len: u32) -> u32 {
    let addr = |o: usize| Ipv6Addr::from(<[u8; 16]>::try_from(&ip[o..o + 16]).unwrap_or_default());
    checksum::pseudo_header_v6(&addr(8), &addr(24), IpProtocol::TCP, tcp_len)
}

#[inline(always)]
fn be32(d: &[u8], o: usize) -> u32 {
    u32::from_be_bytes([d[o], d[o + 1], d[o + 2], d[o + 3]])
}

/// The key's address and port words (3..8) rotated apart and folded with XOR
/// (independent operations), then one multiply to mix: cheap, and good enough to
/// tell flows apart before the full comparison (a collision costs only that
/// comparison). The L2 words are left out: flows that differ only there are rare.
#[inline(always)]
fn hash(k: &[u64; KEY_LEN / 8]) -> u32 {
    let x = (k[3] ^ k[4].rotate_left(13) ^ k[5].rotate_left(26)) ^ (k[6].rotate_left(39) ^ k[7].rotate_left(52));
    let h = (x ^ (x >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (h >> 32) as u32
}

/// The ones-complement sum of a header whose length is a multiple of 4 (IPv4's,
/// TCP's), folded as [`checksum::sum`] folds it. Eight bytes per load, taken
/// little-endian: the sum of byte-swapped words is the byte-swapped sum (RFC 1071
/// 2(B)), swapped back once at the end; the 32-bit halves are added as integers
/// (`2^16 = 1 mod 0xffff`), then reduced (a positive sum stays positive).
#[inline(always)]
fn header_sum(h: &[u8]) -> u32 {
    let mut t: u64 = 0;
    let mut rest = h;
    while let Some((w, tail)) = rest.split_first_chunk::<8>() {
        let w = u64::from_le_bytes(*w);
        t += (w & 0xffff_ffff) + (w >> 32);
        rest = tail;
    }
    if let Some((w, _)) = rest.split_first_chunk::<4>() {
        t += u64::from(u32::from_le_bytes(*w));
    }
    fold_le(t)
}

/// Read segment `frame` (the first segment's data; `pkt_len` the whole packet's
/// length, which must equal it: chained input is not aggregated, nor is an
/// aggregate already, `RX_AGGREGATED`, such as a GSO frame the kernel handed over
/// whole: its segment size is its own). `ol_flags` tells which checksums the port
/// already checked.
pub fn parse(frame: &[u8], pkt_len: usize, ol_flags: u64) -> Result<Seg, Skip> {
    let mut s = Seg::default();
    parse_into(frame, pkt_len, ol_flags, &mut s).map(|()| s)
}

/// [`parse`] into `out` (left as it was on error). The aggregator reads the
/// usual segment with [`parse_fast_pkt`] first and comes here for the others.
#[inline(never)]
pub fn parse_into(frame: &[u8], pkt_len: usize, ol_flags: u64, out: &mut Seg) -> Result<(), Skip> {
    if frame.len() != pkt_len || ol_flags & abi::RX_AGGREGATED != 0 {
        return Err(Skip::NotTcp);
    }
    parse_general(frame, ol_flags, out)
}

/// The little-endian word at constant byte `o` of a fixed-size header (no bounds
/// check once inlined). One 8-byte load: built from single bytes, the word was
/// taken apart again wherever a mask cleared some of them (one load per kept
/// field).
#[inline(always)]
fn le64_at<const N: usize>(h: &[u8; N], o: usize) -> u64 {
    let w: [u8; 8] = h[o..o + 8].try_into().unwrap_or_default();
    u64::from_le_bytes(w)
}

/// A word's two 32-bit halves added (for [`header_sum`]-style sums).
#[inline(always)]
fn halves(w: u64) -> u64 {
    (w & 0xffff_ffff) + (w >> 32)
}

/// A multiple of 0xffff (so 0 in ones-complement arithmetic) larger than any
/// header sum `t` of [`parse_fast_pkt`] (at most five sums of two 32-bit halves
/// and a 16-bit length: < 2^35.4): `NEG_BASE - t` (< 2^36) is `-t` as a positive
/// sum.
const NEG_BASE: u64 = 0xffff << 20;

/// A segment's payload sum `sum` ([`Pkt::sum`], < 2^36) as it adds to the sum
/// of a stream in which it starts at an odd offset (`odd` 1) or an even one (0):
/// its bytes swapped, which is a product by 2^8 modulo 0xffff. Below 2^44, so
/// a run adds up to 2^16 of them (at most one a payload byte) without overflow.
#[inline(always)]
pub fn at_offset(sum: u64, odd: u32) -> u64 {
    sum << (odd * 8)
}

/// [`at_offset`] for a sum of any size below 2^63 (a run's, folded to 33 bits
/// first).
#[inline(always)]
pub fn sum_at_offset(sum: u64, odd: u32) -> u64 {
    at_offset(halves(sum), odd)
}

/// Reduce a sum of little-endian words to the folded big-endian sum (see
/// [`header_sum`]).
#[inline(always)]
fn fold_le(mut t: u64) -> u32 {
    t = (t & 0xffff_ffff) + (t >> 32);
    t = (t & 0xffff) + (t >> 16);
    t = (t & 0xffff) + (t >> 16);
    t = (t & 0xffff) + (t >> 16);
    u32::from((t as u16).swap_bytes())
}

/// Which path read a segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Kind {
    /// The usual layout ([`parse_fast_pkt`]): only the [`Pkt`] was written; its
    /// flow key and template are the frame's [`tpl_words`].
    #[default]
    Fast,
    /// Any other TCP segment: the full [`Seg`] was written too.
    Slow,
}

/// What the aggregator needs of a segment to place it in a run of its flow
/// (small: it lives in registers while the segment is placed).
#[derive(Clone, Copy, Default)]
pub struct Pkt {
    /// Hash of the flow key ([`Seg::hash`]).
    pub hash: u32,
    /// Sequence number.
    pub seq: u32,
    /// IPv4 identification (0 for IPv6).
    pub ip_id: u16,
    /// Payload bytes.
    pub payload: u16,
    /// The payload's sum as a positive sum of little-endian words below 2^36, not
    /// folded ([`Pkt::psum`] folds it): a run adds its segments' with one
    /// addition each ([`at_offset`]).
    pub sum: u64,
    /// TCP flags byte.
    pub flags: u8,
    /// L2 header length (<= [`MAX_L2`]).
    pub l2: u8,
    /// IP header length (<= 60).
    pub l3: u8,
    /// TCP header length (<= 60).
    pub l4: u8,
    /// IPv6 (else IPv4).
    pub v6: bool,
    /// The TCP checksum field is a full checksum ([`Seg::csum_ok`]).
    pub csum_ok: bool,
    /// Which path read it.
    pub kind: Kind,
}

impl Pkt {
    /// The part of the view a held run keeps.
    #[inline(always)]
    pub fn hdr(&self) -> Hdr {
        Hdr {
            l2: u16::from(self.l2),
            l3: u16::from(self.l3),
            l4: u16::from(self.l4),
            v6: self.v6,
            payload: self.payload,
            ip_id: self.ip_id,
            csum_ok: self.csum_ok,
        }
    }

    /// Ones-complement sum of the payload (16-bit, folded).
    #[inline(always)]
    pub fn psum(&self) -> u16 {
        fold_le(self.sum) as u16
    }

    /// The fields of a full view (its header lengths fit: L2 <= [`MAX_L2`], IP
    /// and TCP headers <= 60 bytes).
    pub fn of(s: &Seg, kind: Kind) -> Self {
        Pkt {
            hash: s.hash,
            seq: s.seq,
            ip_id: s.ip_id,
            payload: s.payload,
            sum: u64::from(s.psum.swap_bytes()),
            flags: s.flags,
            l2: s.l2 as u8,
            l3: s.l3 as u8,
            l4: s.l4 as u8,
            v6: s.v6,
            csum_ok: s.csum_ok,
            kind,
        }
    }
}

/// Words of [`tpl_words`].
pub const TPL_WORDS: usize = 9;

/// Which bytes of the usual layout's first 66 (as little-endian words at bytes
/// 0, 8, ..., 56 and 58) name the flow and must match for a merge: all but the
/// IPv4 total length, ID and checksum, the sequence number, the TCP checksum and
/// the PSH and FIN flags (bytes 64-65 only with TCP options; without, bytes 54 on
/// are payload). The IPv4 flags' reserved bit, the TCP header's reserved bits and
/// the urgent pointer must match too, as in the general comparison.
const TPL_MASK_OPTS: [u64; TPL_WORDS] = [
    !0,
    !0,
    0xffff_ffff_0000_0000,
    0xffff_ffff_ffff_0000,
    0x0000_ffff_ffff_ffff,
    0xf6ff_ffff_ffff_0000,
    0xffff_ffff_0000_ffff,
    !0,
    0xffff_0000_0000_0000,
];
/// [`TPL_MASK_OPTS`] without TCP options: bytes 54 on are payload.
const TPL_MASK_BARE: [u64; TPL_WORDS] = {
    let mut m = TPL_MASK_OPTS;
    m[6] = 0x0000_ffff_0000_ffff;
    m[7] = 0;
    m[8] = 0;
    m
};
/// The flow key's bytes among the first five template words: MAC addresses,
/// IPv4 addresses, ports.
const KEY_MASK: [u64; 5] = [!0, 0xffff_ffff, 0, 0xffff_ffff_ffff_0000, 0x0000_ffff_ffff_ffff];

/// A frame of the usual layout: untagged Ethernet, IPv4 without options, not a
/// fragment, TCP with no options or 12 option bytes, lengths consistent with the
/// frame. Its first 54 bytes, TCP header length and IPv4 total length.
#[inline(always)]
fn fast_layout(frame: &[u8]) -> Option<(&[u8; 54], usize, usize)> {
    let h: &[u8; 54] = frame.first_chunk()?;
    let w = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
    if w & 0x00ff_ffff != 0x0045_0008 || h[23] != IpProtocol::TCP.0 {
        return None;
    }
    let frag = be16(h, 20);
    let total = usize::from(be16(h, 16));
    let l4 = usize::from(h[46] >> 4) * 4;
    if frag & 0x3fff != 0 || (l4 != 20 && l4 != 32) || total < 20 + l4 || total > frame.len() - 14 {
        return None;
    }
    Some((h, l4, total))
}

/// The flow key of a frame of the usual layout, as [`parse_general`] builds it.
#[inline(always)]
fn fast_key(h: &[u8; 54]) -> [u64; KEY_LEN / 8] {
    [le64_at(h, 0), le64_at(h, 8) & 0xffff_ffff_ffff, 14 << 56, le64_at(h, 26), 0, 0, 0, le64_at(h, 34) & 0xffff_ffff]
}

/// The flow hash of a frame of the usual layout ([`Seg::hash`]); 0 for a frame
/// too short for it.
#[inline(always)]
pub fn fast_hash(frame: &[u8]) -> u32 {
    frame.first_chunk::<54>().map_or(0, |h| hash(&fast_key(h)))
}

/// Whether a frame of the usual layout may be of the flow whose template words
/// are `t` ([`tpl_words`]): its destination address's last two bytes and its
/// ports are. One word compared, to try a likely flow before [`tpl_matches`]
/// confirms it.
#[inline(always)]
pub fn tpl_may_match(t: &[u64; TPL_WORDS], frame: &[u8]) -> bool {
    frame.first_chunk::<54>().is_some_and(|h| (le64_at(h, 32) & TPL_MASK_BARE[4]) == t[4])
}

/// Read a segment of the usual layout (`fast_layout`) whose IPv4 and TCP
/// checksums the port verified into `p`: everything but the key and template,
/// which stay in the frame ([`tpl_words`]), and the hash ([`fast_hash`]).
/// False (nothing written) for any other packet.
#[inline(always)]
pub fn parse_fast_pkt(frame: &[u8], ol_flags: u64, p: &mut Pkt) -> bool {
    const GOOD: u64 = abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD;
    // (An aggregate already, `RX_AGGREGATED`: the general path passes it on.)
    if ol_flags & (GOOD | abi::RX_AGGREGATED) != GOOD {
        return false;
    }
    let Some((h, l4, total)) = fast_layout(frame) else { return false };
    let tcp_len = total - 20;
    // One sum of little-endian words (see `header_sum`): the pseudo header (the
    // addresses, bytes 26..34; protocol and TCP length) and the TCP header. The
    // payload's sum is what makes the verified checksum come out right.
    let mut t = halves(le64_at(h, 26)) + u64::from(((usize::from(IpProtocol::TCP.0) + tcp_len) as u16).swap_bytes());
    if l4 == 32 {
        let Some(x) = frame.first_chunk::<66>() else { return false }; // (total >= 52)
        t += halves(le64_at(x, 34)) + halves(le64_at(x, 42)) + halves(le64_at(x, 50)) + halves(le64_at(x, 58));
    } else {
        t += halves(le64_at(h, 34)) + halves(le64_at(h, 42)) + (le64_at(h, 46) >> 32);
    }
    *p = Pkt {
        hash: 0, // (`fast_hash`, when the flow is looked up by it)
        seq: be32(h, 38),
        ip_id: be16(h, 18),
        payload: (tcp_len - l4) as u16,
        // header + pseudo + payload folds to 0xffff: payload = -(header + pseudo),
        // kept positive by a multiple of 0xffff above any `t`.
        sum: NEG_BASE - t,
        flags: h[47],
        l2: 14,
        l3: 20,
        l4: l4 as u8,
        v6: false,
        csum_ok: true,
        kind: Kind::Fast,
    };
    true
}

/// The flow key and template of a frame of the usual layout with a TCP header of
/// `l4` bytes, as masked words (`TPL_MASK_OPTS`): two such frames are of the
/// same flow and may merge (sequence and ID permitting) exactly when their words
/// are equal. `None` if the frame is shorter than that layout needs.
#[inline(always)]
pub fn tpl_words(frame: &[u8], l4: u8) -> Option<[u64; TPL_WORDS]> {
    let h: &[u8; 54] = frame.first_chunk()?;
    let mut w = [
        le64_at(h, 0),
        le64_at(h, 8),
        le64_at(h, 16) & TPL_MASK_BARE[2],
        le64_at(h, 24) & TPL_MASK_BARE[3],
        le64_at(h, 32) & TPL_MASK_BARE[4],
        le64_at(h, 40) & TPL_MASK_BARE[5],
        0,
        0,
        0,
    ];
    if l4 == 32 {
        let x: &[u8; 66] = frame.first_chunk()?;
        w[6] = le64_at(x, 48) & TPL_MASK_OPTS[6];
        w[7] = le64_at(x, 56);
        w[8] = le64_at(x, 58) & TPL_MASK_OPTS[8];
    } else {
        // Bytes 48..54 (the frame may end there).
        w[6] = (le64_at(h, 46) >> 16) & TPL_MASK_BARE[6];
    }
    Some(w)
}

/// Whether a frame of the usual layout with a TCP header of `l4` bytes has the
/// template words `t` ([`tpl_words`] compared in place: nothing stored).
#[inline(always)]
pub fn tpl_matches(t: &[u64; TPL_WORDS], frame: &[u8], l4: u8) -> bool {
    let Some(h) = frame.first_chunk::<54>() else { return false };
    let d = (le64_at(h, 0) ^ t[0])
        | (le64_at(h, 8) ^ t[1])
        | ((le64_at(h, 16) & TPL_MASK_BARE[2]) ^ t[2])
        | ((le64_at(h, 24) & TPL_MASK_BARE[3]) ^ t[3])
        | ((le64_at(h, 32) & TPL_MASK_BARE[4]) ^ t[4])
        | ((le64_at(h, 40) & TPL_MASK_BARE[5]) ^ t[5]);
    let e = if l4 == 32 {
        let Some(x) = frame.first_chunk::<66>() else { return false };
        ((le64_at(x, 48) & TPL_MASK_OPTS[6]) ^ t[6])
            | (le64_at(x, 56) ^ t[7])
            | ((le64_at(x, 58) & TPL_MASK_OPTS[8]) ^ t[8])
    } else {
        (((le64_at(h, 46) >> 16) & TPL_MASK_BARE[6]) ^ t[6]) | t[7] | t[8]
    };
    d | e == 0
}

/// [`tpl_words`] of any frame: `None` unless it has the usual layout.
pub fn fast_words(frame: &[u8]) -> Option<[u64; TPL_WORDS]> {
    let (_, l4, _) = fast_layout(frame)?;
    tpl_words(frame, l4 as u8)
}

/// The flow key of a frame of the usual layout from its [`tpl_words`] (as
/// the general parse builds it).
#[inline(always)]
pub fn key_of_words(w: &[u64; TPL_WORDS]) -> Key {
    // Bytes 26..34 (the addresses) straddle words 3 and 4; 34..38 are the ports.
    Key([w[0], w[1] & 0xffff_ffff_ffff, 14 << 56, (w[3] >> 16) | (w[4] << 48), 0, 0, 0, (w[4] >> 16) & 0xffff_ffff])
}

/// Whether two template words are equal (same flow, mergeable template).
#[inline(always)]
pub fn same_tpl(a: &[u64; TPL_WORDS], b: &[u64; TPL_WORDS]) -> bool {
    ((a[0] ^ b[0]) | (a[1] ^ b[1]) | (a[2] ^ b[2]) | (a[3] ^ b[3]) | (a[4] ^ b[4]))
        | ((a[5] ^ b[5]) | (a[6] ^ b[6]) | (a[7] ^ b[7]) | (a[8] ^ b[8]))
        == 0
}

/// Whether two template words name the same flow (whatever the rest).
#[inline(always)]
pub fn same_key_words(a: &[u64; TPL_WORDS], b: &[u64; TPL_WORDS]) -> bool {
    ((a[0] ^ b[0]) & KEY_MASK[0])
        | ((a[1] ^ b[1]) & KEY_MASK[1])
        | ((a[3] ^ b[3]) & KEY_MASK[3])
        | ((a[4] ^ b[4]) & KEY_MASK[4])
        == 0
}

/// [`parse_into`] for any frame (VLAN tags, IPv6, IP or TCP options, checksums
/// to verify).
fn parse_general(frame: &[u8], ol_flags: u64, out: &mut Seg) -> Result<(), Skip> {
    // Untagged Ethernet first (no VLAN walk).
    let (et, l2) = match frame.get(12..14) {
        Some(&[0x08, 0x00]) => (EtherType::IPV4, 14),
        Some(&[0x86, 0xdd]) => (EtherType::IPV6, 14),
        _ => l3_offset(frame).map_err(|_| Skip::Malformed)?,
    };
    if l2 > MAX_L2 {
        return Err(Skip::NotTcp);
    }
    let ip = &frame[l2..];
    let mut key = [0u64; KEY_LEN / 8];
    let (v6, l3, ip_total, ip_id, ip_same, pseudo) = match et {
        EtherType::IPV4 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return Err(Skip::Malformed);
            }
            let hl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(be16(ip, 2));
            if hl < 20 || total < hl || total > ip.len() {
                return Err(Skip::Malformed);
            }
            let frag = be16(ip, 6);
            if frag & 0x3fff != 0 || ip[9] != IpProtocol::TCP.0 {
                return Err(Skip::NotTcp); // a fragment (MF or offset) or not TCP
            }
            if ol_flags & abi::RX_IP_CKSUM_GOOD == 0 && header_sum(&ip[..hl]) != 0xffff {
                return Err(Skip::BadChecksum);
            }
            key[3] = le64(ip, 12);
            // TOS, TTL, DF and the reserved flag.
            let same = u64::from(ip[1]) << 24 | u64::from(ip[8]) << 16 | u64::from(frag & 0xc000);
            (false, hl, total, be16(ip, 4), same, pseudo_v4(ip, (total - hl) as u16))
        }
        EtherType::IPV6 => {
            if ip.len() < 40 || ip[0] >> 4 != 6 {
                return Err(Skip::Malformed);
            }
            let total = 40 + usize::from(be16(ip, 4));
            if total > ip.len() {
                return Err(Skip::Malformed);
            }
            if ip[6] != IpProtocol::TCP.0 {
                return Err(Skip::NotTcp); // extension headers are not aggregated
            }
            (key[3], key[4], key[5], key[6]) = (le64(ip, 8), le64(ip, 16), le64(ip, 24), le64(ip, 32));
            // Traffic class + flow label (first word minus version), hop limit.
            let same = u64::from(be32(ip, 0) & 0x0fff_ffff) << 8 | u64::from(ip[7]);
            (true, 40, total, 0, same, pseudo_v6(ip, (total - 40) as u32))
        }
        _ => return Err(Skip::NotTcp),
    };
    let tcp = &ip[l3..ip_total];
    if tcp.len() < 20 {
        return Err(Skip::Malformed);
    }
    let l4 = usize::from(tcp[12] >> 4) * 4;
    if l4 < 20 || l4 > tcp.len() {
        return Err(Skip::Malformed);
    }
    // The TCP reserved bits (AE among them) and the urgent pointer must match too
    // (the fast path's template words compare them): above the IP fields.
    let ip_same = ip_same | u64::from(tcp[12] & 0x0f) << 36 | u64::from(be16(tcp, 18)) << 40;
    // The L2 header (14 + 20 or more bytes are there: 24 can be read).
    key[0] = le64(frame, 0);
    key[1] = low_bytes(le64(frame, 8), l2 - 8);
    key[2] = if l2 > 16 { low_bytes(le64(frame, 16), l2 - 16) } else { 0 } | (l2 as u64) << 56;
    key[7] = u64::from(u32::from_le_bytes([tcp[0], tcp[1], tcp[2], tcp[3]]));
    let payload = &tcp[l4..];
    // The payload's sum: derived from a checksum the port verified (header-only
    // work), else computed, which also verifies it when the field is complete.
    let psum = if ol_flags & abi::RX_L4_CKSUM_GOOD != 0 {
        let hdr = header_sum(&tcp[..l4]);
        // header + pseudo + payload folds to 0xffff: payload = ~(header + pseudo).
        !checksum::fold(hdr + pseudo)
    } else {
        let p = checksum::fold(checksum::sum(payload));
        if ol_flags & abi::RX_L4_CKSUM_NONE == 0 {
            // A complete checksum we have to check ourselves.
            let all = header_sum(&tcp[..l4]) + pseudo + u32::from(p);
            if checksum::fold(all) != 0xffff {
                return Err(Skip::BadChecksum);
            }
        }
        // RX_L4_CKSUM_NONE: the field holds only the pseudo-header sum (a kernel
        // peer on veth): the data is the sender's own, nothing to check.
        p
    };
    if !v6 && l3 != 20 {
        // IPv4 options are not merged (nor by Linux's GRO): a cut aggregate would
        // carry the first segment's on every segment. (Checked and counted as any
        // segment is, before.)
        return Err(Skip::NotTcp);
    }
    // Options as words (their length is a multiple of 4).
    let o = &tcp[20..l4];
    let mut opts = [0u64; 5];
    let mut k = 0;
    while 8 * k + 8 <= o.len() {
        opts[k] = le64(o, 8 * k);
        k += 1;
    }
    if let Some((w, _)) = o[8 * k..].split_first_chunk::<4>() {
        opts[k] = u64::from(u32::from_le_bytes(*w));
    }
    *out = Seg {
        hash: hash(&key),
        key: Key(key),
        l2: l2 as u16,
        l3: l3 as u16,
        l4: l4 as u16,
        v6,
        seq: be32(tcp, 4),
        ack: be32(tcp, 8),
        flags: tcp[13],
        window: be16(tcp, 14),
        ip_id,
        ip_same,
        opts,
        opt_len: (l4 - 20) as u8,
        payload: payload.len() as u16,
        psum,
        // A field the port called good is taken as whole (as `psum` above takes it).
        csum_ok: ol_flags & abi::RX_L4_CKSUM_GOOD != 0 || ol_flags & abi::RX_L4_CKSUM_NONE == 0,
    };
    Ok(())
}

/// Rewrite the headers of an aggregate whose first segment is `frame`: lengths,
/// IPv4 header checksum, PSH/FIN of the last segment, and the TCP checksum from
/// the payload sums (as [`Pkt::sum`] holds them: positive sums of little-endian
/// words below 2^63) of the first segment (`head`) and of the others at their
/// offsets in the aggregate's payload (`rest`; `tcp_payload` bytes in all).
///
/// The checksums are corrected, not summed again (RFC 1624, eqn. 3: the new field
/// is the complement of the old field's complement plus, for every word that
/// changes, the old word's complement and the new word): the IPv4 header's for the
/// total length; the TCP checksum, when the first segment's was whole
/// ([`Hdr::csum_ok`]), for the TCP length in the pseudo header, the flags word and
/// the payload (the other segments' sums in). Otherwise the TCP header and pseudo
/// header are summed as they are, with every segment's payload sum. Every sum here is positive, so
/// it folds to the same value as a sum from scratch.
/// Headers shorter than IPv4's, IPv6's or TCP's least (never from the parser) or
/// beyond the frame are left alone.
pub fn finish_headers(frame: &mut [u8], s: &Hdr, tcp_payload: u32, last_flags: u8, head: u64, rest: u64) {
    let (l2, l3, l4) = (usize::from(s.l2), usize::from(s.l3), usize::from(s.l4));
    if l3 < if s.v6 { 40 } else { 20 } || l4 < 20 {
        return;
    }
    let Some(hdrs) = frame.get_mut(l2..l2 + l3 + l4) else { return };
    let (ip, tcp) = hdrs.split_at_mut(l3);
    let tcp_len = l4 as u32 + tcp_payload;
    let old_len = l4 as u32 + u32::from(s.payload);
    let pseudo = if s.v6 {
        ip[4..6].copy_from_slice(&(tcp_len as u16).to_be_bytes());
        if s.csum_ok {
            0
        } else {
            pseudo_v6(ip, tcp_len)
        }
    } else {
        let total = (l3 as u32 + tcp_len) as u16;
        // The total length replaced (the header's checksum was verified or
        // trusted when the segment was read).
        let sum = u32::from(!be16(ip, 10)) + u32::from(!be16(ip, 2)) + u32::from(total);
        let pseudo = if s.csum_ok { 0 } else { pseudo_v4(ip, tcp_len as u16) };
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[10..12].copy_from_slice(&(!checksum::fold(sum)).to_be_bytes());
        pseudo
    };
    // The last segment's PSH/FIN in the flags byte (13).
    let old = be16(tcp, 12);
    let new = old | u16::from(last_flags & END_MERGE);
    let flags = u32::from(!old) + u32::from(new);
    let sum = if s.csum_ok {
        // From the first segment's checksum (which holds its payload): its TCP
        // length out, the aggregate's and the other segments' payload in.
        u32::from(!be16(tcp, 16)) + u32::from(!(old_len as u16)) + tcp_len + flags + fold_le(rest)
    } else {
        // The checksum field counted as zero.
        header_sum(tcp) + flags + u32::from(!be16(tcp, 16)) + pseudo + fold_le(halves(head) + halves(rest))
    };
    tcp[13] = new as u8;
    tcp[16..18].copy_from_slice(&(!checksum::fold(sum)).to_be_bytes());
}

/// Turn a finished aggregate's TCP checksum (complete, [`finish_headers`]) into the
/// form TSO takes: the pseudo-header sum over its whole TCP length, for the port (or
/// the kernel's GSO) to complete per segment. Its lengths are read from the IP
/// header `finish_headers` wrote.
pub fn tso_headers(frame: &mut [u8], s: &Hdr) {
    let (l2, l3, l4) = (usize::from(s.l2), usize::from(s.l3), usize::from(s.l4));
    if l3 < if s.v6 { 40 } else { 20 } || l4 < 20 {
        return;
    }
    let Some(hdrs) = frame.get_mut(l2..l2 + l3 + l4) else { return };
    let (ip, tcp) = hdrs.split_at_mut(l3);
    let pseudo = if s.v6 {
        // The payload length counts the extension headers too.
        pseudo_v6(ip, (u32::from(be16(ip, 4)) + 40).saturating_sub(l3 as u32))
    } else {
        pseudo_v4(ip, be16(ip, 2).saturating_sub(l3 as u16))
    };
    tcp[16..18].copy_from_slice(&checksum::fold(pseudo).to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;
    use ironpath_wire::ipv4::Ipv4Packet;
    use ironpath_wire::tcp::TcpPacket;
    use ironpath_wire::IpAddress;
    use std::net::Ipv4Addr;

    /// Ethernet (+ `vlan` tag) + IPv4 (`ip_opts` option bytes) + TCP (`tcp_opts`
    /// option bytes) + `payload` bytes + `pad` trailing bytes, checksums valid.
    fn frame(vlan: bool, ip_opts: usize, tcp_opts: usize, payload: usize, pad: usize, flags: u8) -> Vec<u8> {
        let l2 = if vlan { 18 } else { 14 };
        let (l3, l4) = (20 + ip_opts, 20 + tcp_opts);
        let mut d = vec![0u8; l2 + l3 + l4 + payload + pad];
        d[0..12].copy_from_slice(&[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 1, 7]);
        if vlan {
            d[12..16].copy_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
        }
        d[l2 - 2..l2].copy_from_slice(&[0x08, 0x00]);
        let (src, dst) = (Ipv4Addr::new(198, 18, 3, 4), Ipv4Addr::new(198, 18, 0, 2));
        let ip = &mut d[l2..l2 + l3];
        ip[0] = 0x40 | (l3 / 4) as u8;
        ip[1] = 0x10;
        ip[2..4].copy_from_slice(&((l3 + l4 + payload) as u16).to_be_bytes());
        ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
        ip[6] = 0x40;
        ip[8] = 61;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&src.octets());
        ip[16..20].copy_from_slice(&dst.octets());
        ip[20..].fill(1); // NOP options
        Ipv4Packet::new_unchecked(&mut d[l2..l2 + l3]).fill_checksum();
        let t = l2 + l3;
        let tcp = &mut d[t..t + l4 + payload];
        tcp[0..4].copy_from_slice(&[0x9c, 0x41, 0x14, 0x51]);
        tcp[4..8].copy_from_slice(&0xfedc_ba98u32.to_be_bytes());
        tcp[8..12].copy_from_slice(&0x0102_0304u32.to_be_bytes());
        tcp[12] = ((l4 / 4) as u8) << 4;
        tcp[13] = flags;
        tcp[14..16].copy_from_slice(&501u16.to_be_bytes());
        for (i, b) in tcp[20..].iter_mut().enumerate() {
            *b = (i as u8).wrapping_mul(37).wrapping_add(5);
        }
        TcpPacket::new_unchecked(&mut d[t..t + l4 + payload]).fill_checksum(&IpAddress::V4(src), &IpAddress::V4(dst));
        d
    }

    const GOOD: u64 = abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD;

    type PktView = ((u32, u32), (u16, u16, u16), u8, (u8, u8, u8, bool, bool));

    fn pkt_view(p: &Pkt) -> PktView {
        // (0 and 0xffff are the same ones-complement sum.)
        ((p.hash, p.seq), (p.ip_id, p.payload, p.psum() % 0xffff), p.flags, (p.l2, p.l3, p.l4, p.v6, p.csum_ok))
    }

    /// The fast reading gives exactly the general path's view (hash, lengths,
    /// sequence number, ID, payload and its sum) wherever it applies, and applies
    /// to the usual segments; the key rebuilt from its template words is the
    /// general path's key.
    #[test]
    fn fast_path_matches_the_general_one() {
        let mut fast_taken = 0;
        for vlan in [false, true] {
            for ip_opts in [0, 4] {
                for tcp_opts in [0, 4, 12, 20, 40] {
                    for payload in [0, 1, 7, 536, 1448] {
                        for pad in [0, 6] {
                            for flags in [0x10, 0x18, 0x11, 0x12] {
                                let f = frame(vlan, ip_opts, tcp_opts, payload, pad, flags);
                                // Also cut short or with a wrong total length.
                                let mut cut = f.clone();
                                cut.truncate(f.len().saturating_sub(pad + 3).max(40));
                                let mut long = f.clone();
                                long[14 + usize::from(vlan) * 4 + 3] ^= 0x40;
                                for d in [&f, &cut, &long] {
                                    for ol in [
                                        0,
                                        GOOD,
                                        abi::RX_IP_CKSUM_GOOD,
                                        abi::RX_L4_CKSUM_GOOD,
                                        GOOD | abi::RX_L4_CKSUM_NONE,
                                    ] {
                                        let mut a = Pkt::default();
                                        let mut b = Seg::default();
                                        let rb = parse_general(d, ol, &mut b);
                                        if parse_fast_pkt(d, ol, &mut a) {
                                            fast_taken += 1;
                                            a.hash = fast_hash(d);
                                            assert_eq!(rb, Ok(()), "fast path took a frame the general one rejects");
                                            assert_eq!(
                                                pkt_view(&a),
                                                pkt_view(&Pkt::of(&b, Kind::Fast)),
                                                "vlan {vlan} ip+{ip_opts} tcp+{tcp_opts} {payload}B"
                                            );
                                            let w = tpl_words(d, a.l4).unwrap();
                                            assert!(key_of_words(&w) == b.key);
                                            assert_eq!(fast_words(d), Some(w));
                                            assert!(tpl_may_match(&w, d));
                                        }
                                    }
                                }
                                let usual = !vlan && ip_opts == 0 && (tcp_opts == 0 || tcp_opts == 12);
                                let mut a = Pkt::default();
                                assert_eq!(parse_fast_pkt(&f, GOOD, &mut a), usual);
                                assert_eq!(fast_words(&f).is_some(), usual);
                            }
                        }
                    }
                }
            }
        }
        assert!(fast_taken > 100);
    }

    /// Two frames of the usual layout have equal template words exactly when the
    /// general comparison says same key and mergeable template (reserved bits and
    /// the urgent pointer included); and equal key words exactly when the general
    /// keys are equal. Every byte of the headers is changed in turn.
    #[test]
    fn template_words_compare_as_the_general_path() {
        let mut differ = 0;
        for tcp_opts in [0, 12] {
            for payload in [1, 600] {
                let base = frame(false, 0, tcp_opts, payload, 0, 0x10);
                let wa = fast_words(&base).unwrap();
                let mut sa = Seg::default();
                parse_general(&base, GOOD, &mut sa).unwrap();
                for at in 0..14 + 20 + 20 + tcp_opts {
                    for x in [0x01u8, 0x08, 0x10, 0x80, 0xff] {
                        let mut d = base.clone();
                        d[at] ^= x;
                        let (Some(wb), Ok(sb)) = (fast_words(&d), parse(&d, d.len(), GOOD)) else { continue };
                        let same_key = sa.key == sb.key;
                        let general = same_key && crate::aggregate::same_template(&sa, &sb);
                        assert_eq!(same_tpl(&wa, &wb), general, "byte {at} ^ {x:#x} (tcp+{tcp_opts})");
                        assert_eq!(same_key_words(&wa, &wb), same_key, "byte {at} ^ {x:#x}");
                        differ += usize::from(!general);
                    }
                }
            }
        }
        assert!(differ > 100);
    }

    /// The headers finish_headers writes for a first segment of `p` payload bytes
    /// standing for `p + q` bytes are those of one segment of `p + q` bytes (the same
    /// payload pattern) with PSH set: by correction when the first segment's TCP
    /// checksum is whole, summed again when it holds only the pseudo header's
    /// (`RX_L4_CKSUM_NONE`; the TCP checksum field scrambled to show it is not
    /// read). The IPv4 header checksum is always corrected.
    #[test]
    fn finished_headers_verify() {
        for ip_opts in [0, 8] {
            if ip_opts > 0 {
                // IPv4 options are never merged (so no aggregate carries them).
                let f = frame(false, ip_opts, 0, 100, 0, 0x10);
                assert_eq!(parse_into(&f, f.len(), GOOD, &mut Seg::default()), Err(Skip::NotTcp));
                // Still checked first: a bad TCP checksum is counted as one.
                let mut bad = f.clone();
                bad[14 + 20 + ip_opts + 20 + 5] ^= 0xff;
                assert_eq!(parse_into(&bad, bad.len(), 0, &mut Seg::default()), Err(Skip::BadChecksum));
                continue;
            }
            for tcp_opts in [0, 12, 40] {
                for (p, q) in [(1, 0), (2, 0), (1447, 0), (1448, 0), (1448, 1448), (1447, 1), (1448, 30000), (3, 7)] {
                    let f = frame(false, ip_opts, tcp_opts, p, 0, 0x10);
                    let big = frame(false, ip_opts, tcp_opts, p + q, 0, 0x10);
                    let hdr = 14 + 20 + ip_opts + 20 + tcp_opts;
                    // The other segments' payload sum: the whole payload's less the
                    // first's.
                    let all = checksum::fold(checksum::sum(&big[hdr..]));
                    let first = checksum::fold(checksum::sum(&f[hdr..]));
                    let rest = u64::from(checksum::fold(u32::from(all) + u32::from(!first)).swap_bytes());
                    let mut want = big[..hdr].to_vec();
                    want[14 + 20 + ip_opts + 13] |= 0x08;
                    let (src, dst) =
                        (IpAddress::V4(Ipv4Addr::new(198, 18, 3, 4)), IpAddress::V4(Ipv4Addr::new(198, 18, 0, 2)));
                    let mut w = want.clone();
                    w.extend_from_slice(&big[hdr..]);
                    TcpPacket::new_unchecked(&mut w[14 + 20 + ip_opts..]).fill_checksum(&src, &dst);
                    want.copy_from_slice(&w[..hdr]);
                    for ol in [0, GOOD, abi::RX_L4_CKSUM_NONE] {
                        let mut s = Seg::default();
                        parse_into(&f, f.len(), ol, &mut s).unwrap();
                        assert_eq!(s.csum_ok, ol != abi::RX_L4_CKSUM_NONE);
                        let mut g = f.clone();
                        if !s.csum_ok {
                            g[14 + 20 + ip_opts + 16] ^= 0x33; // TCP checksum
                        }
                        finish_headers(&mut g, &s.hdr(), (p + q) as u32, 0x08, Pkt::of(&s, Kind::Slow).sum, rest);
                        assert_eq!(g[..hdr], want[..], "ip+{ip_opts} tcp+{tcp_opts} {p}+{q}B ol {ol:#x}");
                        let mut out = g[..hdr].to_vec();
                        out.extend_from_slice(&big[hdr..]);
                        assert!(Ipv4Packet::new_checked(&out[14..]).unwrap().verify_checksum());
                    }
                }
            }
        }
    }
}
