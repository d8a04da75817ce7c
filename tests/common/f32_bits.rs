//! A tensor's f32 values as their bit patterns, for tests that compare two computations bit for
//! bit (NaNs and signed zeros included, which `==` on floats would blur).
//!
//! Invariant: one `u32` per element, in row-major order.

#![allow(dead_code)]

use picograd::Tensor;

/// Realizes `t` and returns each f32 element's bits.
pub fn bits(t: &Tensor) -> Vec<u32> {
    t.to_vec::<f32>()
        .unwrap()
        .iter()
        .map(|v| v.to_bits())
        .collect()
}
