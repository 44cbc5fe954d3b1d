//! `ironpath ctl` commands of a `vxlan` node, through a running graph; frames through two VTEPs.

use super::*;
use crate::tests::{burst, call, ctl, eth, ipv4, pool, stats, US_MAC};

const LOCAL: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 1);
const R1: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 2);
const R2: Ipv4Addr = Ipv4Addr::new(198, 18, 60, 3);

/// A VXLAN packet from `src` carrying a frame from `mac`.
fn from(src: Ipv4Addr, mac: [u8; 6]) -> Vec<u8> {
    let inner =
        eth(US_MAC, mac, 0x0800, &ipv4(Ipv4Addr::new(198, 18, 70, 2), Ipv4Addr::new(198, 18, 70, 1), 17, 64, &[0; 8]));
    let mut v = vec![0x08, 0, 0, 0, 0, 0, 100, 0];
    v.extend_from_slice(&inner);
    let u = crate::tests::udp(ironpath_wire::IpAddress::V4(src), ironpath_wire::IpAddress::V4(LOCAL), 40000, 4789, &v);
    eth([2, 0, 0, 0, 9, 9], [2, 0, 0, 0, 0, 1], 0x0800, &ipv4(src, LOCAL, 17, 64, &u))
}

#[test]
fn remotes_change_and_the_table_shows_and_flushes_at_run_time() {
    let p = pool(64);
    let mut v = Vxlan::new(super::tests::cfg(), 0, [2, 0, 0, 0, 9, 9], p.clone(), 1_000_000_000, [1; 16]);
    let st = stats(&v);
    let mut b = burst(&p, &[from(R2, [2, 0, 0, 0, 7, 2]), from(R1, [2, 0, 0, 0, 7, 3])]);
    for i in 0..2 {
        b.header_mut(i).port = 0;
    }
    let c = call(&mut v, &st, &mut b, 1);
    let _ = crate::tests::outputs(&c, &mut b);
    assert_eq!(v.learned(), 2);
    crate::tests::running(Box::new(v), &["inner", "underlay", "other"], |info| {
        let ok = |line: &str| ctl(info, line).expect("taken").unwrap_or_else(|e| panic!("{line}: {e}"));
        let err = |line: &str| ctl(info, line).expect("taken").expect_err(line);
        let s = ok("show vxlan");
        assert!(s.contains("vni 100 local 198.18.60.1") && s.contains("remotes: 198.18.60.2, 198.18.60.3"), "{s}");
        assert!(s.contains("2 learned MACs") && s.contains("02:00:00:00:07:02  198.18.60.3"), "{s}");
        assert!(err("vxlan remote add 198.18.60.1").contains("our own address"));
        assert!(err("vxlan remote add 224.0.0.5").contains("unicast"));
        assert!(err("vxlan remote add 198.18.60.2").contains("already"));
        assert!(err("vxlan remote add x").contains("not an IPv4 address"));
        assert!(ok("vxlan remote add 198.18.60.4").contains("3 remotes"));
        assert!(ok("show vxlan").contains("remotes: 198.18.60.2, 198.18.60.3, 198.18.60.4"));
        assert!(ok("vxlan remote del 198.18.60.3").contains("1 MACs learned behind it forgotten"));
        assert!(err("vxlan remote del 198.18.60.9").contains("not a remote"));
        assert!(ok("vxlan remote del 198.18.60.4").contains("removed"));
        assert!(err("vxlan remote del 198.18.60.2").contains("last remote"));
        assert_eq!(ok("vxlan mac flush"), "1 learned MACs flushed");
        assert!(ok("show vxlan").contains("0 learned MACs"));
        assert!(err("vxlan frobnicate").starts_with("usage: vxlan remote add"));
    });
    assert_eq!(p.stats().in_use, 0);
}

/// Random inner frames (any EtherType, up to two tags, any length that fits the
/// tunnel, unicast and group destinations) encapsulated by one VTEP and decapsulated
/// by its peer come out byte for byte as they went in, each exactly once per remote
/// it was sent to, and every buffer comes back.
#[test]
fn any_frame_that_fits_crosses_the_tunnel_unchanged() {
    use ironpath_util::testing::XorShift;
    let p = pool(512);
    let cfg = |local, remotes| VxlanConfig { vni: 0xabcdef, local, remotes, ..super::tests::cfg() };
    let mut a = Vxlan::new(cfg(LOCAL, vec![R1]), 0, [2, 0, 0, 0, 9, 9], p.clone(), 1_000_000_000, [1; 16]);
    let mut b = Vxlan::new(cfg(R1, vec![LOCAL]), 0, [2, 0, 0, 0, 9, 8], p.clone(), 1_000_000_000, [2; 16]);
    let (sa, sb) = (stats(&a), stats(&b));
    let mut rng = XorShift(0x7348);
    for k in 0..2000u64 {
        let len = 14 + rng.index(1450 - 14 + 1);
        let mut f: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
        match rng.index(4) {
            0 => f[12..14].copy_from_slice(&[0x81, 0x00]),
            1 => f[12..14].copy_from_slice(&[0x88, 0xb5]),
            _ => {}
        }
        // Not IPv4 or IPv6 (those are the MTU rule's): any other EtherType.
        if matches!(f[12..14], [0x08, 0x00] | [0x86, 0xdd]) {
            f[12] = 0x88;
        }
        let mut burst_a = burst(&p, std::slice::from_ref(&f));
        burst_a.header_mut(0).port = 1;
        let c = call(&mut a, &sa, &mut burst_a, k + 1);
        let out = crate::tests::outputs(&c, &mut burst_a);
        assert_eq!(out.len(), 1, "frame {k}");
        let mut o = out[0].1.clone();
        o[..6].copy_from_slice(&[2, 0, 0, 0, 9, 8]);
        let mut burst_b = burst(&p, &[o]);
        burst_b.header_mut(0).port = 0;
        let c = call(&mut b, &sb, &mut burst_b, k + 1);
        let back = crate::tests::outputs(&c, &mut burst_b);
        assert_eq!(back, [(INNER, f)], "frame {k}");
    }
    assert_eq!(p.stats().in_use, 0);
}
