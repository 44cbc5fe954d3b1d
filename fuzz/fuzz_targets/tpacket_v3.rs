//! A TPACKET_V3 receive block with hostile headers through the checked walk the
//! af_packet PMD uses (`ironpath_pmd_sdk::tpacket`): the input is the block (up to
//! 8 KiB). No panic; every frame handed out lies inside the block; the walk ends
//! within `num_pkts` steps, at most one per frame header the block can hold; the
//! `virtio_net_hdr` before each frame maps into an mbuf and back to a header that
//! never asks the kernel to write a checksum beyond the packet.
#![no_main]
use ironpath_pmd_sdk::tpacket::{block_header, frame_at, vnet_before, H3_HDR_LEN};
use ironpath_pmd_sdk::vnet::VnetHdr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let block = &data[..data.len().min(8192)];
    let Some(h) = block_header(block) else { return };
    assert!(h.num_pkts as usize <= block.len() / H3_HDR_LEN);
    let (mut off, mut left, mut sum) = (h.first, h.num_pkts, 0u64);
    while left > 0 {
        let Ok(f) = frame_at(block, off, left == 1) else { break };
        // The frame's bytes, read as a driver copies them.
        sum += block[f.data..f.data + f.snap].iter().map(|&b| u64::from(b)).sum::<u64>();
        // The virtio_net_hdr before it, as the PMD maps it into an mbuf and back.
        if let Some(h) = vnet_before(block, &f).and_then(VnetHdr::parse) {
            // SAFETY: `Mbuf` is integers and raw pointers; all-zero is a valid value.
            let mut m: ironpath_pmd_sdk::abi::Mbuf = unsafe { std::mem::zeroed() };
            m.pkt_len = f.snap as u32 + 4;
            h.shifted(4).to_mbuf_l2(&mut m, 18);
            let back = VnetHdr::from_mbuf(&m);
            assert!(u32::from(back.csum_start) + u32::from(back.csum_offset) + 2 <= m.pkt_len || back.flags == 0);
        }
        left -= 1;
        off = f.next;
    }
    std::hint::black_box(sum);
});
