//! Comparisons (`lt le gt ge eq ne`, bool results), `logical_not` and the select `where_`.
//! Everything lowers to `CmpLt`, `CmpEq`, `Xor` and `Where`.

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::AluOp;

use super::elementwise::Operand;
use super::{must, Tensor};

impl Tensor {
    /// `self < rhs`, elementwise, as bools.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 5.0], &[2]);
    /// assert_eq!(a.lt(3.0).to_vec::<bool>().unwrap(), vec![true, false]);
    /// ```
    pub fn try_lt(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::CmpLt, rhs)
    }
    /// [`Tensor::try_lt`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn lt(&self, rhs: impl Operand) -> Tensor {
        must(self.try_lt(rhs))
    }

    /// `self > rhs`, elementwise, as bools.
    pub fn try_gt(&self, rhs: impl Operand) -> Result<Tensor> {
        let r = rhs.to_tensor(self, self.dtype());
        r.try_alu(AluOp::CmpLt, &[self])
    }
    /// [`Tensor::try_gt`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn gt(&self, rhs: impl Operand) -> Tensor {
        must(self.try_gt(rhs))
    }

    /// `self <= rhs` (as `!(self > rhs)`), elementwise, as bools.
    pub fn try_le(&self, rhs: impl Operand) -> Result<Tensor> {
        Ok(self.try_gt(rhs)?.logical_not())
    }
    /// [`Tensor::try_le`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn le(&self, rhs: impl Operand) -> Tensor {
        must(self.try_le(rhs))
    }

    /// `self >= rhs` (as `!(self < rhs)`), elementwise, as bools.
    pub fn try_ge(&self, rhs: impl Operand) -> Result<Tensor> {
        Ok(self.try_lt(rhs)?.logical_not())
    }
    /// [`Tensor::try_ge`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn ge(&self, rhs: impl Operand) -> Tensor {
        must(self.try_ge(rhs))
    }

    /// `self == rhs`, elementwise, as bools.
    pub fn try_eq(&self, rhs: impl Operand) -> Result<Tensor> {
        self.try_binary(AluOp::CmpEq, rhs)
    }
    /// [`Tensor::try_eq`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn eq(&self, rhs: impl Operand) -> Tensor {
        must(self.try_eq(rhs))
    }

    /// `self != rhs`, elementwise, as bools.
    pub fn try_ne(&self, rhs: impl Operand) -> Result<Tensor> {
        Ok(self.try_eq(rhs)?.logical_not())
    }
    /// [`Tensor::try_ne`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn ne(&self, rhs: impl Operand) -> Tensor {
        must(self.try_ne(rhs))
    }

    /// Logical negation: true where the value is zero (any dtype; gives bools).
    #[track_caller]
    pub fn logical_not(&self) -> Tensor {
        let b = self.cast(DType::Bool);
        must(b.try_alu(AluOp::Xor, &[&b.const_like(1.0)]))
    }

    /// Picks `a` where `self` is true (non-zero) and `b` elsewhere, broadcasting all three.
    /// A scalar branch adopts the other branch's dtype (f32 when both are scalars).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let c = Tensor::from_slice(&[true, false], &[2]);
    /// let x = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// assert_eq!(c.where_(&x, 0.0).to_vec::<f32>().unwrap(), vec![1.0, 0.0]);
    /// ```
    pub fn try_where(&self, a: impl Operand, b: impl Operand) -> Result<Tensor> {
        let (at, bt) = if a.is_scalar() {
            let bt = b.to_tensor(self, DType::F32);
            (a.to_tensor(&bt, bt.dtype()), bt)
        } else {
            let at = a.to_tensor(self, DType::F32);
            let bt = b.to_tensor(&at, at.dtype());
            (at, bt)
        };
        self.cast(DType::Bool).try_alu(AluOp::Where, &[&at, &bt])
    }
    /// [`Tensor::try_where`], panicking on a broadcast mismatch.
    #[track_caller]
    pub fn where_(&self, a: impl Operand, b: impl Operand) -> Tensor {
        must(self.try_where(a, b))
    }
}
