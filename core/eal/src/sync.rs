//! Atomics and cells that switch to `loom`'s model-checked versions under `--cfg loom`.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU32, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU32, Ordering};

/// Busy-wait hint; under loom a yield so the model checker can schedule others.
#[inline(always)]
pub(crate) fn spin() {
    #[cfg(loom)]
    loom::thread::yield_now();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// An `UnsafeCell` that is loom's under `--cfg loom` (whose closure-based accessors
/// the ring uses there); outside loom the ring copies slots with raw pointers.
#[cfg(not(loom))]
#[derive(Debug)]
#[repr(transparent)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(v: T) -> Self {
        Self(std::cell::UnsafeCell::new(v))
    }
}

#[cfg(loom)]
pub(crate) use loom::cell::UnsafeCell;

/// Pads and aligns a value to a cache line pair so two hot counters never share one
/// (adjacent-line prefetch makes 128 the safe figure on x86).
#[derive(Debug, Default)]
#[repr(align(128))]
pub struct CachePadded<T>(pub T);

impl<T> std::ops::Deref for CachePadded<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
