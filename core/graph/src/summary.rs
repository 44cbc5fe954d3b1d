//! One-line packet summaries: a frame's length and first bytes, for a node's trace
//! of frames that are not Ethernet (the default trace decodes headers with
//! `ironpath_wire::describe`).

/// `len N` and the first 16 bytes in hex: for Ethernet, the destination and source
/// MACs, the EtherType and the first two bytes after it.
pub(crate) fn summarize(frame: &[u8]) -> String {
    let n = frame.len().min(16);
    let hex: String = frame[..n].iter().map(|b| format!("{b:02x}")).collect();
    format!("len {} {hex}", frame.len())
}
