//! picograd's std runtime: everything that needs an operating system — the Clang device (compile
//! generated C, cache it on disk, load it), and the glue that installs it as the default device,
//! and device targets (build an exported bundle for a microcontroller, run it under QEMU, measure it).
#![deny(missing_docs)]

pub mod cache;
pub mod compiler;
pub mod export;

pub use compiler::{CompiledLib, Compiler, Effort, EntryFn, Stats};
pub mod clang;
pub mod install;
pub mod pool;
pub mod private_fs;
pub mod safetensors;
pub mod search;
pub mod tuning;

pub use clang::Clang;
pub use install::{clang, install, no_grad};
pub mod target;
