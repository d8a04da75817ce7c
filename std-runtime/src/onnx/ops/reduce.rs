//! Reductions: the `Reduce*` family (axes from the attribute before opset 13/18, from the second
//! input after), ArgMax/ArgMin (first or last index), CumSum/CumProd (a masked sum over a
//! triangular mask, so they stay lazy).

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::shape::isz;
use super::{norm_axis, one, Handler};

/// The handler for `op` if it is a reduction.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "ReduceSum" => |n| reduce(n, 13, |x, a| x.try_sum(a, true)),
        "ReduceMean" => |n| reduce(n, 18, |x, a| x.try_mean(a, true)),
        "ReduceMax" => |n| reduce(n, 18, |x, a| x.try_max(a, true)),
        "ReduceMin" => |n| reduce(n, 18, |x, a| x.try_min(a, true)),
        "ReduceProd" => |n| reduce(n, 18, |x, a| x.try_prod(a, true)),
        "ReduceL1" => |n| reduce(n, 18, |x, a| x.abs().try_sum(a, true)),
        "ReduceL2" => |n| {
            reduce(n, 18, |x, a| {
                let s = x.try_mul(x)?.try_sum(a, true)?;
                Ok(s.sqrt().cast(x.dtype()))
            })
        },
        "ReduceSumSquare" => |n| reduce(n, 18, |x, a| x.try_mul(x)?.try_sum(a, true)),
        "ReduceLogSum" => |n| reduce(n, 18, |x, a| Ok(x.try_sum(a, true)?.log())),
        "ReduceLogSumExp" => |n| reduce(n, 18, log_sum_exp),
        "ArgMax" => |n| arg(n, true),
        "ArgMin" => |n| arg(n, false),
        "CumSum" => |n| cumulative(n, false),
        "CumProd" => |n| cumulative(n, true),
        _ => return None,
    })
}

fn log_sum_exp(x: &Tensor, a: &[isize]) -> Result<Tensor> {
    let m = x.try_max(a, true)?;
    let m = m
        .try_eq(f64::NEG_INFINITY)?
        .try_where(m.const_like(0.0), &m)?;
    let s = x.try_sub(&m)?.exp().try_sum(a, true)?;
    s.log().try_add(&m)
}

fn reduce(
    n: &Node,
    input_since: i64,
    f: fn(&Tensor, &[isize]) -> Result<Tensor>,
) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let r = x.ndim();
    let axes = if n.opset >= input_since {
        n.ints_input(1)?
    } else {
        n.ints("axes")
    };
    let axes: Vec<isize> = match axes {
        Some(a) if !a.is_empty() => a
            .iter()
            .map(|&v| norm_axis(n.op(), v, r).map(|v| v as isize))
            .collect::<Result<_>>()?,
        _ if n.int("noop_with_empty_axes", 0) != 0 => return one(x.clone()),
        _ => (0..r as isize).collect(),
    };
    let y = if r == 0 { f(x, &[])? } else { f(x, &axes)? };
    if n.int("keepdims", 1) != 0 {
        return one(y);
    }
    let out: Vec<usize> = x
        .shape()
        .iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(&(*i as isize)))
        .map(|(_, &d)| d)
        .collect();
    one(y.try_reshape(&isz(&out))?)
}

/// Index (i64, kept axis) of the max (`max`) or min along `axis`, the first or the `last` one.
pub fn arg_extreme(x: &Tensor, axis: isize, max: bool, last: bool) -> Result<Tensor> {
    let m = if max {
        x.try_max(&[axis], true)?
    } else {
        x.try_min(&[axis], true)?
    };
    let hit = x.try_eq(&m)?;
    let d = x.shape()[axis as usize];
    let mut s = vec![1isize; x.ndim()];
    s[axis as usize] = d as isize;
    let ar = Tensor::arange(0.0, d as f64, 1.0, DType::I64).try_reshape(&s)?;
    if last {
        hit.try_where(&ar, -1i64)?.try_max(&[axis], true)
    } else {
        hit.try_where(&ar, d as i64)?.try_min(&[axis], true)
    }
}

fn arg(n: &Node, max: bool) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let a = norm_axis(n.op(), n.int("axis", 0), x.ndim())?;
    let y = arg_extreme(x, a as isize, max, n.int("select_last_index", 0) != 0)?;
    if n.int("keepdims", 1) != 0 {
        return one(y);
    }
    one(y.try_squeeze(Some(a as isize))?)
}

fn cumulative(n: &Node, prod: bool) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let axis = n
        .ints_input(1)?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| bad(n.op(), "no axis"))?;
    let a = norm_axis(n.op(), axis, x.ndim())?;
    let r = x.ndim();
    let mut perm: Vec<usize> = (0..r).filter(|&i| i != a).collect();
    perm.push(a);
    let xt = x.try_permute(&perm)?;
    let d = x.shape()[a];
    let i = Tensor::arange(0.0, d as f64, 1.0, DType::I64).try_reshape(&[d as isize, 1])?;
    let j = Tensor::arange(0.0, d as f64, 1.0, DType::I64).try_reshape(&[1, d as isize])?;
    let (excl, rev) = (n.int("exclusive", 0) != 0, n.int("reverse", 0) != 0);
    let mask = match (rev, excl) {
        (false, false) => j.try_le(&i)?,
        (false, true) => j.try_lt(&i)?,
        (true, false) => j.try_ge(&i)?,
        (true, true) => j.try_gt(&i)?,
    };
    let xe = xt.try_unsqueeze(-2)?;
    let fill = if prod { 1.0 } else { 0.0 };
    let picked = mask.try_where(&xe, xe.const_like(fill))?;
    let y = if prod {
        picked.try_prod(&[-1], false)?
    } else {
        picked.try_sum(&[-1], false)?
    };
    let mut inv = vec![0; r];
    for (k, &p) in perm.iter().enumerate() {
        inv[p] = k;
    }
    one(y.cast(x.dtype()).try_permute(&inv)?)
}
