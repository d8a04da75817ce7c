//! Movement ops: plain (panicking) forms of the primitives in `mod.rs`, and the ones composed
//! from them (`transpose`, `squeeze`, `unsqueeze`, `flatten`, `pad_value`). All are zero-copy
//! view changes.

use alloc::format;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

impl Tensor {
    /// [`Tensor::try_reshape`], panicking when the sizes disagree.
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let t = Tensor::arange(0.0, 6.0, 1.0, DType::F32).reshape(&[2, -1]);
    /// assert_eq!(t.shape(), vec![2, 3]);
    /// ```
    #[track_caller]
    pub fn reshape(&self, shape: &[isize]) -> Tensor {
        must(self.try_reshape(shape))
    }

    /// [`Tensor::try_permute`], panicking on a bad order.
    #[track_caller]
    pub fn permute(&self, order: &[usize]) -> Tensor {
        must(self.try_permute(order))
    }

    /// [`Tensor::try_expand`], panicking when the shape is not a broadcast of `self`'s.
    #[track_caller]
    pub fn expand(&self, shape: &[usize]) -> Tensor {
        must(self.try_expand(shape))
    }

    /// [`Tensor::try_pad`], panicking on a rank mismatch.
    #[track_caller]
    pub fn pad(&self, arg: &[(usize, usize)]) -> Tensor {
        must(self.try_pad(arg))
    }

    /// [`Tensor::try_shrink`], panicking on a bad range.
    #[track_caller]
    pub fn shrink(&self, arg: &[(usize, usize)]) -> Tensor {
        must(self.try_shrink(arg))
    }

    /// [`Tensor::try_flip`], panicking on a bad axis.
    #[track_caller]
    pub fn flip(&self, axes: &[isize]) -> Tensor {
        must(self.try_flip(axes))
    }

    /// Pads each axis with `(before, after)` elements of `value` (as a select on a padded mask).
    pub fn try_pad_value(&self, arg: &[(usize, usize)], value: f64) -> Result<Tensor> {
        let padded = self.try_pad(arg)?;
        if value == 0.0 {
            return Ok(padded);
        }
        let mask =
            Tensor::try_full_on(&self.shape(), 1.0, DType::Bool, &self.device())?.try_pad(arg)?;
        mask.try_where(&padded, value)
    }
    /// [`Tensor::try_pad_value`], panicking on a rank mismatch.
    #[track_caller]
    pub fn pad_value(&self, arg: &[(usize, usize)], value: f64) -> Tensor {
        must(self.try_pad_value(arg, value))
    }

    /// Swaps axes `a` and `b` (negative axes count from the end).
    pub fn try_transpose(&self, a: isize, b: isize) -> Result<Tensor> {
        // Each on its own: swapping an axis with itself is a (legal) no-op.
        let ax = [
            self.resolve_axes("transpose", &[a])?[0],
            self.resolve_axes("transpose", &[b])?[0],
        ];
        let mut order: Vec<usize> = (0..self.ndim()).collect();
        order.swap(ax[0], ax[1]);
        self.try_permute(&order)
    }
    /// [`Tensor::try_transpose`], panicking on a bad axis.
    #[track_caller]
    pub fn transpose(&self, a: isize, b: isize) -> Tensor {
        must(self.try_transpose(a, b))
    }

    /// Removes `axis` if it has size 1 (otherwise returns `self`), or every size-1 axis when
    /// `axis` is `None`.
    pub fn try_squeeze(&self, axis: Option<isize>) -> Result<Tensor> {
        let shape = self.sym_shape();
        let drop: Vec<usize> = match axis {
            Some(a) => self.resolve_axes("squeeze", &[a])?,
            None => (0..shape.len()).collect(),
        };
        let keep: Vec<crate::shape::Sint> = shape
            .into_iter()
            .enumerate()
            .filter(|(i, d)| !(d.as_const() == Some(1) && drop.contains(i)))
            .map(|(_, d)| d)
            .collect();
        self.try_reshape_sym(&keep)
    }
    /// [`Tensor::try_squeeze`], panicking on a bad axis.
    #[track_caller]
    pub fn squeeze(&self, axis: Option<isize>) -> Tensor {
        must(self.try_squeeze(axis))
    }

    /// Inserts a size-1 axis at `axis` (in `-(ndim+1)..=ndim`).
    pub fn try_unsqueeze(&self, axis: isize) -> Result<Tensor> {
        let n = self.ndim() as isize;
        let a = if axis < 0 { axis + n + 1 } else { axis };
        if !(0..=n).contains(&a) {
            return Err(Error::axis(
                "unsqueeze",
                format!("axis {axis} is out of range for shape {:?}", self.shape()),
            ));
        }
        let mut shape = self.sym_shape();
        shape.insert(a as usize, crate::shape::Sint::from(1));
        self.try_reshape_sym(&shape)
    }
    /// [`Tensor::try_unsqueeze`], panicking on a bad axis.
    #[track_caller]
    pub fn unsqueeze(&self, axis: isize) -> Tensor {
        must(self.try_unsqueeze(axis))
    }

    /// Merges axes `start..=end` (negative axes count from the end) into one.
    pub fn try_flatten(&self, start: isize, end: isize) -> Result<Tensor> {
        if self.ndim() == 0 {
            return self.try_reshape(&[1]);
        }
        // Each on its own: flattening one axis into itself is a (legal) no-op.
        let ax = [
            self.resolve_axes("flatten", &[start])?[0],
            self.resolve_axes("flatten", &[end])?[0],
        ];
        if ax[0] > ax[1] {
            return Err(Error::axis(
                "flatten",
                format!("start axis {start} comes after end axis {end}"),
            ));
        }
        if self.is_symbolic() {
            // The merged axis is the product of expressions: a symbolic batch stays symbolic
            // (`(N,16,4,4)` flattened from 1 is `(N, 256)`), and no size is read as a number.
            let s = self.sym_shape();
            let mut shape = s[..ax[0]].to_vec();
            shape.push(crate::shape::prod(&s[ax[0]..=ax[1]]));
            shape.extend_from_slice(&s[ax[1] + 1..]);
            return self.try_reshape_sym(&shape);
        }
        let s = self.shape();
        let mut shape: Vec<isize> = s[..ax[0]].iter().map(|&d| d as isize).collect();
        shape.push(s[ax[0]..=ax[1]].iter().product::<usize>() as isize);
        shape.extend(s[ax[1] + 1..].iter().map(|&d| d as isize));
        self.try_reshape(&shape)
    }
    /// [`Tensor::try_flatten`], panicking on a bad axis.
    #[track_caller]
    pub fn flatten(&self, start: isize, end: isize) -> Tensor {
        must(self.try_flatten(start, end))
    }
}
