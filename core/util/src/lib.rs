//! `ironpath-util`: small pieces shared by the runtime, the graph, the PMD SDK and
//! the apps, kept in one place so that each exists once:
//! * [`Counter`], the per-queue / per-node counter with one writer;
//! * [`suggest`], the "did you mean" search with one cut-off for every message;
//! * [`pci`], PCI addresses (`DDDD:BB:DD.F`).
//!
//! It depends on nothing in the workspace (nor outside it), so any crate may use it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod counter;
pub mod pci;
pub mod suggest;

pub use counter::Counter;
pub use pci::PciAddr;
