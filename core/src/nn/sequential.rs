//! [`Sequential`]: layers applied in order, as one [`Module`]. A layer is any module (Linear,
//! Conv2d, a nested Sequential, your own) or a plain function between them (an activation).
//!
//! Invariant: parameter names are the layer's index in the list (functions count too), a dot,
//! and the layer's own name — `"0.weight"`, `"2.bias"`, as torch's `nn.Sequential` names them —
//! so state dicts of the same list of layers line up.

use alloc::boxed::Box;
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::{prefixed, Module};
use crate::error::Result;
use crate::tensor::Tensor;

/// One entry of a [`Sequential`].
enum Layer {
    /// A module with parameters (or none).
    Module(Box<dyn Module + Send + Sync>),
    /// A function without parameters, such as an activation.
    Func(fn(&Tensor) -> Result<Tensor>),
}

/// Layers applied in order.
///
/// ```
/// use picograd_core::nn::{Linear, Module, Sequential};
/// use picograd_core::{DType, Tensor};
/// let model = Sequential::new()
///     .push(Linear::new(4, 8, true, 0))
///     .push_fn(|x| Ok(x.relu()))
///     .push(Linear::new(8, 3, true, 1));
/// let names: Vec<String> = model.parameters().into_iter().map(|(n, _)| n).collect();
/// assert_eq!(names, ["0.weight", "0.bias", "2.weight", "2.bias"]);
/// let y = model.forward(&Tensor::ones(&[2, 4], DType::F32));
/// assert_eq!(y.shape(), vec![2, 3]);
/// ```
#[derive(Default)]
pub struct Sequential {
    layers: Vec<Layer>,
}

impl Sequential {
    /// No layers (the identity).
    pub fn new() -> Sequential {
        Sequential::default()
    }

    /// Appends a module.
    pub fn push(mut self, layer: impl Module + Send + Sync + 'static) -> Sequential {
        self.layers.push(Layer::Module(Box::new(layer)));
        self
    }

    /// Appends a function without parameters (an activation: `|x| Ok(x.relu())`).
    pub fn push_fn(mut self, f: fn(&Tensor) -> Result<Tensor>) -> Sequential {
        self.layers.push(Layer::Func(f));
        self
    }

    /// The number of layers (functions included).
    pub fn len(&self) -> usize {
        self.layers.len()
    }

    /// True when there are no layers.
    pub fn is_empty(&self) -> bool {
        self.layers.is_empty()
    }

    /// The module at `index`, if that layer is a module.
    pub fn module(&self, index: usize) -> Option<&(dyn Module + Send + Sync)> {
        match self.layers.get(index)? {
            Layer::Module(m) => Some(m.as_ref()),
            Layer::Func(_) => None,
        }
    }
}

impl Module for Sequential {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        self.layers
            .iter()
            .try_fold(x.clone(), |h, layer| match layer {
                Layer::Module(m) => m.try_forward(&h),
                Layer::Func(f) => f(&h),
            })
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(i, layer)| match layer {
                Layer::Module(m) => prefixed(&format!("{i}"), m.parameters()),
                Layer::Func(_) => Vec::new(),
            })
            .collect()
    }
}
