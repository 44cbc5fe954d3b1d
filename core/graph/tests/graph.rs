//! The engine with test nodes: dispatch, drops, counters, rings across lcores,
//! ordering, build errors.

use ironpath_eal::{Burst, MemPolicy, Mempool, MempoolConfig, MAX_BURST};
use ironpath_graph::{build, runner, CounterSpec, Dispatch, EdgeDecl, GraphError, Node, NodeCx, NodeDecl, DROP};
use std::sync::{Arc, Mutex};

/// Emits packets numbered 0.. (u64 in the first 8 bytes), `per_call` per walk, up to `total`.
struct Seq {
    pool: Mempool,
    next: u64,
    total: u64,
    per_call: usize,
}

impl Node for Seq {
    fn process(&mut self, _cx: &mut NodeCx<'_>, pkts: &mut Burst, _n: &mut [u16; MAX_BURST]) -> Dispatch {
        let want = ((self.total - self.next) as usize).min(self.per_call);
        if want > 0 && pkts.alloc(&self.pool, want).is_ok() {
            let start = pkts.len() - want;
            for i in start..pkts.len() {
                pkts.set_len(i, 64).unwrap()[..8].copy_from_slice(&self.next.to_le_bytes());
                self.next += 1;
            }
        }
        Dispatch::All(0)
    }
}

/// Sends even numbers to next 0, odd ones to next 1, multiples of 10 are dropped.
struct Parity;
ironpath_graph::counters! {
    enum ParityCounter {
        Tens("tens", "packets dropped"),
    }
}
impl Node for Parity {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        for (i, slot) in next.iter_mut().enumerate().take(pkts.len()) {
            let v = u64::from_le_bytes(pkts.data(i)[..8].try_into().unwrap());
            *slot = if v % 10 == 0 {
                cx.count(ParityCounter::Tens, 1);
                DROP
            } else {
                (v % 2) as u16
            };
        }
        Dispatch::Each
    }
    fn counters(&self) -> &'static [CounterSpec] {
        ParityCounter::SPECS
    }
}

/// Records what reaches it, then frees it.
struct Sink(Arc<Mutex<Vec<u64>>>);
impl Node for Sink {
    fn process(&mut self, _cx: &mut NodeCx<'_>, pkts: &mut Burst, _n: &mut [u16; MAX_BURST]) -> Dispatch {
        let mut v = self.0.lock().unwrap();
        for i in 0..pkts.len() {
            v.push(u64::from_le_bytes(pkts.data(i)[..8].try_into().unwrap()));
        }
        pkts.free_all();
        Dispatch::Consumed
    }
}

fn pool(n: u32) -> Mempool {
    Mempool::create(&MempoolConfig::new("g", n).cache_size(0).policy(MemPolicy::NoHuge)).unwrap()
}

fn decl(name: &str, lcore: u32, nexts: &[&str], source: bool, node: Box<dyn Node>) -> NodeDecl {
    NodeDecl {
        name: name.into(),
        type_name: "test".into(),
        lcore,
        nexts: nexts.iter().map(|s| s.to_string()).collect(),
        source,
        node,
        port: None,
    }
}

fn edge(from: &str, next: &str, to: &str) -> EdgeDecl {
    EdgeDecl { from: from.into(), next: next.into(), to: to.into(), ring_size: 256 }
}

#[test]
fn per_packet_dispatch_drops_and_counters_on_one_lcore() {
    let p = pool(1024);
    let (even, odd) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let nodes = vec![
        // Declared out of order on purpose: the engine sorts them.
        decl("even", 0, &[], false, Box::new(Sink(even.clone()))),
        decl("par", 0, &["even", "odd"], false, Box::new(Parity)),
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 1000, per_call: 32 })),
        decl("odd", 0, &[], false, Box::new(Sink(odd.clone()))),
    ];
    let edges = [edge("src", "out", "par"), edge("par", "even", "even"), edge("par", "odd", "odd")];
    let mut g = build(nodes, &edges, &[(0, None)]).unwrap();
    let lg = &mut g.lcores[0];
    assert_eq!(lg.node_names().collect::<Vec<_>>(), ["src", "par", "even", "odd"]);
    let mut walks = 0;
    while lg.run_once() > 0 {
        walks += 1;
    }
    assert_eq!(walks, 32); // 1000 / 32 rounded up
    let even = even.lock().unwrap().clone();
    let odd = odd.lock().unwrap().clone();
    assert_eq!(even, (0..1000).filter(|v| v % 2 == 0 && v % 10 != 0).collect::<Vec<_>>());
    assert_eq!(odd, (0..1000).filter(|v| v % 2 == 1).collect::<Vec<_>>());
    let par = g.info.node("par").unwrap().stats.clone();
    assert_eq!(par.packets.get(), 1000);
    assert_eq!(par.drops.get(), 100);
    assert_eq!(par.extra_by_name("tens"), Some(100));
    assert_eq!(g.info.node("src").unwrap().stats.packets.get(), 1000);
    assert!(g.info.format_runtime().contains("tens"));
    assert!(g.info.format_graph().contains("even -> even"));
    drop(g);
    assert_eq!(p.stats().in_use, 0, "every packet went back to the pool");
}

#[test]
fn unconnected_next_is_counted_and_freed() {
    let p = pool(256);
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 100, per_call: 50 })),
        decl("par", 0, &["even", "odd"], false, Box::new(Parity)),
    ];
    let mut g = build(nodes, &[edge("src", "out", "par")], &[(0, None)]).unwrap();
    while g.lcores[0].run_once() > 0 {}
    let par = g.info.node("par").unwrap().stats.snapshot();
    assert_eq!(par.drops, 100);
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn two_lcores_through_a_ring_keep_order_and_lose_nothing() {
    let p = Mempool::create(&MempoolConfig::new("g2", 4096).cache_size(64).policy(MemPolicy::NoHuge)).unwrap();
    let got = Arc::new(Mutex::new(Vec::new()));
    const N: u64 = 200_000;
    let nodes = vec![
        decl("src", 100, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: N, per_call: 32 })),
        decl("sink", 101, &[], false, Box::new(Sink(got.clone()))),
    ];
    let mut edges = vec![edge("src", "out", "sink")];
    edges[0].ring_size = 1 << 16;
    let g = build(nodes, &edges, &[(100, None), (101, None)]).unwrap();
    assert_eq!(g.info.nodes.len(), 4, "ring_tx and ring_rx were inserted");
    let info = g.info.clone();
    let run = runner::launch(g.lcores, false).unwrap();
    let t0 = std::time::Instant::now();
    while got.lock().unwrap().len() < N as usize
        && info.edges[0].stats.drops.get() == 0
        && t0.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert!(run.stop().is_empty());
    let got = got.lock().unwrap();
    let ring_full: u64 = info.nodes.iter().filter_map(|n| n.stats.extra_by_name("ring_full")).sum();
    assert_eq!(ring_full, 0);
    assert_eq!(got.len() as u64, N);
    assert!(got.iter().enumerate().all(|(i, &v)| i as u64 == v), "in order");
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn ring_full_drops_are_counted_and_nothing_leaks_at_stop() {
    let p = pool(2048);
    let nodes = vec![
        decl("src", 102, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 1000, per_call: 64 })),
        decl("sink", 103, &[], false, Box::new(Sink(Arc::new(Mutex::new(Vec::new()))))),
    ];
    let mut edges = vec![edge("src", "out", "sink")];
    edges[0].ring_size = 64;
    let mut g = build(nodes, &edges, &[(102, None), (103, None)]).unwrap();
    // Walk only the sending lcore: the ring fills, the rest is dropped and counted.
    let sender = g.lcores.iter().position(|l| l.lcore == 102).unwrap();
    while g.lcores[sender].run_once() > 0 {}
    let full: u64 = g.info.nodes.iter().filter_map(|n| n.stats.extra_by_name("ring_full")).sum();
    assert_eq!(full, 1000 - 64);
    drop(g); // ring receiver drains at finish
    assert_eq!(p.stats().in_use, 0);
}

#[test]
fn trace_records_the_armed_number_of_packets() {
    let p = pool(256);
    let got = Arc::new(Mutex::new(Vec::new()));
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 64, per_call: 16 })),
        decl("par", 0, &["even", "odd"], false, Box::new(Parity)),
        decl("sink", 0, &[], false, Box::new(Sink(got))),
    ];
    let edges = [edge("src", "out", "par"), edge("par", "even", "sink")];
    let mut g = build(nodes, &edges, &[(0, None)]).unwrap();
    assert!(!g.lcores[0].watched());
    g.info.trace("par", 5).unwrap();
    assert!(g.lcores[0].watched(), "arming sets the lcore's watch flag");
    assert!(g.info.trace("nope", 1).unwrap_err().contains("nodes: src, par, sink"));
    while g.lcores[0].run_once() > 0 {}
    assert!(!g.lcores[0].watched(), "the walk after the last traced packet clears it");
    let t = g.info.take_trace();
    assert_eq!(t.len(), 5, "{t:?}");
    // The header line: lcore, node, time since arming, edge, length and flags; then
    // the frame's headers decoded (Seq's frames start with a sequence number, not
    // Ethernet: the decoder still writes its ethernet line).
    let head = |r: &str| r.lines().next().unwrap().to_string();
    assert!(head(&t[0]).starts_with("lcore 0 par: +"), "{}", t[0]);
    assert!(head(&t[0]).ends_with(" ns -> drop, len 64, ol_flags none"), "{}", t[0]);
    assert!(head(&t[1]).contains(" ns -> odd (unconnected: drop), len 64"), "{}", t[1]);
    assert!(head(&t[2]).contains(" ns -> even, len 64"), "{}", t[2]);
    assert!(t[0].lines().nth(1).unwrap().starts_with("  ethernet: "), "{}", t[0]);
    assert!(g.info.trace("par", ironpath_graph::TRACE_MAX_PACKETS + 1).unwrap_err().contains("at most 1000"));
    g.info.trace("par", 3).unwrap();
    assert!(g.lcores[0].watched());
    g.info.clear_trace();
    assert!(g.info.take_trace().is_empty());
    g.lcores[0].run_once();
    assert!(!g.lcores[0].watched(), "a disarmed trace leaves the walks plain");
}

/// Passes everything on; traces each packet by its sequence number.
struct Numbered;
impl Node for Numbered {
    fn process(&mut self, _cx: &mut NodeCx<'_>, _pkts: &mut Burst, _n: &mut [u16; MAX_BURST]) -> Dispatch {
        Dispatch::All(0)
    }
    fn trace(&self, frame: &[u8], out: &mut String) {
        out.push_str(&format!("packet #{}", u64::from_le_bytes(frame[..8].try_into().unwrap())));
    }
}

#[test]
fn a_node_formats_its_own_trace_records() {
    let p = pool(64);
    let got = Arc::new(Mutex::new(Vec::new()));
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 4, per_call: 4 })),
        decl("num", 0, &["out"], false, Box::new(Numbered)),
        decl("sink", 0, &[], false, Box::new(Sink(got))),
    ];
    let edges = [edge("src", "out", "num"), edge("num", "out", "sink")];
    let mut g = build(nodes, &edges, &[(0, None)]).unwrap();
    g.info.trace("num", 2).unwrap();
    while g.lcores[0].run_once() > 0 {}
    let t: Vec<String> = g.info.take_trace().iter().map(|r| r.split_once(": +").unwrap().1.to_string()).collect();
    let t: Vec<&str> = t.iter().map(|r| r.split_once(" ns ").unwrap().1).collect();
    for (k, r) in t.iter().enumerate() {
        let want = format!("-> out, len 64, ol_flags none\n  packet #{k}\n  then lcore 0 sink: +");
        assert!(r.starts_with(&want), "{r}");
        assert!(r.contains(" ns -> consumed, len 64, ol_flags none\n    ethernet: "), "followed to the sink: {r}");
    }
    assert_eq!(t.len(), 2);
}

#[test]
fn build_errors_name_what_is_wrong() {
    let mk = || {
        vec![
            decl("a", 0, &["out"], true, Box::new(Parity) as Box<dyn Node>),
            decl("b", 0, &["out"], false, Box::new(Parity)),
        ]
    };
    let lc = [(0, None)];
    assert!(
        matches!(build(mk(), &[edge("a", "out", "zz")], &lc), Err(GraphError::NoNode { missing, .. }) if missing == "zz")
    );
    assert!(
        matches!(build(mk(), &[edge("a", "bad", "b")], &lc), Err(GraphError::NoNext { declared, .. }) if declared == "out")
    );
    assert!(matches!(
        build(mk(), &[edge("a", "out", "b"), edge("a", "out", "b")], &lc),
        Err(GraphError::TwiceConnected { .. })
    ));
    assert!(matches!(build(mk(), &[edge("a", "out", "b"), edge("b", "out", "a")], &lc), Err(GraphError::Loop { .. })));
    assert!(matches!(build(mk(), &[], &[(1, None)]), Err(GraphError::NoLcore { lcore: 0, .. })));
    let mut dup = mk();
    dup[1].name = "a".into();
    assert_eq!(build(dup, &[], &lc).err(), Some(GraphError::Duplicate("a".into())));
    // A loop across two lcores is fine: it goes through a ring.
    let mut two = mk();
    two[1].lcore = 1;
    assert!(build(two, &[edge("a", "out", "b"), edge("b", "out", "a")], &[(0, None), (1, None)]).is_ok());
}

/// A source that finds nothing; every `slow_every`-th call it takes `slow` (as an
/// interrupt landing in an idle walk would).
struct SlowIdle {
    calls: u64,
    slow_every: u64,
    slow: std::time::Duration,
}
impl Node for SlowIdle {
    fn process(&mut self, _cx: &mut NodeCx<'_>, _p: &mut Burst, _n: &mut [u16; MAX_BURST]) -> Dispatch {
        self.calls += 1;
        if self.calls.is_multiple_of(self.slow_every) {
            let t = std::time::Instant::now();
            while t.elapsed() < self.slow {}
        }
        Dispatch::All(0)
    }
}

#[test]
fn idle_walks_that_last_long_are_counted_and_short_ones_are_not() {
    // 10 slow walks of 2 ms among ~200,000 fast ones (several ms together): the long
    // idle time must hold the slow walks and leave the fast ones out. Another thread
    // preempting this one is counted too (rightly), so up to 3 attempts.
    let slow = std::time::Duration::from_millis(2);
    let hz = ironpath_eal::tsc::tsc_hz() as f64;
    let mut seen = Vec::new();
    for _ in 0..3 {
        let node = SlowIdle { calls: 0, slow_every: 20_000, slow };
        let mut g = build(vec![decl("idle", 0, &[], true, Box::new(node))], &[], &[(0, None)]).unwrap();
        let t = std::time::Instant::now();
        for _ in 0..200_000 {
            assert_eq!(g.lcores[0].run_once(), 0);
        }
        g.lcores[0].run_once(); // ends the last walk
        let total = t.elapsed().as_secs_f64();
        let st = &g.info.lcore_stats[0].1;
        assert_eq!(st.busy_cycles.get(), 0);
        let long = st.long_idle_cycles.get() as f64 / hz;
        let fast = total - long;
        seen.push((long, total));
        if long >= 0.020 && fast > 0.002 {
            return;
        }
    }
    panic!("long idle walks (s, of total s): {seen:?}; expected >= 0.020 with the fast walks (> 2 ms) left out");
}

/// A test-only node that panics on a burst holding a packet whose number `bad`
/// accepts (a bug in a node one packet can reach), after recording nothing of it.
struct Panicker {
    bad: fn(u64) -> bool,
    seen: Arc<Mutex<Vec<u64>>>,
}
impl Node for Panicker {
    fn process(&mut self, _cx: &mut NodeCx<'_>, pkts: &mut Burst, _n: &mut [u16; MAX_BURST]) -> Dispatch {
        let vals: Vec<u64> =
            (0..pkts.len()).map(|i| u64::from_le_bytes(pkts.data(i)[..8].try_into().unwrap())).collect();
        if let Some(v) = vals.iter().find(|v| (self.bad)(**v)) {
            panic!("deliberate panic at packet {v}");
        }
        self.seen.lock().unwrap().extend(vals);
        pkts.free_all();
        Dispatch::Consumed
    }
}

#[test]
fn a_node_that_panics_on_one_packet_drops_that_packet_and_keeps_forwarding_the_others() {
    let p = pool(1024);
    let (even, odd) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let bad = |v: u64| v % 100 == 2;
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 1000, per_call: 32 })),
        decl("par", 0, &["even", "odd"], false, Box::new(Parity)),
        decl("bad", 0, &[], false, Box::new(Panicker { bad, seen: even.clone() })),
        decl("odd", 0, &[], false, Box::new(Sink(odd.clone()))),
    ];
    let edges = [edge("src", "out", "par"), edge("par", "even", "bad"), edge("par", "odd", "odd")];
    let mut g = build(nodes, &edges, &[(0, None)]).unwrap();
    while g.lcores[0].run_once() > 0 {}
    // The other branch got everything.
    assert_eq!(*odd.lock().unwrap(), (0..1000).filter(|v| v % 2 == 1).collect::<Vec<_>>());
    // The first panic took its whole burst (packets 0..31: the evens of it); from
    // then on the node took its bursts one packet at a time (each later panic came
    // within the isolation), so each later bad packet took only itself.
    let seen = even.lock().unwrap().clone();
    let evens: Vec<u64> = (0..1000).filter(|v| v % 2 == 0 && v % 10 != 0).collect();
    let first_burst: Vec<u64> = evens.iter().copied().filter(|v| (0..32).contains(v)).collect();
    let want: Vec<u64> = evens.iter().copied().filter(|v| !bad(*v) && !first_burst.contains(v)).collect();
    assert_eq!(seen, want);
    let st = g.info.node("bad").unwrap().stats.clone();
    assert_eq!(st.panics.get(), 10, "packets 102, 202, .. 902, 2");
    assert_eq!(st.panic_drops.get(), first_burst.len() as u64 + 9, "the first burst, then one packet each");
    assert_eq!(first_burst.len(), 12);
    assert_eq!(st.fences.get(), 0);
    assert_eq!(st.snapshot().drops, st.panic_drops.get());
    assert_eq!(
        st.first_panic.get().map(|m| m.starts_with("deliberate panic at packet 2 ")),
        Some(true),
        "{:?}",
        st.first_panic.get()
    );
    assert!(st.first_panic.get().unwrap().contains("graph.rs:"), "where it happened: {:?}", st.first_panic.get());
    let rt = g.info.format_runtime();
    assert!(rt.contains("panics") && rt.contains("deliberate panic at packet 2"), "{rt}");
    drop(g);
    assert_eq!(p.stats().in_use, 0, "the dropped packets went back to the pool");
}

#[test]
fn a_node_that_panics_on_every_call_is_fenced_then_called_again() {
    use ironpath_graph::guard::{FENCE_AFTER, FENCE_FIRST, FENCE_MIN_SPAN};
    let p = pool(1024);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: u64::MAX, per_call: 1 })),
        decl("bad", 0, &[], false, Box::new(Panicker { bad: |_| true, seen: seen.clone() })),
    ];
    let mut g = build(nodes, &[edge("src", "out", "bad")], &[(0, None)]).unwrap();
    let st = g.info.node("bad").unwrap().stats.clone();
    let t = std::time::Instant::now();
    // Panics in a row for FENCE_MIN_SPAN: then fenced.
    while st.fences.get() == 0 {
        g.lcores[0].run_once();
        assert!(t.elapsed().as_secs_f64() < FENCE_MIN_SPAN + 5.0, "not fenced: {} panics", st.panics.get());
    }
    let panics = st.panics.get();
    assert!(panics >= u64::from(FENCE_AFTER), "{panics}");
    assert_eq!(st.fenced.get(), 1);
    assert!(
        t.elapsed().as_secs_f64() >= FENCE_MIN_SPAN * 0.95,
        "fenced after {:?}, {panics} panics, hz {}",
        t.elapsed(),
        ironpath_eal::tsc::tsc_hz()
    );
    // While fenced: not called, what is sent to it counted.
    let fenced_at = std::time::Instant::now();
    while fenced_at.elapsed().as_secs_f64() < FENCE_FIRST / 2.0 {
        g.lcores[0].run_once();
    }
    assert_eq!(st.panics.get(), panics, "a fenced node is not called");
    assert!(st.fenced_drops.get() > 0);
    // After the fence it is called again: it panics at once and is fenced again.
    while st.fences.get() < 2 {
        g.lcores[0].run_once();
        assert!(fenced_at.elapsed().as_secs_f64() < FENCE_FIRST + 5.0, "not fenced again");
    }
    assert!(fenced_at.elapsed().as_secs_f64() >= FENCE_FIRST * 0.9);
    assert_eq!(st.panics.get(), panics + 1, "one call, one panic, fenced again (for twice as long)");
    assert!(seen.lock().unwrap().is_empty());
    drop(g);
    assert_eq!(p.stats().in_use, 0);
}

/// Sends every packet on next 0 and a shared reference to it on next 1 (a mirror).
struct Twice;
impl Node for Twice {
    fn process(&mut self, _cx: &mut NodeCx<'_>, pkts: &mut Burst, next: &mut [u16; MAX_BURST]) -> Dispatch {
        let n = pkts.len();
        let k = n.min(pkts.room());
        next[..n].fill(0);
        for i in 0..k {
            let c = pkts.share(i);
            if pkts.push(c).is_ok() {
                next[pkts.len() - 1] = 1;
            }
        }
        Dispatch::Each
    }
}

/// `show runtime`: a node that sends more than it is given counts what it was
/// given, with what it sent on each edge on lines of their own; `Pkts/call` is
/// Packets / Calls and `Pkts/busy` is Packets / Busy, as printed.
#[test]
fn runtime_counts_what_a_node_was_given_and_its_ratios_add_up() {
    let p = pool(1024);
    let (a, b) = (Arc::new(Mutex::new(Vec::new())), Arc::new(Mutex::new(Vec::new())));
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 100, per_call: 10 })),
        decl("twice", 0, &["out", "copy"], false, Box::new(Twice)),
        decl("a", 0, &[], false, Box::new(Sink(a.clone()))),
        decl("b", 0, &[], false, Box::new(Sink(b.clone()))),
    ];
    let edges = [edge("src", "out", "twice"), edge("twice", "out", "a"), edge("twice", "copy", "b")];
    let mut g = build(nodes, &edges, &[(0, None)]).unwrap();
    let lg = &mut g.lcores[0];
    // 10 busy walks, then idle ones: calls of the source outnumber its busy calls.
    for _ in 0..25 {
        lg.run_once();
    }
    assert_eq!((a.lock().unwrap().len(), b.lock().unwrap().len()), (100, 100));
    let rt = g.info.format_runtime();
    let header: Vec<&str> = rt.lines().next().unwrap().split_whitespace().collect();
    assert_eq!(
        header,
        ["Name", "Type", "Lcore", "Calls", "Busy", "Packets", "Drops", "Cycles/pkt", "Pkts/call", "Pkts/busy"]
    );
    let row = |name: &str| -> Vec<String> {
        rt.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row {name}:\n{rt}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let num = |r: &[String], k: usize| -> f64 { r[k].parse().unwrap() };
    for name in ["src", "twice", "a", "b"] {
        let r = row(name);
        let (calls, busy, packets) = (num(&r, 3), num(&r, 4), num(&r, 5));
        assert!(busy <= calls, "{rt}");
        assert_eq!(format!("{:.2}", packets / calls), r[8], "{name}: Pkts/call = Packets / Calls\n{rt}");
        assert_eq!(format!("{:.1}", packets / busy), r[9], "{name}: Pkts/busy = Packets / Busy\n{rt}");
    }
    let (src, twice) = (row("src"), row("twice"));
    assert_eq!((src[3].as_str(), src[4].as_str(), src[5].as_str()), ("25", "10", "100"), "{rt}");
    assert_eq!(twice[5], "100", "the mirror counts what it was given, not what it sent:\n{rt}");
    let edge_line = |s: &str| {
        rt.lines().find(|l| l.trim_start().starts_with(s)).unwrap_or_else(|| panic!("no `{s}` line:\n{rt}")).to_owned()
    };
    assert!(edge_line("to out -> a").split_whitespace().any(|w| w == "100"), "{rt}");
    assert!(edge_line("to copy -> b").split_whitespace().any(|w| w == "100"), "{rt}");
    // One edge: no per-edge line.
    assert!(!rt.contains("to out -> twice"), "{rt}");
    drop(g);
    assert_eq!(p.stats().in_use, 0);
}

/// The `par` row of a `show runtime` text: calls, busy, packets, drops.
fn par_row(rt: &str) -> Vec<u64> {
    let l = rt.lines().find(|l| l.starts_with("par ")).unwrap_or_else(|| panic!("no par in\n{rt}"));
    l.split_whitespace().skip(3).take(4).map(|w| w.parse().unwrap()).collect()
}

#[test]
fn runtime_since_a_base_counts_from_it_and_leaves_the_counters() {
    let p = pool(1024);
    let sink = Arc::new(Mutex::new(Vec::new()));
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 100, per_call: 10 })),
        decl("par", 0, &["even", "odd"], false, Box::new(Parity)),
        decl("s", 0, &[], false, Box::new(Sink(sink.clone()))),
    ];
    let edges = [edge("src", "out", "par"), edge("par", "even", "s"), edge("par", "odd", "s")];
    let mut g = build(nodes, &edges, &[(0, None)]).unwrap();
    for _ in 0..5 {
        g.lcores[0].run_once();
    }
    let base = g.info.runtime_base();
    // Nothing since the base: zeros, edges and own counters included.
    let rt = g.info.format_runtime_since(&base);
    assert_eq!(par_row(&rt), [0, 0, 0, 0], "{rt}");
    assert!(!rt.contains("tens"), "a zero own counter is not shown\n{rt}");
    assert!(rt.contains("to even -> s                                    0 packets"), "{rt}");
    for _ in 0..5 {
        g.lcores[0].run_once();
    }
    // The second half: 50 packets, 5 of them multiples of ten.
    let rt = g.info.format_runtime_since(&base);
    assert_eq!(par_row(&rt), [5, 5, 50, 5], "{rt}");
    assert!(rt.contains("tens                                            5 packets dropped"), "{rt}");
    // The counters themselves were never reset.
    assert_eq!(par_row(&g.info.format_runtime()), [10, 10, 100, 10]);
    assert_eq!(g.info.node("par").unwrap().stats.packets.get(), 100);
}

#[test]
fn capture_copies_what_the_points_see_filters_it_and_counts_what_the_ring_cannot_take() {
    use ironpath_graph::bpf::{Insn, Program};
    use ironpath_graph::capture::{At, Point, Spec, MAX_CAPTURES, RECORD_HEADER, RING_BYTES};
    let p = pool(512);
    let got = Arc::new(Mutex::new(Vec::new()));
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p.clone(), next: 0, total: 300, per_call: 30 })),
        decl("par", 0, &["even", "odd"], false, Box::new(Parity)),
        decl("sink", 0, &[], false, Box::new(Sink(got.clone()))),
    ];
    let edges = [edge("src", "out", "par"), edge("par", "even", "sink"), edge("par", "odd", "sink")];
    let mut g = build(nodes, &edges, &[(0, None)]).unwrap();
    let point = |name: &str, node: &str, at: At| Point { name: name.into(), nodes: vec![node.into()], at };
    // Everything `src` passes on, and what `par` sends along `odd`, cut at 16 bytes.
    let mut all = g
        .info
        .capture(Spec {
            points: vec![point("src", "src", At::Output), point("par.odd", "par", At::Edge("odd".into()))],
            snaplen: 16,
            filter: None,
        })
        .unwrap();
    // Only packets whose first byte is below 100 (the sequence number's low byte):
    // A = P[0]; A < 100 ? keep 1000 : reject.
    let below_100 = Program::verify(&[
        Insn::new(0x30, 0, 0, 0),
        Insn::new(0x35, 1, 0, 100),
        Insn::new(0x06, 0, 0, 1000),
        Insn::new(0x06, 0, 0, 0),
    ])
    .unwrap();
    let mut filtered = g
        .info
        .capture(Spec { points: vec![point("sink", "sink", At::Input)], snaplen: 64, filter: Some(below_100) })
        .unwrap();
    assert!(g
        .info
        .capture(Spec { points: vec![point("x", "nope", At::Input)], snaplen: 64, filter: None })
        .unwrap_err()
        .contains("no node `nope`"));
    assert!(g
        .info
        .capture(Spec { points: vec![point("x", "par", At::Edge("up".into()))], snaplen: 64, filter: None })
        .unwrap_err()
        .contains("its nexts: even, odd"));
    assert_eq!(all.ring_bytes(), RING_BYTES);
    while g.lcores[0].run_once() > 0 {}
    let mut recs = Vec::new();
    all.drain(usize::MAX, |r| recs.push((r.point, r.orig_len, r.data.clone())));
    assert_eq!(recs.iter().filter(|r| r.0 == 0).count(), 300);
    let odd: Vec<u64> =
        recs.iter().filter(|r| r.0 == 1).map(|r| u64::from_le_bytes(r.2[..8].try_into().unwrap())).collect();
    assert_eq!(odd, (0..300).filter(|v| v % 2 == 1).collect::<Vec<_>>());
    assert!(recs.iter().all(|r| r.1 == 64 && r.2.len() == 16));
    assert_eq!(all.counts(0), (300, 0));
    assert_eq!(all.counts(1), (150, 0));
    let mut sunk = Vec::new();
    filtered.drain(usize::MAX, |r| sunk.push(u64::from_le_bytes(r.data[..8].try_into().unwrap())));
    // The sink is given a walk's even packets, then its odd ones.
    sunk.sort_unstable();
    let want: Vec<u64> = (0..300).filter(|v| v % 10 != 0 && v % 256 < 100).collect();
    assert_eq!(sunk, want);
    assert!(filtered.counts(0).1 == 0 && filtered.counts(0).0 == want.len() as u64);
    // Disarmed when dropped: the slot is free again, nothing more is copied.
    drop(filtered);
    let extra: Vec<_> = (0..MAX_CAPTURES - 1)
        .map(|_| {
            g.info.capture(Spec { points: vec![point("s", "sink", At::Input)], snaplen: 65535, filter: None }).unwrap()
        })
        .collect();
    assert!(g
        .info
        .capture(Spec { points: vec![point("s", "sink", At::Input)], snaplen: 64, filter: None })
        .unwrap_err()
        .contains("captures run already"));
    drop(extra);
    drop(all);
    // A ring that is not drained: what it cannot take is counted, the walk goes on.
    let p2 = pool(2048);
    let total = 110_000u64;
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(Seq { pool: p2.clone(), next: 0, total, per_call: 32 })),
        decl("sink", 0, &[], false, Box::new(Sink(Arc::new(Mutex::new(Vec::new()))))),
    ];
    let mut g2 = build(nodes, &[edge("src", "out", "sink")], &[(0, None)]).unwrap();
    let mut slow =
        g2.info.capture(Spec { points: vec![point("sink", "sink", At::Input)], snaplen: 65535, filter: None }).unwrap();
    assert_eq!(slow.ring_bytes(), RING_BYTES);
    while g2.lcores[0].run_once() > 0 {}
    // 8 MiB holds this many records of a header and 64 bytes; the rest were dropped.
    let fit = (RING_BYTES / (RECORD_HEADER + 64)) as u64;
    assert_eq!(slow.counts(0), (total, total - fit));
    let mut seq = Vec::new();
    assert_eq!(slow.drain(usize::MAX, |r| seq.push(u64::from_le_bytes(r.data[..8].try_into().unwrap()))), fit as usize);
    assert_eq!(seq, (0..fit).collect::<Vec<_>>(), "the first ones, whole and in order");
    assert!(!slow.graph_stopped());
    drop(g2);
    assert!(slow.graph_stopped());
    assert_eq!(p2.stats().in_use, 0);
}

/// Emits one packet of two segments (60 bytes of 0x11, then 40 of 0x22) per call,
/// `left` times.
struct TwoSegs {
    pool: Mempool,
    left: u32,
}

impl Node for TwoSegs {
    fn process(&mut self, _cx: &mut NodeCx<'_>, pkts: &mut Burst, _n: &mut [u16; MAX_BURST]) -> Dispatch {
        if self.left > 0 {
            self.left -= 1;
            let mut head = ironpath_eal::Mbuf::alloc(&self.pool).unwrap();
            head.append(60).unwrap().fill(0x11);
            let mut tail = ironpath_eal::Mbuf::alloc(&self.pool).unwrap();
            tail.append(40).unwrap().fill(0x22);
            head.chain(tail).unwrap();
            let _ = pkts.push(head);
        }
        Dispatch::All(0)
    }
}

#[test]
fn capture_copies_every_segment_up_to_the_snap_length() {
    use ironpath_graph::capture::{At, Point, Spec};
    let p = pool(64);
    let nodes = vec![
        decl("src", 0, &["out"], true, Box::new(TwoSegs { pool: p.clone(), left: 2 })),
        decl("sink", 0, &[], false, Box::new(Sink(Arc::new(Mutex::new(Vec::new()))))),
    ];
    let mut g = build(nodes, &[edge("src", "out", "sink")], &[(0, None)]).unwrap();
    let spec = |snaplen| Spec {
        points: vec![Point { name: "src.out".into(), nodes: vec!["src".into()], at: At::Edge("out".into()) }],
        snaplen,
        filter: None,
    };
    let mut whole = g.info.capture(spec(65535)).unwrap();
    let mut cut = g.info.capture(spec(70)).unwrap();
    while g.lcores[0].run_once() > 0 {}
    let mut got = Vec::new();
    whole.drain(usize::MAX, |r| got.push((r.orig_len, r.data.clone())));
    let want: Vec<u8> = [vec![0x11; 60], vec![0x22; 40]].concat();
    assert_eq!(got, vec![(100, want.clone()), (100, want.clone())]);
    got.clear();
    cut.drain(usize::MAX, |r| got.push((r.orig_len, r.data.clone())));
    assert_eq!(got, vec![(100, want[..70].to_vec()), (100, want[..70].to_vec())]);
    drop(g);
    assert_eq!(p.stats().in_use, 0);
}

/// A source that emits one numbered packet when `go` is set (polled lcore), or at
/// TSC time `at` (then it tells a sleeping lcore its timer).
struct Gate {
    pool: Mempool,
    go: Arc<std::sync::atomic::AtomicBool>,
    at: Option<u64>,
    sent: u64,
}

impl Node for Gate {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _n: &mut [u16; MAX_BURST]) -> Dispatch {
        let due = self.at.is_some_and(|t| cx.now_tsc >= t);
        if (due || self.go.swap(false, std::sync::atomic::Ordering::Relaxed)) && pkts.alloc(&self.pool, 1).is_ok() {
            let i = pkts.len() - 1;
            pkts.set_len(i, 64).unwrap()[..8].copy_from_slice(&self.sent.to_le_bytes());
            self.sent += 1;
            self.at = None;
        }
        Dispatch::All(0)
    }

    fn sleep(&mut self, _cx: &mut NodeCx<'_>, plan: &mut ironpath_graph::SleepPlan) {
        match self.at {
            Some(t) => plan.until(t),
            None => plan.quiet(),
        }
    }
}

fn wait_until(secs: u64, ok: impl Fn() -> bool) -> bool {
    let t0 = std::time::Instant::now();
    while !ok() {
        if t0.elapsed() > std::time::Duration::from_secs(secs) {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    true
}

#[test]
fn a_sleeping_lcore_is_woken_by_a_ring_from_another_lcore_and_by_a_timer() {
    use ironpath_graph::RxMode;
    let p = pool(256);
    let got = Arc::new(Mutex::new(Vec::new()));
    let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let nodes = vec![
        decl("gate", 110, &["out"], true, Box::new(Gate { pool: p.clone(), go: go.clone(), at: None, sent: 0 })),
        decl("sink", 111, &[], false, Box::new(Sink(got.clone()))),
    ];
    let mut g = build(nodes, &[edge("gate", "out", "sink")], &[(110, None), (111, None)]).unwrap();
    g.lcores[0].set_rx_mode(RxMode::Poll);
    g.lcores[1].set_rx_mode(RxMode::Interrupt);
    let info = g.info.clone();
    let consumer = info.lcore_stats.iter().find(|(l, _)| *l == 111).unwrap().1.clone();
    let run = runner::launch(g.lcores, false).unwrap();
    // The consumer has nothing to do: it sleeps (its ring_rx waits for the doorbell).
    assert!(wait_until(10, || consumer.walks.get() > 0));
    std::thread::sleep(std::time::Duration::from_millis(100));
    let walks = consumer.walks.get();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(consumer.walks.get() - walks < 10, "an idle interrupt-mode lcore does not walk");
    for k in 0..5u64 {
        go.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(wait_until(10, || got.lock().unwrap().len() as u64 == k + 1), "packet {k} crossed the ring");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(consumer.wake_bell.get() >= 4, "the producer's doorbell woke it: {}", consumer.wake_bell.get());
    assert!(run.stop().is_empty(), "stop wakes a sleeping lcore");
    assert_eq!(*got.lock().unwrap(), (0..5).collect::<Vec<_>>());

    // A node's timer ends a sleep: a source due 30 ms from now on an interrupt lcore.
    let got = Arc::new(Mutex::new(Vec::new()));
    let hz = ironpath_eal::tsc::tsc_hz();
    let at = ironpath_eal::tsc::rdtsc() + hz / 1000 * 30;
    let idle = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let nodes = vec![
        decl("gate", 0, &["out"], true, Box::new(Gate { pool: p.clone(), go: idle, at: Some(at), sent: 7 })),
        decl("sink", 0, &[], false, Box::new(Sink(got.clone()))),
    ];
    let mut g = build(nodes, &[edge("gate", "out", "sink")], &[(0, None)]).unwrap();
    g.lcores[0].set_rx_mode(RxMode::Interrupt);
    let st = g.info.lcore_stats[0].1.clone();
    let run = runner::launch(g.lcores, false).unwrap();
    assert!(wait_until(10, || !got.lock().unwrap().is_empty()), "the timer's packet came");
    assert!(ironpath_eal::tsc::rdtsc() >= at);
    assert!(st.wake_timer.get() >= 1, "a timer ended the sleep");
    assert!(run.stop().is_empty());
    assert_eq!(*got.lock().unwrap(), [7]);
    assert_eq!(p.stats().in_use, 0);
}
