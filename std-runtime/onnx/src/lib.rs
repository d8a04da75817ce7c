//! picograd's ONNX frontend (crate `picograd-onnx`): load a `.onnx` file ([`Model::load`]),
//! validate it, and evaluate its graph into picograd tensors ([`Model::run`]). The protobuf is
//! decoded with `prost` from hand-written message structs ([`proto`]); initializers become
//! weights; each operator maps to Tensor methods through an opset-aware handler in [`ops`]. Bad
//! input — truncated, corrupted or hostile files — is reported as an [`picograd_core::Error`]
//! naming what and where. Compiling a model for a device target (`picograd compile`) lives in
//! the `picograd-cli` crate (`picograd_cli::compile`).
#![deny(missing_docs)]

pub mod control;
pub mod dims;
pub mod external;
pub mod lowbit_types;
pub mod model;
pub mod node;
pub mod npy;
pub mod ops;
pub mod proto;
pub mod qdq;
pub mod quantize;
pub mod values;

pub use model::{Model, UnsupportedOp, ValueSpec};
