//! picograd: a small tensor compiler. This facade re-exports the no_std core and, with the `std`
//! feature (on by default), the desktop runtime.
#![no_std]
#![deny(missing_docs)]

pub use picograd_core::*;

/// The std runtime (Clang device, disk cache); present with the `std` feature.
#[cfg(feature = "std")]
pub use picograd_runtime as runtime;

/// Runs a closure without recording gradients on this thread (std only).
#[cfg(feature = "std")]
pub use picograd_runtime::no_grad;

/// Installs the std runtime as the core's context: `PICOGRAD_DEBUG` (1 kernels and times,
/// 2 schedule, 3 UOps, 4 C source, 5 scheduler decisions), a stderr log, a clock, the `no_grad`
/// scope, and the default device — `PICOGRAD_DEVICE` (`CLANG` or `INTERP`), else Clang when a C
/// compiler is found, else the interpreter with a one-line notice. Call it once at the start of
/// a program; without it the core runs everything on the interpreter. Idempotent.
#[cfg(feature = "std")]
pub fn init() {
    picograd_runtime::install();
}
