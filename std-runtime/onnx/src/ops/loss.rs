//! Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (class weights, `ignore_index`,
//! reductions none/sum/mean), the class picked by one-hot selection along axis 1.

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::{one, Handler};

/// The handler for `op` if it is a loss.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "NegativeLogLikelihoodLoss" => |n| one(nll(n, n.input(0)?)?),
        "SoftmaxCrossEntropyLoss" => sce,
        _ => return None,
    })
}

/// `[C]` as `[1, C, 1, ...]` for rank `r`.
fn channel(t: &Tensor, r: usize) -> Result<Tensor> {
    let mut s = vec![1isize; r];
    s[1] = -1;
    t.try_reshape(&s)
}

/// The NLL loss of log-probabilities `x` `[N, C, d...]` against the node's targets and weights.
fn nll(n: &Node, x: &Tensor) -> Result<Tensor> {
    let r = x.ndim();
    if r < 2 {
        return Err(bad(n.op(), "input needs rank ≥ 2"));
    }
    let c = x.shape()[1];
    let t = n.input(1)?.cast(DType::I64);
    let ignored = match n.has("ignore_index") {
        true => t.try_eq(n.int("ignore_index", 0))?,
        false => t.const_like(0.0).cast(DType::Bool),
    };
    let t = ignored.try_where(t.const_like(0.0), &t)?;
    let ar = channel(&Tensor::try_arange(0.0, c as f64, 1.0, DType::I64)?, r)?;
    let hot = t.try_unsqueeze(1)?.try_eq(&ar)?;
    let val = hot.try_where(x, x.const_like(0.0))?.try_sum(&[1], false)?;
    let w = match n.opt(2) {
        Some(w) => {
            let wc = channel(w, r)?.try_expand(&x.shape())?;
            hot.try_where(&wc, wc.const_like(0.0))?
                .try_sum(&[1], false)?
        }
        None => val.const_like(1.0),
    };
    let w = ignored.try_where(w.const_like(0.0), &w)?;
    let loss = val.neg().try_mul(&w)?;
    let all: Vec<isize> = (0..loss.ndim() as isize).collect();
    match n.string("reduction", "mean").as_str() {
        "none" => Ok(loss),
        "sum" => loss.try_sum(&all, false),
        "mean" => loss.try_sum(&all, false)?.try_div(w.try_sum(&all, false)?),
        m => Err(bad(n.op(), format!("reduction '{m}'"))),
    }
}

fn sce(n: &Node) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let m = x.try_max(&[1], true)?;
    let d = x.try_sub(&m)?;
    let logp = d.try_sub(d.exp().try_sum(&[1], true)?.log())?;
    Ok(vec![nll(n, &logp)?, logp])
}
