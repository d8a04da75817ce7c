//! Functional nn helpers: `linear`, `sequential`, `layernorm`, `batchnorm` (with given
//! statistics), seeded `dropout`, and `scaled_dot_product_attention` (mask or causal). All are
//! compositions of existing tensor ops.

use alloc::format;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::loss::softmax_axis;
use super::{must, Tensor};

impl Tensor {
    /// `self @ weight + bias`, as the reference defines it (a 1-D `weight` scales elementwise).
    /// Note: the weight is *not* transposed (tinygrad's `Tensor.linear`; its `nn.Linear`
    /// stores the transpose).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// let w = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// let b = Tensor::from_slice(&[1i32, 2], &[2]);
    /// assert_eq!(t.linear(&w, Some(&b)).to_vec::<i32>().unwrap(), vec![8, 12, 16, 24]);
    /// ```
    pub fn try_linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Result<Tensor> {
        let x = if weight.ndim() == 1 {
            self.try_mul(weight)?
        } else {
            self.try_dot(weight)?
        };
        match bias {
            Some(b) => x.try_add(b),
            None => Ok(x),
        }
    }
    /// [`Tensor::try_linear`], panicking on mismatched shapes.
    #[track_caller]
    pub fn linear(&self, weight: &Tensor, bias: Option<&Tensor>) -> Tensor {
        must(self.try_linear(weight, bias))
    }

    /// Applies `layers` in order, each to the previous one's output.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3], &[3]);
    /// let y = t.sequential(&[&|x: &Tensor| x.mul(2), &|x: &Tensor| x.add(1)]);
    /// assert_eq!(y.to_vec::<i32>().unwrap(), vec![3, 5, 7]);
    /// ```
    pub fn sequential(&self, layers: &[&dyn Fn(&Tensor) -> Tensor]) -> Tensor {
        layers.iter().fold(self.clone(), |x, f| f(&x))
    }

    /// Layer normalization over `axes`: `(x - mean) / sqrt(var + eps)` (biased variance).
    pub fn try_layernorm(&self, axes: &[isize], eps: f64) -> Result<Tensor> {
        let y = self.try_sub(self.try_mean(axes, true)?)?;
        let var = y.try_mul(&y)?.try_mean(axes, true)?;
        y.try_mul(var.add(eps).rsqrt())
    }
    /// [`Tensor::try_layernorm`], panicking on a bad axis.
    #[track_caller]
    pub fn layernorm(&self, axes: &[isize], eps: f64) -> Tensor {
        must(self.try_layernorm(axes, eps))
    }

    /// Batch normalization with given statistics: `(x - mean) · weight · invstd + bias`, where
    /// `mean`, `invstd`, `weight`, `bias` hold one value per position of `axes` (usually `[1]`,
    /// the channels). An `invstd` of another rank is broadcast as it is.
    pub fn try_batchnorm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axes: &[isize],
    ) -> Result<Tensor> {
        let ax = self.resolve_axes("batchnorm", axes)?;
        let shape: Vec<isize> = (self.shape().iter().enumerate())
            .map(|(i, &d)| if ax.contains(&i) { d as isize } else { 1 })
            .collect();
        let fit = |t: &Tensor| t.try_reshape(&shape);
        let mut x = self.try_sub(fit(mean)?)?;
        if let Some(w) = weight {
            x = x.try_mul(fit(w)?)?;
        }
        x = if invstd.ndim() == ax.len() {
            x.try_mul(fit(invstd)?)?
        } else {
            x.try_mul(invstd)?
        };
        match bias {
            Some(b) => x.try_add(fit(b)?),
            None => Ok(x),
        }
    }
    /// [`Tensor::try_batchnorm`], panicking on mismatched shapes.
    #[track_caller]
    pub fn batchnorm(
        &self,
        weight: Option<&Tensor>,
        bias: Option<&Tensor>,
        mean: &Tensor,
        invstd: &Tensor,
        axes: &[isize],
    ) -> Tensor {
        must(self.try_batchnorm(weight, bias, mean, invstd, axes))
    }

    /// Dropout: when `train`, zeroes each element with probability `p` (a mask drawn from
    /// `seed`) and scales the rest by `1/(1-p)`; otherwise returns `self`.
    pub fn try_dropout(&self, p: f64, train: bool, seed: u64) -> Result<Tensor> {
        if !(0.0..=1.0).contains(&p) {
            return Err(Error::shape(
                "dropout",
                format!("p = {p} is outside [0, 1]"),
            ));
        }
        if !train || p == 0.0 {
            return Ok(self.clone());
        }
        if p == 1.0 {
            return Ok(self.zeros_like());
        }
        let keep = Tensor::rand(&self.shape(), seed).try_ge(p)?;
        keep.try_where(self, 0.0)?.try_div(1.0 - p)
    }
    /// [`Tensor::try_dropout`], panicking when `p` is outside `[0, 1]`.
    #[track_caller]
    pub fn dropout(&self, p: f64, train: bool, seed: u64) -> Tensor {
        must(self.try_dropout(p, train, seed))
    }

    /// Attention: `softmax(q kᵀ / √d + mask) v` with `self` as the query `[.., l, d]`, `key`
    /// `[.., s, d]`, `value` `[.., s, dv]`. A bool `mask` keeps `true` positions; a float mask is
    /// added. `causal` masks keys after each query (and excludes `mask`).
    pub fn try_scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        mask: Option<&Tensor>,
        causal: bool,
    ) -> Result<Tensor> {
        let shape = self.shape();
        if shape.len() < 2 || key.ndim() < 2 {
            return Err(Error::shape(
                "scaled_dot_product_attention",
                format!("query {shape:?} and key {:?} need rank >= 2", key.shape()),
            ));
        }
        if causal && mask.is_some() {
            return Err(Error::shape(
                "scaled_dot_product_attention",
                "a mask cannot be combined with causal",
            ));
        }
        let d = shape[shape.len() - 1] as f64;
        let qk = self
            .float()
            .try_matmul(&key.float().try_transpose(-2, -1)?)?;
        let mut qk = qk.try_div(libm::sqrt(d))?;
        let causal_mask;
        let mask = if causal {
            let s = qk.shape();
            causal_mask = lower_mask(s[s.len() - 2], s[s.len() - 1])?;
            Some(&causal_mask)
        } else {
            mask
        };
        if let Some(m) = mask {
            let add = if m.dtype() == DType::Bool {
                m.try_where(0.0, f64::NEG_INFINITY)?.cast(qk.dtype())
            } else {
                m.clone()
            };
            qk = qk.try_add(&add)?;
        }
        softmax_axis(&qk, -1)?.try_matmul(value)
    }
    /// [`Tensor::try_scaled_dot_product_attention`], panicking on mismatched shapes.
    #[track_caller]
    pub fn scaled_dot_product_attention(
        &self,
        key: &Tensor,
        value: &Tensor,
        mask: Option<&Tensor>,
        causal: bool,
    ) -> Tensor {
        must(self.try_scaled_dot_product_attention(key, value, mask, causal))
    }
}

/// `[l, s]` bools, true where column <= row.
fn lower_mask(l: usize, s: usize) -> Result<Tensor> {
    let rows = Tensor::arange(0.0, l as f64, 1.0, DType::I32).try_reshape(&[l as isize, 1])?;
    let cols = Tensor::arange(0.0, s as f64, 1.0, DType::I32).try_reshape(&[1, s as isize])?;
    cols.try_le(&rows)
}
