//! [`Payload`]: the engine's view of segment data, so data is never copied by TCP.

/// A byte sequence the engine can slice and concatenate without copying the bytes:
/// a refcounted mbuf chain in a graph node, `testing::Bytes` (feature `test-utils`)
/// in tests.
///
/// The send side keeps every queued `Payload` until it is acknowledged and emits
/// slices of it (also for retransmissions); the receive side keeps received payloads
/// (slices of them when segments overlap) until the application takes them.
pub trait Payload: Clone {
    /// Length in bytes.
    fn len(&self) -> usize;

    /// Whether there are no bytes.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `len` bytes starting at `off`. The engine only asks for `off + len <= self.len()`
    /// and `len > 0`.
    fn slice(&self, off: usize, len: usize) -> Self;

    /// Appends `tail` (a segment built from two queued buffers). The engine never
    /// appends an empty payload.
    fn append(&mut self, tail: Self);

    /// Bytes of memory the payload keeps from being reused, charged against the
    /// receive buffer (Linux's `truesize`): a payload in a packet buffer pins the
    /// whole buffer however few bytes it carries. The default is the length.
    fn truesize(&self) -> usize {
        self.len()
    }

    /// One payload with the bytes of `parts` in order, copied into memory sized to
    /// them (Linux's collapse of small socket buffers), or `None` if this payload type
    /// cannot copy (then nothing is collapsed). The default cannot.
    fn compact(parts: &[Self]) -> Option<Self> {
        let _ = parts;
        None
    }
}
