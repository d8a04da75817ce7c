//! Spread along axes: `var` (with a Bessel-style `correction`), `std`, and the `var_mean` /
//! `std_mean` pairs. Composed as a mean, squared deviations, and a sum divided by
//! `max(count - correction, 0)`.

use crate::error::Result;

use super::{must, Tensor};

impl Tensor {
    /// Variance over `axes`: `Σ(x - mean)² / max(n - correction, 0)` where `n` is the number of
    /// reduced elements (`correction = 1` is the unbiased estimate, `0` the population one).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// assert_eq!(t.var(&[1], false, 1.0).to_vec::<f32>().unwrap(), vec![0.5, 0.5]);
    /// assert_eq!(t.var(&[0, 1], false, 0.0).item::<f32>().unwrap(), 1.25);
    /// ```
    pub fn try_var(&self, axes: &[isize], keepdim: bool, correction: f64) -> Result<Tensor> {
        let ax = self.resolve_axes("var", axes)?;
        let n = self.reduced_count(&ax)?;
        let x = self.float();
        let dev = x.try_sub(x.try_mean(axes, true)?)?;
        let squares = dev.mul(&dev).try_sum(axes, keepdim)?;
        let denom = n.corrected(&squares, correction)?;
        squares.try_div(&denom)
    }
    /// [`Tensor::try_var`], panicking on a bad axis.
    #[track_caller]
    pub fn var(&self, axes: &[isize], keepdim: bool, correction: f64) -> Tensor {
        must(self.try_var(axes, keepdim, correction))
    }

    /// `(var, mean)` over `axes`.
    pub fn try_var_mean(
        &self,
        axes: &[isize],
        keepdim: bool,
        correction: f64,
    ) -> Result<(Tensor, Tensor)> {
        Ok((
            self.try_var(axes, keepdim, correction)?,
            self.try_mean(axes, keepdim)?,
        ))
    }
    /// [`Tensor::try_var_mean`], panicking on a bad axis.
    #[track_caller]
    pub fn var_mean(&self, axes: &[isize], keepdim: bool, correction: f64) -> (Tensor, Tensor) {
        must(self.try_var_mean(axes, keepdim, correction))
    }

    /// Standard deviation over `axes`: `√var`.
    pub fn try_std(&self, axes: &[isize], keepdim: bool, correction: f64) -> Result<Tensor> {
        Ok(self.try_var(axes, keepdim, correction)?.sqrt())
    }
    /// [`Tensor::try_std`], panicking on a bad axis.
    #[track_caller]
    pub fn std(&self, axes: &[isize], keepdim: bool, correction: f64) -> Tensor {
        must(self.try_std(axes, keepdim, correction))
    }

    /// `(std, mean)` over `axes`.
    pub fn try_std_mean(
        &self,
        axes: &[isize],
        keepdim: bool,
        correction: f64,
    ) -> Result<(Tensor, Tensor)> {
        Ok((
            self.try_std(axes, keepdim, correction)?,
            self.try_mean(axes, keepdim)?,
        ))
    }
    /// [`Tensor::try_std_mean`], panicking on a bad axis.
    #[track_caller]
    pub fn std_mean(&self, axes: &[isize], keepdim: bool, correction: f64) -> (Tensor, Tensor) {
        must(self.try_std_mean(axes, keepdim, correction))
    }
}
