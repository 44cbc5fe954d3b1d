//! 82540EM registers (BAR 0, 32-bit, little endian) and descriptor layouts, from
//! Intel's "PCI/PCI-X Family of Gigabit Ethernet Controllers Software Developer's
//! Manual" (8254x SDM), chapters 3 (descriptors) and 13 (registers).

/// Device control: [`CTRL_RST`], [`CTRL_SLU`], [`CTRL_ASDE`].
pub const CTRL: usize = 0x0000;
/// Device status: [`STATUS_FD`], [`STATUS_LU`], speed in bits 7:6.
pub const STATUS: usize = 0x0008;
/// Interrupt cause read (clears on read): the [`icr`] bits.
pub const ICR: usize = 0x00C0;
/// Interrupt throttling: the least time between two interrupts, in 256 ns units.
pub const ITR: usize = 0x00C4;
/// Interrupt mask set (a cause interrupts when its bit is set here and in ICR).
pub const IMS: usize = 0x00D0;
/// Interrupt mask clear.
pub const IMC: usize = 0x00D8;
/// Receive control.
pub const RCTL: usize = 0x0100;
/// Transmit control.
pub const TCTL: usize = 0x0400;
/// Transmit inter-packet gap.
pub const TIPG: usize = 0x0410;
/// RX descriptor ring: base (low, high), length in bytes, head, tail.
pub const RDBAL: usize = 0x2800;
pub const RDBAH: usize = 0x2804;
pub const RDLEN: usize = 0x2808;
pub const RDH: usize = 0x2810;
pub const RDT: usize = 0x2818;
/// RX delay timer (0: write back at once).
pub const RDTR: usize = 0x2820;
/// TX descriptor ring: base (low, high), length in bytes, head, tail.
pub const TDBAL: usize = 0x3800;
pub const TDBAH: usize = 0x3804;
pub const TDLEN: usize = 0x3808;
pub const TDH: usize = 0x3810;
pub const TDT: usize = 0x3818;
/// RX checksum control: [`RXCSUM_IPOFL`], [`RXCSUM_TUOFL`].
pub const RXCSUM: usize = 0x5000;
/// Multicast table array (128 registers).
pub const MTA: usize = 0x5200;
/// Receive address 0, low and high ([`RAH_AV`]: address valid).
pub const RAL0: usize = 0x5400;
pub const RAH0: usize = 0x5404;

pub const CTRL_ASDE: u32 = 1 << 5;
pub const CTRL_SLU: u32 = 1 << 6;
pub const CTRL_RST: u32 = 1 << 26;
pub const STATUS_FD: u32 = 1 << 0;
pub const STATUS_LU: u32 = 1 << 1;
pub const RCTL_EN: u32 = 1 << 1;
/// Unicast promiscuous.
pub const RCTL_UPE: u32 = 1 << 3;
/// Multicast promiscuous.
pub const RCTL_MPE: u32 = 1 << 4;
/// Accept broadcast.
pub const RCTL_BAM: u32 = 1 << 15;
/// Strip the Ethernet CRC (BSIZE bits 17:16 = 00 with BSEX = 0: 2048-byte buffers).
pub const RCTL_SECRC: u32 = 1 << 26;
pub const TCTL_EN: u32 = 1 << 1;
/// Pad short packets.
pub const TCTL_PSP: u32 = 1 << 3;
/// Collision threshold 15, collision distance 64 (full duplex), as the SDM recommends.
pub const TCTL_CT_COLD: u32 = (0x0f << 4) | (0x40 << 12);
/// IPG for copper: IPGT 10, IPGR1 8, IPGR2 6.
pub const TIPG_COPPER: u32 = 10 | (8 << 10) | (6 << 20);
pub const RXCSUM_IPOFL: u32 = 1 << 8;
pub const RXCSUM_TUOFL: u32 = 1 << 9;
pub const RAH_AV: u32 = 1 << 31;

/// The receive buffer size RCTL selects (BSIZE = 00): the NIC writes up to this many
/// bytes into each RX buffer.
pub const RX_BUF_SIZE: usize = 2048;
/// Bytes per descriptor (RX and TX, legacy and extended).
pub const DESC_SIZE: usize = 16;

/// Interrupt causes (ICR, IMS, IMC bits).
pub mod icr {
    /// RX descriptors below the minimum threshold (RCTL.RDMTS, half the ring).
    pub const RXDMT0: u32 = 1 << 4;
    /// Receiver overrun (no free descriptor for a frame).
    pub const RXO: u32 = 1 << 6;
    /// Receiver timer: a frame was written back (at once, with RDTR = 0).
    pub const RXT0: u32 = 1 << 7;
}

/// RX descriptor status bits (byte 12).
pub mod rxd {
    /// Descriptor done.
    pub const DD: u8 = 1 << 0;
    /// End of packet.
    pub const EOP: u8 = 1 << 1;
    /// Ignore checksum indication (QEMU always sets it).
    pub const IXSM: u8 = 1 << 2;
    /// TCP/UDP checksum calculated.
    pub const TCPCS: u8 = 1 << 5;
    /// IP checksum calculated.
    pub const IPCS: u8 = 1 << 6;
    /// Error bits (byte 13): CRC, symbol, sequence, carrier extension, RX data error.
    pub const ERR_FRAME: u8 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 4) | (1 << 7);
    /// TCP/UDP checksum error.
    pub const ERR_TCPE: u8 = 1 << 5;
    /// IP checksum error.
    pub const ERR_IPE: u8 = 1 << 6;
}

/// TX descriptor command (byte 11 of a legacy descriptor, bits 31:24 of the second
/// dword of an extended one) and status bits.
pub mod txd {
    /// End of packet.
    pub const EOP: u8 = 1 << 0;
    /// Insert FCS (the Ethernet CRC).
    pub const IFCS: u8 = 1 << 1;
    /// Report status: write DD back when done.
    pub const RS: u8 = 1 << 3;
    /// Extended descriptor (context or data).
    pub const DEXT: u8 = 1 << 5;
    /// Descriptor done (status byte 12).
    pub const DD: u8 = 1 << 0;
    /// Descriptor type in bits 23:20 of the second dword: data (extended).
    pub const DTYP_DATA: u32 = 1 << 20;
    /// Context descriptor TUCMD: TCP (else UDP), IPv4.
    pub const TUCMD_TCP: u8 = 1 << 0;
    pub const TUCMD_IP: u8 = 1 << 1;
    /// Data descriptor POPTS: insert IP checksum, insert TCP/UDP checksum.
    pub const POPTS_IXSM: u8 = 1 << 0;
    pub const POPTS_TXSM: u8 = 1 << 1;
}

/// Link speed from STATUS bits 7:6.
pub fn speed_mbps(status: u32) -> u32 {
    match (status >> 6) & 3 {
        0 => 10,
        1 => 100,
        _ => 1000,
    }
}

/// The MAC address in RAL/RAH (little endian: the first byte is RAL's lowest).
pub fn mac_from_ra(ral: u32, rah: u32) -> [u8; 6] {
    let [a, b, c, d] = ral.to_le_bytes();
    let [e, f, _, _] = rah.to_le_bytes();
    [a, b, c, d, e, f]
}

/// RAL/RAH values for a MAC address (address valid).
pub fn ra_from_mac(mac: [u8; 6]) -> (u32, u32) {
    (u32::from_le_bytes([mac[0], mac[1], mac[2], mac[3]]), u32::from_le_bytes([mac[4], mac[5], 0, 0]) | RAH_AV)
}

/// Memory-mapped BAR 0.
#[derive(Clone, Copy)]
pub struct Regs {
    base: *mut u8,
    len: usize,
}

// SAFETY: `Regs` is a pointer into a device mapping that lives as long as the `Nic`
// holding it (every user holds an `Arc<Nic>`); MMIO registers may be accessed from any
// thread, and each access is a single aligned 32-bit volatile load or store.
unsafe impl Send for Regs {}
// SAFETY: as above.
unsafe impl Sync for Regs {}

impl Regs {
    /// # Safety
    /// `base` points to a mapping of BAR 0 of `len` bytes that outlives the `Regs`.
    pub unsafe fn new(base: *mut u8, len: usize) -> Self {
        Self { base, len }
    }

    fn valid(&self, off: usize) -> bool {
        off.is_multiple_of(4) && off + 4 <= self.len
    }

    /// Read register `off` (all ones, as from an absent device, if `off` is outside
    /// the BAR: never a panic, this runs on the fast path).
    #[inline(always)]
    pub fn read(&self, off: usize) -> u32 {
        if !self.valid(off) {
            return u32::MAX;
        }
        // SAFETY: in bounds and aligned (checked); the mapping is live (see `new`).
        unsafe { std::ptr::read_volatile(self.base.add(off).cast::<u32>()) }
    }

    /// Write register `off` (ignored if `off` is outside the BAR).
    #[inline(always)]
    pub fn write(&self, off: usize, v: u32) {
        if self.valid(off) {
            // SAFETY: as in `read`.
            unsafe { std::ptr::write_volatile(self.base.add(off).cast::<u32>(), v) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mac_round_trip_and_speed() {
        let mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
        let (l, h) = ra_from_mac(mac);
        assert_eq!((l, h), (0x1200_5452, 0x8000_5634));
        assert_eq!(mac_from_ra(l, h), mac);
        assert_eq!(speed_mbps(0x8008_0783), 1000);
        assert_eq!(speed_mbps(1 << 6), 100);
    }
}
