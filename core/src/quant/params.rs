//! Scales and zero points: activations asymmetric per tensor, weights symmetric per output
//! channel, biases int32 at the product of the input and weight scales.
//!
//! Invariant: a scale is finite and > 0 (a constant-zero tensor gets scale 1), and every
//! quantized value is saturated into its type's range after round-half-to-even.

use alloc::vec::Vec;

use crate::{Error, Result};

/// An int8 tensor's affine map: real = scale · (q − zero_point).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QParams {
    /// Real value of one step.
    pub scale: f32,
    /// The code of real 0.
    pub zero_point: i32,
}

impl QParams {
    /// Asymmetric int8 from an observed range, widened to hold 0 so that 0 is exact (padding,
    /// ReLU) — onnxruntime's `compute_scale_zp` for int8 activations.
    pub fn asymmetric(lo: f32, hi: f32) -> QParams {
        let (lo, hi) = (lo.min(0.0), hi.max(0.0));
        let scale = (hi - lo) / 255.0;
        if !(scale.is_finite() && scale > 0.0) {
            return QParams {
                scale: 1.0,
                zero_point: 0,
            };
        }
        let zp = libm::rintf(-128.0 - lo / scale).clamp(-128.0, 127.0) as i32;
        QParams {
            scale,
            zero_point: zp,
        }
    }

    /// `x` quantized: round(x / scale) + zero point, saturated to int8.
    pub fn quantize(&self, x: f32) -> i8 {
        (libm::rintf(x / self.scale) + self.zero_point as f32).clamp(-128.0, 127.0) as i8
    }

    /// The int8 code of the real value `x` without saturation (for clamp bounds).
    pub fn code(&self, x: f32) -> i32 {
        libm::rintf(x / self.scale) as i32 + self.zero_point
    }
}

/// Weights quantized per output channel (axis 0).
#[derive(Clone, Debug, PartialEq)]
pub struct WeightQuant {
    /// The int8 codes, in the weights' order.
    pub values: Vec<i8>,
    /// One scale per output channel; zero points are all 0.
    pub scales: Vec<f32>,
}

/// `w` (output channels first, `out` of them) as symmetric int8 per output channel:
/// scale = max|w_c| / 127, codes in −127..=127.
pub fn quantize_weights_per_channel(w: &[f32], out: usize) -> Result<WeightQuant> {
    if out == 0 || w.len() % out != 0 {
        return Err(Error::Shape {
            op: "quantize_weights_per_channel",
            detail: alloc::format!("{} values do not split into {out} output channels", w.len()),
        });
    }
    let per = w.len() / out;
    let mut values = Vec::with_capacity(w.len());
    let mut scales = Vec::with_capacity(out);
    for ch in w.chunks(per) {
        let absmax = ch.iter().fold(0f32, |m, v| m.max(v.abs()));
        let s = if absmax > 0.0 && absmax.is_finite() {
            absmax / 127.0
        } else {
            1.0
        };
        values.extend(
            ch.iter()
                .map(|v| libm::rintf(v / s).clamp(-127.0, 127.0) as i8),
        );
        scales.push(s);
    }
    Ok(WeightQuant { values, scales })
}

/// Bias `b[c]` as int32 at scale `s_in · s_w[c]`, zero point 0.
pub fn quantize_bias(b: &[f32], s_in: f32, s_w: &[f32]) -> Result<Vec<i32>> {
    if b.len() != s_w.len() {
        return Err(Error::Shape {
            op: "quantize_bias",
            detail: alloc::format!("{} values for {} weight scales", b.len(), s_w.len()),
        });
    }
    Ok(b.iter()
        .zip(s_w)
        .map(|(v, sw)| {
            let q = libm::rint(f64::from(*v) / (f64::from(s_in) * f64::from(*sw)));
            q.clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
        })
        .collect())
}
