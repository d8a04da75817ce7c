//! `nn`: layers, losses, optimizers and state dicts, all composed from the [`Tensor`] API so their
//! gradients come from autograd.
//!
//! Every layer implements [`Module`]: `try_forward`/`forward` and `parameters()`, which names
//! each trainable tensor (`"weight"`, `"bias"`; nested models prefix them, `"0.weight"`).
//! Layers that behave differently while training (BatchNorm, Dropout) carry an explicit
//! `training` flag set by `train()`/`eval()`: the core keeps no global mode. Initialization is
//! tinygrad's (kaiming-uniform for Linear and Conv weights) from a caller-given seed, so the same
//! seed always builds the same model. [`Sequential`] chains layers; [`data::Dataset`] cuts
//! tensors into shuffled or ordered batches; [`fit()`] is a plain training loop with a progress
//! hook.

mod conv;
pub mod data;
mod dropout;
mod embedding;
pub mod fit;
mod linear;
pub mod losses;
mod norm;
pub mod optim;
mod sequential;
pub mod state;

pub use conv::{Conv1d, Conv2d, ConvTranspose2d};
pub use data::{Batches, Dataset, Last, Order};
pub use dropout::Dropout;
pub use embedding::Embedding;
pub use fit::{fit, FitOptions, Progress, ProgressHook};
pub use linear::Linear;
pub use norm::{BatchNorm, GroupNorm, LayerNorm};
pub use optim::{cosine_lr, Adam, Optimizer, StepLR, SGD};
pub use sequential::Sequential;
pub use state::state_dict;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use crate::error::Result;
use crate::tensor::Tensor;

/// A layer or model: a forward pass and its named parameters.
pub trait Module {
    /// The forward pass; errors name the op and the shapes that did not fit.
    fn try_forward(&self, x: &Tensor) -> Result<Tensor>;

    /// [`Module::try_forward`], panicking on misuse (as the Tensor building methods do); the
    /// panic names the caller's line.
    #[track_caller]
    fn forward(&self, x: &Tensor) -> Tensor {
        match self.try_forward(x) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    /// The trainable tensors, by name.
    fn parameters(&self) -> Vec<(String, Tensor)>;
}

/// `params` with every name prefixed by `prefix.` (for nesting models).
pub fn prefixed(prefix: &str, params: Vec<(String, Tensor)>) -> Vec<(String, Tensor)> {
    params
        .into_iter()
        .map(|(n, t)| (format!("{prefix}.{n}"), t))
        .collect()
}

/// A trainable tensor in a buffer of its own, so in-place updates touch only it and every graph
/// built from it reads that buffer.
///
/// Panics only when the device cannot compute or allocate a tensor at all.
pub(crate) fn param(t: Tensor) -> Tensor {
    match t.try_own() {
        Ok(p) => p.requires_grad_(true),
        Err(e) => panic!("nn: cannot allocate a parameter: {e}"),
    }
}

/// Kaiming-uniform values (tinygrad's default for Linear and Conv weights, `a = √5`):
/// `U(-1/√fan_in, 1/√fan_in)`.
pub(crate) fn kaiming_uniform(shape: &[usize], fan_in: usize, seed: u64) -> Tensor {
    let bound = 1.0 / libm::sqrt(fan_in.max(1) as f64);
    Tensor::uniform(shape, -bound, bound, seed)
}
