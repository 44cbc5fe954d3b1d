//! TPACKET_V3 receive blocks as the kernel lays them out (`linux/if_packet.h`), read
//! through checked offsets: a block header or a frame header that points outside its
//! block ends the walk of that block instead of reading beyond it, and no header can
//! make a walk longer than the block has room for frames.
//!
//! A driver holds a block while the kernel has handed it over (its status says
//! `TP_STATUS_USER`), views it as a byte slice, reads [`block_header`], then calls
//! [`frame_at`] for each frame, from `first` on, following each frame's `next`.

/// `tpacket_block_desc`: `hdr.bh1.block_status`.
pub const BLK_STATUS: usize = 8;
/// `hdr.bh1.num_pkts`.
pub const BLK_NUM_PKTS: usize = 12;
/// `hdr.bh1.offset_to_first_pkt`.
pub const BLK_FIRST_PKT: usize = 16;
/// Bytes of the block header read here (through `offset_to_first_pkt`).
pub const BLK_HDR_LEN: usize = 20;
/// `tpacket3_hdr.tp_next_offset`.
pub const H3_NEXT: usize = 0;
/// `tpacket3_hdr.tp_snaplen`.
pub const H3_SNAPLEN: usize = 12;
/// `tpacket3_hdr.tp_len`: the frame's length on the wire (more than `tp_snaplen` when
/// the frame did not fit the ring's frame, e.g. a GSO super-frame from a veth peer).
pub const H3_LEN: usize = 16;
/// `tpacket3_hdr.tp_status`.
pub const H3_STATUS: usize = 20;
/// `tpacket3_hdr.tp_mac` (offset of the frame from the header).
pub const H3_MAC: usize = 24;
/// `tpacket3_hdr.hv1.tp_rxhash`.
pub const H3_RXHASH: usize = 28;
/// `tpacket3_hdr.hv1.tp_vlan_tci`.
pub const H3_VLAN_TCI: usize = 32;
/// `tpacket3_hdr.hv1.tp_vlan_tpid`.
pub const H3_VLAN_TPID: usize = 36;
/// Bytes of a frame header read here (through `tp_vlan_tpid`).
pub const H3_HDR_LEN: usize = 38;
/// Bytes of the `virtio_net_hdr` the kernel writes just before each frame's first
/// byte on a socket with `PACKET_VNET_HDR`.
pub const VNET_LEN: usize = 10;

/// What a block header says, bounded by what the block can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockHeader {
    /// Frames in the block: `num_pkts`, at most one per [`H3_HDR_LEN`] bytes.
    pub num_pkts: u32,
    /// Offset of the first frame header in the block.
    pub first: usize,
}

/// One frame of a block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame {
    /// Offset of the frame's first byte in the block; `data..data + snap` lies in it.
    pub data: usize,
    /// Bytes captured.
    pub snap: usize,
    /// Bytes on the wire (more than `snap` if the frame was cut).
    pub wire_len: usize,
    /// `tp_status` (checksum and VLAN flags).
    pub status: u32,
    /// The kernel's receive hash.
    pub rxhash: u32,
    /// A VLAN tag the kernel took off (with `TP_STATUS_VLAN_VALID`).
    pub vlan_tci: u16,
    /// Its TPID (0 from kernels that do not fill it in: 802.1Q then).
    pub vlan_tpid: u16,
    /// Offset of the next frame header (meaningful while frames are left).
    pub next: usize,
}

/// Why a frame header cannot be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadFrame {
    /// The header does not lie inside the block.
    Header,
    /// The frame's bytes do not lie inside the block.
    Data,
    /// The next header would not lie after this one (a loop).
    Next,
}

fn u32_at(b: &[u8], off: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[off..off + 4]);
    u32::from_ne_bytes(w)
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_ne_bytes([b[off], b[off + 1]])
}

/// The header of `block` (`None` if the block is shorter than one).
pub fn block_header(block: &[u8]) -> Option<BlockHeader> {
    if block.len() < BLK_HDR_LEN {
        return None;
    }
    let most = (block.len() / H3_HDR_LEN) as u32;
    Some(BlockHeader { num_pkts: u32_at(block, BLK_NUM_PKTS).min(most), first: u32_at(block, BLK_FIRST_PKT) as usize })
}

/// The frame whose header is at `off` in `block`. `last`: no frame follows it (its
/// `next` is not checked).
pub fn frame_at(block: &[u8], off: usize, last: bool) -> Result<Frame, BadFrame> {
    if off.checked_add(H3_HDR_LEN).is_none_or(|end| end > block.len()) {
        return Err(BadFrame::Header);
    }
    let h = &block[off..off + H3_HDR_LEN];
    let snap = u32_at(h, H3_SNAPLEN) as usize;
    let data = off + usize::from(u16_at(h, H3_MAC));
    if data.checked_add(snap).is_none_or(|end| end > block.len()) {
        return Err(BadFrame::Data);
    }
    let step = u32_at(h, H3_NEXT) as usize;
    if !last && step < H3_HDR_LEN {
        return Err(BadFrame::Next);
    }
    Ok(Frame {
        data,
        snap,
        wire_len: u32_at(h, H3_LEN) as usize,
        status: u32_at(h, H3_STATUS),
        rxhash: u32_at(h, H3_RXHASH),
        vlan_tci: u32_at(h, H3_VLAN_TCI) as u16,
        vlan_tpid: u16_at(h, H3_VLAN_TPID),
        next: off + step,
    })
}

/// The `virtio_net_hdr` bytes just before frame `f` (a socket with `PACKET_VNET_HDR`),
/// if they lie inside the block after the frame's header.
pub fn vnet_before<'a>(block: &'a [u8], f: &Frame) -> Option<&'a [u8]> {
    let at = f.data.checked_sub(VNET_LEN)?;
    block.get(at..f.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(b: &mut [u8], off: usize, v: u32) {
        b[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }

    /// A block of two frames as the kernel writes it.
    fn block() -> Vec<u8> {
        let mut b = vec![0u8; 4096];
        put(&mut b, BLK_NUM_PKTS, 2);
        put(&mut b, BLK_FIRST_PKT, 48);
        for (off, next, len) in [(48usize, 160u32, 60u32), (208, 0, 100)] {
            put(&mut b, off + H3_NEXT, next);
            put(&mut b, off + H3_SNAPLEN, len);
            put(&mut b, off + H3_LEN, len);
            b[off + H3_MAC..off + H3_MAC + 2].copy_from_slice(&66u16.to_ne_bytes());
        }
        b
    }

    #[test]
    fn walks_the_frames_the_kernel_wrote() {
        let b = block();
        let h = block_header(&b).unwrap();
        assert_eq!(h, BlockHeader { num_pkts: 2, first: 48 });
        let f = frame_at(&b, h.first, false).unwrap();
        assert_eq!((f.data, f.snap, f.next), (114, 60, 208));
        let g = frame_at(&b, f.next, true).unwrap();
        assert_eq!((g.data, g.snap), (274, 100));
    }

    #[test]
    fn hostile_headers_end_the_walk_instead_of_reading_beyond_the_block() {
        let mut b = block();
        put(&mut b, BLK_NUM_PKTS, u32::MAX);
        assert_eq!(block_header(&b).unwrap().num_pkts, 4096 / H3_HDR_LEN as u32);
        assert_eq!(frame_at(&b, 4090, false), Err(BadFrame::Header));
        assert_eq!(frame_at(&b, usize::MAX - 3, false), Err(BadFrame::Header));
        put(&mut b, 48 + H3_SNAPLEN, 5000);
        assert_eq!(frame_at(&b, 48, false), Err(BadFrame::Data));
        let mut c = block();
        put(&mut c, 48 + H3_NEXT, 0);
        assert_eq!(frame_at(&c, 48, false), Err(BadFrame::Next));
        assert!(frame_at(&c, 48, true).is_ok());
        assert_eq!(block_header(&b[..10]), None);
    }
}
