//! Losses used by training: a stable `log_softmax` and sparse (integer-label) cross entropy,
//! composed from primitives. (Free functions, so they sit beside any Tensor methods of the same
//! job without clashing.)

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::tensor::Tensor;

/// `x - max - log(sum(exp(x - max)))` along the last axis.
pub fn log_softmax(x: &Tensor) -> Result<Tensor> {
    let shifted = x.try_sub(x.try_max(&[-1], true)?.detach())?;
    let lse = shifted.exp().try_sum(&[-1], true)?.log();
    shifted.try_sub(lse)
}

/// `[.., C]` one-hot rows of the integer `labels` `[..]` (1.0 at the label, 0.0 elsewhere).
pub fn one_hot(labels: &Tensor, classes: usize, dtype: DType) -> Result<Tensor> {
    if labels.dtype().is_float() {
        return Err(Error::dtype("one_hot", "labels must be integers"));
    }
    let range = Tensor::arange(0.0, classes as f64, 1.0, DType::I32);
    let l = labels.cast(DType::I32).try_unsqueeze(-1)?;
    Ok(l.try_eq(&range)?.cast(dtype))
}

/// Mean cross entropy of `logits` `[B, C]` against integer `labels` `[B]`. Host-known labels
/// (constants, `from_slice`, realized tensors) outside `0..C` are an error naming the label.
pub fn cross_entropy(logits: &Tensor, labels: &Tensor) -> Result<Tensor> {
    let (ls, ys) = (logits.shape(), labels.shape());
    if ls.len() != 2 || ys.len() != 1 || ys[0] != ls[0] {
        return Err(Error::shape(
            "cross_entropy",
            alloc::format!("logits {ls:?} and labels {ys:?} need [B, C] and [B]"),
        ));
    }
    crate::tensor::check_label_range("cross_entropy", labels, ls[1], None)?;
    let target = one_hot(labels, ls[1], logits.dtype())?;
    let picked = log_softmax(logits)?
        .try_mul(target)?
        .try_sum(&[-1], false)?;
    Ok(picked.mean_all().neg())
}
