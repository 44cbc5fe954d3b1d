//! `ironpath` (library part of the application crate): the testpmd shell, its
//! forwarding engines and the packet helpers they use, and the YAML pipeline
//! runner ([`pipeline`]), shared by the `ironpath` binary, its integration tests
//! and the fuzz targets.
#![forbid(unsafe_code)]

pub mod out;
pub mod pipeline;
pub mod telemetry;
pub mod testpmd;
