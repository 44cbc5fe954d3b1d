//! `ironpath-pcapfile`: capture files, the one place that knows their format.
//!
//! * [`read`] (and [`read_from`], from any byte source) loads a whole pcap or pcapng file of Ethernet frames into memory
//!   (microsecond or nanosecond pcap, any pcapng timestamp resolution and offset;
//!   parsed with `pcap-parser`). A broken file is refused with an [`Error`] that
//!   names the record where it breaks.
//! * [`Writer`] appends packets to a new file: pcap (microsecond or nanosecond
//!   timestamps) or, for a path ending in `.pcapng`, pcapng (one section, one
//!   Ethernet interface, enhanced packet blocks with nanosecond timestamps).
//! * [`ng`] builds pcapng blocks one at a time for a stream with several
//!   interfaces (a live capture) and cuts such a stream back into blocks.
//! * [`Spool`] is the same file written by a thread of its own, for the lcores: each
//!   [`SpoolFeed`] encodes a packet into a ring without a lock, an allocation or a
//!   system call, and the `pcap-writer` thread moves the records into the file.
//!
//! Users: the `net_pcap` PMD (`rx_pcap=`/`tx_pcap=`), the `pcap_capture` node,
//! benches and tests.
#![forbid(unsafe_code)]

pub mod ng;
mod spool;

pub use spool::{Spool, SpoolFeed};

use pcap_parser::pcapng::Block;
use pcap_parser::{create_reader, Linktype, PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Why a capture file cannot be read.
#[derive(Debug)]
pub enum Error {
    /// The file cannot be opened or read.
    Io(std::io::Error),
    /// The file does not start with a pcap or pcapng magic number.
    NotACapture,
    /// The file or section header is unusable (e.g. a link type other than Ethernet).
    Header(String),
    /// Record `record` (counted from 1) is broken; `complete` records came before it.
    Record {
        /// Number of the broken record, from 1.
        record: usize,
        /// What is wrong with it.
        what: String,
    },
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Io(e) => write!(f, "{e}"),
            Error::NotACapture => f.write_str("not a pcap or pcapng file (unknown magic number)"),
            Error::Header(s) => f.write_str(s),
            Error::Record { record, what } => write!(f, "record {record}: {what}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

/// One captured packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Capture time in nanoseconds since the epoch.
    pub ts_ns: u64,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Read every packet of a pcap or pcapng file of Ethernet frames.
pub fn read(path: &Path) -> Result<Vec<Packet>, Error> {
    read_from(File::open(path)?, 1 << 20)
}

/// [`read`] from any byte source, through a buffer of `capacity` bytes (the
/// longest block it can hold; a longer one is refused as corrupt).
pub fn read_from(src: impl std::io::Read + Send, capacity: usize) -> Result<Vec<Packet>, Error> {
    let mut reader = match create_reader(capacity, src) {
        Ok(r) => r,
        Err(PcapError::HeaderNotRecognized) => return Err(Error::NotACapture),
        Err(e) => return Err(Error::Header(format!("cannot read the file header: {e:?}"))),
    };
    let mut out = Vec::new();
    let mut nano_legacy = false;
    // pcapng: per interface (resolution in units per second, offset in seconds).
    let mut ifaces: Vec<(u64, i64)> = Vec::new();
    let record = |out: &Vec<Packet>, what: String| Error::Record { record: out.len() + 1, what };
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        if h.network != Linktype::ETHERNET {
                            return Err(Error::Header(format!("link type {} is not Ethernet (1)", h.network.0)));
                        }
                        nano_legacy = h.is_nanosecond_precision();
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let frac = if nano_legacy { u64::from(b.ts_usec) } else { u64::from(b.ts_usec) * 1000 };
                        let data = b
                            .data
                            .get(..b.caplen as usize)
                            .ok_or_else(|| record(&out, "caplen beyond the record".into()))?;
                        out.push(Packet { ts_ns: u64::from(b.ts_sec) * 1_000_000_000 + frac, data: data.to_vec() });
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => ifaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        if idb.linktype != Linktype::ETHERNET {
                            return Err(Error::Header(format!(
                                "interface {}: link type {} is not Ethernet (1)",
                                ifaces.len(),
                                idb.linktype.0
                            )));
                        }
                        let res = idb.ts_resolution().ok_or_else(|| {
                            Error::Header(format!("interface {}: bad timestamp resolution", ifaces.len()))
                        })?;
                        ifaces.push((res, idb.ts_offset()));
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        let &(res, off) = ifaces
                            .get(epb.if_id as usize)
                            .ok_or_else(|| record(&out, format!("unknown interface {}", epb.if_id)))?;
                        let (sec, frac) = epb.decode_ts(off as u64, res);
                        let ns = u64::from(sec) * 1_000_000_000 + u64::from(frac) * 1_000_000_000 / res.max(1);
                        let data = epb
                            .data
                            .get(..epb.caplen as usize)
                            .ok_or_else(|| record(&out, "caplen beyond the block".into()))?;
                        out.push(Packet { ts_ns: ns, data: data.to_vec() });
                    }
                    PcapBlockOwned::NG(Block::SimplePacket(spb)) => {
                        out.push(Packet { ts_ns: 0, data: spb.data.to_vec() });
                    }
                    PcapBlockOwned::NG(_) => {}
                }
                reader.consume(offset);
            }
            Err(PcapError::Eof) => break,
            Err(PcapError::Incomplete(_)) => {
                if reader.refill().is_err() {
                    return Err(record(&out, "read error".into()));
                }
            }
            Err(PcapError::UnexpectedEof) => {
                let complete = out.len();
                return Err(record(&out, format!("file truncated ({complete} complete records before it)")));
            }
            Err(e) => return Err(record(&out, format!("corrupt ({e:?})"))),
        }
    }
    Ok(out)
}

/// A capture file writer (Ethernet link type): pcap, or pcapng for a `.pcapng` path.
pub struct Writer {
    w: BufWriter<File>,
    format: Format,
    written: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Format {
    PcapUs,
    PcapNs,
    /// Enhanced packet blocks on interface 0, nanosecond timestamps.
    Pcapng,
}

/// Largest packet a reader is told to expect.
const SNAPLEN: u32 = 262_144;

impl Writer {
    /// Create (truncate) `path` and write the file header: pcapng if the path ends in
    /// `.pcapng` (nanosecond timestamps), else pcap with nanosecond timestamps when
    /// `nano`, microsecond ones otherwise.
    pub fn create(path: &Path, nano: bool) -> std::io::Result<Writer> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let format = if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("pcapng")) {
            Format::Pcapng
        } else if nano {
            Format::PcapNs
        } else {
            Format::PcapUs
        };
        match format {
            Format::Pcapng => {
                // Section header: byte-order magic, version 1.0, section length unknown.
                let mut shb = Vec::with_capacity(28);
                shb.extend_from_slice(&0x1a2b_3c4du32.to_le_bytes());
                shb.extend_from_slice(&1u16.to_le_bytes());
                shb.extend_from_slice(&0u16.to_le_bytes());
                shb.extend_from_slice(&(-1i64).to_le_bytes());
                block(&mut w, 0x0a0d_0d0a, &shb)?;
                // Interface description: Ethernet, snap length, if_tsresol = 10^-9.
                let mut idb = Vec::with_capacity(20);
                idb.extend_from_slice(&1u16.to_le_bytes());
                idb.extend_from_slice(&0u16.to_le_bytes());
                idb.extend_from_slice(&SNAPLEN.to_le_bytes());
                idb.extend_from_slice(&9u16.to_le_bytes());
                idb.extend_from_slice(&1u16.to_le_bytes());
                idb.extend_from_slice(&[9, 0, 0, 0]);
                idb.extend_from_slice(&[0, 0, 0, 0]);
                block(&mut w, 1, &idb)?;
            }
            Format::PcapUs | Format::PcapNs => {
                let magic: u32 = if format == Format::PcapNs { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
                w.write_all(&magic.to_le_bytes())?;
                w.write_all(&2u16.to_le_bytes())?;
                w.write_all(&4u16.to_le_bytes())?;
                w.write_all(&0i32.to_le_bytes())?;
                w.write_all(&0u32.to_le_bytes())?;
                w.write_all(&SNAPLEN.to_le_bytes())?;
                w.write_all(&1u32.to_le_bytes())?;
            }
        }
        Ok(Writer { w, format, written: 0 })
    }

    /// Append one packet stamped with the current time.
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write_with_len(data, data.len())
    }

    /// Append the first `data.len()` bytes of a packet of `orig_len` bytes (a
    /// capture cut to a snap length).
    pub fn write_with_len(&mut self, data: &[u8], orig_len: usize) -> std::io::Result<()> {
        let (head, n) = record_head(self.format, now(), data.len(), orig_len);
        let (tail, m) = record_tail(self.format, data.len());
        self.w.write_all(&head[..n])?;
        self.w.write_all(data)?;
        self.w.write_all(&tail[..m])?;
        self.written += 1;
        Ok(())
    }

    /// Append records encoded elsewhere ([`SpoolFeed`]).
    fn append(&mut self, records: &[u8]) -> std::io::Result<()> {
        self.w.write_all(records)
    }

    /// Packets written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Push buffered records to the file.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.w.flush()
    }
}

/// The time a record is stamped with.
fn now() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default()
}

/// Longest record head (pcapng's enhanced packet block).
const MAX_HEAD: usize = 28;

/// The head of a record of `caplen` bytes of a packet of `orig_len` bytes captured
/// at `t` (since the epoch), and its length.
fn record_head(format: Format, t: Duration, caplen: usize, orig_len: usize) -> ([u8; MAX_HEAD], usize) {
    let orig = orig_len.max(caplen) as u32;
    let mut h = [0u8; MAX_HEAD];
    match format {
        Format::Pcapng => {
            let ns = t.as_nanos() as u64;
            let pad = (4 - caplen % 4) % 4;
            let total = (12 + 20 + caplen + pad) as u32;
            h[0..4].copy_from_slice(&6u32.to_le_bytes());
            h[4..8].copy_from_slice(&total.to_le_bytes());
            // h[8..12]: interface 0.
            h[12..16].copy_from_slice(&((ns >> 32) as u32).to_le_bytes());
            h[16..20].copy_from_slice(&(ns as u32).to_le_bytes());
            h[20..24].copy_from_slice(&(caplen as u32).to_le_bytes());
            h[24..28].copy_from_slice(&orig.to_le_bytes());
            (h, 28)
        }
        Format::PcapUs | Format::PcapNs => {
            let frac = if format == Format::PcapNs { t.subsec_nanos() } else { t.subsec_micros() };
            h[0..4].copy_from_slice(&(t.as_secs() as u32).to_le_bytes());
            h[4..8].copy_from_slice(&frac.to_le_bytes());
            h[8..12].copy_from_slice(&(caplen as u32).to_le_bytes());
            h[12..16].copy_from_slice(&orig.to_le_bytes());
            (h, 16)
        }
    }
}

/// What follows `caplen` bytes of data in a record (pcapng: padding to 4 bytes and
/// the block length again), and its length.
fn record_tail(format: Format, caplen: usize) -> ([u8; 8], usize) {
    let mut t = [0u8; 8];
    if format != Format::Pcapng {
        return (t, 0);
    }
    let pad = (4 - caplen % 4) % 4;
    let total = (12 + 20 + caplen + pad) as u32;
    t[pad..pad + 4].copy_from_slice(&total.to_le_bytes());
    (t, pad + 4)
}

/// One pcapng block: type, total length, `body` (a multiple of 4 bytes), total length.
fn block(w: &mut impl Write, kind: u32, body: &[u8]) -> std::io::Result<()> {
    let total = (12 + body.len()) as u32;
    w.write_all(&kind.to_le_bytes())?;
    w.write_all(&total.to_le_bytes())?;
    w.write_all(body)?;
    w.write_all(&total.to_le_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("ironpath-pcap-{}-{name}", std::process::id()))
    }

    #[test]
    fn writes_and_reads_back_us_ns_and_pcapng() {
        for (nano, ext) in [(false, "pcap"), (true, "pcap"), (false, "pcapng")] {
            let p = tmp(&format!("rw{nano}.{ext}"));
            let mut w = Writer::create(&p, nano).unwrap();
            let frames: Vec<Vec<u8>> = (0..20u8).map(|i| vec![i; 60 + i as usize]).collect();
            for f in &frames {
                w.write(f).unwrap();
            }
            w.flush().unwrap();
            drop(w);
            let got = read(&p).unwrap();
            std::fs::remove_file(&p).unwrap();
            assert_eq!(got.iter().map(|p| p.data.clone()).collect::<Vec<_>>(), frames);
            assert!(got.windows(2).all(|w| w[0].ts_ns <= w[1].ts_ns));
            let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos() as u64;
            assert!(got.iter().all(|p| now - p.ts_ns < 60_000_000_000), "{ext}: timestamps are the write time");
        }
    }

    #[test]
    fn truncated_and_foreign_files_name_the_record() {
        let p = tmp("trunc");
        let mut w = Writer::create(&p, false).unwrap();
        for i in 0..5u8 {
            w.write(&[i; 100]).unwrap();
        }
        w.flush().unwrap();
        drop(w);
        let len = std::fs::metadata(&p).unwrap().len();
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(len - 30).unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.starts_with("record 5: file truncated (4 complete records before it)"), "{e}");
        std::fs::write(&p, b"this is not a capture file at all").unwrap();
        let e = read(&p).unwrap_err().to_string();
        assert!(e.contains("not a pcap or pcapng file"), "{e}");
        std::fs::remove_file(&p).unwrap();
        assert!(read(&p).unwrap_err().to_string().contains("No such file"));
    }
}
