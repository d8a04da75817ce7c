//! Binary arithmetic (`add sub mul div maximum minimum pow`) and [`Operand`], the right-hand
//! sides they accept: a tensor or a scalar. A scalar adopts the tensor's dtype (the contract's
//! "Python-style scalar"); tensors promote and broadcast as [`Tensor::try_alu`] does.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::AluOp;

use super::{must, Tensor};

/// A right-hand operand of a binary op: a tensor (by value or reference) or a scalar.
pub trait Operand {
    /// The operand as a tensor; scalars become constants of `dtype` shaped like `like`.
    fn to_tensor(self, like: &Tensor, dtype: DType) -> Tensor;
    /// Is this a scalar (which adopts the other side's dtype)?
    fn is_scalar(&self) -> bool {
        false
    }
}

impl Operand for &Tensor {
    fn to_tensor(self, _: &Tensor, _: DType) -> Tensor {
        self.clone()
    }
}

impl Operand for Tensor {
    fn to_tensor(self, _: &Tensor, _: DType) -> Tensor {
        self
    }
}

macro_rules! scalar_operand {
    ($($t:ty),*) => {$(
        impl Operand for $t {
            fn to_tensor(self, like: &Tensor, dtype: DType) -> Tensor {
                like.cast(dtype).const_like(self as f64)
            }
            fn is_scalar(&self) -> bool {
                true
            }
        }
    )*};
}
// Scalars of every common Rust number type convert through f64.
scalar_operand!(f64, f32, i32, i64, u32, usize);

/// The smallest float dtype holding `d`'s values (`d` itself when it is a float).
pub(crate) fn float_of(d: DType) -> DType {
    if d.is_float() {
        d
    } else {
        DType::F32
    }
}

impl Tensor {
    /// `self op rhs` with promotion and broadcasting; a scalar `rhs` adopts `self`'s dtype.
    pub(crate) fn try_binary(&self, op: AluOp, rhs: impl Operand) -> Result<Tensor> {
        let r = rhs.to_tensor(self, self.dtype());
        self.try_alu(op, &[&r])
    }

    /// Elementwise sum with broadcasting (ints wrap).
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// assert_eq!(a.add(10.0).to_vec::<f32>().unwrap(), vec![11.0, 12.0]);
    /// let b = Tensor::ones(&[3, 1], DType::F32);
    /// assert_eq!(a.add(&b).shape(), vec![3, 2]);
    /// ```
    pub fn try_add(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::Add, rhs)
    }
    /// [`Tensor::try_add`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn add(&self, rhs: impl Operand) -> Tensor {
        must(self.try_add(rhs))
    }

    /// Elementwise difference with broadcasting (ints wrap).
    pub fn try_sub(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::Sub, rhs)
    }
    /// [`Tensor::try_sub`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn sub(&self, rhs: impl Operand) -> Tensor {
        must(self.try_sub(rhs))
    }

    /// Elementwise product with broadcasting (ints wrap).
    pub fn try_mul(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::Mul, rhs)
    }
    /// [`Tensor::try_mul`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn mul(&self, rhs: impl Operand) -> Tensor {
        must(self.try_mul(rhs))
    }

    /// Elementwise quotient with broadcasting: IEEE for floats; ints truncate toward zero and
    /// stay ints (x/0 = 0).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[7i32, -7], &[2]);
    /// assert_eq!(a.div(2).to_vec::<i32>().unwrap(), vec![3, -3]);
    /// ```
    pub fn try_div(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::Div, rhs)
    }
    /// [`Tensor::try_div`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn div(&self, rhs: impl Operand) -> Tensor {
        must(self.try_div(rhs))
    }

    /// Elementwise remainder with the dividend's sign (C's `%`, `fmod` for floats).
    pub fn try_rem(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::Mod, rhs)
    }
    /// [`Tensor::try_rem`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn rem(&self, rhs: impl Operand) -> Tensor {
        must(self.try_rem(rhs))
    }

    /// Elementwise maximum with broadcasting.
    pub fn try_maximum(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::Max, rhs)
    }
    /// [`Tensor::try_maximum`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn maximum(&self, rhs: impl Operand) -> Tensor {
        must(self.try_maximum(rhs))
    }

    /// Elementwise minimum with broadcasting: `-max(-a, -b)` for floats, a select otherwise
    /// (negation is not order-reversing for unsigned ints).
    pub fn try_minimum(&self, rhs: impl Operand) -> Result<Tensor> {
        let r = rhs.to_tensor(self, self.dtype());
        if self.dtype().promote(r.dtype()).is_float() {
            return Ok(self.neg().try_maximum(r.neg())?.neg());
        }
        self.try_lt(&r)?.try_where(self, &r)
    }
    /// [`Tensor::try_minimum`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn minimum(&self, rhs: impl Operand) -> Tensor {
        must(self.try_minimum(rhs))
    }

    /// Limits values to `[min, max]` (either bound optional).
    pub fn clamp(&self, min: Option<f64>, max: Option<f64>) -> Tensor {
        let lo = match min {
            Some(m) => self.maximum(m),
            None => self.clone(),
        };
        match max {
            Some(m) => lo.minimum(m),
            None => lo,
        }
    }

    /// `self` raised to `exp`, elementwise. Floats: `exp2(y·log2|x|)`, with the sign restored
    /// for negative bases with integer exponents, NaN for negative bases with fractional ones,
    /// and `x^0 = 1`. Int tensors with an int exponent stay ints (computed in f32, rounded).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let x = Tensor::from_slice(&[-2.0f32, 3.0], &[2]);
    /// let y = x.pow(3.0).to_vec::<f32>().unwrap();
    /// assert!((y[0] + 8.0).abs() < 1e-4 && (y[1] - 27.0).abs() < 1e-4);
    /// ```
    pub fn try_pow(&self, exp: impl Operand) -> Result<Tensor> {
        let scalar = exp.is_scalar();
        let y = exp.to_tensor(self, float_of(self.dtype()));
        let out = if scalar {
            self.dtype()
        } else {
            self.dtype().promote(y.dtype())
        };
        let f = float_of(out);
        let r = pow_float(&self.cast(f), &y.cast(f))?;
        Ok(if out.is_float() { r } else { round_to(&r, out) })
    }
    /// [`Tensor::try_pow`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn pow(&self, exp: impl Operand) -> Tensor {
        must(self.try_pow(exp))
    }
}

/// `x^y` for float tensors of one dtype.
fn pow_float(x: &Tensor, y: &Tensor) -> Result<Tensor> {
    let mag = y.try_mul(x.abs().log2())?.exp2();
    let y_int = y.rem(1.0).eq(0.0);
    let odd = y.rem(2.0).abs().eq(1.0);
    let neg = x.lt(0.0);
    let signed = odd.where_(mag.neg(), &mag);
    let nan = mag.const_like(f64::NAN);
    let fixed = neg.try_where(y_int.where_(&signed, &nan), &mag)?;
    y.eq(0.0).try_where(fixed.const_like(1.0), &fixed)
}

/// Rounds a float tensor to the nearest integer and casts it to the int dtype `d`.
fn round_to(r: &Tensor, d: DType) -> Tensor {
    r.add(r.sign().mul(0.5)).cast(d)
}
