//! The element count of reduced axes, as the divisor of `mean` and `var`: a number when every
//! reduced axis is concrete; a computed scalar when one is symbolic, so a kernel compiled for a
//! variable divides by the count at the bound value of each run (a baked number would be stale
//! in a JIT replay at another value).
//!
//! Invariant: the symbolic count is the product of the reduced sizes at the bound values,
//! exactly (a sum of ones, exact in f32 up to 2^24 elements, times the concrete part); it reads
//! no bound value on the host, so it does not specialize a capture ([`crate::symbolic::Watch`]).
//! Not yet tinygrad's symbolic constant (a constant whose value is an expression of the
//! kernel's variable arguments): the count costs one small kernel summing over the symbolic
//! sizes.

use alloc::vec::Vec;

use super::Tensor;
use crate::dtype::DType;
use crate::error::Result;
use crate::lazy::LazyBuffer;
use crate::ops::Scalar;
use crate::shape::Sint;

/// A reduction's element count.
pub(crate) enum Count {
    /// Every reduced axis is concrete.
    Fixed(f64),
    /// Some reduced axis is symbolic: a scalar tensor of `self`'s float dtype.
    Computed(Tensor),
}

impl Count {
    /// `x / count`.
    pub(crate) fn divide(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Count::Fixed(n) => Ok(x.div(*n)),
            Count::Computed(n) => x.try_div(n),
        }
    }

    /// `max(count - correction, 0)` like `x`: the divisor of a corrected variance.
    pub(crate) fn corrected(&self, like: &Tensor, correction: f64) -> Result<Tensor> {
        match self {
            Count::Fixed(n) => Ok(like.const_like(n - correction).relu()),
            Count::Computed(n) => Ok(n.try_sub(correction)?.relu()),
        }
    }
}

impl Tensor {
    /// The number of elements over the (resolved) `axes`.
    pub(crate) fn reduced_count(&self, axes: &[usize]) -> Result<Count> {
        let shape = self.sym_shape();
        let dims: Vec<&Sint> = axes.iter().map(|&a| &shape[a]).collect();
        let fixed: i64 = dims.iter().filter_map(|d| d.as_const()).product();
        let sym: Vec<Sint> = dims
            .iter()
            .filter(|d| !d.is_const())
            .map(|&d| d.clone())
            .collect();
        if sym.is_empty() {
            return Ok(Count::Fixed(fixed as f64));
        }
        // Counted in f32 (f64 for f64) so a half-precision mean counts exactly too, then
        // rounded to the dtype as the fixed count is.
        let dtype = self.float().dtype();
        let wide = if dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let one = Scalar::from_f64(1.0, wide);
        let ones = Tensor::from_lazy(LazyBuffer::constant(self.lazy().device(), one, &sym));
        let all: Vec<isize> = (0..sym.len() as isize).collect();
        let n = ones.try_sum(&all, false)?;
        let n = if fixed == 1 {
            n
        } else {
            n.try_mul(fixed as f64)?
        };
        Ok(Count::Computed(n.cast(dtype)))
    }
}
