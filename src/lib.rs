//! picograd: a small tensor compiler. This facade re-exports the no_std core and, with the `std`
//! feature (on by default), the desktop runtime.
#![no_std]
#![deny(missing_docs)]

pub use picograd_core::*;

/// The std runtime (Clang device, disk cache); present with the `std` feature.
#[cfg(feature = "std")]
pub use picograd_runtime as runtime;
