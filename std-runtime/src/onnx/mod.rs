//! The ONNX frontend: load a `.onnx` file ([`Model::load`]), validate it, and evaluate its graph
//! into picograd tensors ([`Model::run`]). The protobuf is decoded with `prost` from hand-written
//! message structs ([`proto`]); initializers become weights; each operator maps to Tensor
//! methods through an opset-aware handler in [`ops`]. Bad input — truncated, corrupted or
//! hostile files — is reported as an [`picograd_core::Error`] naming what and where.

pub mod compile;
pub mod control;
pub mod model;
pub mod node;
pub mod npy;
pub mod ops;
pub mod proto;
pub mod values;

pub use compile::{compile, CompileOptions, CompileReport};
pub use model::{Model, UnsupportedOp, ValueSpec};
