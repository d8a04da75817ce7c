//! The softmax family: `softmax`, `log_softmax`, `logsumexp` and `logcumsumexp`. Each subtracts
//! a (detached) maximum before exponentiating, so large inputs do not overflow; the shift does
//! not change the value, so detaching it does not change the gradient.

use crate::error::Result;

use super::{must, Tensor};

impl Tensor {
    /// `(x - max, e^(x - max), Σ e^(x - max))` along `axis`, all with the axis kept.
    fn softmax_parts(&self, axis: isize) -> Result<(Tensor, Tensor, Tensor)> {
        let x = self.float();
        let shifted = x.try_sub(x.try_max(&[axis], true)?.detach())?;
        let e = shifted.exp();
        let total = e.try_sum(&[axis], true)?;
        Ok((shifted, e, total))
    }

    /// `e^x / Σ e^x` along `axis`: values in `[0, 1]` summing to 1.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let p = Tensor::from_slice(&[1.0f32, 1.0], &[2]).softmax(-1).to_vec::<f32>().unwrap();
    /// assert_eq!(p, vec![0.5, 0.5]);
    /// ```
    pub fn try_softmax(&self, axis: isize) -> Result<Tensor> {
        let (_, e, total) = self.softmax_parts(axis)?;
        e.try_mul(total.reciprocal())
    }
    /// [`Tensor::try_softmax`], panicking on a bad axis.
    #[track_caller]
    pub fn softmax(&self, axis: isize) -> Tensor {
        must(self.try_softmax(axis))
    }

    /// `x - log Σ e^x` along `axis` (the log of softmax, computed without underflow).
    pub fn try_log_softmax(&self, axis: isize) -> Result<Tensor> {
        let (shifted, _, total) = self.softmax_parts(axis)?;
        shifted.try_sub(total.log())
    }
    /// [`Tensor::try_log_softmax`], panicking on a bad axis.
    #[track_caller]
    pub fn log_softmax(&self, axis: isize) -> Tensor {
        must(self.try_log_softmax(axis))
    }

    /// `log Σ e^x` over `axes`.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[0.0f32, 0.0], &[2]);
    /// let v = t.logsumexp(&[0], false).item::<f32>().unwrap();
    /// assert!((v - core::f32::consts::LN_2).abs() < 1e-6);
    /// ```
    pub fn try_logsumexp(&self, axes: &[isize], keepdim: bool) -> Result<Tensor> {
        let x = self.float();
        let m = x.try_max(axes, true)?.detach();
        let s = x.try_sub(&m)?.exp().try_sum(axes, keepdim)?.log();
        let dims: alloc::vec::Vec<isize> = s.shape().iter().map(|&d| d as isize).collect();
        s.try_add(m.try_reshape(&dims)?)
    }
    /// [`Tensor::try_logsumexp`], panicking on a bad axis.
    #[track_caller]
    pub fn logsumexp(&self, axes: &[isize], keepdim: bool) -> Tensor {
        must(self.try_logsumexp(axes, keepdim))
    }

    /// `log Σ_{j<=i} e^(x_j)` along `axis`: each prefix is shifted by its running maximum.
    pub fn try_logcumsumexp(&self, axis: isize) -> Result<Tensor> {
        if self.ndim() == 0 {
            return Ok(self.float());
        }
        let x = self.float().try_transpose(axis, -1)?;
        let n = x.shape()[x.ndim() - 1];
        let (run_max, _) = x.try_cummax(-1)?;
        let run_max = run_max.detach();
        // rows[.., i, j] = x[j] - runmax[i], kept where j <= i.
        let rows = x.try_unsqueeze(-2)?.try_sub(run_max.try_unsqueeze(-1)?)?;
        let keep = super::triangle::tri_mask(n, n, 1).logical_not();
        let lowest = x.dtype().min_value();
        let s = keep.try_where(&rows, lowest)?.exp().try_sum(&[-1], false)?;
        s.log().try_add(&run_max)?.try_transpose(-1, axis)
    }
    /// [`Tensor::try_logcumsumexp`], panicking on a bad axis.
    #[track_caller]
    pub fn logcumsumexp(&self, axis: isize) -> Tensor {
        must(self.try_logcumsumexp(axis))
    }
}
