//! The NIC's statistics registers as xstats (`hw_*`), accumulated in software.
//!
//! The 8254x SDM says every statistics register clears when read, and 64-bit
//! counters clear when their high half is read. QEMU's e1000 clears most of them but
//! keeps CRCERRS..MPC and RNBC as running totals. Rather than encode one device's
//! quirks, the first time a register reads non-zero it is read again at once: a
//! register that clears reads (almost) nothing the second time, a running total reads
//! at least as much. From then on a clearing register is added up and a running total
//! is copied.

use crate::regs::Regs;

/// (xstat name, low register, high register for 64-bit byte counters).
const COUNTERS: &[(&str, usize, Option<usize>)] = &[
    ("hw_rx_good_packets", 0x4074, None),       // GPRC
    ("hw_tx_good_packets", 0x4080, None),       // GPTC
    ("hw_rx_good_bytes", 0x4088, Some(0x408C)), // GORCL/H
    ("hw_tx_good_bytes", 0x4090, Some(0x4094)), // GOTCL/H
    ("hw_rx_total_packets", 0x40D0, None),      // TPR
    ("hw_tx_total_packets", 0x40D4, None),      // TPT
    ("hw_rx_broadcast_packets", 0x4078, None),  // BPRC
    ("hw_rx_multicast_packets", 0x407C, None),  // MPRC
    ("hw_tx_broadcast_packets", 0x40F4, None),  // BPTC
    ("hw_tx_multicast_packets", 0x40F0, None),  // MPTC
    ("hw_rx_missed_packets", 0x4010, None),     // MPC: no free descriptor
    ("hw_rx_no_buffer", 0x40A0, None),          // RNBC
    ("hw_rx_crc_errors", 0x4000, None),         // CRCERRS
    ("hw_rx_align_errors", 0x4004, None),       // ALGNERRC
    ("hw_rx_symbol_errors", 0x4008, None),      // SYMERRS
    ("hw_rx_data_errors", 0x400C, None),        // RXERRC
    ("hw_rx_undersize_packets", 0x40A4, None),  // RUC
    ("hw_rx_oversize_packets", 0x40AC, None),   // ROC
];

/// Index of `hw_rx_missed_packets` (reported as `imissed` too).
pub const MISSED: usize = 10;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Kind {
    #[default]
    Unknown,
    /// Clears when read: add each read.
    Clears,
    /// A running total: the last read is the value.
    Total,
}

#[derive(Clone, Copy, Debug, Default)]
struct Counter {
    kind: Kind,
    total: u64,
}

/// Accumulated hardware counters of one device.
#[derive(Debug)]
pub struct HwStats {
    c: [Counter; COUNTERS.len()],
}

impl Default for HwStats {
    fn default() -> Self {
        Self { c: [Counter::default(); COUNTERS.len()] }
    }
}

impl HwStats {
    /// Read every register once and fold it in.
    pub fn refresh(&mut self, regs: &Regs) {
        self.refresh_with(|off| regs.read(off));
    }

    fn refresh_with(&mut self, mut read: impl FnMut(usize) -> u32) {
        let mut get = |lo: usize, hi: Option<usize>| match hi {
            // Low half first: reading the high half clears the pair.
            Some(hi) => u64::from(read(lo)) | u64::from(read(hi)) << 32,
            None => u64::from(read(lo)),
        };
        for (c, &(_, lo, hi)) in self.c.iter_mut().zip(COUNTERS) {
            let v = get(lo, hi);
            match c.kind {
                Kind::Clears => c.total = c.total.wrapping_add(v),
                Kind::Total => c.total = v,
                Kind::Unknown if v == 0 => {}
                Kind::Unknown => {
                    let again = get(lo, hi);
                    if again >= v {
                        c.kind = Kind::Total;
                        c.total = again;
                    } else {
                        c.kind = Kind::Clears;
                        c.total = v.wrapping_add(again);
                    }
                }
            }
        }
    }

    /// Current value of counter `i` (see [`MISSED`]).
    pub fn get(&self, i: usize) -> u64 {
        self.c.get(i).map_or(0, |c| c.total)
    }

    /// Every counter with its xstat name.
    pub fn xstats(&self) -> Vec<(String, u64)> {
        COUNTERS.iter().zip(&self.c).map(|((name, _, _), c)| (name.to_string(), c.total)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn clearing_and_running_total_registers_both_count_right() {
        assert_eq!(COUNTERS[MISSED].0, "hw_rx_missed_packets");
        // A fake device: GPRC clears on read, MPC is a running total, GORC clears on
        // reading its high half.
        let mut regs: HashMap<usize, u32> = HashMap::new();
        let mut s = HwStats::default();
        let read_dev = |regs: &mut HashMap<usize, u32>, s: &mut HwStats| {
            s.refresh_with(|off| {
                let v = regs.get(&off).copied().unwrap_or(0);
                match off {
                    0x4010 | 0x4088 => {}
                    0x408C => {
                        regs.insert(0x4088, 0);
                        regs.insert(0x408C, 0);
                    }
                    _ => {
                        regs.insert(off, 0);
                    }
                }
                v
            })
        };
        regs.insert(0x4074, 5);
        regs.insert(0x4010, 2);
        regs.insert(0x4088, 300);
        read_dev(&mut regs, &mut s);
        assert_eq!((s.get(0), s.get(MISSED), s.get(2)), (5, 2, 300));
        regs.insert(0x4074, 3);
        regs.insert(0x4010, 7);
        regs.insert(0x4088, 100);
        read_dev(&mut regs, &mut s);
        assert_eq!((s.get(0), s.get(MISSED), s.get(2)), (8, 7, 400));
        read_dev(&mut regs, &mut s);
        assert_eq!((s.get(0), s.get(MISSED), s.get(2)), (8, 7, 400));
        assert_eq!(s.xstats().len(), COUNTERS.len());
    }
}
