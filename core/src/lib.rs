//! picograd-core: everything in picograd that is pure computation, `#![no_std]` + `alloc`.
#![no_std]
#![deny(missing_docs)]
extern crate alloc;

pub mod dtype;
pub mod error;
pub mod shape;
pub mod symbolic;

pub use dtype::DType;
pub use error::{Error, Result};
pub use interp::Interp;
pub mod codegen;
pub mod device;
pub mod interp;
pub mod ops;
