//! The operator table: ONNX op type → handler. Each family lives in its own file and exposes a
//! `lookup`; a handler takes the evaluated [`Node`] and returns its outputs. Handlers compose
//! picograd's Tensor API through its `try_` forms only, calling the shared op where the Tensor
//! API has one (conv, pools, norms, softmax family, activations, gather/scatter, scans, topk,
//! argmax) and composing the rest here, one function per ONNX op.

use picograd_core::{Result, Tensor};

use super::node::Node;

mod activation;
mod attention;
mod detect;
mod elementwise;
mod grid;
mod host;
mod index;
mod loss;
// Public: the composed elementwise math (floor/ceil/round …) is usable and testable on its own.
pub mod math;
mod ml;
mod nn;
mod qlinear;
mod quant;
mod reduce;
mod resize;
mod rnn;
mod shape;
mod signal;
mod training;

/// An operator implementation.
pub type Handler = fn(&Node) -> Result<Vec<Tensor>>;

/// The handler for default-domain op `op`, if picograd supports it.
pub fn handler(op: &str) -> Option<Handler> {
    elementwise::lookup(op)
        .or_else(|| activation::lookup(op))
        .or_else(|| shape::lookup(op))
        .or_else(|| reduce::lookup(op))
        .or_else(|| nn::lookup(op))
        .or_else(|| index::lookup(op))
        .or_else(|| quant::lookup(op))
        .or_else(|| qlinear::lookup(op))
        .or_else(|| loss::lookup(op))
        .or_else(|| host::lookup(op))
        .or_else(|| attention::lookup(op))
        .or_else(|| rnn::lookup(op))
        .or_else(|| grid::lookup(op))
        .or_else(|| signal::lookup(op))
        .or_else(|| detect::lookup(op))
}

/// The handler for op `op` of operator-set `domain` (`""` and `ai.onnx` are the default one).
pub fn handler_in(domain: &str, op: &str) -> Option<Handler> {
    match domain {
        "" | "ai.onnx" => handler(op),
        "ai.onnx.preview.training" => training::lookup(op),
        "ai.onnx.ml" => ml::lookup(op),
        "com.microsoft" => qlinear::lookup_ms(op),
        _ => None,
    }
}

/// A family's table: op type → handler.
type Lookup = fn(&str) -> Option<Handler>;

/// The family (source file) of a supported op, for reports: `elementwise`, `nn`, ...
pub fn family(op: &str) -> Option<&'static str> {
    if super::control::is_control(op) {
        return Some("control");
    }
    if op == "FlexAttention" {
        return Some("attention");
    }
    let table: [(&str, Lookup); 18] = [
        ("loss", loss::lookup),
        ("elementwise", elementwise::lookup),
        ("activation", activation::lookup),
        ("shape", shape::lookup),
        ("reduce", reduce::lookup),
        ("nn", nn::lookup),
        ("index", index::lookup),
        ("quant", quant::lookup),
        ("quant", qlinear::lookup),
        ("quant", qlinear::lookup_ms),
        ("host", host::lookup),
        ("attention", attention::lookup),
        ("rnn", rnn::lookup),
        ("grid", grid::lookup),
        ("signal", signal::lookup),
        ("host", detect::lookup),
        ("training", training::lookup),
        ("ml", ml::lookup),
    ];
    table
        .iter()
        .find(|(_, f)| f(op).is_some())
        .map(|(name, _)| *name)
}

pub(crate) use attention::repeat_heads;
pub use ml::zipmap_labels;

/// One output.
fn one(t: Tensor) -> Result<Vec<Tensor>> {
    Ok(vec![t])
}

/// Normalizes a possibly negative `axis` against `rank`.
fn norm_axis(op: &str, axis: i64, rank: usize) -> Result<usize> {
    let r = rank as i64;
    let a = if axis < 0 {
        axis.saturating_add(r)
    } else {
        axis
    };
    if a < 0 || a >= r.max(1) {
        return Err(super::node::bad(
            op,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    Ok(a as usize)
}

/// Normalizes `axis` against `rank` for an op that then indexes that axis of the shape: unlike
/// [`norm_axis`], a scalar (rank 0) has no axis to index and is refused.
fn dim_axis(op: &str, axis: i64, rank: usize) -> Result<usize> {
    if rank == 0 {
        return Err(super::node::bad(
            op,
            format!("axis {axis} of a scalar (the op needs at least one axis)"),
        ));
    }
    norm_axis(op, axis, rank)
}
