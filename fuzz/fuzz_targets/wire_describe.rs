//! Untrusted bytes through `ironpath_wire::describe`: whatever the frame, the decoder
//! returns without a panic, writes at least one line, ends every line in `\n`, and
//! stays bounded (a few lines per header, and at most `MAX_DEPTH` VXLAN levels).
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut out = String::new();
    ironpath_wire::describe::describe(data, &mut out);
    assert!(!out.is_empty());
    assert!(out.ends_with('\n'));
    // Each level: ethernet, 2 vlan, ip, up to 8 extension headers plus a stop line,
    // a truncation line, l4, vxlan; ND options are bounded by the frame's size.
    let levels = ironpath_wire::describe::MAX_DEPTH;
    assert!(out.lines().count() <= levels * 20 + data.len() / 8 + 1, "{out}");
});
