//! [`Embedding`]: a lookup table, composed as a one-hot matmul: `one_hot(idx) @ weight`, where
//! the one-hot is `idx[..., None] == arange(vocab)`. Its gradient is autograd's.

use alloc::string::String;
use alloc::vec::Vec;

use super::{param, Module};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// A table of `vocab` vectors of length `dim`.
pub struct Embedding {
    /// `(vocab, dim)`.
    pub weight: Tensor,
}

impl Embedding {
    /// A table with glorot-uniform values (tinygrad's init), from `seed`.
    pub fn new(vocab: usize, dim: usize, seed: u64) -> Embedding {
        let bound = libm::sqrt(6.0 / (vocab + dim).max(1) as f64);
        Embedding {
            weight: param(Tensor::uniform(&[vocab, dim], -bound, bound, seed)),
        }
    }
}

impl Module for Embedding {
    /// `idx` holds integer indices (any shape); the result appends the `dim` axis. Indices out of
    /// range give zero vectors.
    fn try_forward(&self, idx: &Tensor) -> Result<Tensor> {
        if idx.dtype().is_float() {
            return Err(Error::dtype("embedding", "indices must be integers"));
        }
        let vocab = self.weight.shape()[0];
        let ids = idx.cast(DType::I32).try_unsqueeze(-1)?;
        let range = Tensor::arange(0.0, vocab as f64, 1.0, DType::I32);
        let one_hot = ids.try_eq(&range)?.cast(self.weight.dtype());
        one_hot.try_matmul(&self.weight)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        alloc::vec![(String::from("weight"), self.weight.clone())]
    }
}
