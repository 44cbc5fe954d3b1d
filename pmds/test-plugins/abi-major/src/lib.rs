//! Test plugin: an entry table claiming ABI major `ABI_MAJOR + 1`. The loader must
//! refuse it before calling its probe (which would abort the test if reached).
use ironpath_abi as abi;
use std::ffi::c_char;

unsafe extern "C" fn probe(
    _h: *const abi::HostApi,
    _n: *const c_char,
    _a: *const c_char,
    _o: *mut abi::Device,
    _e: *mut abi::ErrMsg,
) -> i32 {
    std::process::abort()
}

static ENTRY: abi::PmdEntry = {
    let (entry_size, mbuf_size, mempool_size, dev_ops_size, stats_size) = abi::entry_sizes();
    abi::PmdEntry {
        abi_major: abi::ABI_MAJOR + 1,
        abi_minor: 0,
        entry_size,
        mbuf_size,
        mempool_size,
        dev_ops_size,
        stats_size,
        name: c"net_future".as_ptr(),
        devargs_help: c"".as_ptr(),
        probe: Some(probe),
        pci_ids: std::ptr::null(),
        nb_pci_ids: 0,
        reserved: 0,
        check_args: None,
        min_abi_minor: 0,
        reserved_1_6: [0; 3],
    }
};

/// The entry point, with the wrong major.
#[no_mangle]
pub extern "C" fn ironpath_pmd_entry() -> *const abi::PmdEntry {
    &ENTRY
}
