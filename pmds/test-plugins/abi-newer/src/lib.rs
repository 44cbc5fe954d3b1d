//! Test plugin: an entry table of ABI minor `ABI_MINOR + 3` (driver `net_newer`). What
//! it says of the oldest host minor it runs on comes from `$IRONPATH_TEST_MIN_MINOR`
//! when the entry is asked for: unset, nothing (0); `host`, this host's minor (it
//! loads); `newer`, one above (refused), so one file shows every case of the rule.
//! Its probe refuses every device.
use ironpath_abi as abi;
use std::ffi::c_char;

unsafe extern "C" fn probe(
    _h: *const abi::HostApi,
    _n: *const c_char,
    _a: *const c_char,
    _o: *mut abi::Device,
    _e: *mut abi::ErrMsg,
) -> i32 {
    -abi::errno::ENOTSUP
}

const fn entry(minor: u16, min_abi_minor: u16, mbuf_extra: u32) -> abi::PmdEntry {
    let (entry_size, mbuf_size, mempool_size, dev_ops_size, stats_size) = abi::entry_sizes();
    let mbuf_size = mbuf_size + mbuf_extra;
    abi::PmdEntry {
        abi_major: abi::ABI_MAJOR,
        abi_minor: minor,
        entry_size,
        mbuf_size,
        mempool_size,
        dev_ops_size,
        stats_size,
        name: c"net_newer".as_ptr(),
        devargs_help: c"".as_ptr(),
        probe: Some(probe),
        pci_ids: std::ptr::null(),
        nb_pci_ids: 0,
        reserved: 0,
        check_args: None,
        min_abi_minor,
        reserved_1_6: [0; 3],
    }
}

static SAYS_NOTHING: abi::PmdEntry = entry(abi::ABI_MINOR + 3, 0, 0);
static RUNS_ON_HOST: abi::PmdEntry = entry(abi::ABI_MINOR + 3, abi::ABI_MINOR, 0);
static NEEDS_NEWER: abi::PmdEntry = entry(abi::ABI_MINOR + 3, abi::ABI_MINOR + 1, 0);
static BAD_SIZE: abi::PmdEntry = entry(abi::ABI_MINOR, 0, 8);

/// The entry point: a newer minor, with the oldest minor chosen by the environment.
#[no_mangle]
pub extern "C" fn ironpath_pmd_entry() -> *const abi::PmdEntry {
    match std::env::var("IRONPATH_TEST_MIN_MINOR").as_deref() {
        Ok("host") => &RUNS_ON_HOST,
        Ok("newer") => &NEEDS_NEWER,
        Ok("badsize") => &BAD_SIZE,
        _ => &SAYS_NOTHING,
    }
}
