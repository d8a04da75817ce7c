//! Triangular parts of matrices: `triu` and `tril` keep the elements on one side of a diagonal
//! (over the last two axes) and zero the rest. The mask is built from two `arange`s compared,
//! so it is a small constant-like graph, and the select keeps gradients flowing to kept elements.

use alloc::format;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

/// A `rows`×`cols` bool mask, true where `col - row >= diagonal` (the upper triangle from
/// `diagonal` on).
pub(crate) fn tri_mask(rows: usize, cols: usize, diagonal: i64) -> Tensor {
    let r = Tensor::arange(0.0, rows as f64, 1.0, DType::I32).reshape(&[rows as isize, 1]);
    let c = Tensor::arange(0.0, cols as f64, 1.0, DType::I32).reshape(&[1, cols as isize]);
    c.sub(&r).ge(diagonal)
}

impl Tensor {
    /// The mask for `self`'s last two axes, or an error naming `op` when there are fewer.
    fn last_two_mask(&self, op: &'static str, diagonal: i64) -> Result<Tensor> {
        let s = self.shape();
        if s.len() < 2 {
            return Err(Error::shape(
                op,
                format!("needs at least 2 dimensions, shape is {s:?}"),
            ));
        }
        Ok(tri_mask(s[s.len() - 2], s[s.len() - 1], diagonal))
    }

    /// Keeps elements on or above diagonal `diagonal` (0 the main one, positive above, negative
    /// below) of the last two axes; zeros the rest.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1i32, 2, 3, 4], &[2, 2]);
    /// assert_eq!(t.triu(0).to_vec::<i32>().unwrap(), vec![1, 2, 0, 4]);
    /// assert_eq!(t.tril(-1).to_vec::<i32>().unwrap(), vec![0, 0, 3, 0]);
    /// ```
    pub fn try_triu(&self, diagonal: i64) -> Result<Tensor> {
        self.last_two_mask("triu", diagonal)?.try_where(self, 0.0)
    }
    /// [`Tensor::try_triu`], panicking on a tensor of fewer than 2 dimensions.
    #[track_caller]
    pub fn triu(&self, diagonal: i64) -> Tensor {
        must(self.try_triu(diagonal))
    }

    /// Keeps elements on or below diagonal `diagonal` of the last two axes; zeros the rest.
    pub fn try_tril(&self, diagonal: i64) -> Result<Tensor> {
        let above = self.last_two_mask("tril", diagonal + 1)?;
        above.try_where(0.0, self)
    }
    /// [`Tensor::try_tril`], panicking on a tensor of fewer than 2 dimensions.
    #[track_caller]
    pub fn tril(&self, diagonal: i64) -> Tensor {
        must(self.try_tril(diagonal))
    }
}
