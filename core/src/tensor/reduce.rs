//! Reductions along axes, with `keepdim`: `sum` and `max` are primitives; `min` (order-reversing
//! map, then max), `mean` (sum / count) and `prod` (a pairwise multiplication tree, exact for
//! zeros and negatives) are composed. `*_all` forms reduce every axis to a scalar.

use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::{AluOp, ReduceOp};

use super::{must, Tensor};

/// The dtype sums and products accumulate in: small ints widen to 32 bits, bools count as i32.
fn acc_dtype(d: DType) -> DType {
    match d {
        DType::Bool | DType::I8 | DType::I16 => DType::I32,
        DType::U8 | DType::U16 => DType::U32,
        _ => d,
    }
}

impl Tensor {
    /// Drops the (size-1) reduced `axes` unless `keepdim`.
    fn drop_axes(&self, axes: &[usize], keepdim: bool) -> Result<Tensor> {
        if keepdim {
            return Ok(self.clone());
        }
        let shape: Vec<isize> = (self.shape().iter().enumerate())
            .filter(|(i, _)| !axes.contains(i))
            .map(|(_, &d)| d as isize)
            .collect();
        self.try_reshape(&shape)
    }

    /// Sum over `axes` (negative count from the end); small ints accumulate as 32-bit.
    ///
    /// Order of the additions (part of the numeric contract, the same on every device, in JIT
    /// replays and in exported C): a float sum of length `L` (the product of the reduced
    /// dimensions) up to 2^16 adds the elements one by one in row-major order; above that it
    /// sums blocks of `C` consecutive elements (`C` the smallest power of two ≥ √L), then the
    /// block sums in order, then adds the sum of the `L mod C` leftover elements, each level
    /// split again if still above 2^16 (see [`crate::lazy::split_reduce`]). So the f32 sum of
    /// 16,781,312 ones is exact. Integer sums are exact in any order and never split.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 1, 2, 3, 4, 5], &[2, 3]);
    /// assert_eq!(t.sum(&[0], false).to_vec::<i32>().unwrap(), vec![3, 5, 7]);
    /// assert_eq!(t.sum(&[-1], true).shape(), vec![2, 1]);
    /// ```
    pub fn try_sum(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let x = self.cast(acc_dtype(self.dtype()));
        x.try_reduce(ReduceOp::Sum, Some(axes), keepdim)
    }
    /// [`Tensor::try_sum`], panicking on a bad axis.
    #[track_caller]
    pub fn sum(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_sum(axes, keepdim))
    }
    /// Sum of every element (a scalar tensor).
    #[track_caller]
    pub fn sum_all(&self) -> Tensor {
        let x = self.cast(acc_dtype(self.dtype()));
        must(x.try_reduce(ReduceOp::Sum, None, false))
    }

    /// Maximum over `axes`.
    pub fn try_max(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        if self.dtype() == DType::Bool {
            let m = self.cast(DType::I32).try_max(axes, keepdim)?;
            return Ok(m.cast(DType::Bool));
        }
        self.try_reduce(ReduceOp::Max, Some(axes), keepdim)
    }
    /// [`Tensor::try_max`], panicking on a bad axis.
    #[track_caller]
    pub fn max(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_max(axes, keepdim))
    }
    /// Maximum of every element.
    pub fn max_all(&self) -> Tensor {
        let all: Vec<isize> = (0..self.ndim() as isize).collect();
        self.max(&all, false)
    }

    /// An order-reversing map that is its own inverse: `-x` for floats, `!x` for ints and bools.
    #[track_caller]
    pub(crate) fn order_flip(&self) -> Tensor {
        let d = self.dtype();
        if d.is_float() {
            return self.neg();
        }
        let ones = if d.is_unsigned() || d == DType::Bool {
            d.max_value()
        } else {
            -1.0
        };
        must(self.try_alu(AluOp::Xor, &[&self.const_like(ones)]))
    }

    /// Minimum over `axes` (as `flip(max(flip(x)))` with an order-reversing `flip`).
    pub fn try_min(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        Ok(self.order_flip().try_max(axes, keepdim)?.order_flip())
    }
    /// [`Tensor::try_min`], panicking on a bad axis.
    #[track_caller]
    pub fn min(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_min(axes, keepdim))
    }
    /// Minimum of every element.
    pub fn min_all(&self) -> Tensor {
        self.order_flip().max_all().order_flip()
    }

    /// Mean over `axes` (ints are averaged as f32).
    pub fn try_mean(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let ax = self.resolve_axes("mean", axes)?;
        let count = self.reduced_count(&ax)?;
        count.divide(&self.float().try_sum(axes, keepdim)?)
    }
    /// [`Tensor::try_mean`], panicking on a bad axis.
    #[track_caller]
    pub fn mean(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_mean(axes, keepdim))
    }
    /// Mean of every element.
    pub fn mean_all(&self) -> Tensor {
        let all: Vec<usize> = (0..self.ndim()).collect();
        let sum = self.float().sum_all();
        must(self.reduced_count(&all).and_then(|c| c.divide(&sum)))
    }

    /// Product over `axes`, by multiplying halves pairwise (odd lengths padded with 1).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[-1.0f32, 2.0, 0.0, 3.0, 4.0, 5.0], &[2, 3]);
    /// assert_eq!(t.prod(&[1], false).to_vec::<f32>().unwrap(), vec![-0.0, 60.0]);
    /// ```
    pub fn try_prod(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let ax = self.resolve_axes("prod", axes)?;
        let mut x = self.cast(acc_dtype(self.dtype()));
        for &a in &ax {
            x = prod_axis(&x, a)?;
        }
        x.drop_axes(&ax, keepdim)
    }
    /// [`Tensor::try_prod`], panicking on a bad axis.
    #[track_caller]
    pub fn prod(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_prod(axes, keepdim))
    }
    /// Product of every element.
    pub fn prod_all(&self) -> Tensor {
        let all: Vec<isize> = (0..self.ndim() as isize).collect();
        self.prod(&all, false)
    }
}

/// Multiplies axis `ax` down to length 1 by halving: `x[..h] * x[h..]`, padding odd lengths
/// (and empty axes) with 1.
fn prod_axis(t: &Tensor, ax: usize) -> Result<Tensor> {
    let mut x = t.clone();
    loop {
        let n = x.shape()[ax];
        if n == 1 {
            return Ok(x);
        }
        if n % 2 == 1 || n == 0 {
            let mut arg = alloc::vec![(0, 0); x.ndim()];
            arg[ax] = (0, 1);
            x = x.try_pad_value(&arg, 1.0)?;
            continue;
        }
        let halves = x.try_split(&[n / 2, n / 2], ax as isize)?;
        x = halves[0].try_mul(&halves[1])?;
    }
}
