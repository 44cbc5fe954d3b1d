//! The device over its socket against a test front end ([`crate::guest`]): set-up,
//! traffic both ways, the guest's signals, and a hostile front end (bad requests,
//! rings outside its memory, a memory table changed under running queues, a file
//! shorter than its region) while another device keeps forwarding.

use crate::guest::{Guest, QSIZE};
use crate::proto::{self, req, Region, F_NEED_REPLY};
use crate::testkit::*;
use ironpath_pmd_sdk::ipc;
use ironpath_pmd_sdk::testing::{run_rx, TestPool};
use ironpath_pmd_sdk::Pmd;
use std::os::fd::AsRawFd;

#[test]
fn a_front_end_sets_up_the_rings_and_traffic_crosses_both_ways_with_signals() {
    let tp = TestPool::new(512, 2048 + 128, 128);
    let mut d = dev(&tp, "setup");
    let mut fe = FrontEnd::connect(&d.path);
    let mut g = Guest::new();
    let (kick, c0, c1) = (ipc::eventfd().unwrap(), ipc::eventfd().unwrap(), ipc::eventfd().unwrap());
    fe.setup(&g, &kick, [&c0, &c1]);
    wait("the link", || d.d.link().up == 1);
    assert_eq!(round_trip(&mut g, &mut d, 40), 40);
    // The guest asked for signals (its avail flags are 0): both rings were signalled.
    wait("the signals", || {
        ipc::read_nowait(c0.as_raw_fd()).ok().flatten().is_some()
            && ipc::read_nowait(c1.as_raw_fd()).ok().flatten().is_some()
    });
    // GET_VRING_BASE stops the ring and answers its index.
    assert!(fe.send(req::GET_VRING_BASE, 0, &proto::state(1, 0), &[]));
    assert_eq!(fe.reply().unwrap(), proto::state(1, 40));
    wait("the link down", || d.d.link().up == 0);
    drop(fe);
    wait("the disconnection", || xstat(&d.d, "disconnects") == 1);
    assert_eq!(tp.in_use(), 0);
    d.d.stop().unwrap();
}

#[test]
fn a_hostile_front_end_is_refused_and_counted_while_another_device_forwards() {
    let tp = TestPool::new(1024, 2048 + 128, 128);
    let mut good = dev(&tp, "good");
    let mut bad = dev(&tp, "bad");
    let mut gfe = FrontEnd::connect(&good.path);
    let mut gg = Guest::new();
    let (kick, c0, c1) = (ipc::eventfd().unwrap(), ipc::eventfd().unwrap(), ipc::eventfd().unwrap());
    gfe.setup(&gg, &kick, [&c0, &c1]);
    wait("the good link", || good.d.link().up == 1);
    let mut forwarded = 0;
    let mut step = |what: &str, good: &mut Dev| {
        let n = round_trip(&mut gg, good, 16);
        assert_eq!(n, 16, "the good device forwards after: {what}");
        forwarded += n;
    };
    let g = Guest::new();
    let errors = |d: &Dev| xstat(&d.d, "protocol_errors");
    // A ring outside the front end's memory: closed, counted.
    let mut fe = FrontEnd::connect(&bad.path);
    fe.setup(&g, &kick, [&c0, &c1]);
    let outside = proto::RingAddr { desc: 0x10, used: 0x20, avail: 0x30 };
    assert!(fe.send(req::SET_VRING_ADDR, 0, &proto::ring_addr(0, outside), &[]));
    assert!(fe.closed());
    wait("the error count", || errors(&bad) == 1);
    step("a ring outside memory", &mut good);
    // A ring index beyond our rings, a bad version, an oversized payload: closed.
    for (r, flags, payload) in [
        (req::SET_VRING_NUM, 0, proto::state(300, 256)),
        (req::SET_VRING_NUM, 0, proto::state(0, 100)),
        (req::GET_FEATURES, 2, vec![]),
        (req::SET_MEM_TABLE, 0, vec![0; 600]),
        (req::SET_MEM_TABLE, 0, proto::mem_table(&[Guest::region()])),
    ] {
        let before = errors(&bad);
        let mut fe = FrontEnd::connect(&bad.path);
        fe.send(r, flags, &payload, &[]);
        assert!(fe.closed(), "request {r} flags {flags}");
        wait("the error count", || errors(&bad) == before + 1);
        step("a bad request", &mut good);
    }
    // A file shorter than its region: refused (a failure acknowledged).
    let mut fe = FrontEnd::connect(&bad.path);
    assert!(fe.send(req::SET_PROTOCOL_FEATURES, 0, &proto::OFFERED_PROTOCOL.to_le_bytes(), &[]));
    let big = Region { size: crate::guest::SIZE * 2, ..Guest::region() };
    assert!(fe.send(req::SET_MEM_TABLE, F_NEED_REPLY, &proto::mem_table(&[big]), &[g.fd.as_raw_fd()]));
    assert_eq!(fe.reply(), Some(1u64.to_le_bytes().to_vec()));
    // An unknown request asking for a reply gets a failure; a call fd that is a
    // pipe is not used.
    assert!(fe.send(99, F_NEED_REPLY, &[], &[]));
    assert_eq!(fe.reply(), Some(1u64.to_le_bytes().to_vec()));
    let mut p = [0; 2];
    // SAFETY: pipe fills two descriptors, closed below.
    assert_eq!(unsafe { libc::pipe(p.as_mut_ptr()) }, 0);
    assert!(fe.send(req::SET_VRING_CALL, F_NEED_REPLY, &0u64.to_le_bytes(), &[p[1]]));
    assert_eq!(fe.reply(), Some(0u64.to_le_bytes().to_vec()));
    wait("the bad call fd", || xstat(&bad.d, "bad_call_fds") == 1);
    // SAFETY: ours, closed once.
    unsafe { (libc::close(p[0]), libc::close(p[1])) };
    // Another front end while one is served: closed at once.
    let mut second = FrontEnd::connect(&bad.path);
    assert!(second.closed());
    wait("the refusal", || xstat(&bad.d, "refused") == 1);
    drop(fe);
    step("refusals", &mut good);
    // The memory table changed under running queues: a copy of the same memory in
    // a new file, sent while the device forwards, then the old file is gone.
    let mut fe = FrontEnd::connect(&bad.path);
    let mut g2 = Guest::new();
    fe.setup(&g2, &kick, [&c0, &c1]);
    wait("the bad device's link", || bad.d.link().up == 1);
    assert_eq!(round_trip(&mut g2, &mut bad, 16), 16);
    let g3 = Guest::new();
    // SAFETY: both mappings are SIZE bytes.
    unsafe { std::ptr::copy_nonoverlapping(g2.map.ptr(), g3.map.ptr(), crate::guest::SIZE as usize) };
    let (fd2, map2) = (std::mem::replace(&mut g2.fd, g3.fd), std::mem::replace(&mut g2.map, g3.map));
    let table = proto::mem_table(&[Guest::region()]);
    assert!(fe.send(req::SET_MEM_TABLE, F_NEED_REPLY, &table, &[g2.fd.as_raw_fd()]));
    assert_eq!(fe.reply(), Some(0u64.to_le_bytes().to_vec()));
    drop((fd2, map2));
    assert_eq!(round_trip(&mut g2, &mut bad, 16), 16, "traffic follows the new memory");
    // An available index far ahead: that ring stops, counted; the device lives.
    g2.set_avail_idx(1, g2.avail_idx[1].wrapping_add(QSIZE as u16 * 2));
    assert!(run_rx(&mut bad.rx, 32, 0).is_empty());
    assert_eq!(xstat(&bad.d, "rx_bad_ring_index"), 1);
    step("a broken ring", &mut good);
    drop(fe);
    assert!(forwarded >= 16 * 8);
    good.d.stop().unwrap();
    bad.d.stop().unwrap();
    assert_eq!(tp.in_use(), 0, "every mbuf back");
}
