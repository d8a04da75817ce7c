//! Normalization layers: [`BatchNorm`] (batch statistics while training, running statistics in
//! eval), [`LayerNorm`] (over trailing axes) and [`GroupNorm`] (over channel groups). All use the
//! biased variance to normalize; BatchNorm's running variance is the unbiased one, as in PyTorch.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{param, Module};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// `(x - mean) / sqrt(var + eps)` over `axes` (kept), with the batch mean and biased variance.
fn normalize(x: &Tensor, axes: &[isize], eps: f64) -> Result<(Tensor, Tensor, Tensor)> {
    let mean = x.try_mean(axes, true)?;
    let centered = x.try_sub(&mean)?;
    let var = centered.try_mul(&centered)?.try_mean(axes, true)?;
    let y = centered.try_mul(var.try_add(eps)?.rsqrt())?;
    Ok((y, mean, var))
}

/// `(1, C, 1, ...)`: a per-channel vector shaped to broadcast over `(N, C, ...)` of rank `rank`.
fn channel_view(v: &Tensor, rank: usize) -> Result<Tensor> {
    let mut shape = alloc::vec![1isize; rank];
    shape[1] = -1;
    v.try_reshape(&shape)
}

fn affine(w: &Tensor, b: &Tensor) -> Vec<(String, Tensor)> {
    alloc::vec![
        (String::from("weight"), w.clone()),
        (String::from("bias"), b.clone())
    ]
}

/// Batch normalization over `(N, C, ...)`: statistics per channel `C`.
pub struct BatchNorm {
    /// Scale `(C)`.
    pub weight: Tensor,
    /// Shift `(C)`.
    pub bias: Tensor,
    /// Running mean `(C)` (not trained; updated in training mode).
    pub running_mean: Tensor,
    /// Running (unbiased) variance `(C)`.
    pub running_var: Tensor,
    /// Added to the variance.
    pub eps: f64,
    /// Weight of the new batch in the running statistics.
    pub momentum: f64,
    /// Batch statistics (and running updates) when true; running statistics when false.
    pub training: bool,
}

impl BatchNorm {
    /// A layer for `channels` channels (eps 1e-5, momentum 0.1), in training mode.
    pub fn new(channels: usize) -> BatchNorm {
        // Not trained, but updated in place: each in a buffer of its own.
        let stat = |v: f64| param(Tensor::full(&[channels], v, DType::F32)).requires_grad_(false);
        BatchNorm {
            weight: param(Tensor::ones(&[channels], DType::F32)),
            bias: param(Tensor::zeros(&[channels], DType::F32)),
            running_mean: stat(0.0),
            running_var: stat(1.0),
            eps: 1e-5,
            momentum: 0.1,
            training: true,
        }
    }

    /// Switches to training mode (batch statistics; running statistics are updated).
    pub fn train(&mut self) {
        self.training = true;
    }

    /// Switches to eval mode (running statistics).
    pub fn eval(&mut self) {
        self.training = false;
    }

    /// The non-trained state, by name (`running_mean`, `running_var`): saved in state dicts, and
    /// realized along with the parameters after a training step.
    pub fn buffers(&self) -> Vec<(String, Tensor)> {
        alloc::vec![
            (String::from("running_mean"), self.running_mean.clone()),
            (String::from("running_var"), self.running_var.clone())
        ]
    }

    /// Folds the batch statistics into the running ones (in place, lazily, without gradient).
    fn update_running(&self, mean: &Tensor, var: &Tensor, count: usize) -> Result<()> {
        let m = self.momentum;
        let unbiased = count as f64 / (count.max(2) - 1) as f64;
        let flat = |t: &Tensor| t.detach().try_reshape(&[-1]);
        let rm = self.running_mean.detach().try_mul(1.0 - m)?;
        let rv = self.running_var.detach().try_mul(1.0 - m)?;
        let new_m = rm.try_add(flat(mean)?.try_mul(m)?)?;
        let new_v = rv.try_add(flat(var)?.try_mul(m * unbiased)?)?;
        self.running_mean.try_assign(&new_m)?;
        self.running_var.try_assign(&new_v)
    }
}

impl Module for BatchNorm {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        if s.len() < 2 || s[1] != self.weight.numel() {
            return Err(Error::shape(
                "batchnorm",
                format!("input {s:?} needs (N, {}, ...)", self.weight.numel()),
            ));
        }
        let axes: Vec<isize> = (0..s.len() as isize).filter(|&a| a != 1).collect();
        let y = if self.training {
            let (y, mean, var) = normalize(x, &axes, self.eps)?;
            self.update_running(&mean, &var, x.numel() / s[1])?;
            y
        } else {
            let rm = channel_view(&self.running_mean, s.len())?;
            let rv = channel_view(&self.running_var, s.len())?;
            x.try_sub(rm)?.try_mul(rv.try_add(self.eps)?.rsqrt())?
        };
        let w = channel_view(&self.weight, s.len())?;
        y.try_mul(w)?.try_add(channel_view(&self.bias, s.len())?)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        affine(&self.weight, &self.bias)
    }
}

/// Layer normalization over the trailing axes `normalized_shape`.
pub struct LayerNorm {
    /// Scale, shaped `normalized_shape`.
    pub weight: Tensor,
    /// Shift, shaped `normalized_shape`.
    pub bias: Tensor,
    /// Added to the variance.
    pub eps: f64,
}

impl LayerNorm {
    /// A layer normalizing over trailing axes of `shape` (eps 1e-5; weight 1, bias 0).
    pub fn new(shape: &[usize]) -> LayerNorm {
        LayerNorm {
            weight: param(Tensor::ones(shape, DType::F32)),
            bias: param(Tensor::zeros(shape, DType::F32)),
            eps: 1e-5,
        }
    }
}

impl Module for LayerNorm {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let (ns, xs) = (self.weight.shape(), x.shape());
        if xs.len() < ns.len() || xs[xs.len() - ns.len()..] != ns[..] {
            return Err(Error::shape(
                "layernorm",
                format!("input {xs:?} does not end in {ns:?}"),
            ));
        }
        let axes: Vec<isize> = (-(ns.len() as isize)..0).collect();
        let (y, _, _) = normalize(x, &axes, self.eps)?;
        y.try_mul(&self.weight)?.try_add(&self.bias)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        affine(&self.weight, &self.bias)
    }
}

/// Group normalization over `(N, C, ...)`: channels split into groups, each normalized.
pub struct GroupNorm {
    /// Number of channel groups.
    pub groups: usize,
    /// Scale `(C)`.
    pub weight: Tensor,
    /// Shift `(C)`.
    pub bias: Tensor,
    /// Added to the variance.
    pub eps: f64,
}

impl GroupNorm {
    /// `groups` groups over `channels` channels (eps 1e-5; weight 1, bias 0).
    pub fn new(groups: usize, channels: usize) -> GroupNorm {
        GroupNorm {
            groups,
            weight: param(Tensor::ones(&[channels], DType::F32)),
            bias: param(Tensor::zeros(&[channels], DType::F32)),
            eps: 1e-5,
        }
    }
}

impl Module for GroupNorm {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let s = x.shape();
        let c = self.weight.numel();
        if s.len() < 2 || s[1] != c || self.groups == 0 || c % self.groups != 0 {
            return Err(Error::shape(
                "groupnorm",
                format!(
                    "input {s:?} needs (N, {c}, ...) with {c} divisible by {}",
                    self.groups
                ),
            ));
        }
        let g = x.try_reshape(&[s[0] as isize, self.groups as isize, -1])?;
        let (y, _, _) = normalize(&g, &[-1], self.eps)?;
        let back: Vec<isize> = s.iter().map(|&d| d as isize).collect();
        let y = y.try_reshape(&back)?;
        let w = channel_view(&self.weight, s.len())?;
        y.try_mul(w)?.try_add(channel_view(&self.bias, s.len())?)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        affine(&self.weight, &self.bias)
    }
}
