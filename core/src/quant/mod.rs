//! Post-training int8 quantization math: the numbers a quantized model is made of, computed from
//! an fp32 model and calibration activations. This module owns the rules; the graph that the
//! numbers are applied to belongs to whoever holds the layers (the ONNX importer's
//! `quantize` pass rewrites a float graph into the integer operators with them).
//!
//! The rules (onnxruntime's `quantize_static` defaults, so a picograd-quantized model is what a
//! user of that tool expects):
//! - weights: int8, symmetric (zero point 0), one scale per output channel = max|w| / 127;
//! - activations: int8, asymmetric, from the observed range widened to hold 0,
//!   scale = (hi − lo) / 255, zero point = round(−128 − lo / scale);
//! - biases: int32 at scale s_in · s_w\[c\], zero point 0;
//! - BatchNorm folded into the conv before the weights are quantized; ReLU / ReLU6 folded into
//!   the output range (it starts at 0 / ends at 6), so the requantize clamp does the activation.
//!
//! Invariant: every rounding here is round-half-to-even (`libm::rintf`), the rule the integer
//! kernels' requantize step uses.

mod fold;
mod observer;
mod params;

pub use fold::{fold_batchnorm, Activation};
pub use observer::Observer;
pub use params::{quantize_bias, quantize_weights_per_channel, QParams, WeightQuant};
