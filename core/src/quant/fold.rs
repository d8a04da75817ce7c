//! Folding the layers around a conv into it before quantizing: BatchNorm into the weights and
//! bias, ReLU / ReLU6 into the output range (and so into the requantize clamp).
//!
//! Invariant: a folded conv computes the same real function as conv → BatchNorm (inference
//! statistics) → activation, up to f32 rounding.

use alloc::vec::Vec;

use super::params::QParams;
use crate::{Error, Result};

/// The activation fused into a quantized op's output clamp.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Activation {
    /// No activation: the full int8 range.
    None,
    /// max(x, 0).
    Relu,
    /// min(max(x, 0), 6).
    Relu6,
}

impl Activation {
    /// The output range after the activation: ReLU starts it at 0, ReLU6 also ends it at 6.
    pub fn range(self, lo: f32, hi: f32) -> (f32, f32) {
        match self {
            Activation::None => (lo, hi),
            Activation::Relu => (0.0, hi.max(0.0)),
            Activation::Relu6 => (0.0, hi.clamp(0.0, 6.0)),
        }
    }

    /// The int8 clamp of an output quantized with `q`: the requantize step saturates into it,
    /// which is the activation (codes below real 0 / above real 6 cannot occur).
    pub fn clamp(self, q: QParams) -> (i32, i32) {
        let lo = match self {
            Activation::None => -128,
            Activation::Relu | Activation::Relu6 => q.zero_point.max(-128),
        };
        let hi = match self {
            Activation::None | Activation::Relu => 127,
            Activation::Relu6 => q.code(6.0).min(127),
        };
        (lo, hi)
    }
}

/// Conv weights `w` (`out` channels first) and bias `b` (zeros when absent) with an inference
/// BatchNorm folded in: w'\[c\] = w\[c\]·γ/σ, b'\[c\] = (b\[c\] − μ)·γ/σ + β, σ = √(var + ε).
pub fn fold_batchnorm(
    w: &[f32],
    b: Option<&[f32]>,
    gamma: &[f32],
    beta: &[f32],
    mean: &[f32],
    var: &[f32],
    eps: f32,
) -> Result<(Vec<f32>, Vec<f32>)> {
    let out = gamma.len();
    let lens = [
        beta.len(),
        mean.len(),
        var.len(),
        b.map_or(out, <[f32]>::len),
    ];
    if out == 0 || w.len() % out != 0 || lens.iter().any(|&n| n != out) {
        return Err(Error::Shape {
            op: "fold_batchnorm",
            detail: alloc::format!(
                "{} weights, bias {:?}, γ {out}, β {}, mean {}, var {} do not agree",
                w.len(),
                b.map(<[f32]>::len),
                lens[0],
                lens[1],
                lens[2]
            ),
        });
    }
    let k: Vec<f32> = (0..out)
        .map(|c| gamma[c] / libm::sqrtf(var[c] + eps))
        .collect();
    let per = w.len() / out;
    let wf = w.iter().enumerate().map(|(i, v)| v * k[i / per]).collect();
    let bf = (0..out)
        .map(|c| (b.map_or(0.0, |b| b[c]) - mean[c]) * k[c] + beta[c])
        .collect();
    Ok((wf, bf))
}
