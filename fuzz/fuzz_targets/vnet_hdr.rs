//! virtio-net headers and frames as a TAP hands them over: parsed into mbuf offload
//! state and back without panicking.
#![no_main]
use ironpath_pmd_sdk::vnet::VnetHdr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((h, frame)) = VnetHdr::split(data) {
        // SAFETY: `Mbuf` is integers and raw pointers; all-zero is a valid value.
        let mut m: ironpath_pmd_sdk::abi::Mbuf = unsafe { std::mem::zeroed() };
        m.pkt_len = frame.len() as u32;
        h.to_mbuf(&mut m);
        let back = VnetHdr::from_mbuf(&m);
        let _ = back.to_bytes();
    }
});
