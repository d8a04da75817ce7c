//! Joining and splitting along an axis: `cat` (each piece padded to the full length, then
//! summed — or or-ed for bools), `stack` (unsqueeze then cat), `split`/`chunk` (shrinks).

use alloc::format;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::AluOp;

use super::{must, Tensor};

/// Checks that every shape equals the first except along `axis`.
fn check_cat_shapes(ts: &[&Tensor], axis: usize) -> Result<()> {
    let first = ts[0].shape();
    for t in &ts[1..] {
        let s = t.shape();
        let same = s.len() == first.len()
            && s.iter()
                .zip(&first)
                .enumerate()
                .all(|(i, (a, b))| i == axis || a == b);
        if !same {
            return Err(Error::shape(
                "cat",
                format!("shapes {first:?} and {s:?} differ outside axis {axis}"),
            ));
        }
    }
    Ok(())
}

impl Tensor {
    /// Concatenates tensors along `axis` (negative counts from the end); dtypes promote.
    ///
    /// ```
    /// use picograd_core::Tensor;
    /// let a = Tensor::from_slice(&[1i32, 2], &[1, 2]);
    /// let b = Tensor::from_slice(&[3i32, 4], &[1, 2]);
    /// let c = Tensor::cat(&[&a, &b], -1);
    /// assert_eq!(c.shape(), vec![1, 4]);
    /// assert_eq!(c.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]);
    /// ```
    pub fn try_cat(ts: &[&Tensor], axis: isize) -> Result<Tensor> {
        let Some(first) = ts.first() else {
            return Err(Error::shape("cat", "no tensors to concatenate"));
        };
        let ax = first.resolve_axes("cat", &[axis])?[0];
        check_cat_shapes(ts, ax)?;
        let dtype = ts.iter().fold(first.dtype(), |d, t| d.promote(t.dtype()));
        let total: usize = ts.iter().map(|t| t.shape()[ax]).sum();
        let op = if dtype == DType::Bool {
            AluOp::Or
        } else {
            AluOp::Add
        };
        let mut acc: Option<Tensor> = None;
        let mut at = 0;
        for t in ts {
            let len = t.shape()[ax];
            let mut arg = alloc::vec![(0, 0); t.ndim()];
            arg[ax] = (at, total - at - len);
            at += len;
            let piece = t.cast(dtype).try_pad(&arg)?;
            acc = Some(match acc {
                None => piece,
                Some(a) => a.try_alu(op, &[&piece])?,
            });
        }
        Ok(acc.expect("at least one tensor"))
    }
    /// [`Tensor::try_cat`], panicking on mismatched shapes or a bad axis.
    #[track_caller]
    pub fn cat(ts: &[&Tensor], axis: isize) -> Tensor {
        must(Tensor::try_cat(ts, axis))
    }

    /// Stacks equally shaped tensors along a new axis `axis`.
    pub fn try_stack(ts: &[&Tensor], axis: isize) -> Result<Tensor> {
        let ups = ts
            .iter()
            .map(|t| t.try_unsqueeze(axis))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = ups.iter().collect();
        Tensor::try_cat(&refs, axis).map_err(|e| match e {
            Error::Shape { detail, .. } => Error::shape("stack", detail),
            other => other,
        })
    }
    /// [`Tensor::try_stack`], panicking on mismatched shapes or a bad axis.
    #[track_caller]
    pub fn stack(ts: &[&Tensor], axis: isize) -> Tensor {
        must(Tensor::try_stack(ts, axis))
    }

    /// Splits along `axis` into pieces of the given sizes (which must sum to the axis length).
    pub fn try_split(&self, sizes: &[usize], axis: isize) -> Result<Vec<Tensor>> {
        let ax = self.resolve_axes("split", &[axis])?[0];
        let shape = self.shape();
        if sizes.iter().sum::<usize>() != shape[ax] {
            return Err(Error::shape(
                "split",
                format!("sizes {sizes:?} do not sum to axis {axis} of shape {shape:?}"),
            ));
        }
        let mut at = 0;
        let mut out = Vec::with_capacity(sizes.len());
        for &n in sizes {
            let mut arg: Vec<(usize, usize)> = shape.iter().map(|&d| (0, d)).collect();
            arg[ax] = (at, at + n);
            out.push(self.try_shrink(&arg)?);
            at += n;
        }
        Ok(out)
    }
    /// [`Tensor::try_split`], panicking on bad sizes or a bad axis.
    #[track_caller]
    pub fn split(&self, sizes: &[usize], axis: isize) -> Vec<Tensor> {
        must(self.try_split(sizes, axis))
    }

    /// Splits along `axis` into pieces of `size` elements (the last may be shorter).
    pub fn try_split_size(&self, size: usize, axis: isize) -> Result<Vec<Tensor>> {
        let ax = self.resolve_axes("split", &[axis])?[0];
        let n = self.shape()[ax];
        if size == 0 {
            return Err(Error::shape("split", "piece size must be positive"));
        }
        let mut sizes = alloc::vec![size; n / size];
        if n % size != 0 {
            sizes.push(n % size);
        }
        self.try_split(&sizes, axis)
    }
    /// [`Tensor::try_split_size`], panicking on a zero size or a bad axis.
    #[track_caller]
    pub fn split_size(&self, size: usize, axis: isize) -> Vec<Tensor> {
        must(self.try_split_size(size, axis))
    }

    /// Splits along `axis` into `chunks` pieces of `ceil(len/chunks)` (the last may be shorter).
    pub fn try_chunk(&self, chunks: usize, axis: isize) -> Result<Vec<Tensor>> {
        let ax = self.resolve_axes("chunk", &[axis])?[0];
        if chunks == 0 {
            return Err(Error::shape("chunk", "number of chunks must be positive"));
        }
        let n = self.shape()[ax];
        self.try_split_size(n.div_ceil(chunks).max(1), axis)
    }
    /// [`Tensor::try_chunk`], panicking on zero chunks or a bad axis.
    #[track_caller]
    pub fn chunk(&self, chunks: usize, axis: isize) -> Vec<Tensor> {
        must(self.try_chunk(chunks, axis))
    }
}
