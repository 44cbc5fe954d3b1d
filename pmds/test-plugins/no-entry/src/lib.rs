//! Test plugin: a valid shared library that exports something, but not
//! `ironpath_pmd_entry`. The loader must refuse it with a clear message.

/// Not the entry point.
#[no_mangle]
pub extern "C" fn some_other_symbol() -> i32 {
    42
}
