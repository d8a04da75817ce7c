//! Truth reductions and closeness: `any`/`all` along axes (bool results, via `max` of bools and
//! De Morgan), `isclose`/`allclose` with relative and absolute tolerances and NaN handling.

use crate::dtype::DType;
use crate::error::Result;

use super::{must, Tensor};

/// True where `x` is NaN (the only value unequal to itself).
fn is_nan(x: &Tensor) -> Tensor {
    x.ne(x)
}

/// True where `x` is +∞ or -∞.
fn is_inf(x: &Tensor) -> Tensor {
    if !x.dtype().is_float() {
        return x.const_like(0.0).cast(DType::Bool);
    }
    x.abs().eq(f64::INFINITY)
}

/// True where `x` is finite (`x - x` is 0 exactly for finite values, NaN otherwise).
fn is_finite(x: &Tensor) -> Tensor {
    x.sub(x).eq(0.0)
}

fn or(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.try_alu(crate::ops::AluOp::Or, &[b])
}

fn and(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    a.try_alu(crate::ops::AluOp::And, &[b])
}

impl Tensor {
    /// True where any element along `axes` is non-zero (bool result).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[true, true, true, false, false, false], &[3, 2]);
    /// assert_eq!(t.any(&[1], false).to_vec::<bool>().unwrap(), vec![true, true, false]);
    /// assert_eq!(t.all(&[1], false).to_vec::<bool>().unwrap(), vec![true, false, false]);
    /// ```
    pub fn try_any(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        self.cast(DType::Bool).try_max(axes, keepdim)
    }
    /// [`Tensor::try_any`], panicking on a bad axis.
    #[track_caller]
    pub fn any(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_any(axes, keepdim))
    }

    /// True where every element along `axes` is non-zero (bool result): `!any(!x)`.
    pub fn try_all(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let none_false = self.logical_not().try_any(axes, keepdim)?;
        Ok(none_false.logical_not())
    }
    /// [`Tensor::try_all`], panicking on a bad axis.
    #[track_caller]
    pub fn all(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_all(axes, keepdim))
    }

    /// Elementwise `|self - other| <= atol + rtol·|other|` for finite values; infinities are
    /// close only to themselves; NaNs are close to each other only when `equal_nan`.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[1e-7f32, 1e-8, 1e-9, f32::NAN], &[4]);
    /// let b = Tensor::from_slice(&[0.0f32, 0.0, 0.0, f32::NAN], &[4]);
    /// let c = a.isclose(&b, 1e-5, 1e-8, false).to_vec::<bool>().unwrap();
    /// assert_eq!(c, vec![false, true, true, false]);
    /// ```
    pub fn try_isclose(
        &self,
        other: &Tensor,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<Tensor> {
        let diff = self.try_sub(other)?.abs();
        let bound = other.abs().mul(rtol).add(atol);
        let near = and(
            &and(&is_finite(self), &is_finite(other))?,
            &diff.try_le(&bound)?,
        )?;
        let inf = and(&or(&is_inf(self), &is_inf(other))?, &self.try_eq(other)?)?;
        let close = or(&near, &inf)?;
        if !equal_nan {
            return Ok(close);
        }
        or(&close, &and(&is_nan(self), &is_nan(other))?)
    }
    /// [`Tensor::try_isclose`], panicking when the shapes do not broadcast.
    #[track_caller]
    pub fn isclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Tensor {
        must(self.try_isclose(other, rtol, atol, equal_nan))
    }

    /// Are all elements close ([`Tensor::isclose`])? A scalar bool tensor.
    pub fn try_allclose(
        &self,
        other: &Tensor,
        rtol: f64,
        atol: f64,
        equal_nan: bool,
    ) -> Result<Tensor> {
        let c = self.try_isclose(other, rtol, atol, equal_nan)?;
        c.try_all(&c.axes(), false)
    }
    /// [`Tensor::try_allclose`], panicking when the shapes do not broadcast.
    #[track_caller]
    pub fn allclose(&self, other: &Tensor, rtol: f64, atol: f64, equal_nan: bool) -> Tensor {
        must(self.try_allclose(other, rtol, atol, equal_nan))
    }
}
