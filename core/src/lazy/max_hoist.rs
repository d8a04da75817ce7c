//! Monotone epilogues out of a float MAX reduce: `max_i relu(a_i + b) = relu(max_i a_i + b)`.
//!
//! A max pooling over `relu(conv + bias)` applies the bias and the ReLU to every element of a
//! window and keeps one. When an elementwise op `f(v) = op(v, c)` is monotone non-decreasing in
//! the pooled value `v` and its other operand `c` is the same along the reduced axes, the first
//! maximum of `f(a_i)` has the value of `f(max_i a_i)`, so the op runs once per output instead of
//! once per element. The rewrite peels such ops off the reduce's input while the table below
//! allows it, reduces what is left, and applies the peeled ops, in their order, to the maximum.
//!
//! Why in the lazy graph, when the reduce node is made: like the long-sum rule
//! (`split_reduce.rs`), it changes the arithmetic the graph stands for, so it belongs where it is
//! the same on every device, in the interpreter, the JIT and export (host and device give the
//! same bits whatever NaN or zero signs come in); the scheduler then sees an ordinary max reduce
//! with an elementwise epilogue.
//!
//! Exactness (the max reduce is `acc < x ? x : acc` from `-inf`, so it keeps the first of equal
//! values and skips NaN; `max(u, w)` is `u < w ? w : u`). For inputs without NaN the value is
//! always the same; the bits are the same unless
//! - an added (subtracted) operand or product is ±inf (then `-inf + inf` makes a NaN the unhoisted form
//!   skips), or
//! - a `max(v, c)` with the pooled value first (ReLU) collapses a window whose first element is
//!   below `c` while a later one is the zero of the other sign than `c` (`relu` of `[-1, -0]` is
//!   `[+0, -0]`, whose first maximum is `+0`; `relu(max) = relu(-0) = -0`). Rounding never makes
//!   a `-0` from an add or subtract except from `-0 + -0` (`-0 - +0`), so with a bias other than
//!   `-0` this needs a `-0` pooled value.
//!
//! A NaN element is skipped by both forms (the ops here pass a NaN pooled value through, or turn
//! it into `c` for `max(c, v)`, which cannot exceed the maximum). A window of only NaN gives
//! `f(-inf)` (0 for `relu(x + b)`) instead of `-inf`.
//!
//! Invariants: the result has the plain reduce's shape and dtype; only float MAX reduces over an
//! unpadded view of an unrealized elementwise node are rewritten; the peeled ops' other operands
//! are read at the reduce's output positions (their reduced axes shrunk to 1), which is where
//! they were constant.

use alloc::vec::Vec;

use super::{LazyBuffer, LazyOp};
use crate::error::Result;
use crate::ops::{AluOp, ReduceOp};
use crate::shape::Sint;

/// The rule table: which operand of `op` may be the pooled value `v`, given that every other
/// operand is constant along the reduced axes (`c`), so that `max_i op(.., a_i, ..) =
/// op(.., max_i a_i, ..)`.
fn pooled_operand(op: AluOp) -> &'static [usize] {
    match op {
        // max_i (a_i + c) = (max_i a_i) + c, and c + a_i alike: rounding to nearest is monotone.
        AluOp::Add => &[0, 1],
        // max_i (a_i - c) = (max_i a_i) - c (not c - a_i: that order reverses).
        AluOp::Sub => &[0],
        // max_i max(a_i, c) = max(max_i a_i, c), either operand order (ReLU, clamp's lower bound).
        AluOp::Max => &[0, 1],
        // max_i (a·b + v_i) = a·b + max_i v_i, the product rounded once or not at all.
        AluOp::MulAcc | AluOp::Fma => &[2],
        // Not monotone non-decreasing in one operand for every value of the others (a negative
        // factor or divisor, `x·0` at inf, wrapping, periodic or decreasing functions), or not
        // float-valued.
        AluOp::Exp2
        | AluOp::Log2
        | AluOp::Sin
        | AluOp::Sqrt
        | AluOp::Neg
        | AluOp::Recip
        | AluOp::Mul
        | AluOp::Div
        | AluOp::Mod
        | AluOp::CmpLt
        | AluOp::CmpEq
        | AluOp::Xor
        | AluOp::And
        | AluOp::Or
        | AluOp::FloorDiv
        | AluOp::FloorMod
        | AluOp::Where
        | AluOp::MulWide
        | AluOp::Requant
        | AluOp::Clamp => &[],
    }
}

/// One peeled op: the op, where the pooled value goes, and the other operands already read at
/// the output positions (`None` at the pooled value's place).
struct Peeled {
    op: AluOp,
    srcs: Vec<Option<LazyBuffer>>,
}

/// The hoisted form of `x.reduce(op, axes)` (axes sorted, deduplicated, in range) when at least
/// one op peels off, else `None`.
pub(super) fn hoist(x: &LazyBuffer, op: ReduceOp, axes: &[usize]) -> Result<Option<LazyBuffer>> {
    if op != ReduceOp::Max || !x.dtype().is_float() {
        return Ok(None);
    }
    let mut peeled: Vec<Peeled> = Vec::new();
    let mut inner = x.clone();
    while let Some((p, next)) = peel(&inner, axes)? {
        peeled.push(p);
        inner = next;
    }
    if peeled.is_empty() {
        return Ok(None);
    }
    let mut out = inner.reduce(ReduceOp::Max, axes)?;
    for p in peeled.iter().rev() {
        let srcs: Vec<LazyBuffer> = p
            .srcs
            .iter()
            .map(|s| s.clone().unwrap_or_else(|| out.clone()))
            .collect();
        out = srcs[0].alu(p.op, &srcs[1..].iter().collect::<Vec<_>>())?;
    }
    Ok(Some(out))
}

/// Peels the outermost op of `x` (a view of an elementwise base) when the table allows it: the
/// op, and the pooled operand read through `x`'s view.
fn peel(x: &LazyBuffer, axes: &[usize]) -> Result<Option<(Peeled, LazyBuffer)>> {
    let base = x.base();
    let Some((LazyOp::Alu(op), srcs)) = base.op() else {
        return Ok(None);
    };
    // Padding of an op's result is 0, not the op applied to its operands' padding.
    if base.realized().is_some() || x.st().has_mask() {
        return Ok(None);
    }
    let (op, srcs) = (*op, srcs.to_vec());
    let seen: Vec<LazyBuffer> = srcs
        .iter()
        .map(|s| Ok(s.view_through(s.st().concat(x.st())?)))
        .collect::<Result<_>>()?;
    for &at in pooled_operand(op) {
        if seen[at].dtype() != x.dtype() {
            continue;
        }
        let others_invariant = (seen.iter().enumerate())
            .filter(|&(i, _)| i != at)
            .all(|(_, s)| invariant(s, axes));
        if !others_invariant {
            continue;
        }
        let mut out_srcs = Vec::with_capacity(seen.len());
        for (i, s) in seen.iter().enumerate() {
            out_srcs.push(if i == at {
                None
            } else {
                Some(at_outputs(s, axes)?)
            });
        }
        let p = Peeled { op, srcs: out_srcs };
        return Ok(Some((p, seen[at].clone())));
    }
    Ok(None)
}

/// Does `s` read the same element all along each reduced axis?
fn invariant(s: &LazyBuffer, axes: &[usize]) -> bool {
    let strides = s.st().real_strides();
    let shape = s.shape();
    axes.iter().all(|&a| {
        shape[a].as_const() == Some(1)
            || strides[a].as_ref().and_then(|st| st.as_const()) == Some(0)
    })
}

/// `s` (constant along `axes`) at the reduce's output positions: each reduced axis shrunk to 1.
fn at_outputs(s: &LazyBuffer, axes: &[usize]) -> Result<LazyBuffer> {
    let arg: Vec<(Sint, Sint)> = (s.shape().iter().enumerate())
        .map(|(i, d)| {
            let end = if axes.contains(&i) {
                Sint::cst(1)
            } else {
                d.clone()
            };
            (Sint::cst(0), end)
        })
        .collect();
    s.shrink_nodes(&arg)
}
