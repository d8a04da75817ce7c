//! Sorting along an axis: `sort` (values and source indices), `argsort`, `topk`. Stable: equal
//! values keep their original order, in both directions.
//!
//! Composed by ranking rather than by a sorting network: every element counts the elements
//! that must come before it (strictly smaller — or larger, descending — or equal and earlier),
//! which is its position in the result; a one-hot of those ranks then moves values and indices
//! into place. The values are a select-and-sum of the input, so gradients flow back to the
//! elements they came from. Costs `n²` comparisons per line (fine for short axes; a bitonic
//! network would be `n log² n`). NaN orders as numpy orders it: above every number, NaNs among
//! themselves in their original order — last when ascending, first when descending. A `-0.0`
//! comes out as `+0.0` (the select-and-sum adds zeros to it).

use alloc::format;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::AluOp;

use super::triangle::tri_mask;
use super::{must, Tensor};

/// `0..n` as i32.
fn positions(n: usize) -> Tensor {
    Tensor::arange(0.0, n as f64, 1.0, DType::I32)
}

/// `a < b` in the total order that puts NaN above every number: `a < b`, or `b` is NaN and `a`
/// is not. (Only floats have NaN.)
fn total_lt(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let lt = a.try_lt(b)?;
    if !a.dtype().is_float() {
        return Ok(lt);
    }
    let (a_nan, b_nan) = (a.try_ne(a)?, b.try_ne(b)?);
    let nan_above = b_nan.try_alu(AluOp::And, &[&a_nan.logical_not()])?;
    lt.try_alu(AluOp::Or, &[&nan_above])
}

/// `a == b` in the same order: equal, or both NaN.
fn total_eq(a: &Tensor, b: &Tensor) -> Result<Tensor> {
    let eq = a.try_eq(b)?;
    if !a.dtype().is_float() {
        return Ok(eq);
    }
    let both_nan = a.try_ne(a)?.try_alu(AluOp::And, &[&b.try_ne(b)?])?;
    eq.try_alu(AluOp::Or, &[&both_nan])
}

/// The rank (final position) of every element of `x` along its last axis, as i32.
fn ranks(x: &Tensor, descending: bool) -> Result<Tensor> {
    let n = x.shape()[x.ndim() - 1];
    let (xi, xj) = (x.try_unsqueeze(-1)?, x.try_unsqueeze(-2)?);
    let ahead = if descending {
        total_lt(&xi, &xj)?
    } else {
        total_lt(&xj, &xi)?
    };
    let earlier = tri_mask(n, n, 0).logical_not();
    let tie_earlier = total_eq(&xj, &xi)?.try_alu(AluOp::And, &[&earlier])?;
    let before = ahead.try_alu(AluOp::Or, &[&tie_earlier])?;
    before.try_sum(&[-1], false)
}

impl Tensor {
    /// Sorts along `axis`, ascending or `descending`; returns the sorted values and, as i32,
    /// the index each came from. Equal values keep their original order.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[0.1f32, 3.4, 1.2, 3.4], &[4]);
    /// let (v, i) = t.sort(-1, true);
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![3.4, 3.4, 1.2, 0.1]);
    /// assert_eq!(i.to_vec::<i32>().unwrap(), vec![1, 3, 2, 0]);
    /// ```
    pub fn try_sort(&self, axis: isize, descending: bool) -> Result<(Tensor, Tensor)> {
        let ax = self.resolve_axes("sort", &[axis])?[0];
        let n = self.shape()[ax];
        let x = self.try_transpose(ax as isize, -1)?;
        let rank = ranks(&x.detach(), descending)?;
        // place[.., i, r]: element i goes to position r.
        let place = rank.try_unsqueeze(-1)?.try_eq(positions(n))?;
        let values = place.try_where(x.try_unsqueeze(-1)?, 0.0)?;
        let values = values.try_sum(&[-2], false)?.cast(self.dtype());
        let from = positions(n).try_reshape(&[n as isize, 1])?;
        let index = place.try_where(&from, 0.0)?.try_sum(&[-2], false)?;
        Ok((
            values.try_transpose(-1, ax as isize)?,
            index.try_transpose(-1, ax as isize)?,
        ))
    }
    /// [`Tensor::try_sort`], panicking on a bad axis.
    #[track_caller]
    pub fn sort(&self, axis: isize, descending: bool) -> (Tensor, Tensor) {
        must(self.try_sort(axis, descending))
    }

    /// The indices (i32) that sort `self` along `axis`.
    pub fn try_argsort(&self, axis: isize, descending: bool) -> Result<Tensor> {
        Ok(self.detach().try_sort(axis, descending)?.1)
    }
    /// [`Tensor::try_argsort`], panicking on a bad axis.
    #[track_caller]
    pub fn argsort(&self, axis: isize, descending: bool) -> Tensor {
        must(self.try_argsort(axis, descending))
    }

    /// The `k` largest (or, unless `largest`, smallest) values along `axis`, in sorted order,
    /// with their indices (i32). Equal values keep their original order.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[0.1f32, 0.5, 1.2, 3.4, 2.1], &[5]);
    /// let (v, i) = t.topk(2, -1, true);
    /// assert_eq!(v.to_vec::<f32>().unwrap(), vec![3.4, 2.1]);
    /// assert_eq!(i.to_vec::<i32>().unwrap(), vec![3, 4]);
    /// ```
    pub fn try_topk(&self, k: usize, axis: isize, largest: bool) -> Result<(Tensor, Tensor)> {
        let ax = self.resolve_axes("topk", &[axis])?[0];
        let shape = self.shape();
        if k > shape[ax] {
            return Err(Error::shape(
                "topk",
                format!("k = {k} exceeds axis {axis} of shape {shape:?}"),
            ));
        }
        let (v, i) = self.try_sort(axis, largest)?;
        let mut keep: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
        keep[ax] = (0, k);
        Ok((v.try_shrink(&keep)?, i.try_shrink(&keep)?))
    }
    /// [`Tensor::try_topk`], panicking on a bad axis or `k`.
    #[track_caller]
    pub fn topk(&self, k: usize, axis: isize, largest: bool) -> (Tensor, Tensor) {
        must(self.try_topk(k, axis, largest))
    }
}
