//! `ironpath-util`: small pieces shared by the runtime, the graph, the PMD SDK and
//! the apps, kept in one place so that each exists once:
//! * [`Counter`], the per-queue / per-node counter with one writer;
//! * [`suggest`], the "did you mean" search with one cut-off for every message;
//! * [`pci`], PCI addresses (`DDDD:BB:DD.F`);
//! * `testing` (feature `test-utils`), the seeded generator every crate's tests use.
//!
//! It depends on nothing in the workspace (nor outside it), so any crate may use it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod counter;
pub mod pci;
pub mod suggest;
#[cfg(any(test, feature = "test-utils"))]
pub mod testing;

pub use counter::Counter;
pub use pci::PciAddr;
