//! Creation: `arange` (values built on the host and uploaded), `eye` (composed from a padded
//! column of ones read through a skewing reshape), and `*_like` constants.

use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::Result;
use crate::ops::Scalar;

use super::{must, Tensor};

/// The little-endian bytes of `v` converted to `dtype` (as a cast would convert it).
fn scalar_bytes(v: f64, dtype: DType, out: &mut Vec<u8>) {
    let s = Scalar::from_f64(v, dtype);
    match dtype {
        DType::F16 => out.extend(half::f16::from_f64(s.as_f64()).to_le_bytes()),
        DType::BF16 => out.extend(half::bf16::from_f64(s.as_f64()).to_le_bytes()),
        DType::F32 => out.extend((s.as_f64() as f32).to_le_bytes()),
        DType::F64 => out.extend(s.as_f64().to_le_bytes()),
        // Ints and bools: the canonical bits are the value sign-extended; keep the low bytes.
        _ => out.extend(&s.bits().to_le_bytes()[..dtype.itemsize()]),
    }
}

impl Tensor {
    /// A tensor of `dtype` holding `values` (converted as casts convert), on the default device.
    pub fn try_from_f64s(values: &[f64], shape: &[usize], dtype: DType) -> Result<Tensor> {
        let n: usize = shape.iter().product();
        if n != values.len() {
            return Err(crate::error::Error::shape(
                "from_f64s",
                alloc::format!("{} values do not fill shape {shape:?}", values.len()),
            ));
        }
        let mut bytes = Vec::with_capacity(n * dtype.itemsize());
        values
            .iter()
            .for_each(|&v| scalar_bytes(v, dtype, &mut bytes));
        let dev = crate::context::default_device();
        Tensor::from_raw_bytes(&bytes, shape, dtype, &dev)
    }
    /// [`Tensor::try_from_f64s`], panicking on a size mismatch.
    #[track_caller]
    pub fn from_f64s(values: &[f64], shape: &[usize], dtype: DType) -> Tensor {
        must(Tensor::try_from_f64s(values, shape, dtype))
    }

    /// `start, start+step, ...` up to (not including) `stop`, as a 1-D tensor of `dtype`.
    /// Panics when `step` is zero.
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let t = Tensor::arange(5.0, 0.0, -2.0, DType::I32);
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![5, 3, 1]);
    /// ```
    pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Tensor {
        assert!(step != 0.0, "arange: step must not be zero");
        let n = libm::ceil((stop - start) / step).max(0.0) as usize;
        let vals: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
        Tensor::from_f64s(&vals, &[n], dtype)
    }

    /// The `n`×`n` identity matrix.
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let e = Tensor::eye(2, DType::I32);
    /// assert_eq!(e.to_vec::<i32>().unwrap(), vec![1, 0, 0, 1]);
    /// ```
    pub fn eye(n: usize, dtype: DType) -> Tensor {
        if n == 0 {
            return Tensor::zeros(&[0, 0], dtype);
        }
        // Rows of [1, 0 × n] laid end to end put a 1 every n+1 elements: the diagonal of n×n.
        let col = Tensor::ones(&[n, 1], dtype).pad(&[(0, 0), (0, n)]);
        let flat = col.reshape(&[(n * (n + 1)) as isize]);
        flat.shrink(&[(0, n * n)])
            .reshape(&[n as isize, n as isize])
    }

    /// A tensor shaped like `self`, of its dtype, filled with `value`.
    pub fn full_like(&self, value: f64) -> Tensor {
        self.const_like(value)
    }

    /// Zeros shaped like `self`, of its dtype.
    pub fn zeros_like(&self) -> Tensor {
        self.const_like(0.0)
    }

    /// Ones shaped like `self`, of its dtype.
    pub fn ones_like(&self) -> Tensor {
        self.const_like(1.0)
    }
}
