//! Integer kernels: the widening multiply, integer conv and matmul that accumulate in i32, and
//! the requantize step back to int8/uint8.
//!
//! Invariant: nothing here computes a float. Operands are i8, u8 or i16 (the same dtype on both
//! sides), products are exact i32 ([`AluOp::MulWide`]), sums accumulate in i32, and
//! [`Tensor::try_requantize`] rescales with a fixed-point multiplier and shift, rounded as
//! onnxruntime's f32 product rounds and then half to even ([`AluOp::Requant`]), then adds the
//! zero point and clamps with integer ops.

use alloc::format;
use alloc::vec::Vec;

use super::conv::ConvOpts;
use super::Tensor;
use crate::autograd::FnKind;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{fixed_point, AluOp};

/// The fixed-point `(multipliers, shifts)` of positive f32 `scales`, one pair per scale, for
/// [`Tensor::try_requantize`]; `op` names the caller in the error for a scale out of range.
pub fn requant_params(op: &'static str, scales: &[f32]) -> Result<(Vec<i32>, Vec<i32>)> {
    let mut m = Vec::with_capacity(scales.len());
    let mut s = Vec::with_capacity(scales.len());
    for &x in scales {
        let (a, b) = fixed_point(x).ok_or_else(|| {
            Error::dtype(
                op,
                format!("requantize scale {x:e} is not positive and within [2^-32, 2^30)"),
            )
        })?;
        m.push(a);
        s.push(b);
    }
    Ok((m, s))
}

/// Is `dt` an operand type of the widening multiply?
fn narrow(dt: DType) -> bool {
    AluOp::MulWide.defined_on(dt)
}

impl Tensor {
    /// The exact product of two narrow integer tensors (each i8, u8 or i16; they may differ,
    /// and are not promoted: an i8 weight stays i8 in memory) as i32.
    pub fn try_mul_wide(&self, rhs: &Tensor) -> Result<Tensor> {
        if !narrow(self.dtype()) || !narrow(rhs.dtype()) {
            return Err(Error::dtype(
                "mul_wide",
                format!(
                    "operands {} and {} (shapes {:?}, {:?}) must be i8, u8 or i16",
                    self.dtype(),
                    rhs.dtype(),
                    self.shape(),
                    rhs.shape()
                ),
            ));
        }
        let shape = Tensor::broadcast_shape("mul_wide", &self.shape(), &rhs.shape())?;
        let (a, b) = (
            self.try_broadcast_to(&shape)?,
            rhs.try_broadcast_to(&shape)?,
        );
        let out = a.lazy().alu(AluOp::MulWide, &[&b.lazy()])?;
        Ok(Tensor::derive(FnKind::Alu(AluOp::MulWide), &[&a, &b], out))
    }

    /// Integer convolution: narrow-integer `self` `[b, cin, i..]` and `weight`
    /// `[cout, cin/groups, k..]` (see [`Tensor::try_conv2d`]), products widened and summed in
    /// i32, plus an optional i32 `bias` `[cout]`. Gives i32 `[b, cout, o..]`.
    pub fn try_conv2d_int(
        &self,
        weight: &Tensor,
        bias: Option<&Tensor>,
        opts: &ConvOpts,
    ) -> Result<Tensor> {
        let n = self.ndim().saturating_sub(2);
        let p: Vec<(i64, i64)> = (opts.padding.resolve("conv2d_int", n)?.iter())
            .map(|&(b, a)| (b as i64, a as i64))
            .collect();
        let bias = bias.map(|b| b.cast(DType::I32));
        self.conv_padded(weight, bias.as_ref(), opts, &p, Tensor::try_mul_wide)
    }

    /// Integer matrix product of narrow-integer `self` `[.., m, k]` and `rhs` `[.., k, n]`
    /// (leading axes broadcast), products widened and summed in i32. Gives i32 `[.., m, n]`.
    pub fn try_matmul_int(&self, rhs: &Tensor) -> Result<Tensor> {
        let (sa, sb) = (self.shape(), rhs.shape());
        if sa.len() < 2 || sb.len() < 2 || sa[sa.len() - 1] != sb[sb.len() - 2] {
            return Err(Error::shape(
                "matmul_int",
                format!("{sa:?} and {sb:?} do not multiply (need [.., m, k] and [.., k, n])"),
            ));
        }
        let a = self.try_unsqueeze(-1)?; // [.., m, k, 1]
        let b = rhs.try_unsqueeze(-3)?; // [.., 1, k, n]
        a.try_mul_wide(&b)?.try_sum(&[-2], false)
    }

    /// Requantizes an i32 accumulator to `out` (an integer dtype):
    /// `clamp(round(self * multiplier / 2^shift) + zero_point, lo, hi)`, rounded as the f32
    /// product `float(self) * scale` and then half to even ([`AluOp::Requant`]), `[lo, hi]` being `out`'s range narrowed by `floor` (a fused
    /// ReLU passes the zero point). `ties` says whether a tie goes to the even value before the
    /// zero point is added ([`Ties::BeforeZeroPoint`]) or to the even final value
    /// ([`Ties::WithZeroPoint`]). `multiplier`, `shift` and `zero_point` broadcast against
    /// `self` (per tensor, or per channel shaped `[1, c, 1, ..]`).
    pub fn try_requantize(
        &self,
        multiplier: &Tensor,
        shift: &Tensor,
        zero_point: &Tensor,
        floor: Option<i64>,
        out: DType,
        ties: Ties,
    ) -> Result<Tensor> {
        if self.dtype() != DType::I32 || out.is_float() || out == DType::Bool {
            return Err(Error::dtype(
                "requantize",
                format!(
                    "needs an i32 accumulator (got {} {:?}) and an integer result (got {out})",
                    self.dtype(),
                    self.shape()
                ),
            ));
        }
        let (m, s) = (multiplier.cast(DType::I32), shift.cast(DType::I32));
        let zp = zero_point.cast(DType::I32);
        let r = match ties {
            Ties::BeforeZeroPoint => self.try_alu(AluOp::Requant, &[&m, &s])?.try_add(&zp)?,
            // The zero point packed above the shift: `s + 256 * z`.
            Ties::WithZeroPoint => {
                self.try_alu(AluOp::Requant, &[&m, &s.try_add(&zp.try_mul(256i64)?)?])?
            }
        };
        let lo = out.min_value().max(floor.map_or(f64::MIN, |f| f as f64));
        let low = r.try_maximum(lo)?;
        if lo <= i32::MIN as f64 {
            return Ok(low.try_minimum(out.max_value())?.cast(out));
        }
        // min(x, hi) as -max(-x, -hi): x ≥ lo > i32::MIN, so every negation is exact. An integer
        // `minimum` is a `where` that reads x twice, and a node with two readers that holds the
        // conv's sum is stored by the scheduler as an i32 buffer; with one reader the clamp and
        // the cast fuse into the conv's kernel, which then stores int8 values (4× less memory).
        let high = low.neg().try_maximum(-out.max_value())?.neg();
        Ok(high.cast(out))
    }
}

/// Where [`Tensor::try_requantize`] breaks an exact tie between two integers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ties {
    /// Round half to even, then add the zero point (onnxruntime's convolutions and matmuls).
    BeforeZeroPoint,
    /// The even result after the zero point wins (onnxruntime's quantized pools).
    WithZeroPoint,
}
