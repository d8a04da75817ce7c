//! Seeded random tensors: a counter-based generator (SplitMix64 of seed and element index) runs on
//! the host and the values are uploaded. The same seed and shape always give the same values, on
//! every device.

use core::f64::consts::PI;

use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::Result;

use super::size::checked_numel;
use super::{must, Tensor};

/// SplitMix64's output function applied to `x`: a well-mixed 64-bit hash.
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The `i`-th uniform draw in `[0, 1)` for `seed` (53 random bits).
fn unit(seed: u64, i: u64) -> f64 {
    let h = mix(mix(seed) ^ i.wrapping_mul(0xD134_2543_DE82_EF95));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

impl Tensor {
    /// Uniform f32 values in `[0, 1)`, deterministic for `seed`; an error when the shape is
    /// too large to exist.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::rand(&[4], 7).to_vec::<f32>().unwrap();
    /// assert_eq!(a, Tensor::rand(&[4], 7).to_vec::<f32>().unwrap());
    /// assert!(a.iter().all(|&v| (0.0..1.0).contains(&v)));
    /// ```
    pub fn try_rand(shape: &[usize], seed: u64) -> Result<Tensor> {
        Tensor::try_uniform(shape, 0.0, 1.0, seed)
    }
    /// [`Tensor::try_rand`], panicking on a shape too large to exist.
    pub fn rand(shape: &[usize], seed: u64) -> Tensor {
        must(Tensor::try_rand(shape, seed))
    }

    /// Uniform f32 values in `[low, high)`, deterministic for `seed`; an error when the shape
    /// is too large to exist.
    pub fn try_uniform(shape: &[usize], low: f64, high: f64, seed: u64) -> Result<Tensor> {
        let n = checked_numel("uniform", shape, DType::F32)?;
        let vals: Vec<f64> = (0..n as u64)
            .map(|i| {
                let v = (low + unit(seed, i) * (high - low)) as f32;
                // Rounding to f32 may reach `high`; keep the interval half-open.
                f64::from(if f64::from(v) >= high && high > low {
                    libm::nextafterf(v, f32::NEG_INFINITY)
                } else {
                    v
                })
            })
            .collect();
        Tensor::try_from_f64s(&vals, shape, DType::F32)
    }
    /// [`Tensor::try_uniform`], panicking on a shape too large to exist.
    pub fn uniform(shape: &[usize], low: f64, high: f64, seed: u64) -> Tensor {
        must(Tensor::try_uniform(shape, low, high, seed))
    }

    /// Standard normal f32 values (Box–Muller), deterministic for `seed`; an error when the
    /// shape is too large to exist.
    pub fn try_randn(shape: &[usize], seed: u64) -> Result<Tensor> {
        let n = checked_numel("randn", shape, DType::F32)? as u64;
        let vals: Vec<f64> = (0..n)
            .map(|i| {
                let u1 = 1.0 - unit(seed, 2 * i); // in (0, 1], so the log is finite
                let u2 = unit(seed, 2 * i + 1);
                libm::sqrt(-2.0 * libm::log(u1)) * libm::cos(2.0 * PI * u2)
            })
            .collect();
        Tensor::try_from_f64s(&vals, shape, DType::F32)
    }
    /// [`Tensor::try_randn`], panicking on a shape too large to exist.
    pub fn randn(shape: &[usize], seed: u64) -> Tensor {
        must(Tensor::try_randn(shape, seed))
    }
}
