//! pcapng blocks one at a time, for a stream with several interfaces (a live
//! capture): a section header, an interface description per capture point
//! (name, nanosecond time stamps), enhanced packet blocks, and interface
//! statistics at the end (packets received and dropped). [`Splitter`] cuts a
//! byte stream back into whole blocks, refusing any that is malformed or over
//! [`MAX_BLOCK`] bytes. All little-endian.

/// Block types.
pub const SHB: u32 = 0x0A0D_0D0A;
/// Interface description.
pub const IDB: u32 = 1;
/// Interface statistics.
pub const ISB: u32 = 5;
/// Enhanced packet.
pub const EPB: u32 = 6;
/// Largest block [`Splitter`] accepts (a 64 KiB packet and its header with room).
pub const MAX_BLOCK: usize = 70_000;

fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    body.resize(body.len().next_multiple_of(4), 0);
}

fn end_options(body: &mut Vec<u8>) {
    body.extend_from_slice(&[0, 0, 0, 0]);
}

fn block(out: &mut Vec<u8>, kind: u32, body: &[u8]) {
    let total = (12 + body.len()) as u32;
    out.extend_from_slice(&kind.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(&total.to_le_bytes());
}

/// Appends a section header block naming the writing application.
pub fn section_header(out: &mut Vec<u8>, app: &str) {
    let mut b = Vec::with_capacity(64);
    b.extend_from_slice(&0x1A2B_3C4Du32.to_le_bytes());
    b.extend_from_slice(&1u16.to_le_bytes());
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&(-1i64).to_le_bytes()); // section length: not known
    option(&mut b, 4, &app.as_bytes()[..app.len().min(256)]); // shb_userappl
    end_options(&mut b);
    block(out, SHB, &b);
}

/// Appends an interface description block: Ethernet, `snaplen`, `if_name` =
/// `name`, time stamps in nanoseconds (`if_tsresol` = 9).
pub fn interface(out: &mut Vec<u8>, name: &str, snaplen: u32) {
    let mut b = Vec::with_capacity(64);
    b.extend_from_slice(&1u16.to_le_bytes()); // LINKTYPE_ETHERNET
    b.extend_from_slice(&0u16.to_le_bytes());
    b.extend_from_slice(&snaplen.to_le_bytes());
    option(&mut b, 2, &name.as_bytes()[..name.len().min(256)]); // if_name
    option(&mut b, 9, &[9]); // if_tsresol: 10^-9
    end_options(&mut b);
    block(out, IDB, &b);
}

fn ts(b: &mut Vec<u8>, ts_ns: u64) {
    b.extend_from_slice(&((ts_ns >> 32) as u32).to_le_bytes());
    b.extend_from_slice(&(ts_ns as u32).to_le_bytes());
}

/// Appends an enhanced packet block: `data` (the bytes kept) of a packet
/// `orig_len` long on the wire, seen on interface `ifid` at `ts_ns` (ns since
/// the epoch).
pub fn packet(out: &mut Vec<u8>, ifid: u32, ts_ns: u64, data: &[u8], orig_len: u32) {
    let padded = data.len().next_multiple_of(4);
    let total = (12 + 20 + padded) as u32;
    out.extend_from_slice(&EPB.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(&ifid.to_le_bytes());
    let start = out.len();
    ts(out, ts_ns);
    debug_assert_eq!(out.len(), start + 8);
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out.extend_from_slice(&orig_len.max(data.len() as u32).to_le_bytes());
    out.extend_from_slice(data);
    out.resize(out.len() + padded - data.len(), 0);
    out.extend_from_slice(&total.to_le_bytes());
}

/// Appends an interface statistics block for `ifid` at `ts_ns`: `received`
/// (`isb_ifrecv`) and `dropped` (`isb_ifdrop`) packets.
pub fn statistics(out: &mut Vec<u8>, ifid: u32, ts_ns: u64, received: u64, dropped: u64) {
    let mut b = Vec::with_capacity(48);
    b.extend_from_slice(&ifid.to_le_bytes());
    ts(&mut b, ts_ns);
    option(&mut b, 4, &received.to_le_bytes());
    option(&mut b, 5, &dropped.to_le_bytes());
    end_options(&mut b);
    block(out, ISB, &b);
}

/// What an interface statistics block says: (interface, `isb_ifrecv`,
/// `isb_ifdrop`), each `None` when absent or malformed.
pub fn read_statistics(block: &[u8]) -> Option<(u32, Option<u64>, Option<u64>)> {
    let kind = u32::from_le_bytes(block.get(0..4)?.try_into().ok()?);
    if kind != ISB || block.len() < 24 {
        return None;
    }
    let ifid = u32::from_le_bytes(block.get(8..12)?.try_into().ok()?);
    let (mut recv, mut drop) = (None, None);
    let mut at = 20;
    let end = block.len() - 4;
    while at + 4 <= end {
        let code = u16::from_le_bytes([block[at], block[at + 1]]);
        let len = u16::from_le_bytes([block[at + 2], block[at + 3]]) as usize;
        let v = block.get(at + 4..(at + 4 + len).min(end))?;
        let val = || v.try_into().ok().map(u64::from_le_bytes);
        match code {
            0 => break,
            4 => recv = val(),
            5 => drop = val(),
            _ => {}
        }
        at += 4 + len.next_multiple_of(4);
    }
    Some((ifid, recv, drop))
}

/// Why a stream is not whole pcapng blocks.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// A length below 12 or not a multiple of 4.
    #[error("block of type {kind:#x}: bad length {len}")]
    BadLength {
        /// Block type.
        kind: u32,
        /// Its total length.
        len: u32,
    },
    /// Over [`MAX_BLOCK`] bytes.
    #[error("block of type {kind:#x}: {len} bytes, more than {MAX_BLOCK}")]
    TooBig {
        /// Block type.
        kind: u32,
        /// Its total length.
        len: u32,
    },
    /// The trailing length differs from the leading one.
    #[error("block of type {0:#x}: its two lengths differ")]
    Mismatch(u32),
}

/// Cuts a stream of bytes into whole blocks.
#[derive(Debug, Default)]
pub struct Splitter {
    buf: Vec<u8>,
}

impl Splitter {
    /// Adds bytes read.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes held that are not yet a whole block.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next whole block (its type and bytes), `Ok(None)` until one is whole.
    pub fn next_block(&mut self) -> Result<Option<(u32, Vec<u8>)>, SplitError> {
        let (Some(k), Some(l)) = (self.buf.get(0..4), self.buf.get(4..8)) else { return Ok(None) };
        let kind = u32::from_le_bytes(k.try_into().expect("4 bytes"));
        let len = u32::from_le_bytes(l.try_into().expect("4 bytes"));
        if len < 12 || len % 4 != 0 {
            return Err(SplitError::BadLength { kind, len });
        }
        if len as usize > MAX_BLOCK {
            return Err(SplitError::TooBig { kind, len });
        }
        let n = len as usize;
        if self.buf.len() < n {
            return Ok(None);
        }
        if self.buf[n - 4..n] != self.buf[4..8] {
            return Err(SplitError::Mismatch(kind));
        }
        let rest = self.buf.split_off(n);
        Ok(Some((kind, std::mem::replace(&mut self.buf, rest))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_read_back_with_the_file_reader_and_split_whole() {
        let mut s = Vec::new();
        section_header(&mut s, "ironpath test");
        interface(&mut s, "a/rx", 128);
        interface(&mut s, "rx_a.out", 128);
        packet(&mut s, 0, 1_700_000_000_123_456_789, &[1, 2, 3, 4, 5], 60);
        packet(&mut s, 1, 1_700_000_000_123_456_790, &[9; 64], 64);
        statistics(&mut s, 0, 1_700_000_001_000_000_000, 7, 5);
        let path = std::env::temp_dir().join(format!("ng-{}.pcapng", std::process::id()));
        std::fs::write(&path, &s).unwrap();
        let pkts = crate::read(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(pkts.len(), 2);
        assert_eq!(pkts[0].data, [1, 2, 3, 4, 5]);
        assert_eq!(pkts[0].ts_ns, 1_700_000_000_123_456_789);
        // Cut into blocks again, fed a byte at a time.
        let mut sp = Splitter::default();
        let mut kinds = Vec::new();
        for b in &s {
            sp.push(&[*b]);
            while let Some((k, blk)) = sp.next_block().unwrap() {
                if k == ISB {
                    assert_eq!(read_statistics(&blk), Some((0, Some(7), Some(5))));
                }
                kinds.push(k);
            }
        }
        assert_eq!(kinds, [SHB, IDB, IDB, EPB, EPB, ISB]);
        assert_eq!(sp.pending(), 0);
        let mut bad = Splitter::default();
        bad.push(&[6, 0, 0, 0, 13, 0, 0, 0]);
        assert!(matches!(bad.next_block(), Err(SplitError::BadLength { .. })));
        let mut big = Splitter::default();
        big.push(&[6, 0, 0, 0, 0, 0, 0, 1]);
        assert!(matches!(big.next_block(), Err(SplitError::TooBig { .. })));
        let mut odd = Splitter::default();
        odd.push(&[6, 0, 0, 0, 12, 0, 0, 0, 16, 0, 0, 0]);
        assert_eq!(odd.next_block(), Err(SplitError::Mismatch(6)));
    }
}
