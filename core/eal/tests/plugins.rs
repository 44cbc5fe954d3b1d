//! Loads the real PMD plugins (`cargo build --workspace` builds them next to this
//! test's binary) and moves packets through null and ring ports; proves every refusal.

use ironpath_eal::abi::Mbuf as RawMbuf;
use ironpath_eal::loader::LoadError;
use ironpath_eal::{Eal, MemPolicy, Mempool, MempoolConfig, PortError};
use std::path::PathBuf;

/// The directory holding the plugins built with this test (target/<profile>).
#[path = "../../../ci/skip.rs"]
mod skip_log;
use skip_log::skip;

fn plugin_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().to_path_buf();
    assert!(
        dir.join("libironpath_pmd_null.so").exists(),
        "plugins not built in {}: run `cargo build --workspace` (same profile) first",
        dir.display()
    );
    dir
}

fn plugin(name: &str) -> PathBuf {
    plugin_dir().join(format!("lib{name}.so"))
}

fn eal() -> Eal {
    let mut e = Eal::new(MemPolicy::NoHuge);
    let errs = e.load_plugins(&[plugin("ironpath_pmd_null"), plugin("ironpath_pmd_ring")], false);
    assert!(errs.is_empty(), "{errs:?}");
    e
}

fn pool(name: &str, n: u32) -> Mempool {
    Mempool::create(&MempoolConfig::new(name, n).cache_size(0).policy(MemPolicy::NoHuge)).unwrap()
}

fn setup(e: &mut Eal, devargs: &str, pool: &Mempool) -> u16 {
    let id = e.port_attach(devargs).unwrap_or_else(|err| panic!("{devargs}: {err}"));
    let p = e.port_mut(id).unwrap();
    p.configure(1, 1).unwrap();
    p.rx_queue_setup(0, 512, pool).unwrap();
    p.tx_queue_setup(0, 512).unwrap();
    p.start().unwrap();
    id
}

#[test]
fn default_search_is_the_executables_directory_and_lib_ironpath_beside_it() {
    // This test's binary lives in target/<profile>/deps: the plugins one level up are
    // not searched (nothing above the executable's own directory is).
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap();
    let dirs = ironpath_eal::loader::exe_dirs();
    assert_eq!(dirs, vec![dir.to_path_buf(), dir.parent().unwrap().join("lib/ironpath")]);
    let mut e = Eal::new(MemPolicy::NoHuge);
    let errs = e.load_plugins(&[plugin_dir()], false);
    assert!(errs.is_empty(), "{errs:?}");
    let names: Vec<&str> = e.drivers().iter().map(|d| d.name.as_str()).collect();
    assert!(names.contains(&"net_null") && names.contains(&"net_ring"), "{names:?}");
}

/// A private directory (mode 0755) holding a copy of the null plugin (mode 0644).
struct Staged {
    dir: PathBuf,
    file: PathBuf,
}

impl Staged {
    fn new(tag: &str) -> Staged {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("ironpath-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let file = dir.join("libironpath_pmd_null.so");
        std::fs::copy(plugin("ironpath_pmd_null"), &file).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        Staged { dir, file }
    }

    fn load(&self, path: &std::path::Path) -> Result<String, String> {
        let mut e = Eal::new(MemPolicy::NoHuge);
        e.load_plugin(path).map(|d| d.name.clone()).map_err(|err| err.to_string())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

#[test]
fn a_checked_copy_loads_and_a_symlink_to_it_is_refused() {
    let s = Staged::new("link");
    assert_eq!(s.load(&s.file).as_deref(), Ok("net_null"));
    let link = s.dir.join("libironpath_pmd_linked.so");
    std::os::unix::fs::symlink(&s.file, &link).unwrap();
    let err = s.load(&link).unwrap_err();
    assert!(err.contains("libironpath_pmd_linked.so: refused: it is a symbolic link"), "{err}");
    let fifo = s.dir.join("libironpath_pmd_fifo.so");
    rustix::fs::mknodat(rustix::fs::CWD, &fifo, rustix::fs::FileType::Fifo, rustix::fs::Mode::from_raw_mode(0o644), 0)
        .unwrap();
    let err = s.load(&fifo).unwrap_err();
    assert!(err.contains("refused: not a regular file"), "{err}");
}

#[test]
fn a_plugin_owned_by_another_user_is_refused_root() {
    if !is_root() {
        skip("needs root (chown)");
        return;
    }
    let s = Staged::new("owner");
    rustix::fs::chown(&s.file, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
    let err = s.load(&s.file).unwrap_err();
    assert!(err.contains("refused: owned by uid 65534; expected root, the effective user (uid 0)"), "{err}");
}

#[test]
fn a_plugin_under_a_directory_others_can_write_is_refused_root() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        skip("needs root (a directory of its own under /tmp)");
        return;
    }
    let s = Staged::new("wdir");
    let inner = s.dir.join("sub");
    std::fs::create_dir(&inner).unwrap();
    let file = inner.join("libironpath_pmd_null.so");
    std::fs::copy(&s.file, &file).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(s.load(&file).as_deref(), Ok("net_null"));
    // World-writable, not sticky: anyone could swap the file.
    std::fs::set_permissions(&s.dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let err = s.load(&file).unwrap_err();
    let want = format!(
        "refused: directory {} is writable by group or others without the sticky bit (mode 0777)",
        s.dir.display()
    );
    assert!(err.contains(&want), "{err}");
    // A directory owned by another user (not writable by us: it could change it).
    std::fs::set_permissions(&s.dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    rustix::fs::chown(&inner, Some(rustix::process::Uid::from_raw(65534)), None).unwrap();
    let err = s.load(&file).unwrap_err();
    assert!(err.contains(&format!("refused: directory {} is owned by uid 65534", inner.display())), "{err}");
}

#[test]
fn null_to_ring_loopback_to_null_counts_exactly() {
    let mut e = eal();
    let mp = pool("fwd", 1024);
    let null = setup(&mut e, "net_null0,size=100,copy=1", &mp);
    let ring = setup(&mut e, "net_ring0,bytes=1", &mp);
    let (nrx, ntx, rrx, rtx) = (
        e.port(null).unwrap().rx_queue(0).unwrap(),
        e.port(null).unwrap().tx_queue(0).unwrap(),
        e.port(ring).unwrap().rx_queue(0).unwrap(),
        e.port(ring).unwrap().tx_queue(0).unwrap(),
    );
    assert!(e.port(null).unwrap().rx_queue(0).is_none(), "one handle per queue");
    let mut burst = [std::ptr::null_mut::<RawMbuf>(); 32];
    for _ in 0..100 {
        let n = nrx.rx_burst(&mut burst);
        assert_eq!(n, 32);
        // SAFETY: just received, owned by us.
        let first = unsafe { &*burst[0] };
        assert_eq!(first.pkt_len, 100);
        assert_eq!(first.port, null);
        assert_eq!(rtx.tx_burst(&mut burst[..n]), n);
        let m = rrx.rx_burst(&mut burst);
        assert_eq!(m, n);
        // SAFETY: as above.
        assert_eq!(unsafe { (*burst[0]).port }, ring);
        assert_eq!(ntx.tx_burst(&mut burst[..m]), m);
    }
    let ns = e.port(null).unwrap().stats().unwrap();
    let rs = e.port(ring).unwrap().stats().unwrap();
    assert_eq!((ns.ipackets, ns.ibytes, ns.opackets, ns.obytes), (3200, 320_000, 3200, 320_000));
    assert_eq!((rs.ipackets, rs.opackets, rs.q_ipackets[0]), (3200, 3200, 3200));
    assert_eq!(mp.stats().in_use, 0, "every mbuf returned");
    let xs = e.port(null).unwrap().xstats().unwrap();
    assert!(xs.contains(&("rx_q0_packets".to_string(), 3200)), "{xs:?}");
    e.port_mut(null).unwrap().stats_reset().unwrap();
    assert_eq!(e.port(null).unwrap().stats().unwrap().ipackets, 0);
    let info = e.port(null).unwrap().info();
    assert_eq!(info.driver, "net_null");
    assert!(info.mac.is_some());
    assert_eq!(e.port(null).unwrap().link().unwrap().speed_mbps, 10_000);
}

#[test]
fn ring_link_cross_connects_two_ports_and_refuses_a_third() {
    let mut e = eal();
    let mp = pool("link", 256);
    let a = setup(&mut e, "net_ring_a,link=t1", &mp);
    let b = setup(&mut e, "net_ring_b,link=t1", &mp);
    let err = e.port_attach("net_ring_c,link=t1").unwrap_err();
    assert!(err.to_string().contains("already connects net_ring_a and net_ring_b"), "{err}");
    assert_eq!(e.port(a).unwrap().link().unwrap().up, 1);
    let (atx, brx, btx, arx) = (
        e.port(a).unwrap().tx_queue(0).unwrap(),
        e.port(b).unwrap().rx_queue(0).unwrap(),
        e.port(b).unwrap().tx_queue(0).unwrap(),
        e.port(a).unwrap().rx_queue(0).unwrap(),
    );
    let mut burst = [std::ptr::null_mut::<RawMbuf>(); 8];
    mp.alloc_bulk_raw(&mut burst).unwrap();
    assert_eq!(atx.tx_burst(&mut burst), 8);
    assert_eq!(arx.rx_burst(&mut burst), 0, "a does not hear itself");
    assert_eq!(brx.rx_burst(&mut burst), 8);
    assert_eq!(btx.tx_burst(&mut burst), 8);
    assert_eq!(arx.rx_burst(&mut burst), 8);
    // SAFETY: owned packets, freed once.
    unsafe { ironpath_eal::mbuf::free_bulk_raw(&burst) };
    // Closing both ends frees packets still in flight on the link.
    assert_eq!(atx.tx_burst(&mut []), 0);
    let mut more = [std::ptr::null_mut::<RawMbuf>(); 4];
    mp.alloc_bulk_raw(&mut more).unwrap();
    assert_eq!(atx.tx_burst(&mut more), 4);
    let err = e.port_detach(a).unwrap_err().to_string();
    assert!(err.contains("queue 0 is still in use by a forwarding thread"), "{err}");
    drop((atx, brx, btx, arx));
    e.port_detach(a).unwrap();
    e.port_detach(b).unwrap();
    assert_eq!(mp.stats().in_use, 0, "packets left in the rings were freed");
}

#[test]
fn ring_full_returns_partial_tx() {
    let mut e = eal();
    let mp = pool("full", 256);
    let r = setup(&mut e, "net_ring9,size=16", &mp);
    let tx = e.port(r).unwrap().tx_queue(0).unwrap();
    let mut burst = [std::ptr::null_mut::<RawMbuf>(); 32];
    mp.alloc_bulk_raw(&mut burst).unwrap();
    let n = tx.tx_burst(&mut burst);
    assert_eq!(n, 16);
    // SAFETY: the 16 not taken are still ours.
    unsafe { ironpath_eal::mbuf::free_bulk_raw(&burst[n..]) };
    drop(tx);
    drop(e);
    assert_eq!(mp.stats().in_use, 0);
}

#[test]
fn mempool_exhaustion_is_counted_as_rx_nombuf() {
    let mut e = eal();
    let mp = pool("tiny", 40);
    let id = setup(&mut e, "net_null1", &mp);
    let rx = e.port(id).unwrap().rx_queue(0).unwrap();
    let mut a = [std::ptr::null_mut::<RawMbuf>(); 32];
    let mut b = [std::ptr::null_mut::<RawMbuf>(); 32];
    assert_eq!(rx.rx_burst(&mut a), 32);
    assert_eq!(rx.rx_burst(&mut b), 0, "only 8 left: bulk allocation fails");
    let s = e.port(id).unwrap().stats().unwrap();
    assert_eq!((s.ipackets, s.rx_nombuf), (32, 32));
    assert_eq!(mp.stats().get_fails, 1);
    // SAFETY: owned packets, freed once.
    unsafe { ironpath_eal::mbuf::free_bulk_raw(&a) };
    assert_eq!(rx.rx_burst(&mut b), 32);
    // SAFETY: as above.
    unsafe { ironpath_eal::mbuf::free_bulk_raw(&b) };
}

#[test]
fn bad_device_arguments_name_the_argument() {
    let mut e = eal();
    let err = e.port_attach("net_null0,sise=64").unwrap_err().to_string();
    assert!(err.contains("unknown device argument `sise` (did you mean `size`?)"), "{err}");
    assert!(err.contains("usage: net_null0,size="), "{err}");
    let err = e.port_attach("net_null0,size=99999").unwrap_err().to_string();
    assert!(err.contains("`size=99999` is out of range"), "{err}");
    let err = e.port_attach("net_nul0").unwrap_err().to_string();
    assert!(err.contains("no driver for device `net_nul0`") && err.contains("did you mean `net_null`"), "{err}");
    let mp = pool("big", 8);
    let id = e.port_attach("net_null5,size=4000").unwrap();
    let p = e.port_mut(id).unwrap();
    p.configure(1, 1).unwrap();
    let err = p.rx_queue_setup(0, 64, &mp).unwrap_err().to_string();
    assert!(err.contains("rx_queue_setup failed"), "{err}");
    let err = p.start().unwrap_err().to_string();
    assert!(err.contains("RX queue 0 is not set up"), "{err}");
    let err = p.configure(100, 1).unwrap_err().to_string();
    assert!(err.contains("allows at most 64"), "{err}");
    // Control-path errors carry the driver's own message.
    let err = p.set_mtu(5).unwrap_err().to_string();
    assert_eq!(err, "port 0: mtu_set failed: MTU 5 is out of range 68..=9000");
}

#[test]
fn plugin_with_another_abi_major_is_refused() {
    let mut e = Eal::new(MemPolicy::NoHuge);
    let err = e.load_plugin(&plugin("ironpath_testpmd_abi_major")).unwrap_err();
    assert!(matches!(err, LoadError::AbiMajor { found: 2, expected: 1, .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("libironpath_testpmd_abi_major.so") && msg.contains("ABI major version 2, this host expects 1"),
        "{msg}"
    );
    assert!(e.drivers().is_empty());
}

#[test]
fn library_without_entry_symbol_is_refused() {
    let mut e = Eal::new(MemPolicy::NoHuge);
    let err = e.load_plugin(&plugin("ironpath_testpmd_no_entry")).unwrap_err();
    assert!(matches!(err, LoadError::NoEntry { .. }), "{err}");
    assert!(err.to_string().contains("no `ironpath_pmd_entry` symbol"), "{err}");
}

#[test]
fn panicking_probe_is_an_error_and_the_host_keeps_running() {
    let mut e = Eal::new(MemPolicy::NoHuge);
    e.load_plugin(&plugin("ironpath_testpmd_panic_probe")).unwrap();
    let err = e.port_attach("net_panic0").unwrap_err();
    assert!(matches!(err, PortError::Probe { .. }));
    assert!(err.to_string().contains("panicked in probe: deliberate panic in probe of net_panic0"), "{err}");
    // The same library still works, and fast-path panics become counted errors.
    let mp = pool("p", 64);
    let id = setup(&mut e, "net_panic1,ok=1", &mp);
    let rx = e.port(id).unwrap().rx_queue(0).unwrap();
    let mut b = [std::ptr::null_mut::<RawMbuf>(); 4];
    assert_eq!(rx.rx_burst(&mut b), 0);
    assert_eq!(e.port(id).unwrap().stats().unwrap().ierrors, 1);
    assert_eq!(mp.stats().in_use, 0, "the packets the panicking RX burst allocated went back to the pool");
    let err = e.port(id).unwrap().mac().unwrap_err().to_string();
    assert!(err.contains("mac_addr_get failed: driver panicked: deliberate panic in mac_addr_get"), "{err}");
    // The panic fenced the RX queue off: later bursts are skipped, and counted.
    assert_eq!(rx.rx_burst(&mut b), 0);
    let xs = |e: &Eal| -> std::collections::HashMap<String, u64> {
        e.port(id).unwrap().xstats().unwrap().into_iter().collect()
    };
    let x = xs(&e);
    assert_eq!((x["rx_q0_driver_panics"], x["rx_q0_fenced_bursts"]), (1, 1), "{x:?}");
    assert_eq!(e.port(id).unwrap().stats().unwrap().ierrors, 1, "the skipped burst is no new error");
    // A TX burst that panics before taking anything leaves every packet with the
    // caller (no leak), and fences the queue off too.
    let tx = e.port(id).unwrap().tx_queue(0).unwrap();
    let mut b = [std::ptr::null_mut::<RawMbuf>(); 2];
    mp.alloc_bulk_raw(&mut b).unwrap();
    assert_eq!(tx.tx_burst(&mut b), 0);
    assert_eq!(tx.tx_burst(&mut b), 0);
    let x = xs(&e);
    assert_eq!((x["tx_q0_driver_panics"], x["tx_q0_fenced_bursts"]), (1, 1), "{x:?}");
    // SAFETY: the two packets were never taken: still ours, freed once.
    unsafe { ironpath_eal::mbuf::free_bulk_raw(&b) };
    assert_eq!(mp.stats().in_use, 0);
}

#[test]
fn world_writable_plugin_is_refused() {
    use std::os::unix::fs::PermissionsExt;
    let dir = std::env::temp_dir().join(format!("ironpath-ww-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let f = dir.join("libironpath_pmd_null.so");
    std::fs::copy(plugin("ironpath_pmd_null"), &f).unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut e = Eal::new(MemPolicy::NoHuge);
    let errs = e.load_plugins(std::slice::from_ref(&dir), false);
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(errs.len(), 1);
    let msg = errs[0].to_string();
    assert!(msg.contains("writable by others than its owner (mode 0666)"), "{msg}");
    assert!(e.drivers().is_empty());
}

#[test]
fn library_stays_loaded_while_a_port_exists() {
    let mp = pool("keep", 64);
    let (id, mut e) = {
        let mut e = eal();
        let id = setup(&mut e, "net_null7", &mp);
        (id, e)
    };
    let driver = e.port(id).unwrap().driver().clone();
    assert!(std::sync::Arc::strong_count(&driver) >= 3, "registry + port + this handle");
    e.port_detach(id).unwrap();
    assert_eq!(std::sync::Arc::strong_count(&driver), 2, "registry + this handle");
}
