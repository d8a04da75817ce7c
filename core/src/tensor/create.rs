//! Creation: `arange` (values built on the host and uploaded), `eye` (composed from a padded
//! column of ones read through a skewing reshape), and `*_like` constants.

use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::device::Device;
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
        let dev = crate::context::default_device();
        Tensor::try_from_f64s_on(values, shape, dtype, &dev)
    }
    /// [`Tensor::try_from_f64s`] on `device`.
    pub fn try_from_f64s_on(
        values: &[f64],
        shape: &[usize],
        dtype: DType,
        dev: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        let n = super::size::checked_numel("from_f64s", shape, dtype)?;
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
        Tensor::from_raw_bytes(&bytes, shape, dtype, dev)
    }
    /// [`Tensor::try_from_f64s`], panicking on a size mismatch.
    #[track_caller]
    pub fn from_f64s(values: &[f64], shape: &[usize], dtype: DType) -> Tensor {
        must(Tensor::try_from_f64s(values, shape, dtype))
    }

    /// `start, start+step, ...` up to (not including) `stop`, as a 1-D tensor of `dtype`. An
    /// error when `step` is zero, a bound or the step is not finite, or the range is too long
    /// to exist.
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let t = Tensor::arange(5.0, 0.0, -2.0, DType::I32);
    /// assert_eq!(t.to_vec::<i32>().unwrap(), vec![5, 3, 1]);
    /// assert!(Tensor::try_arange(0.0, f64::INFINITY, 1.0, DType::F32).is_err());
    /// ```
    pub fn try_arange(start: f64, stop: f64, step: f64, dtype: DType) -> Result<Tensor> {
        let dev = crate::context::default_device();
        Tensor::try_arange_on(start, stop, step, dtype, &dev)
    }
    /// [`Tensor::try_arange`] on `device`.
    pub fn try_arange_on(
        start: f64,
        stop: f64,
        step: f64,
        dtype: DType,
        dev: &Arc<dyn Device>,
    ) -> Result<Tensor> {
        let bad = |why: &str| {
            crate::error::Error::shape(
                "arange",
                alloc::format!("arange({start}, {stop}, {step}): {why}"),
            )
        };
        if step == 0.0 {
            return Err(bad("the step is zero"));
        }
        if !(start.is_finite() && stop.is_finite() && step.is_finite()) {
            return Err(bad("bounds and step must be finite"));
        }
        let count = libm::ceil((stop - start) / step).max(0.0);
        // Past 2^53 the positions are not distinct f64s anyway.
        if count > (1u64 << 53) as f64 {
            return Err(bad("too many elements"));
        }
        let n = count as usize;
        super::size::checked_numel("arange", &[n], dtype)?;
        let vals: Vec<f64> = (0..n).map(|i| start + i as f64 * step).collect();
        Tensor::try_from_f64s_on(&vals, &[n], dtype, dev)
    }
    /// [`Tensor::try_arange`], panicking on a zero or non-finite step or bound.
    pub fn arange(start: f64, stop: f64, step: f64, dtype: DType) -> Tensor {
        must(Tensor::try_arange(start, stop, step, dtype))
    }

    /// The `n`×`n` identity matrix; an error when it is too large to exist.
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let e = Tensor::eye(2, DType::I32);
    /// assert_eq!(e.to_vec::<i32>().unwrap(), vec![1, 0, 0, 1]);
    /// ```
    pub fn try_eye(n: usize, dtype: DType) -> Result<Tensor> {
        if n == 0 {
            return Tensor::try_zeros(&[0, 0], dtype);
        }
        super::size::checked_numel("eye", &[n, n + 1], dtype)?;
        // Rows of [1, 0 × n] laid end to end put a 1 every n+1 elements: the diagonal of n×n.
        let col = Tensor::try_ones(&[n, 1], dtype)?.try_pad(&[(0, 0), (0, n)])?;
        let flat = col.try_reshape(&[(n * (n + 1)) as isize])?;
        flat.try_shrink(&[(0, n * n)])?
            .try_reshape(&[n as isize, n as isize])
    }
    /// [`Tensor::try_eye`], panicking when `n`×`n` is too large to exist.
    pub fn eye(n: usize, dtype: DType) -> Tensor {
        must(Tensor::try_eye(n, dtype))
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
