//! A chain of quantized 1×1 convs (int8 weights, i32 biases, per-channel requantize to i8 with
//! one zero point) over an `h × w` image, and its naive i64 reference: the model of the packed
//! dual multiply-accumulate tests (`tests/packed_dual_mac.rs`, `tests/packed_tile.rs`).
//! Included with `#[path]` beside `rng.rs` (`mod rng;` at the test crate's root).

use std::sync::Arc;

use picograd::device::Device;
use picograd::interp::Interp;
use picograd::jit::Capture;
use picograd::ops::requant;
use picograd::runtime::target::Values;
use picograd::tensor::quantized::{requant_params, Ties};
use picograd::{ConvOpts, DType, Tensor};

use crate::rng::Rng;

/// The chain: image size, channels of each activation (input first), zero point, and the
/// seeds of its weights and input.
pub struct Chain {
    pub h: usize,
    pub w: usize,
    pub c: &'static [usize],
    pub zp: i64,
    pub weight_seed: u64,
    pub input_seed: u64,
}

/// Layer `n`: 1×1 conv weights `[c[n+1], c[n]]`, biases and per-channel scales.
struct Layer {
    w: Vec<i8>,
    bias: Vec<i32>,
    scales: Vec<f32>,
}

impl Chain {
    fn layer(&self, n: usize) -> Layer {
        let (ci, co) = (self.c[n], self.c[n + 1]);
        let mut r = Rng(self.weight_seed + n as u64);
        let w = (0..ci * co).map(|_| r.range(-127, 127) as i8).collect();
        let bias = (0..co).map(|_| r.range(-3000, 3000) as i32).collect();
        let scales = (0..co).map(|c| 0.0009 + 2e-4 * c as f32).collect();
        Layer { w, bias, scales }
    }

    /// The input image, `[c[0], h·w]`.
    pub fn input(&self) -> Vec<i8> {
        let mut r = Rng(self.input_seed);
        (0..self.c[0] * self.h * self.w)
            .map(|_| r.range(-128, 127) as i8)
            .collect()
    }

    /// A 1×1 conv of `x` (`[ci, h·w]`) with layer `n`, requantized to i8.
    fn conv_reference(&self, x: &[i64], n: usize) -> Vec<i64> {
        let (ci, co, p) = (self.c[n], self.c[n + 1], self.h * self.w);
        let l = self.layer(n);
        let (m, s) = requant_params("test", &l.scales).unwrap();
        let mut out = Vec::new();
        for o in 0..co {
            for q in 0..p {
                let mut acc = l.bias[o] as i64;
                for c in 0..ci {
                    acc += x[c * p + q] * l.w[o * ci + c] as i64;
                }
                let y = requant(acc as i32, m[o], s[o]) as i64;
                out.push((y + self.zp).clamp(-128, 127));
            }
        }
        out
    }

    /// Every layer of the chain on [`Chain::input`], in plain loops.
    pub fn reference(&self) -> Vec<i32> {
        let mut x: Vec<i64> = self.input().iter().map(|&v| v as i64).collect();
        for n in 0..self.c.len() - 1 {
            x = self.conv_reference(&x, n);
        }
        x.iter().map(|&v| v as i32).collect()
    }

    fn qconv(&self, x: &Tensor, n: usize, dev: &Arc<dyn Device>) -> Tensor {
        let (ci, co) = (self.c[n], self.c[n + 1]);
        let l = self.layer(n);
        let w = Tensor::try_from_slice_on(&l.w, &[co, ci, 1, 1], dev).unwrap();
        let bias = Tensor::try_from_slice_on(&l.bias, &[co], dev).unwrap();
        let acc = x
            .try_conv2d_int(&w, Some(&bias), &ConvOpts::default())
            .unwrap();
        let (m, s) = requant_params("test", &l.scales).unwrap();
        let per = [1, co, 1, 1];
        let m = Tensor::try_from_slice_on(&m, &per, dev).unwrap();
        let s = Tensor::try_from_slice_on(&s, &per, dev).unwrap();
        let zp = Tensor::try_from_slice_on(&[self.zp as i8], &[1], dev).unwrap();
        acc.try_requantize(&m, &s, &zp, None, DType::I8, Ties::BeforeZeroPoint)
            .unwrap()
    }

    /// The chain on the interpreter, captured from its input: the device, the input and the
    /// capture.
    pub fn captured(&self) -> (Arc<dyn Device>, Tensor, Capture) {
        picograd::init();
        let dev: Arc<dyn Device> = Arc::new(Interp::new());
        let shape = [1, self.c[0], self.h, self.w];
        let x = Tensor::try_from_slice_on(&self.input(), &shape, &dev).unwrap();
        x.realize().unwrap();
        let y = self.model(&x, &dev);
        let (cap, _) = Capture::record(&[&x], &[&y]).unwrap();
        (dev, x, cap)
    }

    /// The input as an exported bundle's feed for `x`.
    pub fn feed(&self) -> [(&'static str, Values); 1] {
        let bits = self.input().iter().map(|&v| u64::from(v as u8)).collect();
        [(
            "x",
            Values {
                dtype: DType::I8,
                bits,
            },
        )]
    }

    /// The chain as tensor ops on `x` (`[1, c[0], h, w]`, i8), cast to i32.
    pub fn model(&self, x: &Tensor, dev: &Arc<dyn Device>) -> Tensor {
        let mut y = x.clone();
        for n in 0..self.c.len() - 1 {
            y = self.qconv(&y, n, dev);
        }
        y.cast(DType::I32)
    }
}

/// The output of `rel` (a capture of the chain, relowered for a target) recompiled for `dev`
/// and replayed on `x`.
pub fn replayed(rel: &Capture, dev: &Arc<dyn Device>, x: &Tensor) -> Vec<i32> {
    rel.recompiled(dev)
        .unwrap()
        .replay(&[x])
        .unwrap()
        .remove(0)
        .to_vec::<i32>()
        .unwrap()
}
