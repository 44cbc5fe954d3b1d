//! Command lines: runtime (EAL) arguments, testpmd application arguments, lcore lists
//! and `--txpkts` values. Input bytes are split into arguments at NUL bytes.
#![no_main]
use ironpath::testpmd::params::{parse_txpkts, Params};
use ironpath_eal::args::EalArgs;
use ironpath_eal::lcore::parse_lcore_list;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else { return };
    let args: Vec<String> = s.split('\0').map(String::from).collect();
    if let Ok((_, rest)) = EalArgs::parse(&args) {
        let _ = Params::parse(&rest);
    }
    let _ = Params::parse(&args);
    let _ = parse_lcore_list(s);
    let _ = parse_txpkts(s);
});
