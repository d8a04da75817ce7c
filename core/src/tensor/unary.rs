//! Unary math, composed from the primitive unary ops (`Exp2 Log2 Sin Sqrt Neg Recip`) and
//! arithmetic. Non-float inputs to transcendental functions are cast to f32 first.

use core::f64::consts::{FRAC_PI_2, LN_2, LOG2_E, PI};

use crate::dtype::DType;
use crate::ops::AluOp;

use super::elementwise::float_of;
use super::{must, Tensor};

impl Tensor {
    #[track_caller]
    fn unary(&self, op: AluOp) -> Tensor {
        must(self.try_alu(op, &[]))
    }

    /// `self` as a float tensor (unchanged when already a float; ints become f32).
    pub fn float(&self) -> Tensor {
        self.cast(float_of(self.dtype()))
    }

    /// `-x` (ints wrap). For bools use [`Tensor::logical_not`].
    pub fn neg(&self) -> Tensor {
        self.unary(AluOp::Neg)
    }

    /// `2^x`.
    pub fn exp2(&self) -> Tensor {
        self.float().unary(AluOp::Exp2)
    }

    /// `log2(x)`.
    pub fn log2(&self) -> Tensor {
        self.float().unary(AluOp::Log2)
    }

    /// `e^x`, as `exp2(x·log2 e)`.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let y = Tensor::from_slice(&[0.0f32, 1.0], &[2]).exp().to_vec::<f32>().unwrap();
    /// assert!((y[0] - 1.0).abs() < 1e-6 && (y[1] - core::f32::consts::E).abs() < 1e-5);
    /// ```
    pub fn exp(&self) -> Tensor {
        self.float().mul(LOG2_E).exp2()
    }

    /// Natural logarithm, as `log2(x)·ln 2`.
    pub fn log(&self) -> Tensor {
        self.log2().mul(LN_2)
    }

    /// Square root.
    pub fn sqrt(&self) -> Tensor {
        self.float().unary(AluOp::Sqrt)
    }

    /// `1/√x`.
    pub fn rsqrt(&self) -> Tensor {
        self.sqrt().reciprocal()
    }

    /// `1/x` (ints are cast to f32 first).
    pub fn reciprocal(&self) -> Tensor {
        self.float().unary(AluOp::Recip)
    }

    /// Sine (radians).
    pub fn sin(&self) -> Tensor {
        self.float().unary(AluOp::Sin)
    }

    /// Cosine, as `sin(π/2 - x)`.
    pub fn cos(&self) -> Tensor {
        let x = self.float();
        x.const_like(FRAC_PI_2).sub(&x).sin()
    }

    /// Tangent, as `sin(x)/cos(x)`.
    pub fn tan(&self) -> Tensor {
        self.sin().div(self.cos())
    }

    /// `max(x, 0)`.
    pub fn relu(&self) -> Tensor {
        self.maximum(0.0)
    }

    /// `1/(1+e^-x)`.
    pub fn sigmoid(&self) -> Tensor {
        self.neg().exp().add(1.0).reciprocal()
    }

    /// Hyperbolic tangent, as `2·sigmoid(2x) - 1`.
    pub fn tanh(&self) -> Tensor {
        self.float().mul(2.0).sigmoid().mul(2.0).sub(1.0)
    }

    /// GELU, tanh approximation: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
    pub fn gelu(&self) -> Tensor {
        let x = self.float();
        let inner = x.mul(&x).mul(&x).mul(0.044715).add(&x);
        let t = inner.mul(libm::sqrt(2.0 / PI)).tanh();
        x.mul(0.5).mul(t.add(1.0))
    }

    /// Absolute value (`max(x, -x)`; unsigned ints unchanged).
    pub fn abs(&self) -> Tensor {
        if self.dtype().is_unsigned() || self.dtype() == DType::Bool {
            return self.clone();
        }
        self.maximum(self.neg())
    }

    /// -1, 0 or 1 by the sign of each value, in `self`'s dtype (NaN stays NaN).
    pub fn sign(&self) -> Tensor {
        let s = self.lt(0.0).where_(-1.0, 1.0);
        let s = self.ne(0.0).where_(s.cast(self.dtype()), 0.0);
        if self.dtype().is_float() {
            s.add(self.mul(0.0))
        } else {
            s
        }
    }

    /// Truncation toward zero (`x - fmod(x, 1)` for floats; ints unchanged).
    pub fn trunc(&self) -> Tensor {
        if !self.dtype().is_float() {
            return self.clone();
        }
        self.sub(self.rem(1.0))
    }
}
