//! `pcap_capture`: write the packets passing an edge to a pcap file (as
//! dpdk-pdump does) and pass them on unchanged. The lcore only copies each record
//! into a ring ([`Spool`]); a thread of the node's own writes the file, since a
//! write to a file waits for the disk and an lcore must never wait. A record that
//! finds the ring full is not captured (counted); a write error stops the capture
//! (counted) but never the traffic.

use crate::kind::{NodeError, NodeKind};
use ironpath_config::{Nexts, NodeSpec, ParamKind, ParamSpec};
use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};
use ironpath_pcapfile::{Spool, SpoolFeed};
use std::path::Path;

ironpath_graph::counters! {
    /// What `pcap_capture` counts.
    pub enum CaptureCounter {
        Captured("captured", "packets"),
        NotCaptured("not_captured", "packets (limit reached, ring full or write error)"),
        RingFull("ring_full", "packets (the writer thread was behind: not captured)"),
        WriteErrors("write_errors", "errors"),
    }
}

/// Bytes of records waiting for the writer thread at most.
const RING_BYTES: usize = 4 << 20;

/// The capture node.
pub struct Capture {
    /// The lcore's side; None once writing failed.
    feed: Option<SpoolFeed>,
    spool: Spool,
    snaplen: usize,
    limit: u64,
}

impl Capture {
    /// Create (truncate) `path`; capture at most `limit` packets (0: no limit),
    /// each cut to `snaplen` bytes.
    pub fn create(path: &Path, snaplen: usize, limit: u64) -> std::io::Result<Self> {
        let spool = Spool::create(path, true)?;
        Ok(Self { feed: Some(spool.feed(RING_BYTES)), spool, snaplen, limit })
    }

    /// Count a write error once, and capture no more.
    fn check_failed(&mut self, cx: &mut NodeCx<'_>) {
        if self.feed.as_ref().is_some_and(SpoolFeed::failed) {
            cx.count(CaptureCounter::WriteErrors, 1);
            self.feed = None;
        }
    }
}

impl Node for Capture {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        self.check_failed(cx);
        let Some(feed) = self.feed.as_mut() else {
            cx.count(CaptureCounter::NotCaptured, pkts.len() as u64);
            return Dispatch::All(0);
        };
        for i in 0..pkts.len() {
            if self.limit != 0 && feed.captured() >= self.limit {
                cx.count(CaptureCounter::NotCaptured, 1);
            } else if feed.push(pkts.segments(i), pkts.pkt_len(i), self.snaplen) {
                cx.count(CaptureCounter::Captured, 1);
            } else {
                cx.count(CaptureCounter::RingFull, 1);
                cx.count(CaptureCounter::NotCaptured, 1);
            }
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        CaptureCounter::SPECS
    }

    fn idle(&mut self, cx: &mut NodeCx<'_>) {
        self.check_failed(cx);
    }

    /// Not on an lcore (after every lcore stopped): wait for the file to be complete.
    fn stop(&mut self) {
        let _ = self.spool.flush();
    }
}

/// `pcap_capture`.
pub const KIND: NodeKind = NodeKind {
    spec: NodeSpec {
        type_name: "pcap_capture",
        doc: "write the packets passing through to a pcap file (nanosecond timestamps), pass them on",
        params: &[
            ParamSpec::new("file", ParamKind::Path).required().doc("output file (created or truncated)"),
            ParamSpec::new("snaplen", ParamKind::Uint { min: 64, max: 262_144 })
                .default("65535")
                .doc("bytes kept per packet"),
            ParamSpec::new("max_packets", ParamKind::Uint { min: 0, max: u64::MAX })
                .default("0")
                .doc("stop capturing after this many (0: no limit)"),
        ],
        nexts: Nexts::Fixed(&["out"]),
        ..NodeSpec::DEFAULT
    },
    build: |b, _env| {
        let p = b.params();
        let file = p.path("file")?;
        let c = Capture::create(file, p.int("snaplen")?, p.uint("max_packets")?)
            .map_err(|source| NodeError::Create { path: file.to_owned(), source })?;
        Ok(Box::new(c))
    },
};

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::*;
    use ironpath_pcapfile::read;
    use std::path::PathBuf;

    /// A file in the temporary directory, removed when dropped.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str) -> Self {
            Self(std::env::temp_dir().join(format!("ironpath-nodes-{}-{name}.pcap", std::process::id())))
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn frame(len: usize, tag: u8) -> Vec<u8> {
        let mut f = eth(PEER_MAC, US_MAC, 0x0800, &vec![tag; len - 14]);
        f[14] = tag.wrapping_add(1);
        f
    }

    /// (caplen, orig_len) of every record of a pcap file written by us.
    fn record_lengths(path: &Path) -> Vec<(u32, u32)> {
        let bytes = std::fs::read(path).expect("read pcap");
        let mut off = 24;
        let mut out = vec![];
        while off + 16 <= bytes.len() {
            let word = |k: usize| u32::from_le_bytes(bytes[off + k..off + k + 4].try_into().expect("4 bytes"));
            let (cap, orig) = (word(8), word(12));
            out.push((cap, orig));
            off += 16 + cap as usize;
        }
        assert_eq!(off, bytes.len(), "records end with the file");
        out
    }

    #[test]
    fn writes_a_readable_pcap_and_passes_packets_on() {
        let f = TempFile::new("readable");
        let pool = pool(16);
        let mut n = Capture::create(&f.0, 65535, 0).expect("create");
        let st = stats(&n);
        // 5000 bytes: a chained packet, captured whole.
        let frames = vec![frame(60, 1), frame(1514, 2), frame(5000, 3)];
        let mut pkts = burst(&pool, &frames);
        let c = call(&mut n, &st, &mut pkts, 0);
        assert_eq!(c.dispatch, Dispatch::All(0));
        assert_eq!(pkts.len(), 3);
        assert_eq!(pkts.data(0), &frames[0][..], "unchanged");
        pkts.free_all();
        n.stop();
        let got: Vec<_> = read(&f.0).expect("readable pcap").into_iter().map(|p| p.data).collect();
        assert_eq!(got, frames);
        assert_eq!(record_lengths(&f.0), [(60, 60), (1514, 1514), (5000, 5000)]);
        assert_eq!(counter(&st, "captured"), 3);
        assert_eq!(counter(&st, "not_captured"), 0);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn snaplen_cuts_and_keeps_the_original_length() {
        let f = TempFile::new("snaplen");
        let pool = pool(16);
        let mut n = Capture::create(&f.0, 64, 0).expect("create");
        let st = stats(&n);
        let frames = vec![frame(100, 1), frame(40, 2), frame(64, 3), frame(5000, 4)];
        let mut pkts = burst(&pool, &frames);
        call(&mut n, &st, &mut pkts, 0);
        pkts.free_all();
        n.stop();
        let got: Vec<_> = read(&f.0).expect("readable pcap").into_iter().map(|p| p.data).collect();
        assert_eq!(got, [&frames[0][..64], &frames[1][..], &frames[2][..], &frames[3][..64]]);
        assert_eq!(record_lengths(&f.0), [(64, 100), (40, 40), (64, 64), (64, 5000)]);
        assert_eq!(counter(&st, "captured"), 4);
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn max_packets_limits_the_capture_not_the_traffic() {
        let f = TempFile::new("limit");
        let pool = pool(16);
        let mut n = Capture::create(&f.0, 65535, 2).expect("create");
        let st = stats(&n);
        let frames: Vec<_> = (0..5).map(|k| frame(60, k)).collect();
        let mut pkts = burst(&pool, &frames);
        call(&mut n, &st, &mut pkts, 0);
        assert_eq!(pkts.len(), 5);
        call(&mut n, &st, &mut pkts, 0);
        pkts.free_all();
        n.stop();
        let got: Vec<_> = read(&f.0).expect("readable pcap").into_iter().map(|p| p.data).collect();
        assert_eq!(got, &frames[..2]);
        assert_eq!((counter(&st, "captured"), counter(&st, "not_captured")), (2, 8));
        assert_eq!(pool.stats().in_use, 0);
    }

    #[test]
    fn write_error_stops_the_capture_not_the_traffic() {
        // /dev/full refuses the file header: the writer thread fails at once, and the
        // lcore learns it at its next burst or idle walk.
        let pool = pool(256);
        let mut n = Capture::create(Path::new("/dev/full"), 65535, 0).expect("create");
        let st = stats(&n);
        let frames: Vec<_> = (0..256).map(|k| frame(2000, k as u8)).collect();
        let mut pkts = burst(&pool, &frames);
        let mut calls = 0;
        let t = std::time::Instant::now();
        while counter(&st, "write_errors") == 0 && t.elapsed() < std::time::Duration::from_secs(10) {
            let c = call(&mut n, &st, &mut pkts, 0);
            assert_eq!((c.dispatch, pkts.len()), (Dispatch::All(0), 256));
            calls += 1;
            ironpath_graph::testing::idle(&mut n, &st, 0);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(counter(&st, "write_errors"), 1);
        let captured = counter(&st, "captured");
        for _ in 0..4 {
            let c = call(&mut n, &st, &mut pkts, 0);
            assert_eq!((c.dispatch, pkts.len()), (Dispatch::All(0), 256), "the traffic goes on");
        }
        pkts.free_all();
        assert_eq!(counter(&st, "captured"), captured, "nothing captured after the error");
        assert_eq!(counter(&st, "captured") + counter(&st, "not_captured"), (calls + 4) * 256);
        assert_eq!(counter(&st, "write_errors"), 1, "counted once");
        n.stop();
        assert_eq!(pool.stats().in_use, 0);
    }
}
