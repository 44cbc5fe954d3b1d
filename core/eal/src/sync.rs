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

/// An `UnsafeCell` with loom's closure-based API, so the ring compiles against both.
#[cfg(not(loom))]
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

#[cfg(not(loom))]
impl<T> UnsafeCell<T> {
    pub(crate) const fn new(v: T) -> Self {
        Self(std::cell::UnsafeCell::new(v))
    }
    #[inline(always)]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }
    #[inline(always)]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
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
