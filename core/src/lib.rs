//! picograd-core: everything in picograd that is pure computation, `#![no_std]` + `alloc`.
//!
//! The flow of data: [`Tensor`] → lazy graph ([`lazy`]) → [`schedule`] (fused kernels as ASTs,
//! [`ast`]) → [`codegen`] (Kernel → Linearizer → UOps → C) → a [`device`] runs them
//! ([`interp::Interp`] here; the std runtime adds Clang).
#![no_std]
#![deny(missing_docs)]
extern crate alloc;

pub mod ast;
pub mod autograd;
pub mod codegen;
pub mod context;
pub mod device;
pub mod dtype;
pub mod error;
pub mod export;
pub mod interp;
pub mod jit;
pub mod lazy;
pub mod lowbit;
pub mod lru;
pub mod nn;
pub mod ops;
pub mod quant;
pub mod realize;
pub mod schedule;
pub mod shape;
pub mod symbolic;
pub mod tensor;

pub use dtype::DType;
pub use error::{Error, Result};
pub use interp::Interp;
pub use lowbit::LowBit;
pub use shape::{ShapeTracker, View};
pub use tensor::{ConvOpts, InterpolateMode, Padding, PoolOpts, Reduction, Tensor};
