//! Reductions: the `Reduce*` family (axes from the attribute before opset 13/18, from the second
//! input after), ArgMax/ArgMin (first or last index) and CumSum/CumProd (reverse, exclusive),
//! the last two through the shared Tensor ops, so they stay lazy and export.

use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::{norm_axis, one, Handler};

/// The handler for `op` if it is a reduction.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "ReduceSum" => |n| reduce(n, 13, |x, a| x.try_sum(a, true)),
        "ReduceMean" => |n| reduce(n, 18, |x, a| x.try_mean(a, true)),
        "ReduceMax" => |n| reduce(n, 18, |x, a| via_u8(x, |t| t.try_max(a, true))),
        "ReduceMin" => |n| reduce(n, 18, |x, a| via_u8(x, |t| t.try_min(a, true))),
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

/// Bools reduced as u8 (so an empty max is false and an empty min true) and cast back.
fn via_u8(x: &Tensor, f: impl Fn(&Tensor) -> Result<Tensor>) -> Result<Tensor> {
    if x.dtype() != DType::Bool {
        return f(x);
    }
    Ok(f(&x.cast(DType::U8))?.cast(DType::Bool))
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
    // Symbolic sizes of the kept axes stay symbolic.
    let out: Vec<_> = x
        .sym_shape()
        .into_iter()
        .enumerate()
        .filter(|(i, _)| !axes.contains(&(*i as isize)))
        .map(|(_, d)| d)
        .collect();
    one(y.try_reshape_sym(&out)?)
}

/// Index (i64, kept axis) of the max (`max`) or min along `axis`, the first or the `last`
/// one: the shared `argmax`/`argmin`, on the flipped axis for the last one.
pub fn arg_extreme(x: &Tensor, axis: isize, max: bool, last: bool) -> Result<Tensor> {
    let src = if last {
        x.try_flip(&[axis])?
    } else {
        x.clone()
    };
    let i = if max {
        src.try_argmax(Some(axis), true)?
    } else {
        src.try_argmin(Some(axis), true)?
    };
    let i = i.cast(DType::I64);
    if last {
        let d = x.shape()[axis as usize] as i64;
        return i.const_like((d - 1) as f64).try_sub(&i);
    }
    Ok(i)
}

fn arg(n: &Node, max: bool) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let a = super::dim_axis(n.op(), n.int("axis", 0), x.ndim())?;
    let y = arg_extreme(x, a as isize, max, n.int("select_last_index", 0) != 0)?;
    if n.int("keepdims", 1) != 0 {
        return one(y);
    }
    one(y.try_squeeze(Some(a as isize))?)
}

/// CumSum/CumProd with the shared scans: `reverse` flips around them, `exclusive` shifts the
/// result by one along the axis (the identity comes in first).
fn cumulative(n: &Node, prod: bool) -> Result<Vec<Tensor>> {
    let x = n.input(0)?;
    let axis = n
        .ints_input(1)?
        .and_then(|v| v.first().copied())
        .ok_or_else(|| bad(n.op(), "no axis"))?;
    let a = super::dim_axis(n.op(), axis, x.ndim())?;
    let ax = a as isize;
    let (excl, rev) = (n.int("exclusive", 0) != 0, n.int("reverse", 0) != 0);
    let mut t = if rev { x.try_flip(&[ax])? } else { x.clone() };
    if excl && x.shape()[a] > 0 {
        let d = x.shape()[a];
        let mut keep: Vec<(usize, usize)> = x.shape().iter().map(|&s| (0, s)).collect();
        keep[a] = (0, d - 1);
        let mut pads = vec![(0, 0); x.ndim()];
        pads[a] = (1, 0);
        let fill = if prod { 1.0 } else { 0.0 };
        t = t.try_shrink(&keep)?.try_pad_value(&pads, fill)?;
    }
    let y = if prod {
        t.try_cumprod(ax)?
    } else {
        t.try_cumsum(ax)?
    };
    let y = if rev { y.try_flip(&[ax])? } else { y };
    one(y.cast(x.dtype()))
}
