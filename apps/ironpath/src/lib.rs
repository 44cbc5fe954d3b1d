//! `ironpath` (library part of the application crate): the testpmd shell, its
//! forwarding engines and the packet helpers they use, and the YAML pipeline
//! runner ([`pipeline`]), shared by the `ironpath` binary, its integration tests
//! and the fuzz targets.
#![forbid(unsafe_code)]

pub mod completion;
pub mod ctl;
pub mod newpmd;
pub mod out;
pub mod pipeline;
pub mod telemetry;
pub mod testpmd;

/// What to say when no PMD plugin could be loaded, `refused` of them having been
/// refused (each said why on its own line already).
pub fn no_plugin_message(refused: usize) -> String {
    if refused == 0 {
        "no PMD plugin found (searched -d paths, $IRONPATH_PMD_PATH and next to the executable; \
         build them with `cargo build --workspace`)"
            .to_string()
    } else {
        format!("no PMD plugin loaded: {refused} found and refused (the reason of each is above)")
    }
}
