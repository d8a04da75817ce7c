//! Mask-driven ops: `masked_fill` (a select, lazy and differentiable), and the two ops whose
//! result shape depends on data, `masked_select` and `nonzero`. Those compute their mask (or
//! input) eagerly, which is why they return `Result`, and cannot be exported ahead of time.
//! `masked_select` then gathers from `self` lazily, so gradients still reach the selected
//! elements.

use alloc::format;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::elementwise::Operand;
use super::{must, Tensor};

/// The flat positions of the true entries of a bool tensor (computes it).
fn true_positions(mask: &Tensor) -> Result<Vec<f64>> {
    let flags = mask.to_vec::<bool>()?;
    Ok((flags.iter().enumerate())
        .filter(|(_, &f)| f)
        .map(|(i, _)| i as f64)
        .collect())
}

/// The coordinates of flat index `i` in `shape`, appended to `out`.
fn push_coords(mut i: usize, shape: &[usize], out: &mut Vec<f64>) {
    let start = out.len();
    for &d in shape.iter().rev() {
        out.push((i % d) as f64);
        i /= d;
    }
    out[start..].reverse();
}

impl Tensor {
    /// `value` where `mask` is true, `self` elsewhere (mask and value broadcast; a scalar value
    /// takes `self`'s dtype).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3], &[3]);
    /// let m = Tensor::from_slice(&[true, false, true], &[3]);
    /// assert_eq!(t.masked_fill(&m, -12).to_vec::<i32>().unwrap(), vec![-12, 2, -12]);
    /// ```
    pub fn try_masked_fill(&self, mask: &Tensor, value: impl Operand) -> Result<Tensor> {
        let v = value.to_tensor(self, self.dtype());
        mask.try_where(&v, self)
    }
    /// [`Tensor::try_masked_fill`], panicking when the shapes do not broadcast.
    #[track_caller]
    pub fn masked_fill(&self, mask: &Tensor, value: impl Operand) -> Tensor {
        must(self.try_masked_fill(mask, value))
    }

    /// The elements of `self` where bool `mask` (broadcast to `self`'s shape) is true, as a 1-D
    /// tensor in row-major order. Computes the mask (the result's length depends on it).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 1, 2, 3], &[2, 2]);
    /// let m = Tensor::from_slice(&[true, false, false, true], &[2, 2]);
    /// assert_eq!(t.masked_select(&m).unwrap().to_vec::<i32>().unwrap(), vec![0, 3]);
    /// ```
    pub fn masked_select(&self, mask: &Tensor) -> Result<Tensor> {
        if mask.dtype() != DType::Bool {
            return Err(Error::dtype(
                "masked_select",
                format!("mask must be bool, got {}", mask.dtype()),
            ));
        }
        let mask = mask.try_broadcast_to(&self.shape()).map_err(|_| {
            Error::shape(
                "masked_select",
                format!(
                    "mask {:?} does not broadcast to {:?}",
                    mask.shape(),
                    self.shape()
                ),
            )
        })?;
        let pos = true_positions(&mask)?;
        let index = Tensor::try_from_f64s(&pos, &[pos.len()], DType::I32)?;
        self.try_reshape(&[-1])?.try_gather(0, &index)
    }

    /// The coordinates of the non-zero elements, one row each (`[count, ndim]`, i32), in
    /// row-major order. Computes `self`.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 0, 0, 2], &[2, 2]);
    /// assert_eq!(t.nonzero().unwrap().to_vec::<i32>().unwrap(), vec![0, 0, 1, 1]);
    /// ```
    pub fn nonzero(&self) -> Result<Tensor> {
        let shape = self.shape();
        let pos = true_positions(&self.ne(0.0))?;
        let mut coords = Vec::with_capacity(pos.len() * shape.len());
        pos.iter()
            .for_each(|&i| push_coords(i as usize, &shape, &mut coords));
        Tensor::try_from_f64s(&coords, &[pos.len(), shape.len()], DType::I32)
    }
}
