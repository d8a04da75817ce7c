//! `argmax`/`argmin`: the index of the extreme value along an axis, ties resolved to the first
//! index, and — as numpy does — the first NaN's index when the line holds a NaN (NaN counts as
//! the extreme both ways). Composed as "equal to the max, or NaN" masks weighted by descending
//! positions, then a max. Results are i32 and carry no gradient. An empty axis is an error.

use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

/// `n, n-1, .., 1` along axis `ax` of an `ndim`-rank tensor (size 1 on every other axis).
fn descending_positions(n: usize, ax: usize, ndim: usize) -> Tensor {
    let mut shape: Vec<isize> = alloc::vec![1; ndim];
    shape[ax] = n as isize;
    Tensor::arange(n as f64, 0.0, -1.0, DType::I32).reshape(&shape)
}

/// The first index along `ax` where bool `mask` is true (`n` when none is).
pub(crate) fn first_true(mask: &Tensor, ax: usize, keepdim: bool) -> Result<Tensor> {
    let n = mask.shape()[ax];
    let weights = descending_positions(n, ax, mask.ndim());
    let best = mask
        .try_where(&weights, 0.0)?
        .try_max(&[ax as isize], keepdim)?;
    Ok(best.const_like(n as f64).sub(&best))
}

/// Where `x` is NaN on a line holding a NaN, else where it equals its line's `extreme` (a max
/// over an axis skips NaN, README "Sizes, NaN and long-running processes", so the NaN lines
/// are found apart). Refuses an empty axis `ax`, which has no index to give.
fn extreme_or_nan(x: &Tensor, extreme: &Tensor, op: &'static str, ax: usize) -> Result<Tensor> {
    if x.shape()[ax] == 0 {
        return Err(Error::shape(
            op,
            alloc::format!("axis {ax} of shape {:?} is empty", x.shape()),
        ));
    }
    let hit = x.try_eq(extreme)?;
    if !x.dtype().is_float() {
        return Ok(hit);
    }
    let nan = x.try_ne(x)?;
    let line_has_nan = nan.try_max(&[ax as isize], true)?;
    line_has_nan.try_where(&nan, &hit)
}

impl Tensor {
    /// Index of the largest value along `axis` (of the flattened tensor when `None`), the first
    /// one on ties, as i32.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 2, 5, 4, 3], &[2, 3]);
    /// assert_eq!(t.argmax(None, false).item::<i32>().unwrap(), 3);
    /// assert_eq!(t.argmax(Some(1), false).to_vec::<i32>().unwrap(), vec![2, 0]);
    /// assert_eq!(t.argmin(Some(0), false).to_vec::<i32>().unwrap(), vec![0, 0, 0]);
    /// ```
    pub fn try_argmax(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        let Some(axis) = axis else {
            return self.try_reshape(&[-1])?.try_argmax(Some(0), false);
        };
        let ax = self.resolve_axes("argmax", &[axis])?[0];
        let x = self.detach();
        let hit = extreme_or_nan(&x, &x.try_max(&[axis], true)?, "argmax", ax)?;
        first_true(&hit, ax, keepdim)
    }
    /// [`Tensor::try_argmax`], panicking on a bad axis.
    #[track_caller]
    pub fn argmax(&self, axis: Option<isize>, keepdim: bool) -> Tensor {
        must(self.try_argmax(axis, keepdim))
    }

    /// Index of the smallest value along `axis` (of the flattened tensor when `None`), the first
    /// one on ties, as i32.
    pub fn try_argmin(&self, axis: Option<isize>, keepdim: bool) -> Result<Tensor> {
        let Some(axis) = axis else {
            return self.try_reshape(&[-1])?.try_argmin(Some(0), false);
        };
        let ax = self.resolve_axes("argmin", &[axis])?[0];
        let x = self.detach();
        let hit = extreme_or_nan(&x, &x.try_min(&[axis], true)?, "argmin", ax)?;
        first_true(&hit, ax, keepdim)
    }
    /// [`Tensor::try_argmin`], panicking on a bad axis.
    #[track_caller]
    pub fn argmin(&self, axis: Option<isize>, keepdim: bool) -> Tensor {
        must(self.try_argmin(axis, keepdim))
    }
}
