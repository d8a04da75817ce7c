//! [`Linear`]: `y = x Wᵀ + b`, with `W` of shape `(out, in)` as in tinygrad and PyTorch.

use alloc::string::String;
use alloc::vec::Vec;

use super::{kaiming_uniform, param, Module};
use crate::error::Result;
use crate::tensor::Tensor;

/// A fully connected layer.
pub struct Linear {
    /// `(out_features, in_features)`.
    pub weight: Tensor,
    /// `(out_features)`, if the layer has a bias.
    pub bias: Option<Tensor>,
}

impl Linear {
    /// A layer with kaiming-uniform weights and a uniform `±1/√in` bias, from `seed`.
    pub fn new(in_features: usize, out_features: usize, bias: bool, seed: u64) -> Linear {
        let weight = param(kaiming_uniform(
            &[out_features, in_features],
            in_features,
            seed,
        ));
        let bias = bias.then(|| {
            let b = kaiming_uniform(&[out_features], in_features, seed.wrapping_add(1));
            param(b)
        });
        Linear { weight, bias }
    }
}

impl Module for Linear {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = x.try_matmul(&self.weight.try_transpose(0, 1)?)?;
        match &self.bias {
            Some(b) => y.try_add(b),
            None => Ok(y),
        }
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        let mut p = alloc::vec![(String::from("weight"), self.weight.clone())];
        if let Some(b) = &self.bias {
            p.push((String::from("bias"), b.clone()));
        }
        p
    }
}
