//! Convolution layers ([`Conv1d`], [`Conv2d`], [`ConvTranspose2d`]): parameters and options
//! around the Tensor convolutions (`Tensor::conv2d` and friends), whose gradients autograd
//! gives.
//!
//! Padding is `[left, right, top, bottom]` (tinygrad's order: last axis first). Shapes follow
//! PyTorch: input `(N, C, H, W)`, weight `(C_out, C_in/groups, KH, KW)`; a transposed conv's
//! weight is `(C_in, C_out/groups, KH, KW)`.

use alloc::string::String;
use alloc::vec::Vec;

use super::{kaiming_uniform, param, Module};
use crate::error::Result;
use crate::tensor::{ConvOpts, Padding, Tensor};

/// Kaiming-uniform weight and bias of a conv layer.
fn conv_params(shape: &[usize], fan_in: usize, bias: usize, seed: u64) -> (Tensor, Tensor) {
    let w = param(kaiming_uniform(shape, fan_in, seed));
    let b = param(kaiming_uniform(&[bias], fan_in, seed.wrapping_add(1)));
    (w, b)
}

fn named(w: &Tensor, b: &Option<Tensor>) -> Vec<(String, Tensor)> {
    let mut p = alloc::vec![(String::from("weight"), w.clone())];
    if let Some(b) = b {
        p.push((String::from("bias"), b.clone()));
    }
    p
}

/// A 2-D convolution layer.
pub struct Conv2d {
    /// `(C_out, C_in/groups, KH, KW)`.
    pub weight: Tensor,
    /// `(C_out)`, if present.
    pub bias: Option<Tensor>,
    /// Stride `(y, x)`.
    pub stride: (usize, usize),
    /// Dilation `(y, x)`.
    pub dilation: (usize, usize),
    /// `[left, right, top, bottom]`.
    pub padding: [usize; 4],
    /// Channel groups.
    pub groups: usize,
}

impl Conv2d {
    /// A square-kernel conv with symmetric `padding`, stride `stride`, no dilation, one group.
    pub fn new(
        c_in: usize,
        c_out: usize,
        k: usize,
        stride: usize,
        padding: usize,
        seed: u64,
    ) -> Conv2d {
        let (w, b) = conv_params(&[c_out, c_in, k, k], c_in * k * k, c_out, seed);
        Conv2d {
            weight: w,
            bias: Some(b),
            stride: (stride, stride),
            dilation: (1, 1),
            padding: [padding; 4],
            groups: 1,
        }
    }
}

impl Module for Conv2d {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let opts = ConvOpts::default()
            .groups(self.groups)
            .stride(&[self.stride.0, self.stride.1])
            .dilation(&[self.dilation.0, self.dilation.1])
            .padding(Padding::PerSide(self.padding.to_vec()));
        x.try_conv2d(&self.weight, self.bias.as_ref(), &opts)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}

/// A 1-D convolution layer over `(N, C, L)`, run as a conv2d with height 1.
pub struct Conv1d {
    /// `(C_out, C_in/groups, K)`.
    pub weight: Tensor,
    /// `(C_out)`, if present.
    pub bias: Option<Tensor>,
    /// Stride.
    pub stride: usize,
    /// Dilation.
    pub dilation: usize,
    /// Zeros added on each side.
    pub padding: usize,
    /// Channel groups.
    pub groups: usize,
}

impl Conv1d {
    /// A conv with kernel `k`, stride `stride`, symmetric `padding`, no dilation, one group.
    pub fn new(
        c_in: usize,
        c_out: usize,
        k: usize,
        stride: usize,
        padding: usize,
        seed: u64,
    ) -> Conv1d {
        let (w, b) = conv_params(&[c_out, c_in, k], c_in * k, c_out, seed);
        Conv1d {
            weight: w,
            bias: Some(b),
            stride,
            dilation: 1,
            padding,
            groups: 1,
        }
    }
}

impl Module for Conv1d {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let opts = ConvOpts::default()
            .groups(self.groups)
            .stride(&[self.stride])
            .dilation(&[self.dilation])
            .padding(self.padding);
        x.try_conv1d(&self.weight, self.bias.as_ref(), &opts)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}

/// A transposed 2-D convolution (the gradient of a conv with respect to its input).
pub struct ConvTranspose2d {
    /// `(C_in, C_out/groups, KH, KW)`.
    pub weight: Tensor,
    /// `(C_out)`, if present.
    pub bias: Option<Tensor>,
    /// Stride `(y, x)`.
    pub stride: (usize, usize),
    /// Dilation `(y, x)`.
    pub dilation: (usize, usize),
    /// Padding removed from each side: `(y, x)`.
    pub padding: (usize, usize),
    /// Extra rows/columns added at the bottom/right: `(y, x)`.
    pub output_padding: (usize, usize),
    /// Channel groups.
    pub groups: usize,
}

impl ConvTranspose2d {
    /// A square-kernel transposed conv, no dilation or output padding, one group.
    pub fn new(
        c_in: usize,
        c_out: usize,
        k: usize,
        stride: usize,
        padding: usize,
        seed: u64,
    ) -> Self {
        let (w, b) = conv_params(&[c_in, c_out, k, k], c_out * k * k, c_out, seed);
        ConvTranspose2d {
            weight: w,
            bias: Some(b),
            stride: (stride, stride),
            dilation: (1, 1),
            padding: (padding, padding),
            output_padding: (0, 0),
            groups: 1,
        }
    }
}

impl Module for ConvTranspose2d {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        let opts = ConvOpts::default()
            .groups(self.groups)
            .stride(&[self.stride.0, self.stride.1])
            .dilation(&[self.dilation.0, self.dilation.1])
            .padding(Padding::PerDim(alloc::vec![self.padding.0, self.padding.1]))
            .output_padding(&[self.output_padding.0, self.output_padding.1]);
        x.try_conv_transpose2d(&self.weight, self.bias.as_ref(), &opts)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        named(&self.weight, &self.bias)
    }
}
