//! Longest-prefix match over IPv4 and IPv6 addresses: a multibit trie with a
//! 16-bit (or, for a large IPv4 table, 24-bit) root and 8-bit plies.
//!
//! Why this shape: rte_lpm's DIR-24-8 answers most IPv4 lookups with one load, but
//! its first level is 2^24 entries (64 MiB); VPP's mtrie uses a 16-bit root (256
//! KiB of 4-byte entries) and 8-bit plies below it, three loads at most for IPv4.
//! We take the mtrie's strides, and use them for IPv6 too (a /64 is the root and
//! six plies; a /128 fourteen). A table of a MiB or more is on transparent huge
//! pages, so its size costs few TLB misses. An IPv4 table with routes longer than
//! /16 under many /16s ([`Lpm::build4`]: from [`WIDE_ROOT_SLOTS`] of them, when the
//! kernel gives huge pages) takes DIR-24-8's 24-bit root instead: a lookup to a
//! random destination then waits for one cache miss instead of two (root, then
//! ply), for 64 MiB of memory.
//!
//! Entries are leaf-pushed: every slot holds either a ply reference or the value
//! of the longest prefix covering it, so a lookup never backtracks. The table is
//! built from the whole route list at once (routes come from the pipeline file),
//! shortest prefixes first, so a longer prefix always paints over a shorter one.
//! The router looks an IPv4 burst up in passes, so that the loads of different
//! packets overlap: every root slot prefetched ([`Lpm::prefetch_root4`]), each slot
//! read with the next ply's line prefetched ([`Lpm::root4`]), then the plies below
//! the slots that are not leaves ([`Lpm::leaf4`]).

use ironpath_eal::prefetch;

/// A slot that refers to a ply (its index in the low bits).
const PLY: u32 = 1 << 31;
/// Slots per ply.
const FAN: usize = 256;

/// One route to insert: a prefix left-aligned in 128 bits (an IPv4 address is
/// shifted up by 96), its length in bits, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Prefix {
    /// The address bits, most significant first; bits past `len` are zero.
    pub bits: u128,
    /// The prefix length: 0..=32 for IPv4, 0..=128 for IPv6.
    pub len: u8,
}

impl Prefix {
    /// The prefix of an IPv4 address (`len` <= 32; host bits cleared).
    pub fn v4(a: std::net::Ipv4Addr, len: u8) -> Prefix {
        Prefix { bits: key4(a), len }.masked()
    }

    /// The prefix of an IPv6 address (`len` <= 128; host bits cleared).
    pub fn v6(a: std::net::Ipv6Addr, len: u8) -> Prefix {
        Prefix { bits: u128::from(a), len }.masked()
    }

    /// The same prefix with the bits past `len` cleared.
    pub fn masked(self) -> Prefix {
        Prefix { bits: self.bits & mask(self.len), len: self.len }
    }

    /// Does the prefix cover `key`?
    pub fn covers(&self, key: u128) -> bool {
        key & mask(self.len) == self.bits
    }
}

fn mask(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len.min(128)))
    }
}

/// The lookup key of an IPv4 address.
#[inline(always)]
pub fn key4(a: std::net::Ipv4Addr) -> u128 {
    u128::from(u32::from(a)) << 96
}

/// An IPv4 table whose routes longer than /16 fall under this many /16s takes a
/// 24-bit root ([`Lpm::build4`]): with a 16-bit root it would hold at least as
/// many plies (1 KiB each), and most lookups would read two lines at random.
pub const WIDE_ROOT_SLOTS: usize = 256;

/// A built table.
pub struct Lpm {
    /// The root's 2^`bits` slots from `mem[root]`, and the plies from
    /// `ply_mem[plies]`: tables on huge pages where the kernel allows (read at
    /// random, they would otherwise miss the TLB on nearly every lookup).
    mem: Vec<u32>,
    root: usize,
    ply_mem: Vec<u32>,
    plies: usize,
    /// Bits of the key that index the root: 16 or 24.
    bits: u32,
}

/// A table being painted: the root in place (`mem[at..]`, the final table's), the
/// plies growing.
struct Build {
    bits: u32,
    mem: Vec<u32>,
    at: usize,
    plies: Vec<u32>,
}

impl Lpm {
    /// The table of `routes` (value `u32` < 2^31 - 1 each). A prefix given twice takes
    /// the later value. Fails when the table would need more than `max_plies` plies
    /// (1 KiB each).
    pub fn build(routes: &[(Prefix, u32)], max_plies: usize) -> Result<Lpm, String> {
        Self::build_with(routes, max_plies, 16)
    }

    /// [`Lpm::build`] for IPv4 routes: a 24-bit root when the routes longer than
    /// /16 fall under [`WIDE_ROOT_SLOTS`] or more /16s and the kernel gives
    /// transparent huge pages (on 4 KiB pages, 64 MiB read at random would miss the
    /// TLB on every lookup), else a 16-bit one.
    pub fn build4(routes: &[(Prefix, u32)], max_plies: usize) -> Result<Lpm, String> {
        let under: std::collections::HashSet<u128> =
            routes.iter().filter(|(p, _)| p.len > 16).map(|(p, _)| p.bits >> 112).collect();
        let wide = under.len() >= WIDE_ROOT_SLOTS && ironpath_eal::memory::transparent_huge_pages();
        Self::build_with(routes, max_plies, if wide { 24 } else { 16 })
    }

    /// [`Lpm::build`] with a root of `bits` (16 or 24) bits.
    pub fn build_with(routes: &[(Prefix, u32)], max_plies: usize, bits: u32) -> Result<Lpm, String> {
        assert!(bits == 16 || bits == 24, "a root of 16 or 24 bits");
        let mut order: Vec<usize> = (0..routes.len()).collect();
        order.sort_by_key(|&i| routes[i].0.len);
        let (mem, at) = ironpath_eal::memory::huge_table(1 << bits, 0u32);
        let mut t = Build { bits, mem, at, plies: Vec::new() };
        for i in order {
            let (p, value) = routes[i];
            let p = p.masked();
            let leaf = value.checked_add(1).filter(|l| l & PLY == 0).ok_or("route value out of range")?;
            t.paint(p, leaf, max_plies)?;
        }
        let (mut ply_mem, plies) = ironpath_eal::memory::huge_table(t.plies.len(), 0u32);
        ply_mem[plies..].copy_from_slice(&t.plies);
        Ok(Lpm { mem: t.mem, root: t.at, ply_mem, plies, bits })
    }
}

impl Build {
    fn root(&mut self) -> &mut [u32] {
        let at = self.at;
        &mut self.mem[at..]
    }

    fn paint(&mut self, p: Prefix, leaf: u32, max_plies: usize) -> Result<(), String> {
        let len = u32::from(p.len);
        let top = (p.bits >> (128 - self.bits)) as usize;
        if len <= self.bits {
            let n = 1usize << (self.bits - len);
            for s in &mut self.root()[top..top + n] {
                debug_assert_eq!(*s & PLY, 0, "shorter prefixes are painted first");
                *s = leaf;
            }
            return Ok(());
        }
        // The slot that must become (or is) a ply: the root's, then a ply's.
        let mut slot = (true, top);
        let mut depth = self.bits;
        loop {
            let e = if slot.0 { self.root()[slot.1] } else { self.plies[slot.1] };
            let ply = if e & PLY != 0 {
                (e & !PLY) as usize
            } else {
                let n = self.plies.len() / FAN;
                if n >= max_plies {
                    return Err(format!("the routes need more than {max_plies} plies (max_plies)"));
                }
                self.plies.resize(self.plies.len() + FAN, e);
                let r = PLY | n as u32;
                if slot.0 {
                    self.root()[slot.1] = r;
                } else {
                    self.plies[slot.1] = r;
                }
                n
            };
            let byte = ((p.bits >> (120 - depth)) & 0xff) as usize;
            let at = ply * FAN + byte;
            if len <= depth + 8 {
                let n = 1usize << (depth + 8 - len);
                for s in &mut self.plies[at..at + n] {
                    debug_assert_eq!(*s & PLY, 0, "shorter prefixes are painted first");
                    *s = leaf;
                }
                return Ok(());
            }
            slot = (false, at);
            depth += 8;
        }
    }
}

impl Lpm {
    /// Plies in use.
    pub fn plies(&self) -> usize {
        (self.ply_mem.len() - self.plies) / FAN
    }

    /// Bits of the key that index the root (16 or 24).
    pub fn root_bits(&self) -> u32 {
        self.bits
    }

    /// Root slot `x` (the top `bits` bits of a key).
    #[inline(always)]
    fn root_slot(&self, x: usize) -> u32 {
        self.mem[self.root + x]
    }

    /// Slot `byte` of the ply a slot `e` refers to.
    #[inline(always)]
    fn ply_slot(&self, e: u32, byte: usize) -> &u32 {
        &self.ply_mem[self.plies + (e & !PLY) as usize * FAN + byte]
    }

    /// The value of the longest prefix covering `key`.
    #[inline(always)]
    pub fn lookup(&self, key: u128) -> Option<u32> {
        self.finish(self.root_slot((key >> (128 - self.bits)) as usize), key)
    }

    #[inline(always)]
    fn finish(&self, mut e: u32, key: u128) -> Option<u32> {
        let mut shift = 120 - self.bits;
        while e & PLY != 0 {
            e = *self.ply_slot(e, (key >> shift) as usize & 0xff);
            shift = shift.wrapping_sub(8);
        }
        e.checked_sub(1)
    }

    /// The raw leaf of an IPv4 address (as `u32`): 0 for no route, else the value + 1.
    /// One to three loads, no 128-bit arithmetic.
    #[inline(always)]
    pub fn leaf4(&self, a: u32, root: u32) -> u32 {
        // (Two plies at most below a 16-bit root: bits 8..16, then 0..8; one below a
        // 24-bit root.)
        let mut e = root;
        if e & PLY != 0 {
            e = *self.ply_slot(e, (a >> (24 - self.bits) & 0xff) as usize);
            if e & PLY != 0 {
                e = *self.ply_slot(e, (a & 0xff) as usize);
            }
        }
        e
    }

    /// Is a slot a leaf (the value + 1 of its longest prefix, or 0), not a ply?
    #[inline(always)]
    pub fn is_leaf(e: u32) -> bool {
        e & PLY == 0
    }

    /// Hint the CPU to load the root slot of an IPv4 address.
    #[inline(always)]
    pub fn prefetch_root4(&self, a: u32) {
        prefetch(&self.mem[self.root + (a >> (32 - self.bits)) as usize]);
    }

    /// The root slot of an IPv4 address, for [`Lpm::leaf4`] later; the ply it refers
    /// to, if any, is prefetched meanwhile.
    #[inline(always)]
    pub fn root4(&self, a: u32) -> u32 {
        let e = self.root_slot((a >> (32 - self.bits)) as usize);
        if e & PLY != 0 {
            prefetch(self.ply_slot(e, (a >> (24 - self.bits)) as usize & 0xff));
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::acl::sample::Lcg;
    use std::net::{Ipv4Addr, Ipv6Addr};

    /// The model: the longest prefix covering the key, the later of equals.
    fn scan(routes: &[(Prefix, u32)], key: u128) -> Option<u32> {
        let mut best: Option<(u8, u32)> = None;
        for (p, v) in routes {
            if p.masked().covers(key) && best.is_none_or(|(l, _)| p.len >= l) {
                best = Some((p.len, *v));
            }
        }
        best.map(|b| b.1)
    }

    fn random_routes(g: &mut Lcg, n: usize, v6: bool) -> Vec<(Prefix, u32)> {
        (0..n)
            .map(|i| {
                let len = if v6 { (g.next_u64() % 129) as u8 } else { (g.next_u64() % 33) as u8 };
                // Addresses from a few /8s (v4) or /16s (v6), so prefixes nest and overlap.
                let hi = (g.next_u64() % 4) as u128;
                let bits = if v6 {
                    (0xfd00u128 + hi) << 112 | u128::from(g.next_u64()) << 64 | u128::from(g.next_u64())
                } else {
                    key4(Ipv4Addr::from((198 + hi as u32) << 24 | g.next_u64() as u32 & 0x00ff_ffff))
                };
                (Prefix { bits, len }.masked(), i as u32)
            })
            .collect()
    }

    /// Keys near the routes (inside, at the edges, just outside) and random ones.
    fn keys(g: &mut Lcg, routes: &[(Prefix, u32)], v6: bool) -> Vec<u128> {
        let mut k = Vec::new();
        for (p, _) in routes {
            let span = !mask(p.len);
            k.push(p.bits);
            k.push(p.bits | span);
            k.push(p.bits.wrapping_sub(1));
            k.push((p.bits | span).wrapping_add(1));
            k.push(p.bits | (u128::from(g.next_u64()) << 64 | u128::from(g.next_u64())) & span);
        }
        for _ in 0..1000 {
            let r = u128::from(g.next_u64()) << 75 | u128::from(g.next_u64());
            k.push(if v6 { r } else { r & (u128::from(u32::MAX) << 96) });
        }
        if !v6 {
            for x in k.iter_mut() {
                *x &= u128::from(u32::MAX) << 96;
            }
        }
        k
    }

    #[test]
    fn lookups_match_a_linear_scan_of_the_routes() {
        let mut g = Lcg(7);
        for round in 0..40 {
            let v6 = round % 2 == 1;
            let n = [1, 5, 50, 500][round % 4];
            let routes = random_routes(&mut g, n, v6);
            // IPv4 tables with either root (a few rounds: 64 MiB each).
            let bits = if !v6 && round % 8 == 2 { 24 } else { 16 };
            let t = Lpm::build_with(&routes, 1 << 20, bits).unwrap();
            let ks = keys(&mut g, &routes, v6);
            if !v6 {
                // The router's fast path: the root slot, then the plies below it.
                for k in &ks {
                    let a = (*k >> 96) as u32;
                    let r = t.leaf4(a, t.root4(a));
                    assert_eq!(r.checked_sub(1), scan(&routes, *k), "IPv4 leaf of {k:#x}");
                }
            }
            for k in &ks {
                let want = scan(&routes, *k);
                assert_eq!(t.lookup(*k), want, "key {k:#x}, {n} routes (v6: {v6}, {bits}-bit root)");
            }
        }
    }

    #[test]
    fn default_route_host_routes_and_the_edges_of_a_prefix() {
        let r = |a: [u8; 4], len, v| (Prefix::v4(Ipv4Addr::from(a), len), v);
        let routes = [
            r([0, 0, 0, 0], 0, 0),
            r([198, 18, 0, 0], 15, 1),
            r([198, 19, 255, 255], 32, 2),
            r([198, 18, 1, 0], 24, 3),
        ];
        let t = Lpm::build(&routes, 16).unwrap();
        let at = |a: [u8; 4]| t.lookup(key4(Ipv4Addr::from(a)));
        assert_eq!(at([8, 8, 8, 8]), Some(0));
        assert_eq!(at([198, 17, 255, 255]), Some(0));
        assert_eq!(at([198, 18, 0, 0]), Some(1));
        assert_eq!(at([198, 18, 1, 0]), Some(3));
        assert_eq!(at([198, 18, 1, 255]), Some(3));
        assert_eq!(at([198, 18, 2, 0]), Some(1));
        assert_eq!(at([198, 19, 255, 254]), Some(1));
        assert_eq!(at([198, 19, 255, 255]), Some(2));
        assert_eq!(at([198, 20, 0, 0]), Some(0));
        let empty = Lpm::build(&[], 0).unwrap();
        assert_eq!(empty.lookup(0), None);
        let six = Lpm::build(&[(Prefix::v6(Ipv6Addr::LOCALHOST, 128), 9)], 16).unwrap();
        assert_eq!(six.lookup(1), Some(9));
        assert_eq!(six.lookup(2), None);
        assert_eq!(six.plies(), 14, "a /128 is the root and fourteen plies");
    }

    #[test]
    fn a_wide_root_for_many_long_prefixes_under_many_slash_16s() {
        let r = |a: u32, len| (Prefix::v4(Ipv4Addr::from(a), len), a >> 16);
        let few: Vec<_> = (0..WIDE_ROOT_SLOTS as u32 - 1).map(|i| r(0x0100_0000 + (i << 16), 24)).collect();
        assert_eq!(Lpm::build4(&few, 1 << 20).unwrap().root_bits(), 16);
        let mut many = few.clone();
        many.push(r(0x0a00_0000, 20));
        let t = Lpm::build4(&many, 1 << 20).unwrap();
        if !ironpath_eal::memory::transparent_huge_pages() {
            assert_eq!(t.root_bits(), 16, "no huge pages: the narrow root");
            return;
        }
        assert_eq!((t.root_bits(), t.plies()), (24, 0), "/24 and shorter: all in the root");
        for (p, v) in &many {
            assert_eq!(t.lookup(p.bits | 0xff << 96), Some(*v));
        }
        assert_eq!(t.lookup(key4(Ipv4Addr::new(1, 0, 1, 0))), None);
    }

    #[test]
    fn the_ply_bound_is_refused_by_name() {
        let routes: Vec<_> = (0..10u8).map(|i| (Prefix::v4(Ipv4Addr::new(198, i, 0, 0), 24), 0)).collect();
        assert!(Lpm::build(&routes, 10).is_ok());
        let e = Lpm::build(&routes, 9).err().unwrap();
        assert!(e.contains("max_plies"), "{e}");
    }
}
