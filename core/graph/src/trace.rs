//! Per-packet trace, as VPP's `trace add`: `trace on NODE N` records the next N
//! packets the node handles (a one-line summary and where each went). When no
//! trace is armed the engine pays one relaxed load per node call.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Most records kept; older ones are discarded.
pub const TRACE_CAPACITY: usize = 4096;

/// Records shared between the lcores and the shell.
#[derive(Debug, Default)]
pub struct TraceBuf {
    records: Mutex<VecDeque<String>>,
}

impl TraceBuf {
    pub(crate) fn push(&self, rec: String) {
        let mut r = self.records.lock().unwrap_or_else(|e| e.into_inner());
        if r.len() == TRACE_CAPACITY {
            r.pop_front();
        }
        r.push_back(rec);
    }

    /// Take all records (oldest first).
    pub fn take(&self) -> Vec<String> {
        self.records.lock().unwrap_or_else(|e| e.into_inner()).drain(..).collect()
    }
}

/// A one-line summary of a frame: its length and its first 16 bytes in hex.
pub fn summarize(frame: &[u8]) -> String {
    crate::summary::summarize(frame)
}
