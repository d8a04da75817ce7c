//! Losses (`binary_crossentropy[_logits]`, `sparse_categorical_crossentropy`, `cross_entropy`,
//! `nll_loss`) with a [`Reduction`], and the helpers they share: a numerically stable
//! log-softmax and one-hot masks from integer labels (compares against an `arange`). All
//! composed, so gradients come from the primitives. Integer labels are range-checked where their
//! values are known on the host (see `check_label_range`).

use alloc::format;
use alloc::vec;

use crate::dtype::DType;
use crate::error::{Error, Result};

use super::gather::host_known_values;
use super::{must, Tensor};

/// How a per-element loss is reduced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// Keep every element's loss.
    None,
    /// The mean over all elements.
    #[default]
    Mean,
    /// The sum over all elements.
    Sum,
}

impl Tensor {
    fn reduce_loss(&self, r: Reduction) -> Tensor {
        match r {
            Reduction::None => self.clone(),
            Reduction::Mean => self.mean_all(),
            Reduction::Sum => self.sum_all(),
        }
    }
}

/// `log(softmax(x))` along `axis`, in float.
pub(crate) fn log_softmax_axis(x: &Tensor, axis: isize) -> Result<Tensor> {
    x.float().try_log_softmax(axis)
}

/// `softmax(x)` along `axis`, in float.
pub(crate) fn softmax_axis(x: &Tensor, axis: isize) -> Result<Tensor> {
    x.float().try_softmax(axis)
}

/// A bool mask `[.., classes, ..]`: `labels` (ints) one-hot along a new axis at `axis`.
pub(crate) fn one_hot_at(labels: &Tensor, classes: usize, axis: usize) -> Result<Tensor> {
    let hits = super::gather::index_hits(labels, classes)?;
    let last = hits.ndim() - 1;
    let mut order: alloc::vec::Vec<usize> = (0..last).collect();
    order.insert(axis, last);
    hits.try_permute(&order)
}

/// `log(sigmoid(x))` = `min(x, 0) - log(1 + e^-|x|)`, stable for large `|x|`.
fn log_sigmoid(x: &Tensor) -> Tensor {
    x.minimum(0.0).sub(x.abs().neg().exp().add(1.0).log())
}

/// Errors when a host-known label (see [`host_known_values`]) is outside `0..classes` and is
/// not `ignore`, naming the label, its position and the class count. Labels still to be
/// computed are not checked: an out-of-range one matches no class, so its one-hot row is all
/// zero and it adds nothing but the smoothing term to the loss.
pub(crate) fn check_label_range(
    op: &'static str,
    y: &Tensor,
    classes: usize,
    ignore: Option<i64>,
) -> Result<()> {
    let Some(labels) = host_known_values(y)? else {
        return Ok(());
    };
    let bad = labels.iter().enumerate().find(|&(_, &l)| {
        let ignored = ignore.is_some_and(|i| l == i as f64);
        !(ignored || (0.0..classes as f64).contains(&l))
    });
    match bad {
        None => Ok(()),
        Some((at, &l)) => Err(Error::shape(
            op,
            format!(
                "label {l} (at flat index {at}) is out of range for {classes} classes (valid: 0..={})",
                classes.saturating_sub(1)
            ),
        )),
    }
}

fn check_labels(op: &'static str, x: &Tensor, y: &Tensor, want: &[usize]) -> Result<()> {
    if y.shape() != want || y.dtype().is_float() || y.dtype() == DType::Bool {
        return Err(Error::shape(
            op,
            format!(
                "labels {:?} {} must be ints of shape {want:?} for input {:?}",
                y.shape(),
                y.dtype(),
                x.shape()
            ),
        ));
    }
    Ok(())
}

impl Tensor {
    /// Binary cross-entropy of probabilities `self` against targets `y`.
    ///
    /// ```
    /// use picograd_core::{Reduction, Tensor};
    /// let p = Tensor::from_slice(&[0.1f32, 0.9, 0.2], &[3]);
    /// let y = Tensor::from_slice(&[0i32, 1, 0], &[3]);
    /// let l = p.binary_crossentropy(&y, Reduction::Mean).item::<f32>().unwrap();
    /// assert!((l - 0.14462155).abs() < 1e-6);
    /// ```
    pub fn try_binary_crossentropy(&self, y: &Tensor, r: Reduction) -> Result<Tensor> {
        let x = self.float();
        let y = y.cast(x.dtype());
        let pos = y.neg().try_mul(x.log())?;
        let neg = y
            .const_like(1.0)
            .try_sub(&y)?
            .try_mul(x.const_like(1.0).sub(&x).log())?;
        Ok(pos.try_sub(neg)?.reduce_loss(r))
    }
    /// [`Tensor::try_binary_crossentropy`], panicking on mismatched shapes.
    #[track_caller]
    pub fn binary_crossentropy(&self, y: &Tensor, r: Reduction) -> Tensor {
        must(self.try_binary_crossentropy(y, r))
    }

    /// Binary cross-entropy of logits `self` against targets `y`, the positive term optionally
    /// weighted by `pos_weight`.
    pub fn try_binary_crossentropy_logits(
        &self,
        y: &Tensor,
        r: Reduction,
        pos_weight: Option<&Tensor>,
    ) -> Result<Tensor> {
        let x = self.float();
        let y = y.cast(x.dtype());
        let mut pos = y.try_mul(log_sigmoid(&x))?;
        if let Some(w) = pos_weight {
            pos = pos.try_mul(w)?;
        }
        let neg = y
            .const_like(1.0)
            .try_sub(&y)?
            .try_mul(log_sigmoid(&x.neg()))?;
        Ok(pos.try_add(neg)?.neg().reduce_loss(r))
    }
    /// [`Tensor::try_binary_crossentropy_logits`], panicking on mismatched shapes.
    #[track_caller]
    pub fn binary_crossentropy_logits(
        &self,
        y: &Tensor,
        r: Reduction,
        pos_weight: Option<&Tensor>,
    ) -> Tensor {
        must(self.try_binary_crossentropy_logits(y, r, pos_weight))
    }

    /// Cross-entropy of logits `self` `[.., classes]` (class axis last) against integer labels
    /// `y` `[..]`. Labels equal to `ignore_index` (unless it is -1) do not count; with
    /// `label_smoothing` the target mixes in the uniform distribution. `Mean` divides by the
    /// number of counted labels.
    ///
    /// A label outside `0..classes` is an error naming it and the class count when the labels
    /// are known on the host (a constant, `from_slice`, or a realized tensor); labels still to be
    /// computed are not checked, and an out-of-range one then matches no class.
    ///
    /// ```
    /// use picograd_core::{Reduction, Tensor};
    /// let t = Tensor::from_slice(&[-1.0f32, 2.0, -3.0, 1.0, -2.0, 3.0], &[2, 3]);
    /// let y = Tensor::from_slice(&[1i32, 2], &[2]);
    /// let l = t.sparse_categorical_crossentropy(&y, -1, 0.0, Reduction::Mean);
    /// assert!((l.item::<f32>().unwrap() - 0.09391524).abs() < 1e-6);
    /// ```
    pub fn try_sparse_categorical_crossentropy(
        &self,
        y: &Tensor,
        ignore_index: i64,
        label_smoothing: f64,
        r: Reduction,
    ) -> Result<Tensor> {
        let op = "sparse_categorical_crossentropy";
        let shape = self.shape();
        if shape.is_empty() || !(0.0..=1.0).contains(&label_smoothing) {
            return Err(Error::shape(
                op,
                format!("input {shape:?}, label_smoothing {label_smoothing}"),
            ));
        }
        check_labels(op, self, y, &shape[..shape.len() - 1])?;
        let ignore = (ignore_index != -1).then_some(ignore_index);
        check_label_range(op, y, shape[shape.len() - 1], ignore)?;
        let logp = log_softmax_axis(self, -1)?;
        let mask = if ignore_index != -1 {
            y.try_ne(ignore_index)?
        } else {
            Tensor::full(&y.shape(), 1.0, DType::Bool)
        };
        let hot = one_hot_at(y, shape[shape.len() - 1], y.ndim())?;
        let hot = hot.try_mul(&mask.try_unsqueeze(-1)?)?;
        let picked = hot.try_where(&logp, 0.0)?.try_sum(&[-1], false)?;
        let smooth = logp
            .try_mean(&[-1], false)?
            .try_mul(mask.cast(logp.dtype()))?
            .mul(label_smoothing);
        let per = picked.mul(1.0 - label_smoothing).try_add(smooth)?;
        if r == Reduction::Mean {
            return per
                .sum_all()
                .neg()
                .try_div(mask.cast(logp.dtype()).sum_all());
        }
        Ok(per.neg().reduce_loss(r))
    }
    /// [`Tensor::try_sparse_categorical_crossentropy`], panicking on mismatched shapes.
    #[track_caller]
    pub fn sparse_categorical_crossentropy(
        &self,
        y: &Tensor,
        ignore_index: i64,
        label_smoothing: f64,
        r: Reduction,
    ) -> Tensor {
        must(self.try_sparse_categorical_crossentropy(y, ignore_index, label_smoothing, r))
    }

    /// Cross-entropy of logits `self` (`[classes]` or `[n, classes, ..]`, class axis 1) against
    /// `y`: integer labels (`self`'s shape without the class axis) or class probabilities
    /// (`self`'s shape).
    ///
    /// A label outside `0..classes` is an error naming it and the class count when the labels
    /// are known on the host (a constant, `from_slice`, or a realized tensor); labels still to be
    /// computed are not checked, and an out-of-range one then matches no class.
    pub fn try_cross_entropy(
        &self,
        y: &Tensor,
        r: Reduction,
        label_smoothing: f64,
    ) -> Result<Tensor> {
        let shape = self.shape();
        if shape.is_empty() || !(0.0..=1.0).contains(&label_smoothing) {
            return Err(Error::shape(
                "cross_entropy",
                format!("input {shape:?}, label_smoothing {label_smoothing}"),
            ));
        }
        let cd = usize::from(shape.len() > 1);
        let logp = log_softmax_axis(self, cd as isize)?;
        let target = if y.shape() == shape {
            y.cast(logp.dtype())
        } else {
            let mut want = shape.clone();
            want.remove(cd);
            check_labels("cross_entropy", self, y, &want)?;
            check_label_range("cross_entropy", y, shape[cd], None)?;
            one_hot_at(y, shape[cd], cd)?.cast(logp.dtype())
        };
        let target = target
            .mul(1.0 - label_smoothing)
            .add(label_smoothing / shape[cd] as f64);
        Ok(logp
            .try_mul(&target)?
            .try_sum(&[cd as isize], false)?
            .neg()
            .reduce_loss(r))
    }
    /// [`Tensor::try_cross_entropy`], panicking on mismatched shapes.
    #[track_caller]
    pub fn cross_entropy(&self, y: &Tensor, r: Reduction, label_smoothing: f64) -> Tensor {
        must(self.try_cross_entropy(y, r, label_smoothing))
    }

    /// Negative log-likelihood of log-probabilities `self` `[n, classes, ..]` at integer labels
    /// `y` `[n, ..]`, with optional per-class `weight` `[classes]`; labels equal to
    /// `ignore_index` do not count. `Mean` divides by the total weight counted.
    ///
    /// A label outside `0..classes` is an error naming it and the class count when the labels
    /// are known on the host (a constant, `from_slice`, or a realized tensor); labels still to be
    /// computed are not checked, and an out-of-range one then matches no class.
    pub fn try_nll_loss(
        &self,
        y: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: Option<i64>,
        r: Reduction,
    ) -> Result<Tensor> {
        let shape = self.shape();
        if shape.len() < 2 {
            return Err(Error::shape(
                "nll_loss",
                format!("input {shape:?} needs [n, classes, ..]"),
            ));
        }
        let mut want = shape.clone();
        want.remove(1);
        check_labels("nll_loss", self, y, &want)?;
        check_label_range("nll_loss", y, shape[1], ignore_index)?;
        let x = self.float();
        let hot = one_hot_at(y, shape[1], 1)?;
        let w = match weight {
            None => y.cast(x.dtype()).ones_like(),
            Some(wt) => {
                let mut ws = vec![1isize; hot.ndim()];
                ws[1] = shape[1] as isize;
                hot.try_where(&wt.cast(x.dtype()).try_reshape(&ws)?, 0.0)?
                    .try_sum(&[1], false)?
            }
        };
        let w = match ignore_index {
            None => w,
            Some(i) => y.try_ne(i)?.try_where(&w, 0.0)?,
        };
        let picked = hot.try_where(&x, 0.0)?.try_sum(&[1], false)?;
        let nll = picked.neg().try_mul(&w)?;
        if r == Reduction::Mean {
            return nll.sum_all().try_div(w.sum_all());
        }
        Ok(nll.reduce_loss(r))
    }
    /// [`Tensor::try_nll_loss`], panicking on mismatched shapes.
    #[track_caller]
    pub fn nll_loss(
        &self,
        y: &Tensor,
        weight: Option<&Tensor>,
        ignore_index: Option<i64>,
        r: Reduction,
    ) -> Tensor {
        must(self.try_nll_loss(y, weight, ignore_index, r))
    }
}
