//! Packets from the wire through every testpmd engine that parses them: header
//! parsing, checksum verification/repair (csum), ARP/ICMP answering (icmpecho) and
//! 5-tuple swapping. None may panic; repaired checksums must verify.
#![no_main]
use ironpath::testpmd::fwd::{csum, fivetswap, icmpecho};
use ironpath::testpmd::pkt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, frame)) = data.split_first() else { return };
    let _ = pkt::parse(frame);
    let mut f = frame.to_vec();
    if let Some(_c) = csum::check_and_fix(&mut f, flags & 1 != 0) {
        // After repair, a second pass must find nothing bad.
        let again = csum::check_and_fix(&mut f.clone(), false).expect("still parses");
        assert!(!again.bad_ip && !again.bad_l4, "repaired checksums must verify: {again:?}");
    }
    let mut f = frame.to_vec();
    let _ = icmpecho::answer(&mut f, [2, 0, 0, 0, 0, 1]);
    let mut f = frame.to_vec();
    fivetswap::swap5(&mut f);
});
