//! Indexing ops, all lazy: GatherElements and ScatterElements (and the old Scatter) are the
//! shared `gather`/`scatter`/`scatter_reduce` after wrapping negative indices; Gather with
//! indices known at import (an initializer or a Constant node: buffers marked constant) is a view
//! of each run of consecutive indices, concatenated — no kernel computes `x[:, 0]` or a packed
//! projection's `q, k, v = qkv[0], qkv[1], qkv[2]`; other Gathers compare the indices with an
//! `arange` and select-and-sum along the indexed axis. Also Einsum, as one broadcast product
//! summed over the contracted letters.

use picograd_core::tensor::ScatterReduce;
use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
use super::super::values::to_i64s;
use super::shape::isz;
use super::{dim_axis, one, Handler};

/// The handler for `op` if it is an indexing op.
pub fn lookup(op: &str) -> Option<Handler> {
    Some(match op {
        "Gather" => gather,
        "GatherElements" => gather_elements,
        "ScatterElements" | "Scatter" => scatter_elements,
        "Einsum" => einsum,
        _ => return None,
    })
}

/// Indices made non-negative against an axis of length `n`, as i64.
fn wrap_indices(idx: &Tensor, n: usize) -> Result<Tensor> {
    let i = idx.cast(DType::I64);
    i.try_lt(0i64)?.try_where(i.try_add(n as i64)?, &i)
}

/// `arange(n)` as i64 shaped `[1, ..., n]` with `rank` axes.
fn arange_last(n: usize, rank: usize) -> Result<Tensor> {
    let mut s = vec![1isize; rank];
    if let Some(l) = s.last_mut() {
        *l = n as isize;
    }
    Tensor::try_arange(0.0, n as f64, 1.0, DType::I64)?.try_reshape(&s)
}

/// Bools are summed as u8 and cast back.
fn summable(t: &Tensor) -> Tensor {
    if t.dtype() == DType::Bool {
        t.cast(DType::U8)
    } else {
        t.clone()
    }
}

/// Most runs of consecutive indices a constant Gather concatenates as views; beyond that the
/// graph would grow with the index list, and the select-and-sum is one kernel whatever its length.
const MAX_GATHER_RUNS: usize = 16;

fn gather(n: &Node) -> Result<Vec<Tensor>> {
    let data = n.input(0)?;
    let ds = data.shape();
    let a = dim_axis("Gather", n.int("axis", 0), ds.len())?;
    let is = n.input(1)?.shape();
    if let Some(ix) = constant_indices(n.input(1)?)? {
        if let Some(t) = gather_views(data, a, &is, &ix)? {
            return one(t);
        }
    }
    let idx = wrap_indices(n.input(1)?, ds[a])?;
    let hot = idx
        .try_unsqueeze(-1)?
        .try_eq(&arange_last(ds[a], is.len() + 1)?)?;
    let mut hs = vec![1usize; a];
    hs.extend(&is);
    hs.push(ds[a]);
    hs.extend(vec![1; ds.len() - a - 1]);
    let hot = hot.try_reshape(&isz(&hs))?;
    let mut dshape = ds[..a].to_vec();
    dshape.extend(vec![1; is.len()]);
    dshape.extend(&ds[a..]);
    let d = summable(data).try_reshape(&isz(&dshape))?;
    let picked = hot.try_where(&d, d.const_like(0.0))?;
    one(picked
        .try_sum(&[(a + is.len()) as isize], false)?
        .cast(data.dtype()))
}

/// The values of `idx` when they are known at import: a buffer marked constant (an initializer
/// or a Constant node's value), read without taint — never an input-derived tensor, whose values
/// a capture must not bake in.
fn constant_indices(idx: &Tensor) -> Result<Option<Vec<i64>>> {
    let known = idx.lazy().realized().is_some_and(|b| b.is_constant());
    if !known || idx.numel() > MAX_GATHER_RUNS {
        return Ok(None);
    }
    to_i64s(idx).map(Some)
}

/// `data` gathered along `a` at the constant indices `ix` (of shape `is`) as views: each run of
/// consecutive indices one shrink, the runs concatenated. `None` when there are no indices or
/// too many runs, or when `data` has a symbolic size (the select-and-sum path then takes it).
fn gather_views(data: &Tensor, a: usize, is: &[usize], ix: &[i64]) -> Result<Option<Tensor>> {
    if data.is_symbolic() {
        return Ok(None);
    }
    let ds = data.shape();
    let d = ds[a] as i64;
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for (k, &i) in ix.iter().enumerate() {
        let w = if i < 0 { i + d } else { i };
        if !(0..d).contains(&w) {
            return Err(bad(
                "Gather",
                format!(
                    "index {i} (position {k}) is out of range for axis {a} of length {d} \
                     (data shape {ds:?})"
                ),
            ));
        }
        let w = w as usize;
        match runs.last_mut() {
            Some((_, end)) if *end == w => *end += 1,
            _ => runs.push((w, w + 1)),
        }
    }
    if runs.is_empty() || runs.len() > MAX_GATHER_RUNS {
        return Ok(None);
    }
    let parts = runs
        .iter()
        .map(|&(s, e)| {
            let mut arg: Vec<(usize, usize)> = ds.iter().map(|&n| (0, n)).collect();
            arg[a] = (s, e);
            data.try_shrink(&arg)
        })
        .collect::<Result<Vec<_>>>()?;
    let joined = match parts.as_slice() {
        [one] => one.clone(),
        _ => Tensor::try_cat(&parts.iter().collect::<Vec<_>>(), a as isize)?,
    };
    let mut shape = ds[..a].to_vec();
    shape.extend(is);
    shape.extend(&ds[a + 1..]);
    joined.try_reshape(&isz(&shape)).map(Some)
}

fn gather_elements(n: &Node) -> Result<Vec<Tensor>> {
    let data = n.input(0)?;
    let ds = data.shape();
    let a = dim_axis("GatherElements", n.int("axis", 0), ds.len())?;
    let idx = wrap_indices(n.input(1)?, ds[a])?;
    one(data.try_gather(a as isize, &idx)?)
}

fn scatter_elements(n: &Node) -> Result<Vec<Tensor>> {
    let data = n.input(0)?;
    let a = dim_axis(n.op(), n.int("axis", 0), data.ndim())?;
    let idx = wrap_indices(n.input(1)?, data.shape()[a])?;
    let upd = n.input(2)?;
    let ax = a as isize;
    let how = match n.string("reduction", "none").as_str() {
        "none" => return one(data.try_scatter(ax, &idx, upd)?),
        "add" => ScatterReduce::Sum,
        "mul" => ScatterReduce::Prod,
        "max" => ScatterReduce::Amax,
        "min" => ScatterReduce::Amin,
        m => return Err(bad(n.op(), format!("reduction '{m}'"))),
    };
    one(data.try_scatter_reduce(ax, &idx, upd, how, true)?)
}

fn einsum(n: &Node) -> Result<Vec<Tensor>> {
    let eq: String = n
        .string("equation", "")
        .chars()
        .filter(|c| !c.is_whitespace())
        .collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != n.inputs.len() || eq.contains('.') {
        return Err(bad(
            "Einsum",
            format!("equation '{eq}' (ellipses are not supported)"),
        ));
    }
    let mut letters: Vec<char> = Vec::new();
    for c in terms.iter().flat_map(|t| t.chars()) {
        if !letters.contains(&c) {
            letters.push(c);
        }
    }
    let out: Vec<char> = match rhs {
        Some(r) => r.chars().collect(),
        None => {
            let mut v: Vec<char> = letters
                .iter()
                .copied()
                .filter(|c| lhs.matches(*c).count() == 1)
                .collect();
            v.sort_unstable();
            v
        }
    };
    let mut order: Vec<char> = out.clone();
    order.extend(letters.iter().filter(|c| !out.contains(c)));
    let mut acc: Option<Tensor> = None;
    for (k, t) in terms.iter().enumerate() {
        let x = align(n.input(k)?, t, &order)?;
        acc = Some(match acc {
            None => x,
            Some(a) => a.try_mul(&x)?,
        });
    }
    let acc = acc.ok_or_else(|| bad("Einsum", "no operands"))?;
    let red: Vec<isize> = (out.len()..order.len()).map(|i| i as isize).collect();
    if red.is_empty() {
        return one(acc);
    }
    one(acc.try_sum(&red, false)?)
}

/// Permutes and reshapes an operand labelled `term` to the axis order `order` (1 where absent).
fn align(x: &Tensor, term: &str, order: &[char]) -> Result<Tensor> {
    let chars: Vec<char> = term.chars().collect();
    if chars.len() != x.ndim() {
        return Err(bad(
            "Einsum",
            format!("term '{term}' for shape {:?}", x.shape()),
        ));
    }
    let mut uniq = chars.clone();
    uniq.dedup();
    if (1..chars.len()).any(|i| chars[..i].contains(&chars[i])) {
        return Err(bad(
            "Einsum",
            format!("repeated index in '{term}' (diagonals are not supported)"),
        ));
    }
    let present: Vec<char> = order
        .iter()
        .copied()
        .filter(|c| chars.contains(c))
        .collect();
    let perm: Vec<usize> = present
        .iter()
        .map(|c| chars.iter().position(|d| d == c).unwrap_or(0))
        .collect();
    let xp = x.try_permute(&perm)?;
    let s = x.shape();
    let shape: Vec<usize> = order
        .iter()
        .map(|c| chars.iter().position(|d| d == c).map_or(1, |i| s[i]))
        .collect();
    xp.try_reshape(&isz(&shape))
}
