//! Index-driven reads: `gather` (pick elements along an axis by an index tensor) and `one_hot`.
//! Both compare indices against an `arange` of positions; `gather` then selects and sums over
//! the positions, so its gradient reaches exactly the gathered elements. A gathered `-0.0`
//! comes out as `+0.0`.
//!
//! Out-of-range indices (the rule, shared by `scatter`): an index outside `0..n` — negative
//! ones included, nothing wraps — is an error when its values are known on the host (the
//! index tensor is a constant or a realized buffer, as one made from data is), checked by
//! [`check_known_indices`]. An index still lazy (computed in the graph, or replayed by the JIT,
//! or fed to exported C) is not read back: it matches no position, so `gather` gives 0 there,
//! `one_hot` an all-zero row and `scatter` drops the write — the same on every device, because
//! the rule is made of compares in the graph, not of a device's memory access.

use alloc::format;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::{must, Tensor};

/// `index[.., k] == k'` for `k'` in `0..n`: the index tensor with a trailing one-hot axis.
pub(crate) fn index_hits(index: &Tensor, n: usize) -> Result<Tensor> {
    // On the index's device: positions on the default one could not meet an index elsewhere.
    let positions = Tensor::try_arange_on(0.0, n as f64, 1.0, index.dtype(), &index.device())?;
    index.try_unsqueeze(-1)?.try_eq(&positions)
}

/// Errors unless `index` has an integer dtype.
pub(crate) fn check_int_index(op: &'static str, index: &Tensor) -> Result<()> {
    if index.dtype().is_int() {
        return Ok(());
    }
    Err(Error::dtype(
        op,
        format!("index must be an integer tensor, got {}", index.dtype()),
    ))
}

/// A tensor's values when they are known on the host without running anything: a constant,
/// or a realized contiguous buffer (as `from_slice` and realized tensors are). `None` for values
/// still to be computed. (Labels of the losses and indices of gather/scatter/one_hot.)
pub(crate) fn host_known_values(y: &Tensor) -> Result<Option<Vec<f64>>> {
    let lazy = y.lazy();
    if let Some(v) = lazy.as_const() {
        return Ok(Some(alloc::vec![v.as_f64()]));
    }
    if !lazy.st().contiguous() {
        return Ok(None);
    }
    match lazy.realized() {
        Some(buf) if buf.len() == y.numel() => {
            Ok(Some(super::bytes_to_f64(&buf.to_bytes()?, buf.dtype())))
        }
        _ => Ok(None),
    }
}

/// When `index`'s values are known on the host ([`host_known_values`]), every value must lie in
/// `0..n`; otherwise an error naming `op`, the value, its element and `what` has `n` positions.
/// A lazy index is left alone (see the module doc for its documented result).
pub(crate) fn check_known_indices(
    op: &'static str,
    index: &Tensor,
    n: usize,
    what: &dyn Fn() -> alloc::string::String,
) -> Result<()> {
    let Some(vals) = host_known_values(index)? else {
        return Ok(());
    };
    let Some((k, v)) = (vals.iter().enumerate()).find(|(_, &v)| v < 0.0 || v >= n as f64) else {
        return Ok(());
    };
    Err(Error::shape(
        op,
        format!(
            "index {} (element {k} of index {:?}) is out of range for {} (valid: 0 to {})",
            *v as i64,
            index.shape(),
            what(),
            n as i64 - 1
        ),
    ))
}

impl Tensor {
    /// Checks gather's shapes; returns the resolved axis.
    fn check_gather(&self, axis: isize, index: &Tensor) -> Result<usize> {
        check_int_index("gather", index)?;
        let ax = self.resolve_axes("gather", &[axis])?[0];
        let (s, i) = (self.shape(), index.shape());
        let fits = s.len() == i.len() && (0..s.len()).all(|d| d == ax || i[d] <= s[d]);
        if !fits {
            return Err(Error::shape(
                "gather",
                format!("index {i:?} does not fit input {s:?} outside axis {axis}"),
            ));
        }
        check_known_indices("gather", index, s[ax], &|| {
            format!("axis {ax} of size {} of input {s:?}", s[ax])
        })?;
        Ok(ax)
    }

    /// `out[p] = self[p with its axis coordinate replaced by index[p]]`; the result has
    /// `index`'s shape (which must not exceed `self`'s outside `axis`).
    ///
    /// An index outside `0..n` (`n` the axis length; negative ones do not wrap) is an error when
    /// `index` is a constant or a realized buffer; a lazy index there gives 0, on every device, in JIT
    /// replays and in exported C (see the module doc).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[1.0f32, 2.0, 3.0, 4.0], &[2, 2]);
    /// let i = Tensor::from_slice(&[0i32, 0, 1, 0], &[2, 2]);
    /// assert_eq!(t.gather(1, &i).to_vec::<f32>().unwrap(), vec![1.0, 1.0, 4.0, 3.0]);
    /// ```
    pub fn try_gather(&self, axis: isize, index: &Tensor) -> Result<Tensor> {
        let ax = self.check_gather(axis, index)?;
        let n = self.shape()[ax];
        let ranges: Vec<(usize, usize)> = (index.shape().iter().enumerate())
            .map(|(d, &len)| if d == ax { (0, n) } else { (0, len) })
            .collect();
        // x[.., 1 at ax, .., n]: the candidates of each output position along a trailing axis.
        let x = self.try_shrink(&ranges)?.try_unsqueeze(-1)?;
        let x = x.try_transpose(ax as isize, -1)?;
        let picked = index_hits(index, n)?.try_where(&x, 0.0)?;
        Ok(picked.try_sum(&[-1], false)?.cast(self.dtype()))
    }
    /// [`Tensor::try_gather`], panicking on a bad axis, dtype or shape.
    #[track_caller]
    pub fn gather(&self, axis: isize, index: &Tensor) -> Tensor {
        must(self.try_gather(axis, index))
    }

    /// A trailing axis of `num_classes` with a 1 at each value's position (i32 result). `self`
    /// must hold integers. A value outside `0..num_classes` is an error when `self` is a
    /// constant or a realized buffer; a lazy one gives an all-zero row, on every device (see the module doc).
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let t = Tensor::from_slice(&[0i32, 2], &[2]);
    /// assert_eq!(t.one_hot(3).to_vec::<i32>().unwrap(), vec![1, 0, 0, 0, 0, 1]);
    /// ```
    pub fn try_one_hot(&self, num_classes: usize) -> Result<Tensor> {
        check_int_index("one_hot", self)?;
        check_known_indices("one_hot", self, num_classes, &|| {
            format!("{num_classes} classes")
        })?;
        Ok(index_hits(self, num_classes)?.cast(DType::I32))
    }
    /// [`Tensor::try_one_hot`], panicking on a non-integer tensor.
    #[track_caller]
    pub fn one_hot(&self, num_classes: usize) -> Tensor {
        must(self.try_one_hot(num_classes))
    }
}
