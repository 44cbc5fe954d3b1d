//! Receive aggregation, ours, measured alone: a capture of TCP/IPv4 segments is
//! replayed from memory in bursts; each burst is copied into fresh mbufs (not
//! timed), the aggregator runs on it (timed with the TSC), and the outputs are
//! freed (not timed). `ci/bench-gro` runs this and DPDK's librte_gro
//! (`ci/bench/gro_dpdk.c`, the same loop in C) on the same capture, alternately,
//! and prints the table; see docs/benchmarks.md.
//!
//! ```text
//! gro --write-pcap FILE --flows N [--packets P]     write a capture
//! gro --pcap FILE --mode gro|lro|off [--flush burst|timeout] [--timeout-us U]
//!     [--dur S] [--warmup S] [--burst B] [--max-flows F] [--no-csum-offload]
//! gro                                                (plain `cargo bench`) a quick look, ours only
//! ```
//!
//! The capture: `flows` TCP flows 198.18.(4 + i / 256).(i % 256):(10000 + i) ->
//! 198.18.0.2:5201, interleaved round-robin, 1448-byte payloads, ACK only,
//! contiguous sequence numbers and IPv4 IDs per flow, DF, the same window and
//! NOP NOP timestamp option throughout: every segment is mergeable.
//!
//! As in the C harness: the frames sit back to back in one buffer; the thread is
//! an lcore (its pools serve it from the per-lcore cache, as DPDK's main lcore is
//! served); a refilled mbuf is flagged as a NIC would flag it (IPv4 and TCP
//! checksums good, packet type, header lengths); a burst whose timed part took
//! over a millisecond (the thread was descheduled) is not counted.
//!
//! `off` times the refill and free of the burst instead (nothing in between):
//! what the untimed part of the other modes costs, for scale.
//!
//! One line `RESULT key=value ...` per measurement, for the script.
#![forbid(unsafe_code)]

use ironpath_eal::abi::{self, ptype};
use ironpath_eal::tsc::{rdtsc, tsc_hz};
use ironpath_eal::{Burst, MemPolicy, Mempool, MempoolConfig};
use ironpath_nodes::aggregate::{AggrConfig, AggrStats, Aggregator, Flush, Mode};
use ironpath_pcapfile::{read, Writer};
use ironpath_wire::ipv4::Ipv4Packet;
use ironpath_wire::tcp::TcpPacket;
use ironpath_wire::IpAddress;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

const MSS: usize = 1448;
const L2: usize = 14;
const L3: usize = 20;
const L4: usize = 32;

/// Segment `k` of flow `i` (of `flows`).
fn frame(i: usize, k: usize) -> Vec<u8> {
    let mut d = vec![0u8; L2 + L3 + L4 + MSS];
    d[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    d[6..12].copy_from_slice(&[2, 0, 0, 0, 1, 1]);
    d[12..14].copy_from_slice(&[0x08, 0x00]);
    let src = Ipv4Addr::new(198, 18, 4 + (i / 256) as u8, (i % 256) as u8);
    let dst = Ipv4Addr::new(198, 18, 0, 2);
    let ip = &mut d[L2..L2 + L3];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((L3 + L4 + MSS) as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&((i as u16).wrapping_mul(7919).wrapping_add(k as u16)).to_be_bytes());
    ip[6] = 0x40; // DF
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    Ipv4Packet::new_unchecked(&mut d[L2..L2 + L3]).fill_checksum();
    let tcp = &mut d[L2 + L3..];
    tcp[0..2].copy_from_slice(&(10000 + i as u16).to_be_bytes());
    tcp[2..4].copy_from_slice(&5201u16.to_be_bytes());
    let seq = (i as u32).wrapping_mul(0x9e37_79b9).wrapping_add((k * MSS) as u32);
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[8..12].copy_from_slice(&0x1234_5678u32.to_be_bytes());
    tcp[12] = ((L4 / 4) as u8) << 4;
    tcp[13] = 0x10; // ACK
    tcp[14..16].copy_from_slice(&502u16.to_be_bytes());
    tcp[20..32].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9]);
    for (j, b) in tcp[L4..].iter_mut().enumerate() {
        *b = (j as u32).wrapping_mul(31).wrapping_add(seq) as u8;
    }
    TcpPacket::new_unchecked(&mut d[L2 + L3..]).fill_checksum(&IpAddress::V4(src), &IpAddress::V4(dst));
    d
}

fn write_pcap(path: &Path, flows: usize, packets: usize) -> std::io::Result<()> {
    let mut w = Writer::create(path, false)?;
    let per_flow = packets.div_ceil(flows);
    for k in 0..per_flow {
        for i in 0..flows {
            w.write(&frame(i, k))?;
        }
    }
    w.flush()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum What {
    Agg(Mode),
    Off,
}

struct Opts {
    what: What,
    flush: Flush,
    timeout_us: f64,
    dur: f64,
    warmup: f64,
    burst: usize,
    max_flows: usize,
    offload: bool,
}

/// What one measurement counted.
#[derive(Default)]
struct Tally {
    pkts_in: u64,
    pkts_out: u64,
    bursts: u64,
    cycles: u64,
    /// Bursts not counted: their timed part took over a millisecond (the thread
    /// was descheduled; the whole loop is normally a few microseconds).
    skipped: u64,
}

/// The capture in memory as the C harness holds it: every frame back to back in
/// one buffer.
struct Frames {
    bytes: Vec<u8>,
    /// Start and length of each frame in `bytes`.
    at: Vec<(usize, usize)>,
}

impl Frames {
    fn new(pkts: impl Iterator<Item = Vec<u8>>) -> Self {
        let mut f = Frames { bytes: Vec::new(), at: Vec::new() };
        for p in pkts {
            f.at.push((f.bytes.len(), p.len()));
            f.bytes.extend_from_slice(&p);
        }
        f
    }

    fn get(&self, i: usize) -> &[u8] {
        let (o, n) = self.at[i];
        &self.bytes[o..o + n]
    }
}

/// Copy the next `n` frames into fresh mbufs, flagged as a NIC that verified the
/// checksums and classified the packet would (when `offload`).
fn refill(b: &mut Burst, pool: &Mempool, frames: &Frames, pos: &mut usize, n: usize, offload: bool) {
    b.alloc(pool, n).expect("pool large enough for a burst");
    for i in 0..n {
        let f = frames.get(*pos);
        *pos = if *pos + 1 == frames.at.len() { 0 } else { *pos + 1 };
        b.set_len(i, f.len()).expect("frame fits an mbuf").copy_from_slice(f);
        let h = b.header_mut(i);
        h.ol_flags = if offload { abi::RX_IP_CKSUM_GOOD | abi::RX_L4_CKSUM_GOOD } else { 0 };
        h.packet_type = ptype::L2_ETHER | ptype::L3_IPV4 | ptype::L4_TCP;
        h.l2_len = L2 as u8;
        h.l3_len = L3 as u16;
        h.l4_len = L4 as u8;
    }
}

/// One measurement: warm-up, then `o.dur` seconds; everything held is freed
/// before the pools go.
fn measure(frames: &Frames, o: &Opts) -> (Tally, Option<AggrStats>) {
    let pool = Mempool::create(&MempoolConfig::new("gro-bench", 32767).policy(MemPolicy::NoHuge)).expect("pool");
    let hz = tsc_hz();
    let mut agg = match o.what {
        What::Agg(mode) => {
            let lro = (mode == Mode::Lro).then(|| {
                Mempool::create(&MempoolConfig::new("gro-bench-lro", 1100).data_room(65535).policy(MemPolicy::NoHuge))
                    .expect("LRO pool")
            });
            let cfg = AggrConfig {
                mode,
                max_bytes: 65535,
                max_segments: 64,
                max_flows: o.max_flows,
                max_held: AggrConfig::default().max_held,
                flush: o.flush,
                flush_tsc: (o.timeout_us * hz as f64 / 1e6) as u64,
                drop_bad: false,
                tso: false,
            };
            Some(Aggregator::new(cfg, lro))
        }
        What::Off => None,
    };
    let mut b = Burst::new();
    let mut pos = 0;
    let mut t = Tally::default();
    for (secs, keep) in [(o.warmup, false), (o.dur, true)] {
        t = Tally::default();
        if let Some(a) = agg.as_mut() {
            a.stats = Default::default();
        }
        let end = rdtsc() + (secs * hz as f64) as u64;
        while rdtsc() < end {
            let (t0, t1, n_out);
            match agg.as_mut() {
                Some(a) => {
                    refill(&mut b, &pool, frames, &mut pos, o.burst, o.offload);
                    t0 = rdtsc();
                    a.process(&mut b, t0);
                    t1 = rdtsc();
                    n_out = b.len() as u64;
                    b.free_all();
                }
                None => {
                    t0 = rdtsc();
                    refill(&mut b, &pool, frames, &mut pos, o.burst, o.offload);
                    n_out = b.len() as u64;
                    b.free_all();
                    t1 = rdtsc();
                }
            }
            if t1 - t0 > hz / 1000 {
                t.skipped += 1;
                continue;
            }
            t.pkts_out += n_out;
            t.cycles += t1 - t0;
            t.pkts_in += o.burst as u64;
            t.bursts += 1;
        }
        // Empty the aggregator (timeout mode holds packets between bursts).
        if let Some(a) = agg.as_mut() {
            let stats = a.stats;
            a.flush(&mut b);
            b.free_all();
            a.discard();
            a.stats = stats;
        }
        if keep {
            break;
        }
    }
    (t, agg.map(|a| a.stats))
}

fn report(name: &str, flows: usize, o: &Opts, t: &Tally, stats: Option<&AggrStats>) {
    let hz = tsc_hz();
    let cpp = t.cycles as f64 / t.pkts_in.max(1) as f64;
    let mpps = hz as f64 / cpp / 1e6;
    let flush = if o.flush == Flush::Burst { "burst" } else { "timeout" };
    print!(
        "RESULT side=ours mode={name} flush={flush} flows={flows} burst={} pkts_in={} pkts_out={} bursts={} skipped={} \
         cycles={} hz={hz} cycles_per_pkt={cpp:.2} mpps={mpps:.3} out_per_in={:.4}",
        o.burst,
        t.pkts_in,
        t.pkts_out,
        t.bursts,
        t.skipped,
        t.cycles,
        t.pkts_out as f64 / t.pkts_in.max(1) as f64
    );
    if let Some(s) = stats {
        let per = if s.aggregates > 0 { s.merged as f64 / s.aggregates as f64 } else { 0.0 };
        print!(
            " aggregates={} merged={} segs_per_aggregate={per:.2} flush_limit={} evicted={} bad_checksum={} malformed={}",
            s.aggregates, s.merged, s.flush_limit, s.flows_evicted, s.bad_checksum, s.malformed
        );
    }
    println!();
}

fn flows_in(frames: &Frames) -> usize {
    let mut keys: Vec<&[u8]> = (0..frames.at.len()).map(|i| &frames.get(i)[L2 + 12..L2 + L3 + 4]).collect();
    keys.sort_unstable();
    keys.dedup();
    keys.len()
}

fn usage() -> ! {
    eprintln!(
        "usage: gro --write-pcap FILE --flows N [--packets P]\n       gro --pcap FILE --mode gro|lro|off \
         [--flush burst|timeout] [--timeout-us U] [--dur S] [--warmup S] [--burst B] [--max-flows F] \
         [--no-csum-offload]"
    );
    std::process::exit(2)
}

fn main() {
    // An lcore, as DPDK's main thread is: the pools then serve it from its per-lcore
    // cache (recently freed mbufs first), not from the shared ring.
    ironpath_eal::lcore::register_thread().expect("lcore id");
    let mut args = std::env::args().skip(1);
    let (mut write, mut pcap, mut flows, mut packets) = (None::<PathBuf>, None::<PathBuf>, 1usize, 65536usize);
    let mut o = Opts {
        what: What::Agg(Mode::Gro),
        flush: Flush::Burst,
        timeout_us: 500.0,
        dur: 2.0,
        warmup: 0.3,
        burst: 32,
        max_flows: 0,
        offload: true,
    };
    let mut name = "gro".to_string();
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_else(|| usage());
        let num = |v: String| v.parse::<f64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--write-pcap" => write = Some(val().into()),
            "--pcap" => pcap = Some(val().into()),
            "--flows" => flows = num(val()) as usize,
            "--packets" => packets = num(val()) as usize,
            "--mode" => {
                name = val();
                o.what = match name.as_str() {
                    "gro" => What::Agg(Mode::Gro),
                    "lro" => What::Agg(Mode::Lro),
                    "off" => What::Off,
                    _ => usage(),
                }
            }
            "--flush" => {
                o.flush = match val().as_str() {
                    "burst" => Flush::Burst,
                    "timeout" => Flush::Timeout,
                    _ => usage(),
                }
            }
            "--timeout-us" => o.timeout_us = num(val()),
            "--dur" => o.dur = num(val()),
            "--warmup" => o.warmup = num(val()),
            "--burst" => o.burst = (num(val()) as usize).clamp(1, ironpath_eal::MAX_BURST),
            "--max-flows" => o.max_flows = num(val()) as usize,
            "--no-csum-offload" => o.offload = false,
            "--bench" => {} // added by `cargo bench`
            _ => usage(),
        }
    }
    if let Some(path) = write {
        write_pcap(&path, flows.max(1), packets).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        return;
    }
    let runs: Vec<(PathBuf, usize)> = match pcap {
        Some(p) => vec![(p, 0)],
        None => {
            // Plain `cargo bench`: a quick look, ours only.
            let dir =
                PathBuf::from(std::env::var("CARGO_TARGET_DIR").unwrap_or_else(|_| "target".into())).join("bench");
            std::fs::create_dir_all(&dir).expect("target/bench");
            o.dur = 0.5;
            [1, 16, 1024]
                .into_iter()
                .map(|n| {
                    let p = dir.join(format!("gro-{n}.pcap"));
                    write_pcap(&p, n, 65536).expect("write capture");
                    (p, n)
                })
                .collect()
        }
    };
    let quick = runs.len() > 1;
    for (path, _) in runs {
        let frames =
            Frames::new(read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).into_iter().map(|p| p.data));
        assert!(!frames.at.is_empty(), "{}: no packets", path.display());
        let n = flows_in(&frames);
        let modes: Vec<(&str, What)> = if quick {
            vec![("gro", What::Agg(Mode::Gro)), ("lro", What::Agg(Mode::Lro)), ("off", What::Off)]
        } else {
            vec![(name.as_str(), o.what)]
        };
        for (mname, what) in modes {
            let mut run = Opts { what, ..o };
            if run.max_flows == 0 {
                run.max_flows = if run.flush == Flush::Burst { run.burst } else { n.max(run.burst) };
            }
            let (t, stats) = measure(&frames, &run);
            report(mname, n, &run, &t, stats.as_ref());
        }
    }
}
