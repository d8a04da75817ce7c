//! The library side of the `picograd` command line (crate `picograd-cli`): [`compile`](mod@compile)
//! exports an ONNX model (loaded with `picograd-onnx`) to freestanding C for a device target and
//! builds and measures it there with `picograd_runtime::target` — what `picograd compile` runs,
//! callable from tests and programs; [`check`] compares a device run with the desktop;
//! [`free_dims`] makes `--shape x=N,... --max N=8` run-time dimensions; [`progress`] shows long stages on stderr; [`quantize`] reads calibration files for
//! `--quantize int8`. The binary itself (`src/main.rs`) only parses arguments.
#![deny(missing_docs)]

pub mod check;
pub mod compile;
pub mod free_dims;
pub mod progress;
pub mod quantize;

pub use compile::{compile, CompileOptions, CompileReport};
