//! Capture files: reading pcap and pcapng (with `pcap-parser`) into memory, and
//! writing pcap. Errors name the record where a file breaks.

use pcap_parser::pcapng::Block;
use pcap_parser::{create_reader, Linktype, PcapBlockOwned, PcapError};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// One captured packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// Capture time in nanoseconds since the epoch.
    pub ts_ns: u64,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Read every packet of a pcap or pcapng file of Ethernet frames.
pub fn read(path: &Path) -> Result<Vec<Packet>, String> {
    let f = File::open(path).map_err(|e| e.to_string())?;
    let mut reader = match create_reader(1 << 20, f) {
        Ok(r) => r,
        Err(PcapError::HeaderNotRecognized) => return Err("not a pcap or pcapng file (unknown magic number)".into()),
        Err(e) => return Err(format!("cannot read the file header: {e:?}")),
    };
    let mut out = Vec::new();
    let mut nano_legacy = false;
    // pcapng: per interface (resolution in units per second, offset in seconds).
    let mut ifaces: Vec<(u64, i64)> = Vec::new();
    let record = |out: &Vec<Packet>| out.len() + 1;
    loop {
        match reader.next() {
            Ok((offset, block)) => {
                match block {
                    PcapBlockOwned::LegacyHeader(h) => {
                        if h.network != Linktype::ETHERNET {
                            return Err(format!("link type {} is not Ethernet (1)", h.network.0));
                        }
                        nano_legacy = h.is_nanosecond_precision();
                    }
                    PcapBlockOwned::Legacy(b) => {
                        let frac = if nano_legacy { u64::from(b.ts_usec) } else { u64::from(b.ts_usec) * 1000 };
                        let data = b
                            .data
                            .get(..b.caplen as usize)
                            .ok_or_else(|| format!("record {}: caplen beyond the record", record(&out)))?;
                        out.push(Packet { ts_ns: u64::from(b.ts_sec) * 1_000_000_000 + frac, data: data.to_vec() });
                    }
                    PcapBlockOwned::NG(Block::SectionHeader(_)) => ifaces.clear(),
                    PcapBlockOwned::NG(Block::InterfaceDescription(idb)) => {
                        if idb.linktype != Linktype::ETHERNET {
                            return Err(format!(
                                "interface {}: link type {} is not Ethernet (1)",
                                ifaces.len(),
                                idb.linktype.0
                            ));
                        }
                        let res = idb
                            .ts_resolution()
                            .ok_or_else(|| format!("interface {}: bad timestamp resolution", ifaces.len()))?;
                        ifaces.push((res, idb.ts_offset()));
                    }
                    PcapBlockOwned::NG(Block::EnhancedPacket(epb)) => {
                        let &(res, off) = ifaces
                            .get(epb.if_id as usize)
                            .ok_or_else(|| format!("record {}: unknown interface {}", record(&out), epb.if_id))?;
                        let (sec, frac) = epb.decode_ts(off as u64, res);
                        let ns = u64::from(sec) * 1_000_000_000 + u64::from(frac) * 1_000_000_000 / res.max(1);
                        let data = epb
                            .data
                            .get(..epb.caplen as usize)
                            .ok_or_else(|| format!("record {}: caplen beyond the block", record(&out)))?;
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
                    return Err(format!("record {}: read error", record(&out)));
                }
            }
            Err(PcapError::UnexpectedEof) => {
                return Err(format!(
                    "record {}: file truncated ({} complete records before it)",
                    record(&out),
                    out.len()
                ))
            }
            Err(e) => return Err(format!("record {}: corrupt ({e:?})", record(&out))),
        }
    }
    Ok(out)
}

/// A pcap writer (Ethernet link type).
pub struct Writer {
    w: BufWriter<File>,
    nano: bool,
    written: u64,
}

impl Writer {
    /// Create (truncate) `path` and write the file header.
    pub fn create(path: &Path, nano: bool) -> std::io::Result<Writer> {
        let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let magic: u32 = if nano { 0xa1b2_3c4d } else { 0xa1b2_c3d4 };
        w.write_all(&magic.to_le_bytes())?;
        w.write_all(&2u16.to_le_bytes())?;
        w.write_all(&4u16.to_le_bytes())?;
        w.write_all(&0i32.to_le_bytes())?;
        w.write_all(&0u32.to_le_bytes())?;
        w.write_all(&262_144u32.to_le_bytes())?;
        w.write_all(&1u32.to_le_bytes())?;
        Ok(Writer { w, nano, written: 0 })
    }

    /// Append one packet stamped with the current time.
    pub fn write(&mut self, data: &[u8]) -> std::io::Result<()> {
        self.write_with_len(data, data.len())
    }

    /// Append the first `data.len()` bytes of a packet of `orig_len` bytes (a
    /// capture cut to a snap length).
    pub fn write_with_len(&mut self, data: &[u8], orig_len: usize) -> std::io::Result<()> {
        let t = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let frac = if self.nano { t.subsec_nanos() } else { t.subsec_micros() };
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&(t.as_secs() as u32).to_le_bytes());
        h[4..8].copy_from_slice(&frac.to_le_bytes());
        h[8..12].copy_from_slice(&(data.len() as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(orig_len.max(data.len()) as u32).to_le_bytes());
        self.w.write_all(&h)?;
        self.w.write_all(data)?;
        self.written += 1;
        Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        std::env::temp_dir().join(format!("ironpath-pcap-{}-{name}", std::process::id()))
    }

    #[test]
    fn writes_and_reads_back_us_and_ns() {
        for nano in [false, true] {
            let p = tmp(&format!("rw{nano}"));
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
        let e = read(&p).unwrap_err();
        assert!(e.starts_with("record 5: file truncated (4 complete records before it)"), "{e}");
        std::fs::write(&p, b"this is not a capture file at all").unwrap();
        let e = read(&p).unwrap_err();
        assert!(e.contains("not a pcap or pcapng file"), "{e}");
        std::fs::remove_file(&p).unwrap();
        assert!(read(&p).unwrap_err().contains("No such file"));
    }
}
