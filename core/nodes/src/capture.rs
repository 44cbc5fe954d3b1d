//! `pcap_capture`: write the packets passing an edge to a pcap file (as
//! dpdk-pdump does) and pass them on unchanged. Records are buffered and written
//! when the lcore is idle and at stop; a write error stops the capture (counted)
//! but never the traffic.

use ironpath_eal::{Burst, MAX_BURST};
use ironpath_graph::{CounterSpec, Dispatch, Node, NodeCx};
use ironpath_pmd_pcap::file::Writer;
use std::path::Path;

static COUNTERS: [CounterSpec; 3] = [
    CounterSpec { name: "captured", unit: "packets" },
    CounterSpec { name: "not_captured", unit: "packets (limit reached or write error)" },
    CounterSpec { name: "write_errors", unit: "errors" },
];

/// The capture node.
pub struct Capture {
    w: Option<Writer>,
    snaplen: usize,
    limit: u64,
    buf: Vec<u8>,
}

impl Capture {
    /// Create (truncate) `path`; capture at most `limit` packets (0: no limit),
    /// each cut to `snaplen` bytes.
    pub fn create(path: &Path, snaplen: usize, limit: u64) -> std::io::Result<Self> {
        Ok(Self { w: Some(Writer::create(path, true)?), snaplen, limit, buf: Vec::with_capacity(snaplen.min(65536)) })
    }
}

impl Node for Capture {
    fn process(&mut self, cx: &mut NodeCx<'_>, pkts: &mut Burst, _next: &mut [u16; MAX_BURST]) -> Dispatch {
        for i in 0..pkts.len() {
            let Some(w) = self.w.as_mut() else {
                cx.count(1, (pkts.len() - i) as u64);
                break;
            };
            if self.limit != 0 && w.written() >= self.limit {
                cx.count(1, 1);
                continue;
            }
            self.buf.clear();
            for s in pkts.segments(i) {
                let take = (self.snaplen - self.buf.len()).min(s.len());
                self.buf.extend_from_slice(&s[..take]);
                if self.buf.len() == self.snaplen {
                    break;
                }
            }
            match w.write_with_len(&self.buf, pkts.pkt_len(i)) {
                Ok(()) => cx.count(0, 1),
                Err(_) => {
                    cx.count(2, 1);
                    cx.count(1, 1);
                    self.w = None;
                }
            }
        }
        Dispatch::All(0)
    }

    fn counters(&self) -> &'static [CounterSpec] {
        &COUNTERS
    }

    fn idle(&mut self, cx: &mut NodeCx<'_>) {
        if let Some(w) = self.w.as_mut() {
            if w.flush().is_err() {
                cx.count(2, 1);
                self.w = None;
            }
        }
    }

    fn stop(&mut self) {
        if let Some(w) = self.w.as_mut() {
            let _ = w.flush();
        }
    }
}
