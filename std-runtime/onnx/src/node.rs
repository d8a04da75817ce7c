//! [`Node`]: what an operator handler sees — the node's evaluated inputs (absent optional inputs
//! are `None`), its attributes with typed, defaulted accessors, and the model's opset version —
//! plus the error context that names the node in every message.

use picograd_core::lowbit::LowBit;
use picograd_core::{Error, Result, Tensor};

use super::proto::{attr_type, AttributeProto, GraphProto, NodeProto, TensorProto};
use super::values::{to_f64s, to_i64s};

/// One node ready to evaluate.
pub struct Node<'a> {
    /// The node as stored in the model.
    pub proto: &'a NodeProto,
    /// Its inputs, in order; `None` where an optional input was left empty.
    pub inputs: Vec<Option<Tensor>>,
    /// The version of the default ONNX operator set the model imports.
    pub opset: i64,
    /// The low-bit ONNX type of each input that has one (its tensor holds the carrier dtype).
    pub lowbits: Vec<Option<LowBit>>,
}

/// A `Shape`-kind error naming an ONNX op.
pub fn bad(op: &str, detail: impl Into<String>) -> Error {
    Error::Unsupported(format!("{op}: {}", detail.into()))
}

impl<'a> Node<'a> {
    /// The operator type (`Conv`, `Relu`, ...).
    pub fn op(&self) -> &str {
        &self.proto.op_type
    }

    /// Input `i`, which must be present.
    pub fn input(&self, i: usize) -> Result<&Tensor> {
        self.inputs.get(i).and_then(Option::as_ref).ok_or_else(|| {
            Error::shape(
                "onnx",
                format!("{}: required input {i} is missing", self.op()),
            )
        })
    }

    /// Input `i`, which must be present and have at least `min` axes: handlers that index
    /// the shape check the rank here first (an error naming the input, never a panic).
    pub fn input_min_rank(&self, i: usize, min: usize) -> Result<&Tensor> {
        let t = self.input(i)?;
        check_min_rank(self.op(), i, t, min)?;
        Ok(t)
    }

    /// Input `i`, which must be present and have exactly `rank` axes.
    pub fn input_rank(&self, i: usize, rank: usize) -> Result<&Tensor> {
        let t = self.input(i)?;
        check_rank(self.op(), i, t, rank)?;
        Ok(t)
    }

    /// Input `i` if present, which must then have exactly `rank` axes.
    pub fn opt_rank(&self, i: usize, rank: usize) -> Result<Option<&Tensor>> {
        let t = self.opt(i);
        if let Some(t) = t {
            check_rank(self.op(), i, t, rank)?;
        }
        Ok(t)
    }

    /// The low-bit ONNX type of input `i`, when it has one.
    pub fn lowbit(&self, i: usize) -> Option<LowBit> {
        self.lowbits.get(i).copied().flatten()
    }

    /// Input `i` if present.
    pub fn opt(&self, i: usize) -> Option<&Tensor> {
        self.inputs.get(i).and_then(Option::as_ref)
    }

    /// Input `i`'s values as integers, if the input is present.
    pub fn ints_input(&self, i: usize) -> Result<Option<Vec<i64>>> {
        self.opt(i).map(to_i64s).transpose()
    }

    /// Input `i`'s values as floats, if the input is present.
    pub fn floats_input(&self, i: usize) -> Result<Option<Vec<f64>>> {
        self.opt(i).map(to_f64s).transpose()
    }

    fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.proto.attribute.iter().find(|a| a.name == name)
    }

    /// Is attribute `name` set?
    pub fn has(&self, name: &str) -> bool {
        self.attr(name).is_some()
    }

    /// Integer attribute `name`, or `default`.
    pub fn int(&self, name: &str, default: i64) -> i64 {
        self.attr(name).map_or(default, |a| a.i)
    }

    /// Float attribute `name`, or `default`.
    pub fn float(&self, name: &str, default: f32) -> f32 {
        self.attr(name).map_or(default, |a| a.f)
    }

    /// Integer-list attribute `name`, if set.
    pub fn ints(&self, name: &str) -> Option<Vec<i64>> {
        self.attr(name).map(|a| a.ints.clone())
    }

    /// Float-list attribute `name`, if set.
    pub fn floats(&self, name: &str) -> Option<Vec<f32>> {
        self.attr(name).map(|a| a.floats.clone())
    }

    /// String attribute `name`, or `default`.
    pub fn string(&self, name: &str, default: &str) -> String {
        self.attr(name).map_or(default.to_string(), |a| {
            String::from_utf8_lossy(&a.s).into_owned()
        })
    }

    /// Tensor attribute `name`, if set.
    pub fn tensor(&self, name: &str) -> Option<&'a TensorProto> {
        self.attr(name).and_then(|a| a.t.as_ref())
    }

    /// Graph attribute `name`, if set.
    pub fn graph(&self, name: &str) -> Option<&'a GraphProto> {
        self.attr(name).and_then(|a| a.g.as_ref())
    }

    /// The kind of attribute `name` (an `attr_type` constant), if set.
    pub fn attr_kind(&self, name: &str) -> Option<i32> {
        self.attr(name).map(|a| match a.r#type {
            0 if a.t.is_some() => attr_type::TENSOR,
            k => k,
        })
    }
}

/// Input `i` of op `op` must have exactly `rank` axes.
pub fn check_rank(op: &str, i: usize, t: &Tensor, rank: usize) -> Result<()> {
    if t.ndim() == rank {
        return Ok(());
    }
    Err(Error::shape(
        "onnx",
        format!(
            "{op}: input {i} must have {rank} axes, got shape {:?}",
            t.shape()
        ),
    ))
}

/// Input `i` of op `op` must have at least `min` axes.
pub fn check_min_rank(op: &str, i: usize, t: &Tensor, min: usize) -> Result<()> {
    if t.ndim() >= min {
        return Ok(());
    }
    Err(Error::shape(
        "onnx",
        format!(
            "{op}: input {i} must have at least {min} axes, got shape {:?}",
            t.shape()
        ),
    ))
}

/// Adds "in node NAME (OP)" to an error so the user can find the failing node.
pub fn in_node(e: Error, node: &NodeProto) -> Error {
    let at = format!("in node '{}' ({})", node.name, node.op_type);
    match e {
        Error::Shape { op, detail } => Error::Shape {
            op,
            detail: format!("{detail} {at}"),
        },
        Error::Axis { op, detail } => Error::Axis {
            op,
            detail: format!("{detail} {at}"),
        },
        Error::DType { op, detail } => Error::DType {
            op,
            detail: format!("{detail} {at}"),
        },
        Error::Overflow { what } => Error::Overflow {
            what: format!("{what} {at}"),
        },
        Error::Unsupported(m) => Error::Unsupported(format!("{m} {at}")),
        Error::Format {
            file,
            offset,
            detail,
        } => Error::Format {
            file,
            offset,
            detail: format!("{detail} {at}"),
        },
        other => other,
    }
}
