//! Running reductions along an axis: `cumsum`, `cumprod`, `cummax`, `cummin` (the last two also
//! give the index where each running extreme was first reached).
//!
//! Composed without loops: the axis is moved last, every prefix becomes a row of an `n`×`n`
//! view (`x` broadcast along a new axis, masked to `j <= i` by a lower-triangular mask, the
//! rest set to the reduction's identity), and a plain reduction over the rows gives all prefixes
//! at once. This costs `n²` work per line, which is fine for the axis lengths these ops meet.

use crate::dtype::DType;
use crate::error::Result;

use super::argminmax::first_true;
use super::triangle::tri_mask;
use super::{must, Tensor};

/// The reduction a prefix op applies.
#[derive(Clone, Copy)]
enum Running {
    Sum,
    Prod,
    Max,
}

/// True where `j <= i` in an `n`×`n` grid (row `i` holds prefix `i`).
fn prefix_mask(n: usize) -> Tensor {
    tri_mask(n, n, 1).logical_not()
}

impl Tensor {
    /// Applies `how` to every prefix along `axis`.
    fn running(&self, how: Running, axis: isize) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Ok(self.clone());
        }
        let x = self.try_transpose(axis, -1)?;
        let n = x.shape()[x.ndim() - 1];
        let identity = match how {
            Running::Sum => 0.0,
            Running::Prod => 1.0,
            Running::Max => x.dtype().min_value(),
        };
        let rows = prefix_mask(n).try_where(x.try_unsqueeze(-2)?, identity)?;
        let out = match how {
            Running::Sum => rows.try_sum(&[-1], false)?,
            Running::Prod => rows.try_prod(&[-1], false)?,
            Running::Max => rows.try_max(&[-1], false)?,
        };
        out.try_transpose(-1, axis)
    }

    /// Running sum along `axis` (small ints accumulate as 32-bit, like `sum`).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.cumsum(1).to_vec::<f32>().unwrap(), vec![1.0, 3.0, 3.0, 7.0]);
    /// assert_eq!(t.cumsum(0).to_vec::<f32>().unwrap(), vec![1.0, 2.0, 4.0, 6.0]);
    /// ```
    pub fn try_cumsum(&self, axis: isize) -> Result<Tensor> {
        self.running(Running::Sum, axis)
    }
    /// [`Tensor::try_cumsum`], panicking on a bad axis.
    #[track_caller]
    pub fn cumsum(&self, axis: isize) -> Tensor {
        must(self.try_cumsum(axis))
    }

    /// Running product along `axis`.
    pub fn try_cumprod(&self, axis: isize) -> Result<Tensor> {
        self.running(Running::Prod, axis)
    }
    /// [`Tensor::try_cumprod`], panicking on a bad axis.
    #[track_caller]
    pub fn cumprod(&self, axis: isize) -> Tensor {
        must(self.try_cumprod(axis))
    }

    /// Running maximum along `axis`, and (as i32) the index where each running maximum was
    /// first reached.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 1, -1, 2, -2, 3, -3], &[7]);
    /// let (v, i) = t.cummax(0);
    /// assert_eq!(v.to_vec::<i32>().unwrap(), vec![0, 1, 1, 2, 2, 3, 3]);
    /// assert_eq!(i.to_vec::<i32>().unwrap(), vec![0, 1, 1, 3, 3, 5, 5]);
    /// ```
    pub fn try_cummax(&self, axis: isize) -> Result<(Tensor, Tensor)> {
        let values = self.running(Running::Max, axis)?;
        if self.ndim() == 0 {
            return Ok((values, Tensor::zeros(&[], DType::I32)));
        }
        let x = self.detach().try_transpose(axis, -1)?;
        let v = values.detach().try_transpose(axis, -1)?;
        let n = x.shape()[x.ndim() - 1];
        // hit[.., i, j]: x[j] equals the running max of prefix i, with j inside that prefix.
        let same = x.try_unsqueeze(-2)?.try_eq(v.try_unsqueeze(-1)?)?;
        let hit = same.try_alu(crate::ops::AluOp::And, &[&prefix_mask(n)])?;
        let idx = first_true(&hit, hit.ndim() - 1, false)?;
        Ok((values, idx.try_transpose(-1, axis)?))
    }
    /// [`Tensor::try_cummax`], panicking on a bad axis.
    #[track_caller]
    pub fn cummax(&self, axis: isize) -> (Tensor, Tensor) {
        must(self.try_cummax(axis))
    }

    /// Running minimum along `axis`, and (as i32) the index where each running minimum was
    /// first reached.
    pub fn try_cummin(&self, axis: isize) -> Result<(Tensor, Tensor)> {
        let (v, idx) = self.order_flip().try_cummax(axis)?;
        Ok((v.order_flip(), idx))
    }
    /// [`Tensor::try_cummin`], panicking on a bad axis.
    #[track_caller]
    pub fn cummin(&self, axis: isize) -> (Tensor, Tensor) {
        must(self.try_cummin(axis))
    }
}
