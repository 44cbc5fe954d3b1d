//! One-line packet summaries for traces.

/// Length and a hex prefix (replaced by a protocol summary once `wire` is in).
pub(crate) fn summarize(frame: &[u8]) -> String {
    let n = frame.len().min(16);
    let hex: String = frame[..n].iter().map(|b| format!("{b:02x}")).collect();
    format!("len {} {hex}", frame.len())
}
