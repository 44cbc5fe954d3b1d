//! Adversarial property tests of the IPv4 tries (`acl::trie`) and their use in
//! `Classifier`: every lookup path against a linear first-match scan.

use super::super::sample::Lcg;
use super::super::{parse_prefix, Action, Classifier, Rule, ANY, FIELDS};
use super::{interval, interval_portable, key_of_v4, v4_key, Budget, Trie, V4Key, V4Rule, MISS, PAD};

const M: u128 = 0xffff_0000_0000;

fn v4(a: u32) -> u128 {
    M | u128::from(a)
}

/// What `v4_key` should accept: both addresses in `::ffff:0:0/96`.
fn truly_mapped(k: &[u128; FIELDS]) -> bool {
    k[0] >> 32 == 0xffff && k[1] >> 32 == 0xffff
}

fn pick<T: Copy>(g: &mut Lcg, xs: &[T]) -> T {
    xs[g.next_u64() as usize % xs.len()]
}

const EDGE_V4: [u32; 12] =
    [0, 1, 0xff, 0x100, 0xffff, 0x1_0000, 0x00ff_ffff, 0x0100_0000, 0x7fff_ffff, 0x8000_0000, 0xffff_fffe, 0xffff_ffff];

fn addr_range(g: &mut Lcg) -> (u128, u128) {
    let base = |g: &mut Lcg| if g.next_u64().is_multiple_of(2) { pick(g, &EDGE_V4) } else { g.next_u64() as u32 };
    match g.next_u64() % 16 {
        0 => (0, u128::MAX),
        1 => parse_prefix("0.0.0.0/0").unwrap(),
        2 | 3 => {
            let a = base(g);
            (v4(a), v4(a))
        }
        4 => {
            let a = base(g) & !1;
            (v4(a), v4(a | 1))
        }
        5 | 6 => {
            let len = (g.next_u64() % 33) as u32;
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            let a = base(g) & mask;
            (v4(a), v4(a | !mask))
        }
        7 => parse_prefix("::fffe:0:0/95").unwrap(),
        8 => parse_prefix("::/0").unwrap(),
        9 => parse_prefix(pick(g, &["::ffff:c000:0/112", "::ffff:0:0/97", "::ffff:8000:0/97", "::ffff:ffff:ff00/120"]))
            .unwrap(),
        10 => {
            // A range, not a prefix, often across a byte boundary.
            let a = base(g);
            let b = a.saturating_add((g.next_u64() % 600) as u32);
            (v4(a), v4(b))
        }
        11 => (g.next_u64() as u128 % M, v4(base(g))), // from below the mapped space into it
        12 => (v4(base(g)), M + (1 << 32) + g.next_u64() as u128 % 1000), // from inside past it
        13 => parse_prefix(pick(g, &["::/96", "fd00::/8", "::fffe:0:0/96", "::1:0:0:0/80", "::/1"])).unwrap(),
        14 => (M - 1, M),                      // one address below, one inside
        _ => (M | 0xffff_ffff, M + (1 << 32)), // the last inside, the first above
    }
}

const EDGE_PORTS: [(u128, u128); 16] = [
    (0, 0),
    (65535, 65535),
    (0, 65535),
    (255, 256),
    (511, 512),
    (256, 511),
    (0, 255),
    (255, 255),
    (256, 256),
    (1, 65534),
    (0, 1),
    (65534, 65535),
    (254, 257),
    (0, 256),
    (255, 65535),
    (32767, 32768),
];

fn port_range(g: &mut Lcg) -> (u128, u128) {
    match g.next_u64() % 4 {
        0 | 1 => pick(g, &EDGE_PORTS),
        2 => {
            let p = u128::from(g.next_u64() % 65536);
            (p, p)
        }
        _ => {
            // Across a multiple of 256.
            let k = 1 + u128::from(g.next_u64() % 255);
            let lo = k * 256 - 1 - u128::from(g.next_u64() % 300).min(k * 256 - 1);
            (lo, (k * 256 + u128::from(g.next_u64() % 300)).min(65535))
        }
    }
}

fn proto_range(g: &mut Lcg) -> (u128, u128) {
    match g.next_u64() % 3 {
        0 => pick(
            g,
            &[
                (0, 255),
                (0, 0),
                (255, 255),
                (6, 6),
                (17, 17),
                (0, 1),
                (254, 255),
                (1, 254),
                (127, 128),
                (128, 128),
                (127, 127),
            ],
        ),
        1 => {
            let p = u128::from(g.next_u64() % 256);
            (p, p)
        }
        _ => {
            let lo = u128::from(g.next_u64() % 256);
            (lo, (lo + u128::from(g.next_u64() % 40)).min(255))
        }
    }
}

fn adversarial_rules(g: &mut Lcg, n: usize) -> Vec<Rule> {
    let mut rules: Vec<Rule> = Vec::with_capacity(n);
    while rules.len() < n {
        if !rules.is_empty() && g.next_u64().is_multiple_of(8) {
            // The same rule again (another action), or an earlier one moved.
            let mut r = rules[g.next_u64() as usize % rules.len()].clone();
            r.action = pick(g, &[Action::Permit, Action::Deny, Action::Count]);
            rules.push(r);
            continue;
        }
        let mut ranges = ANY;
        // Each field restricted or open, independently.
        for (f, r) in ranges.iter_mut().enumerate() {
            if !g.next_u64().is_multiple_of(3) {
                *r = match f {
                    0 | 1 => addr_range(g),
                    2 => proto_range(g),
                    _ => port_range(g),
                };
            }
        }
        rules.push(Rule { ranges, action: pick(g, &[Action::Permit, Action::Deny, Action::Count]) });
    }
    if g.next_u64().is_multiple_of(4) {
        // Identical rule sets except order.
        let (a, b) = (g.next_u64() as usize % n.max(1), g.next_u64() as usize % n.max(1));
        rules.swap(a, b);
    }
    rules
}

const EDGE_ADDRS: [u128; 10] = [
    M,               // ::ffff:0.0.0.0
    M | 0xffff_ffff, // ::ffff:255.255.255.255
    M - 1,           // just below
    M + (1 << 32),   // just above
    0,               // ::
    0xffff_ffff,     // ::255.255.255.255 (v4-compatible)
    u128::MAX,
    0xfffe_ffff_ffff,
    0xfd00 << 112 | 0x1234,
    M | 0x8000_0000,
];

/// Keys at, beside and inside the ends of the rules' ranges, and at the mapped space's
/// edges; never an address with bits above 96 set that looks mapped below them (that
/// bug has its own test).
fn adversarial_keys(g: &mut Lcg, rules: &[Rule], n: usize, v4_only: bool) -> Vec<[u128; FIELDS]> {
    let mut keys = Vec::with_capacity(n);
    while keys.len() < n {
        let mut k = [0u128; FIELDS];
        for (f, v) in k.iter_mut().enumerate() {
            let max = [u128::MAX, u128::MAX, 255, 65535, 65535][f];
            let near = rules.get(g.next_u64() as usize % rules.len().max(1)).map(|r| r.ranges[f]);
            *v = match (g.next_u64() % 8, near) {
                (0, Some((lo, _))) => lo,
                (1, Some((lo, _))) => lo.saturating_sub(1),
                (2, Some((_, hi))) => hi,
                (3, Some((_, hi))) => hi.saturating_add(1).min(max),
                (4, Some((lo, hi))) => lo + (hi - lo) / 2,
                (5, _) if f < 2 => pick(g, &EDGE_ADDRS),
                (5, _) => pick(g, &[0, 1, 255, 256, 511, 512, 65535, 65534, 127, 128]).min(max),
                _ if f < 2 => v4(g.next_u64() as u32),
                _ => u128::from(g.next_u64()) % (max + 1),
            };
            if f < 2 && v4_only {
                *v = v4(*v as u32);
            }
        }
        if truly_mapped(&k) == v4_key(&k).is_some() {
            keys.push(k);
        }
    }
    keys
}

fn scan(rules: &[Rule], k: &[u128; FIELDS]) -> Option<usize> {
    rules.iter().position(|r| r.matches(k))
}

/// Every lookup path (one key, a burst, IPv4 keys packed, each trie with SSE2 and
/// the portable compare) against a linear scan.
fn check(c: &Classifier, rules: &[Rule], keys: &[[u128; FIELDS]], what: &str) {
    let want: Vec<Option<usize>> = keys.iter().map(|k| scan(rules, k)).collect();
    for (k, w) in keys.iter().zip(&want) {
        assert_eq!(c.lookup(k), *w, "{what}: lookup {k:x?}\nrules {rules:?}");
    }
    let mut found = vec![Some(usize::MAX); keys.len()];
    c.lookup_burst(keys, &mut found);
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(found[i], want[i], "{what}: lookup_burst {k:x?}\nrules {rules:?}");
    }
    let (v4s, v4want): (Vec<V4Key>, Vec<u32>) =
        keys.iter().zip(&want).filter_map(|(k, w)| v4_key(k).map(|b| (b, w.map_or(MISS, |i| i as u32)))).unzip();
    let mut got = vec![0u32; v4s.len()];
    c.lookup_v4_burst(&v4s, &mut got);
    assert_eq!(got, v4want, "{what}: lookup_v4_burst\nrules {rules:?}");
    for t in c.tries.iter().flatten() {
        let (mut a, mut b) = (vec![MISS; v4s.len()], vec![MISS; v4s.len()]);
        t.lookup_burst(&v4s, &mut a);
        t.lookup_burst_portable(&v4s, &mut b);
        assert_eq!(a, b, "{what}: AVX2 (where the CPU has it) and portable walks differ");
        // From MISS again: a walk keeps the smaller of `best` and its own.
        b.fill(MISS);
        t.lookup_burst_sse2(&v4s, &mut b);
        assert_eq!(a, b, "{what}: AVX2 (where the CPU has it) and SSE2 walks differ");
        for (k, &r) in v4s.iter().zip(&a) {
            assert_eq!(t.lookup(k), r, "{what}: one key and a burst differ");
        }
    }
}

/// The bug: `v4_key` casts `k >> 32` to u64, dropping bits 96..128, so an IPv6 address
/// such as `2001:db8::ffff:c000:201` is taken for `::ffff:192.0.2.1` and looked up in
/// the tries, with the IPv4 rules it does not match and without the IPv6 rules it does.
#[test]
fn an_ipv6_address_that_ends_like_a_mapped_one_is_not_ipv4() {
    let rule =
        Rule { ranges: [parse_prefix("192.0.2.1").unwrap(), ANY[1], ANY[2], ANY[3], ANY[4]], action: Action::Deny };
    let src = 0x2001_0db8u128 << 96 | 0xffff_c000_0201;
    let k = [src, v4(0x0a00_0001), 6, 1234, 80];
    assert!(!rule.matches(&k));
    assert_eq!(v4_key(&k), None, "v4_key takes {src:x} for an IPv4-mapped address");
    let c = Classifier::new(vec![rule.clone()]);
    assert_eq!(c.lookup(&k), None, "lookup");
    let mut found = [Some(9)];
    c.lookup_burst(&[k], &mut found);
    assert_eq!(found, [None], "lookup_burst");
}

/// The same bug from the wire: an IPv6 packet from `2001:db8::ffff:a00:1` escapes
/// `deny src 2001:db8::/32` (the tries, which it is sent to, do not hold that rule)
/// and is let through by a later `permit`.
#[test]
fn an_ipv6_deny_rule_is_not_bypassed_by_a_mapped_looking_address() {
    use crate::tests::{burst, call, eth, ipv6, pool, stats, udp, PEER_MAC, US_MAC};
    use ironpath_wire::IpAddress;
    let deny =
        Rule { ranges: [parse_prefix("2001:db8::/32").unwrap(), ANY[1], ANY[2], ANY[3], ANY[4]], action: Action::Deny };
    let permit = Rule { ranges: ANY, action: Action::Permit };
    let src: std::net::Ipv6Addr = "2001:db8::ffff:a00:1".parse().unwrap();
    let dst: std::net::Ipv6Addr = "2001:db8::ffff:a00:2".parse().unwrap();
    let frame = eth(
        US_MAC,
        PEER_MAC,
        0x86dd,
        &ipv6(src, dst, 17, 64, &udp(IpAddress::V6(src), IpAddress::V6(dst), 1, 2, &[0; 8])),
    );
    let k = super::super::key_of(&frame).unwrap();
    let rules = vec![deny, permit];
    assert_eq!(scan(&rules, &k), Some(0));
    assert_eq!(Classifier::new(rules.clone()).lookup(&k), Some(0), "the deny rule is skipped");
    let mut acl = super::super::Acl::new(rules, Action::Permit);
    let st = stats(&acl);
    let p = pool(4);
    let mut b = burst(&p, &[frame]);
    let c = call(&mut acl, &st, &mut b, 0);
    let dropped = c.next[0] == ironpath_graph::DROP;
    b.free_all();
    assert!(dropped, "the node passes a packet its first rule denies");
}

/// Keys outside the fields' widths (protocol > 255, port > 65535) go to the trees,
/// which compare them whole, as a scan does. (No frame yields such a key: `key_of`
/// cannot; `lookup` is public, though.)
#[test]
fn keys_wider_than_their_fields() {
    let rule = Rule { ranges: [ANY[0], ANY[1], (6, 6), ANY[3], (80, 80)], action: Action::Deny };
    let c = Classifier::new(vec![rule.clone()]);
    for k in [[v4(1), v4(2), 256 + 6, 0, 80], [v4(1), v4(2), 6, 0, 65536 + 80]] {
        assert_eq!(c.lookup(&k), scan(std::slice::from_ref(&rule), &k), "{k:x?}");
    }
}

/// Rules whose ranges run past their field's width (built by hand: `Rule`'s fields are
/// public) are clipped to the field by `V4Rule::of`, and empty ranges (lo > hi) match
/// nothing, as a scan says (they once wrapped, and panicked in debug).
#[test]
fn rules_wider_than_their_fields() {
    let mut wrong = Vec::new();
    for (f, range, k) in [
        (2, (0, 256), [v4(1), v4(2), 6, 1000, 80]),
        (4, (0, 65536), [v4(1), v4(2), 6, 1000, 80]),
        (4, (70000, 70000), [v4(1), v4(2), 6, 1000, 70000 & 0xffff]),
    ] {
        let mut r = Rule { ranges: ANY, action: Action::Deny };
        r.ranges[f] = range;
        let want = scan(&[r.clone()], &k);
        let got = Classifier::new(vec![r]).lookup(&k);
        if got != want {
            wrong.push(format!("field {f} {range:?}, key {k:?}: {got:?}, a scan says {want:?}"));
        }
    }
    for (f, range) in [(3, (5, 3)), (0, (v4(9), v4(3)))] {
        let mut empty = Rule { ranges: ANY, action: Action::Deny };
        empty.ranges[f] = range;
        if std::panic::catch_unwind(|| Classifier::new(vec![empty.clone()])).is_err() {
            wrong.push(format!("field {f} {range:x?} (empty): the compile panics"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn adversarial_small_rule_sets_agree_with_a_linear_scan() {
    // ACL_ATTACK_ROUNDS=N (and ACL_ATTACK_SEED) for a longer run by hand.
    let env = |k: &str, d: u64| std::env::var(k).ok().and_then(|s| s.parse().ok()).unwrap_or(d);
    let mut g = Lcg(env("ACL_ATTACK_SEED", 0xac1 ^ 0x5eed));
    for round in 0..env("ACL_ATTACK_ROUNDS", 400) as usize {
        let n = 1 + round % 12;
        let rules = adversarial_rules(&mut g, n);
        let keys = adversarial_keys(&mut g, &rules, 200, false);
        let v4keys = adversarial_keys(&mut g, &rules, 100, true);
        let c = Classifier::new(rules.clone());
        assert!(c.tries.is_some());
        check(&c, &rules, &keys, &format!("round {round}"));
        check(&c, &rules, &v4keys, &format!("round {round}, v4"));
    }
}

#[test]
fn adversarial_larger_rule_sets_and_small_budgets_agree_with_a_linear_scan() {
    let mut g = Lcg(77);
    for n in [40, 150, 600] {
        let rules = adversarial_rules(&mut g, n);
        let mut keys = adversarial_keys(&mut g, &rules, 1500, false);
        keys.extend(adversarial_keys(&mut g, &rules, 1500, true));
        let c = Classifier::new(rules.clone());
        check(&c, &rules, &keys, &format!("{n} rules"));
        let (nodes, _) = c.trie_size();
        for budget in [
            Budget::new(nodes, usize::MAX),
            Budget::new(nodes / 3, usize::MAX),
            Budget::new(usize::MAX, 64),
            Budget::new(8, 8),
        ] {
            let s = Classifier::compile(rules.clone(), Some(budget));
            check(&s, &rules, &keys, &format!("{n} rules, budget {budget:?}: {} tries", s.tries()));
        }
    }
}

/// Thousands of overlapping rules (the same few shapes over and over, in every order).
#[test]
fn thousands_of_overlapping_rules() {
    let mut g = Lcg(3);
    let base = adversarial_rules(&mut g, 60);
    let mut rules = Vec::new();
    for i in 0..3000 {
        let mut r = base[g.next_u64() as usize % base.len()].clone();
        if i % 3 == 0 {
            r.ranges[4] = port_range(&mut g);
        }
        rules.push(r);
    }
    let keys = adversarial_keys(&mut g, &rules, 2000, true);
    let t = std::time::Instant::now();
    let c = Classifier::new(rules.clone());
    eprintln!(
        "3000 overlapping rules: {} tries, {:?} nodes/bytes, compiled in {:?}",
        c.tries(),
        c.trie_size(),
        t.elapsed()
    );
    check(&c, &rules, &keys, "3000 overlapping");
}

/// Every V4Key byte pattern (the unused bytes too) through `lookup_v4_burst`, with
/// tries and with trees, against a scan of `key_of_v4`.
#[test]
fn random_packed_keys_agree_with_a_linear_scan() {
    let mut g = Lcg(21);
    for round in 0..60 {
        let rules = adversarial_rules(&mut g, 1 + round % 30);
        let mut keys: Vec<V4Key> = (0..300)
            .map(|_| {
                let mut b = [0u8; 16];
                for x in &mut b {
                    *x = g.next_u64() as u8;
                }
                b
            })
            .collect();
        // And keys through v4_key (round trip).
        for k in adversarial_keys(&mut g, &rules, 100, true) {
            let b = v4_key(&k).unwrap();
            assert_eq!(key_of_v4(&b), k);
            keys.push(b);
        }
        let want: Vec<u32> = keys.iter().map(|b| scan(&rules, &key_of_v4(b)).map_or(MISS, |i| i as u32)).collect();
        for c in [Classifier::new(rules.clone()), Classifier::compile(rules.clone(), None)] {
            let mut got = vec![7; keys.len()];
            c.lookup_v4_burst(&keys, &mut got);
            assert_eq!(got, want, "round {round}, {} tries\nrules {rules:?}", c.tries());
            // Odd lengths and a longer `found`.
            let mut got = vec![7; 5];
            c.lookup_v4_burst(&keys[..3], &mut got);
            assert_eq!(&got[..3], &want[..3]);
        }
    }
}

/// SSE2 and portable interval searches, and the interval a sorted list of starts says,
/// for every shape, byte and many start sets (255 among them: stored as PAD).
#[test]
fn interval_search_sse2_and_portable_agree() {
    let mut g = Lcg(99);
    for round in 0..3000 {
        let shape = (round % 17) as u32;
        let mut starts: Vec<u8> = Vec::new();
        while starts.len() < shape as usize {
            let v = if g.next_u64().is_multiple_of(4) {
                pick(&mut g, &[1u8, 127, 128, 129, 254, 255])
            } else {
                1 + g.next_u64() as u8 % 255
            };
            if v != 0 && !starts.contains(&v) {
                starts.push(v);
            }
        }
        starts.sort_unstable();
        let mut bytes = [PAD; 16];
        for (b, &s) in bytes.iter_mut().zip(&starts) {
            *b = s ^ 0x80;
        }
        let bounds =
            [u64::from_le_bytes(bytes[..8].try_into().unwrap()), u64::from_le_bytes(bytes[8..].try_into().unwrap())];
        for v in 0..=255u8 {
            let want = starts.iter().filter(|&&s| s <= v).count();
            assert_eq!(interval(bounds, shape, v ^ 0x80), want, "{starts:?} {v}");
            assert_eq!(interval_portable(bounds, shape, v ^ 0x80), want, "{starts:?} {v}");
        }
    }
}

/// Rules that make 256-way nodes (many single protocols, ports on both sides of every
/// byte): every protocol and the ports around each multiple of 256.
#[test]
fn full_nodes_every_protocol_and_port_byte() {
    let mut rules = Vec::new();
    for p in (0..=255u128).step_by(7) {
        rules.push(Rule {
            ranges: [ANY[0], ANY[1], (p, p), ANY[3], (p * 256 + 255, p * 256 + 256)],
            action: Action::Deny,
        });
    }
    rules.push(Rule { ranges: [ANY[0], ANY[1], (255, 255), (65535, 65535), ANY[4]], action: Action::Count });
    rules.push(Rule { ranges: [ANY[0], ANY[1], (0, 0), (0, 0), (0, 0)], action: Action::Count });
    let c = Classifier::new(rules.clone());
    assert!(c.tries.iter().flatten().any(|t| t.has_full_node()), "no 256-way node");
    let mut keys = Vec::new();
    for proto in 0..=255u128 {
        for port in [
            0u128,
            255,
            256,
            257,
            proto * 256 + 254,
            proto * 256 + 255,
            (proto * 256 + 256).min(65535),
            (proto * 256 + 257).min(65535),
            65535,
        ] {
            keys.push([v4(1), v4(2), proto, port, port]);
            keys.push([v4(1), v4(2), proto, 65535 - port, port]);
        }
    }
    check(&c, &rules, &keys, "full nodes");
}

/// Exhaustive over two bytes: every destination port against rules whose ranges start
/// and end at every kind of byte boundary.
#[test]
fn every_port_against_boundary_ranges() {
    let mut g = Lcg(5);
    for round in 0..4 {
        let rules: Vec<Rule> = (0..12)
            .map(|_| Rule { ranges: [ANY[0], ANY[1], ANY[2], ANY[3], port_range(&mut g)], action: Action::Deny })
            .collect();
        let c = Classifier::new(rules.clone());
        let keys: Vec<[u128; FIELDS]> = (0..=65535u128).step_by(1 + round).map(|p| [v4(7), v4(8), 17, 9, p]).collect();
        check(&c, &rules, &keys, &format!("ports round {round}"));
    }
}

/// IPv6 rules over part of the mapped space (`::ffff:0:0/95`, `::/0`,
/// `::ffff:c000:0/112`) before and after IPv4 rules, with keys at the mapped space's
/// edges and one address mapped, the other not.
#[test]
fn ipv6_rules_over_the_mapped_space() {
    let p = |s: &str| parse_prefix(s).unwrap();
    let r = |src: (u128, u128), dst: (u128, u128), a| Rule { ranges: [src, dst, ANY[2], ANY[3], ANY[4]], action: a };
    let rules = vec![
        r(p("::ffff:c000:0/112"), ANY[1], Action::Deny),
        r(p("192.0.0.0/16"), p("::fffe:0:0/95"), Action::Count),
        r(ANY[0], p("::/96"), Action::Count),
        r(p("::fffe:0:0/95"), p("10.0.0.0/8"), Action::Permit),
        r(p("255.255.255.255/32"), ANY[1], Action::Deny),
        r(p("0.0.0.0/32"), p("::/0"), Action::Deny),
        r((M - 1, M), ANY[1], Action::Count),
        r((M | 0xffff_ffff, M + (1 << 32)), ANY[1], Action::Count),
        r(p("::/0"), p("0.0.0.0/1"), Action::Permit),
    ];
    let addrs = [
        M,
        M | 0xffff_ffff,
        M - 1,
        M + (1 << 32),
        0,
        0xffff_ffff,
        v4(0xc000_0000),
        v4(0xc000_ffff),
        v4(0xc001_0000),
        v4(0x0a00_0000),
        v4(0x7fff_ffff),
        v4(0x8000_0000),
        0xfffe_c000_0001,
        0xfd00 << 112,
        u128::MAX,
    ];
    let mut keys = Vec::new();
    for &a in &addrs {
        for &b in &addrs {
            keys.push([a, b, 6, 1, 2]);
        }
    }
    for order in 0..rules.len() {
        let mut rs = rules.clone();
        rs.rotate_left(order);
        check(&Classifier::new(rs.clone()), &rs, &keys, &format!("rotated {order}"));
        check(&Classifier::compile(rs.clone(), None), &rs, &keys, &format!("trees, rotated {order}"));
    }
}

/// Trie::build straight from V4Rules (no Classifier), keys of random bytes: the walk
/// against a scan of the V4Rules' ranges.
#[test]
fn tries_built_directly_agree() {
    let mut g = Lcg(1234);
    for round in 0..100 {
        let rules = adversarial_rules(&mut g, 1 + round % 20);
        let v4rules: Vec<V4Rule> = rules.iter().enumerate().filter_map(|(i, r)| V4Rule::of(i as u32, r)).collect();
        if v4rules.is_empty() {
            continue;
        }
        let mut budget = Budget::default();
        let t = Trie::build(&v4rules, &mut budget).expect("fits");
        let keys: Vec<V4Key> = adversarial_keys(&mut g, &rules, 200, true).iter().map(|k| v4_key(k).unwrap()).collect();
        for k in &keys {
            let want = v4rules.iter().find(|r| rules[r.id as usize].matches(&key_of_v4(k))).map_or(MISS, |r| r.id);
            assert_eq!(t.lookup(k), want, "round {round}");
        }
    }
}
