//! Device-argument strings (what `--vdev` and `port attach` pass to every PMD).
#![no_main]
use ironpath_pmd_sdk::DevArgs;
use libfuzzer_sys::fuzz_target;

const KEYS: &[&str] = &["size", "copy", "mac", "link", "iface"];

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    if let Ok(a) = DevArgs::parse(s, KEYS) {
        let _ = a.get_u64("size", 64, 14, 9000);
        let _ = a.get_bool("copy", false);
        let _ = a.get_mac("mac");
        let _ = a.get_name("link", 64);
        let _ = a.get("iface");
    }
});
