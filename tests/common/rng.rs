//! A deterministic pseudo-random stream (xorshift) for tests that need reproducible integers
//! without an RNG crate.
//!
//! Invariant: the same seed gives the same stream on every platform.

#![allow(dead_code)]

/// Xorshift64 state; seed it with any non-zero value.
pub struct Rng(pub u64);

impl Rng {
    /// The next value, uniform enough for test data, in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        lo + (self.0 % (hi - lo + 1) as u64) as i64
    }
}
