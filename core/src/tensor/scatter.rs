//! Index-driven writes: `scatter` (write `src` elements into a copy of `self` at positions given
//! by an index tensor along an axis), `scatter_value` (a scalar source) and `scatter_reduce`
//! (combine with `sum prod mean amax amin`).
//!
//! Composed: for every output position the candidate sources sit on a trailing axis of length
//! `K` (the index's length along the axis), masked by "index points here". A reduction over that
//! axis gives the result, so gradients flow to both `self` and `src`. Where several sources hit
//! one position, plain `scatter` keeps the last one. Out-of-range indices follow `gather`'s rule
//! (an error when the index's values are known on the host, else the write is dropped on every
//! device).

use alloc::format;
use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::AluOp;

use super::gather::{check_int_index, check_known_indices, index_hits};
use super::{must, Tensor};

/// How `scatter_reduce` combines the sources hitting a position (and `self`'s value there).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterReduce {
    /// Add them.
    Sum,
    /// Multiply them.
    Prod,
    /// Average them.
    Mean,
    /// Keep the largest.
    Amax,
    /// Keep the smallest.
    Amin,
}

/// The sources (`[.., 1 at axis, .., K]`) and the hit mask (`self.shape + [K]`).
struct Spread {
    src: Tensor,
    hits: Tensor,
}

fn check_scatter(s: &[usize], index: &[usize], src: &[usize], ax: usize) -> Result<()> {
    let n = s.len();
    let fits = index.len() == n
        && src.len() == n
        && (0..n).all(|d| index[d] <= src[d] && (d == ax || index[d] <= s[d]));
    if fits {
        return Ok(());
    }
    Err(Error::shape(
        "scatter",
        format!("index {index:?} must fit source {src:?}, and input {s:?} outside axis {ax}"),
    ))
}

impl Tensor {
    /// Lines the sources up against every output position (see the module doc).
    fn spread(&self, axis: isize, index: &Tensor, src: &Tensor) -> Result<(Spread, usize)> {
        check_int_index("scatter", index)?;
        let ax = self.resolve_axes("scatter", &[axis])?[0];
        let (s, i) = (self.shape(), index.shape());
        check_scatter(&s, &i, &src.shape(), ax)?;
        check_known_indices("scatter", index, s[ax], &|| {
            format!("axis {ax} of size {} of input {s:?}", s[ax])
        })?;
        let keep: Vec<(usize, usize)> = i.iter().map(|&d| (0, d)).collect();
        let mut pad: Vec<(usize, usize)> = (0..s.len())
            .map(|d| if d == ax { (0, 0) } else { (0, s[d] - i[d]) })
            .collect();
        pad.push((0, 0));
        let src = src
            .cast(self.dtype())
            .try_shrink(&keep)?
            .try_unsqueeze(-1)?;
        let src = src.try_transpose(ax as isize, -1)?.try_pad(&pad)?;
        let hits = index_hits(index, s[ax])?.try_transpose(ax as isize, -1)?;
        Ok((
            Spread {
                src,
                hits: hits.try_pad(&pad)?,
            },
            ax,
        ))
    }

    /// A copy of `self` with `src[p]` written at `p` with its axis coordinate replaced by
    /// `index[p]`, for every position `p` of `index` (which must fit inside `src`, and inside
    /// `self` outside `axis`). When several sources hit one position the last one wins. An
    /// index outside `0..n` (`n` the axis length) is an error when `index` is a constant or
    /// a realized buffer; a lazy one writes nothing (`self`'s value stays), on every device.
    ///
    /// ```
    /// use picograd_core::{DType, Tensor};
    /// let src = Tensor::from_slice(&[1i32, 2, 3, 4], &[1, 4]);
    /// let index = Tensor::from_slice(&[0i32, 1, 1, 0], &[1, 4]);
    /// let out = Tensor::zeros(&[2, 4], DType::I32).scatter(0, &index, &src);
    /// assert_eq!(out.to_vec::<i32>().unwrap(), vec![1, 0, 0, 4, 0, 2, 3, 0]);
    /// ```
    pub fn try_scatter(&self, axis: isize, index: &Tensor, src: &Tensor) -> Result<Tensor> {
        let (sp, _) = self.spread(axis, index, src)?;
        let k = sp.hits.shape()[sp.hits.ndim() - 1];
        let pos = Tensor::try_arange_on(1.0, k as f64 + 1.0, 1.0, DType::I32, &self.device())?;
        let last = sp.hits.try_where(&pos, 0.0)?.try_max(&[-1], true)?;
        let only_last = sp.hits.try_alu(AluOp::And, &[&pos.try_eq(&last)?])?;
        let value = only_last.try_where(&sp.src, 0.0)?.try_sum(&[-1], false)?;
        let any = sp.hits.try_any(&[-1], false)?;
        any.try_where(value.cast(self.dtype()), self)
    }
    /// [`Tensor::try_scatter`], panicking on a bad axis, dtype or shape.
    #[track_caller]
    pub fn scatter(&self, axis: isize, index: &Tensor, src: &Tensor) -> Tensor {
        must(self.try_scatter(axis, index, src))
    }

    /// [`Tensor::try_scatter`] with every source equal to `value`; with `reduce` it combines
    /// instead of overwriting ([`Tensor::try_scatter_reduce`], `self` included).
    pub fn try_scatter_value(
        &self,
        axis: isize,
        index: &Tensor,
        value: f64,
        reduce: Option<ScatterReduce>,
    ) -> Result<Tensor> {
        let src = index.cast(self.dtype()).full_like(value);
        match reduce {
            None => self.try_scatter(axis, index, &src),
            Some(r) => self.try_scatter_reduce(axis, index, &src, r, true),
        }
    }
    /// [`Tensor::try_scatter_value`], panicking on a bad axis, dtype or shape.
    #[track_caller]
    pub fn scatter_value(
        &self,
        axis: isize,
        index: &Tensor,
        value: f64,
        reduce: Option<ScatterReduce>,
    ) -> Tensor {
        must(self.try_scatter_value(axis, index, value, reduce))
    }

    /// Like [`Tensor::try_scatter`], but every position combines the sources hitting it with
    /// `reduce`, together with `self`'s value there when `include_self` (positions no source
    /// hits keep `self`'s value either way).
    ///
    /// ```
    /// use picograd_core::{tensor::ScatterReduce, DType, Tensor};
    /// let src = Tensor::from_slice(&[1.0f32, 2.0, 3.0], &[3]);
    /// let index = Tensor::from_slice(&[0i32, 0, 1], &[3]);
    /// let out = Tensor::ones(&[2], DType::F32).scatter_reduce(0, &index, &src, ScatterReduce::Sum, true);
    /// assert_eq!(out.to_vec::<f32>().unwrap(), vec![4.0, 4.0]);
    /// ```
    pub fn try_scatter_reduce(
        &self,
        axis: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Result<Tensor> {
        let (sp, _) = self.spread(axis, index, src)?;
        let missed = sp.hits.try_any(&[-1], false)?.logical_not();
        // `self`'s share: itself, or (when excluded) itself only where nothing hits.
        let own = |identity: f64| -> Result<Tensor> {
            if include_self {
                Ok(self.clone())
            } else {
                missed.try_where(self, identity)
            }
        };
        let d = self.dtype();
        let out = match reduce {
            ScatterReduce::Sum => sum_hits(&sp)?.try_add(own(0.0)?)?,
            ScatterReduce::Prod => {
                let p = sp.hits.try_where(&sp.src, 1.0)?.try_prod(&[-1], false)?;
                p.cast(d).try_mul(own(1.0)?)?
            }
            ScatterReduce::Amax => {
                let m = sp.hits.try_where(&sp.src, d.min_value())?;
                m.try_max(&[-1], false)?.try_maximum(own(d.min_value())?)?
            }
            ScatterReduce::Amin => {
                let m = sp.hits.try_where(&sp.src, d.max_value())?;
                m.try_min(&[-1], false)?.try_minimum(own(d.max_value())?)?
            }
            ScatterReduce::Mean => {
                let total = sum_hits(&sp)?.try_add(own(0.0)?)?;
                let extra = if include_self {
                    self.const_like(1.0)
                } else {
                    missed.cast(d)
                };
                let count = sp.hits.try_sum(&[-1], false)?.cast(d).try_add(extra)?;
                total.try_div(count)?
            }
        };
        Ok(out.cast(d))
    }
    /// [`Tensor::try_scatter_reduce`], panicking on a bad axis, dtype or shape.
    #[track_caller]
    pub fn scatter_reduce(
        &self,
        axis: isize,
        index: &Tensor,
        src: &Tensor,
        reduce: ScatterReduce,
        include_self: bool,
    ) -> Tensor {
        must(self.try_scatter_reduce(axis, index, src, reduce, include_self))
    }
}

/// The sum of the sources hitting each position, in the sources' dtype.
fn sum_hits(sp: &Spread) -> Result<Tensor> {
    let s = sp.hits.try_where(&sp.src, 0.0)?.try_sum(&[-1], false)?;
    Ok(s.cast(sp.src.dtype()))
}
