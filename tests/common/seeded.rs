//! Deterministic float test data: `n` values in about ±`scale`, a different sequence per seed,
//! reproducible on every platform and with no RNG crate.
//!
//! Invariant: the values are multiples of 1/1001 (times `scale`) spread over [-1, 1], none of
//! them NaN or infinite, so sums of a few thousand stay far from overflow.

#![allow(dead_code)]

/// `n` values in about ±1.37 for seed `seed`.
pub fn data(n: usize, seed: usize) -> Vec<f32> {
    data_scaled(n, seed, 1.37)
}

/// `n` values in about ±`scale` for seed `seed`.
pub fn data_scaled(n: usize, seed: usize, scale: f32) -> Vec<f32> {
    (0..n)
        .map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 / 1001.0 - 1.0) * scale)
        .collect()
}
