//! Indexing ops, all lazy: GatherElements and ScatterElements (and the old Scatter) are the
//! shared `gather`/`scatter`/`scatter_reduce` after wrapping negative indices; Gather compares
//! the indices with an `arange` and selects-and-sums along the indexed axis. Also Einsum, as one
//! broadcast product summed over the contracted letters.

use picograd_core::tensor::ScatterReduce;
use picograd_core::{DType, Result, Tensor};

use super::super::node::{bad, Node};
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

fn gather(n: &Node) -> Result<Vec<Tensor>> {
    let data = n.input(0)?;
    let ds = data.shape();
    let a = dim_axis("Gather", n.int("axis", 0), ds.len())?;
    let is = n.input(1)?.shape();
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
