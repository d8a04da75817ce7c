//! [`Dropout`]: zeroes each value with probability `p` and scales the rest by `1/(1-p)` while
//! training; the identity in eval. The mask comes from the seeded generator, one new seed per
//! call, so a run is reproducible.
//!
//! Under the JIT the mask of the captured call is replayed (it is uploaded data, a weight of the
//! capture); call it outside the JIT when a fresh mask per step matters.

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicU32, Ordering};

use super::Module;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// Randomly zeroes values while training.
pub struct Dropout {
    /// The probability of zeroing a value, in `[0, 1)`.
    pub p: f64,
    /// Drop values when true; pass them through when false.
    pub training: bool,
    seed: u64,
    calls: AtomicU32,
}

impl Dropout {
    /// Dropout with probability `p`, masks drawn from `seed`, in training mode.
    pub fn new(p: f64, seed: u64) -> Dropout {
        Dropout {
            p,
            training: true,
            seed,
            calls: AtomicU32::new(0),
        }
    }

    /// Switches to training mode.
    pub fn train(&mut self) {
        self.training = true;
    }

    /// Switches to eval mode (identity).
    pub fn eval(&mut self) {
        self.training = false;
    }
}

impl Module for Dropout {
    fn try_forward(&self, x: &Tensor) -> Result<Tensor> {
        if !(0.0..1.0).contains(&self.p) {
            return Err(Error::Unsupported(alloc::format!(
                "dropout: p = {} is outside [0, 1)",
                self.p
            )));
        }
        if !self.training || self.p == 0.0 {
            return Ok(x.clone());
        }
        let call = u64::from(self.calls.fetch_add(1, Ordering::Relaxed));
        let seed = self.seed ^ call.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let keep = Tensor::rand(&x.shape(), seed).try_ge(self.p)?;
        keep.try_where(x.try_mul(1.0 / (1.0 - self.p))?, 0.0)
    }

    fn parameters(&self) -> Vec<(String, Tensor)> {
        Vec::new()
    }
}
