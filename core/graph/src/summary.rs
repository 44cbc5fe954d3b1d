//! One-line packet summaries for traces. The graph crate does not parse protocols
//! (it does not depend on `ironpath-wire`), so a summary is the frame's bytes, not
//! its fields.

/// `len N` and the first 16 bytes in hex: for Ethernet, the destination and source
/// MACs, the EtherType and the first two bytes after it.
pub(crate) fn summarize(frame: &[u8]) -> String {
    let n = frame.len().min(16);
    let hex: String = frame[..n].iter().map(|b| format!("{b:02x}")).collect();
    format!("len {} {hex}", frame.len())
}
