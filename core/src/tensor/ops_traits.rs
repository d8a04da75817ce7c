//! `std::ops` operators for tensors: `+ - * /` between tensors (owned or borrowed) and with
//! `f64` scalars on either side (a scalar adopts the tensor's dtype), and unary `-`.
//! Only `f64` scalars get operator impls: a second float type would make `&t + 1.0` ambiguous
//! for type inference. Other scalar types go through the methods (`t.add(2.5f32)`).
//! They panic on a broadcast mismatch, naming both shapes; use `try_add` etc. to get a `Result`.

use core::ops::{Add, Div, Mul, Neg, Sub};

use super::Tensor;

/// Implements one operator for every tensor/tensor and tensor/scalar pairing.
macro_rules! binary_op {
    ($trait:ident, $method:ident) => {
        binary_op!(@tt $trait, $method, Tensor, Tensor);
        binary_op!(@tt $trait, $method, Tensor, &Tensor);
        binary_op!(@tt $trait, $method, &Tensor, Tensor);
        binary_op!(@tt $trait, $method, &Tensor, &Tensor);
        binary_op!(@scalar $trait, $method, f64);
    };
    (@tt $trait:ident, $method:ident, $lhs:ty, $rhs:ty) => {
        impl $trait<$rhs> for $lhs {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $rhs) -> Tensor {
                Tensor::$method(&self, rhs)
            }
        }
    };
    (@scalar $trait:ident, $method:ident, $s:ty) => {
        impl $trait<$s> for Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                Tensor::$method(&self, rhs)
            }
        }
        impl $trait<$s> for &Tensor {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: $s) -> Tensor {
                Tensor::$method(self, rhs)
            }
        }
        impl $trait<Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: Tensor) -> Tensor {
                Tensor::$method(&rhs.const_like(f64::from(self)), &rhs)
            }
        }
        impl $trait<&Tensor> for $s {
            type Output = Tensor;
            #[track_caller]
            fn $method(self, rhs: &Tensor) -> Tensor {
                Tensor::$method(&rhs.const_like(f64::from(self)), rhs)
            }
        }
    };
}

binary_op!(Add, add);
binary_op!(Sub, sub);
binary_op!(Mul, mul);
binary_op!(Div, div);

impl Neg for Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(&self)
    }
}

impl Neg for &Tensor {
    type Output = Tensor;
    fn neg(self) -> Tensor {
        Tensor::neg(self)
    }
}
