//! Properties and lifecycle helpers: `element_size`, `nbytes`, `is_floating_point`, `size`,
//! `axes`, `clone_data` (a copy in a buffer of its own) and `replace` (swap in another value).

use alloc::format;
use alloc::vec::Vec;

use crate::autograd::FnKind;
use crate::error::{Error, Result};

use super::{must, Tensor};

impl Tensor {
    /// Bytes per element.
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let t = Tensor::from_slice(&[5i16], &[1]);
    /// assert_eq!(t.element_size(), 2);
    /// assert_eq!(Tensor::zeros(&[2], DType::F32).nbytes(), 8);
    /// ```
    pub fn element_size(&self) -> usize {
        self.dtype().itemsize()
    }

    /// Bytes of all elements.
    pub fn nbytes(&self) -> usize {
        self.numel() * self.element_size()
    }

    /// Is the dtype f16, bf16, f32 or f64?
    pub fn is_floating_point(&self) -> bool {
        self.dtype().is_float()
    }

    /// Length of `axis` (negative counts from the end).
    pub fn try_size(&self, axis: isize) -> Result<usize> {
        let a = self.resolve_axes("size", &[axis])?[0];
        Ok(self.shape()[a])
    }
    /// [`Tensor::try_size`], panicking on a bad axis.
    #[track_caller]
    pub fn size(&self, axis: isize) -> usize {
        must(self.try_size(axis))
    }

    /// Every axis, `[0, 1, .., ndim-1]` (for reductions over the whole tensor).
    pub fn axes(&self) -> Vec<isize> {
        (0..self.ndim() as isize).collect()
    }

    /// A copy of the value in a new buffer that shares nothing with `self` (tinygrad's
    /// `clone`; the name avoids [`Clone::clone`], which shares the tensor). It computes `self`,
    /// so it returns `Result`; gradients flow through it as through `contiguous`.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[1.0f32, 2.0], &[2]);
    /// let b = a.clone_data().unwrap();
    /// a.assign(&Tensor::from_slice(&[5.0f32, 6.0], &[2]));
    /// assert_eq!(b.to_vec::<f32>().unwrap(), vec![1.0, 2.0]);
    /// ```
    pub fn clone_data(&self) -> Result<Tensor> {
        let bytes = self.to_bytes()?;
        let fresh = Tensor::from_raw_bytes(&bytes, &self.shape(), self.dtype(), &self.device())?;
        Ok(Tensor::derive(FnKind::Contiguous, &[self], fresh.lazy()))
    }

    /// Makes `self` hold `other`'s value (and dtype); only the shapes must match. Gradient
    /// history of `self` is dropped; its `requires_grad` flag is kept.
    pub fn try_replace(&self, other: &Tensor) -> Result<()> {
        if self.shape() != other.shape() {
            return Err(Error::shape(
                "replace",
                format!("shape {:?} differs from {:?}", other.shape(), self.shape()),
            ));
        }
        *self.0.lazy.lock() = other.lazy();
        *self.0.ctx.lock() = None;
        Ok(())
    }
    /// [`Tensor::try_replace`], panicking when the shapes differ.
    #[track_caller]
    pub fn replace(&self, other: &Tensor) {
        must(self.try_replace(other))
    }
}
