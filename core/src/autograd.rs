//! Autograd: the differentiable primitives and their backward rules, and the reverse pass.
//!
//! Every Tensor operation lowers to one of the primitives in [`FnKind`] (elementwise ALU ops,
//! reductions, movement ops, casts), so every composed op gets its gradient for free. A result
//! that needs a gradient keeps a [`Function`]: which primitive made it, its parents, and the lazy
//! values backward needs. Backward rules are written on LazyBuffers, like tinygrad's mlops, so
//! computing a gradient builds more lazy graph (fused and run like anything else) and never
//! recurses into autograd.
//!
//! Invariant: a rule returns one gradient per parent, shaped and typed like that parent, or `None`
//! where no gradient flows (comparisons, integer ops, the condition of `where`).

use alloc::vec::Vec;

use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::lazy::LazyBuffer;
use crate::ops::{AluOp, ReduceOp, Scalar};
use crate::shape::Sint;

/// Which primitive made a tensor.
#[derive(Clone, Debug)]
pub enum FnKind {
    /// An elementwise op over same-shaped, same-dtype operands.
    Alu(AluOp),
    /// A reduction over axes (kept as size 1).
    Reduce(ReduceOp, Vec<usize>),
    /// A reshape.
    Reshape,
    /// A permutation of axes.
    Permute(Vec<usize>),
    /// An expand of size-1 axes.
    Expand,
    /// Zero padding `(before, after)` per axis.
    Pad(Vec<(i64, i64)>),
    /// Keeping `[start, end)` per axis.
    Shrink(Vec<(i64, i64)>),
    /// A pad whose amounts may be symbolic (`Tensor::try_pad_sym`).
    PadSym(Vec<(crate::shape::Sint, crate::shape::Sint)>),
    /// A shrink whose bounds may be symbolic (`Tensor::try_shrink_sym`).
    ShrinkSym(Vec<(crate::shape::Sint, crate::shape::Sint)>),
    /// Every `k`-th element per axis; negative flips.
    Stride(Vec<i64>),
    /// A dtype conversion.
    Cast,
    /// A materialized copy.
    Contiguous,
    /// The identity, whose gradient is materialized (a kernel boundary in the backward pass).
    ContiguousBackward,
    /// A copy to another device.
    Copy,
}

/// How a tensor was made: the primitive, the parents' values at that time, and its own value.
#[derive(Clone, Debug)]
pub struct Function {
    /// The primitive.
    pub kind: FnKind,
    /// The parents' lazy values, in operand order.
    pub inputs: Vec<LazyBuffer>,
    /// The result's lazy value.
    pub out: LazyBuffer,
}

fn konst(like: &LazyBuffer, v: f64) -> LazyBuffer {
    LazyBuffer::constant(
        like.device(),
        Scalar::from_f64(v, like.dtype()),
        like.shape(),
    )
}

fn alu(op: AluOp, srcs: &[&LazyBuffer]) -> Result<LazyBuffer> {
    srcs[0].alu(op, &srcs[1..])
}

fn mul(a: &LazyBuffer, b: &LazyBuffer) -> Result<LazyBuffer> {
    alu(AluOp::Mul, &[a, b])
}

fn div(a: &LazyBuffer, b: &LazyBuffer) -> Result<LazyBuffer> {
    alu(AluOp::Div, &[a, b])
}

/// A 0/1 mask in the gradient's dtype.
fn mask(cond: &LazyBuffer, dtype: DType) -> LazyBuffer {
    cond.cast(dtype)
}

/// Sums `g` over the axes where `shape` has 1 and `g` does not (the reverse of an expand).
fn sum_to(g: &LazyBuffer, shape: &[Sint]) -> Result<LazyBuffer> {
    let axes: Vec<usize> = g
        .shape()
        .iter()
        .zip(shape)
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i)
        .collect();
    g.reduce(ReduceOp::Sum, &axes)
}

impl Function {
    /// The gradient of each parent, given the gradient of the result.
    pub fn backward(&self, g: &LazyBuffer) -> Result<Vec<Option<LazyBuffer>>> {
        let x = &self.inputs;
        match &self.kind {
            FnKind::Alu(op) => alu_backward(*op, x, &self.out, g),
            FnKind::Reduce(op, axes) => Ok(alloc::vec![Some(reduce_backward(
                *op, axes, &x[0], &self.out, g
            )?)]),
            FnKind::Reshape => Ok(alloc::vec![Some(g.reshape(x[0].shape())?)]),
            FnKind::Permute(order) => {
                let mut inv = alloc::vec![0usize; order.len()];
                order.iter().enumerate().for_each(|(i, &a)| inv[a] = i);
                Ok(alloc::vec![Some(g.permute(&inv)?)])
            }
            FnKind::Expand => Ok(alloc::vec![Some(sum_to(g, x[0].shape())?)]),
            FnKind::Pad(arg) => {
                let sh: Vec<(i64, i64)> = arg
                    .iter()
                    .zip(x[0].shape())
                    .map(|(&(b, _), d)| (b, b + d.vmax()))
                    .collect();
                Ok(alloc::vec![Some(g.shrink(&sh)?)])
            }
            FnKind::Shrink(arg) => {
                let pd: Vec<(i64, i64)> = arg
                    .iter()
                    .zip(x[0].shape())
                    .map(|(&(b, e), d)| (b, d.vmax() - e))
                    .collect();
                Ok(alloc::vec![Some(g.pad(&pd)?)])
            }
            FnKind::PadSym(arg) => {
                let sh: Vec<_> = arg
                    .iter()
                    .zip(x[0].shape())
                    .map(|((b, _), d)| (b.clone(), b + d))
                    .collect();
                Ok(alloc::vec![Some(g.shrink_nodes(&sh)?)])
            }
            FnKind::ShrinkSym(arg) => {
                let pd: Vec<_> = arg
                    .iter()
                    .zip(x[0].shape())
                    .map(|((b, e), d)| (b.clone(), d - e))
                    .collect();
                Ok(alloc::vec![Some(g.pad_nodes(&pd)?)])
            }
            FnKind::Stride(steps) => Ok(alloc::vec![Some(unstride(g, steps, x[0].shape())?)]),
            FnKind::Cast => {
                let back = if x[0].dtype().is_float() {
                    Some(g.cast(x[0].dtype()))
                } else {
                    None
                };
                Ok(alloc::vec![back])
            }
            FnKind::Contiguous => Ok(alloc::vec![Some(g.clone())]),
            FnKind::ContiguousBackward => Ok(alloc::vec![Some(g.contiguous())]),
            FnKind::Copy => Ok(alloc::vec![Some(g.copy_to(x[0].device()))]),
        }
    }
}

fn alu_backward(
    op: AluOp,
    x: &[LazyBuffer],
    out: &LazyBuffer,
    g: &LazyBuffer,
) -> Result<Vec<Option<LazyBuffer>>> {
    use AluOp::*;
    let ln2 = core::f64::consts::LN_2;
    let one = |v: LazyBuffer| Ok(alloc::vec![Some(v)]);
    match op {
        Neg => one(alu(Neg, &[g])?),
        // d 2^x = 2^x ln2
        Exp2 => one(mul(g, &mul(out, &konst(out, ln2))?)?),
        // d log2 x = 1 / (x ln2)
        Log2 => one(div(g, &mul(&x[0], &konst(g, ln2))?)?),
        // d sin x = cos x = sin(pi/2 - x)
        Sin => {
            let c = alu(
                Sin,
                &[&alu(
                    Sub,
                    &[&konst(g, core::f64::consts::FRAC_PI_2), &x[0]],
                )?],
            )?;
            one(mul(g, &c)?)
        }
        // d sqrt x = 1 / (2 sqrt x)
        Sqrt => one(div(g, &mul(out, &konst(out, 2.0))?)?),
        // d (1/x) = -1/x^2
        Recip => one(alu(Neg, &[&mul(g, &mul(out, out)?)?])?),
        Add => Ok(alloc::vec![Some(g.clone()), Some(g.clone())]),
        Sub => Ok(alloc::vec![Some(g.clone()), Some(alu(Neg, &[g])?)]),
        Mul => Ok(alloc::vec![Some(mul(g, &x[1])?), Some(mul(g, &x[0])?)]),
        Div => {
            let ga = div(g, &x[1])?;
            let gb = alu(Neg, &[&div(&mul(g, &x[0])?, &mul(&x[1], &x[1])?)?])?;
            Ok(alloc::vec![Some(ga), Some(gb)])
        }
        Max => max_backward(x, g),
        Where => {
            let zero = konst(g, 0.0);
            Ok(alloc::vec![
                None,
                Some(alu(Where, &[&x[0], g, &zero])?),
                Some(alu(Where, &[&x[0], &zero, g])?)
            ])
        }
        MulAcc | Fma => Ok(alloc::vec![
            Some(mul(g, &x[1])?),
            Some(mul(g, &x[0])?),
            Some(g.clone())
        ]),
        CmpLt | CmpEq | Mod | Xor | And | Or | FloorDiv | FloorMod => {
            Ok(alloc::vec![None; op.arity()])
        }
        // Integer kernels are not differentiable: a gradient through them is a user error.
        MulWide | Requant | Clamp => Err(Error::dtype(
            op.name(),
            alloc::format!("{} is an integer-only op and has no gradient", op.name()),
        )),
    }
}

/// max(a, b): the larger operand takes the gradient; a tie splits it evenly.
fn max_backward(x: &[LazyBuffer], g: &LazyBuffer) -> Result<Vec<Option<LazyBuffer>>> {
    let d = g.dtype();
    let half = konst(g, 0.5);
    let tie = mul(&mask(&alu(AluOp::CmpEq, &[&x[0], &x[1]])?, d), &half)?;
    let a_wins = alu(
        AluOp::Add,
        &[&mask(&alu(AluOp::CmpLt, &[&x[1], &x[0]])?, d), &tie],
    )?;
    let b_wins = alu(
        AluOp::Add,
        &[&mask(&alu(AluOp::CmpLt, &[&x[0], &x[1]])?, d), &tie],
    )?;
    Ok(alloc::vec![Some(mul(g, &a_wins)?), Some(mul(g, &b_wins)?)])
}

fn reduce_backward(
    op: ReduceOp,
    axes: &[usize],
    x: &LazyBuffer,
    out: &LazyBuffer,
    g: &LazyBuffer,
) -> Result<LazyBuffer> {
    let full = x.shape();
    match op {
        ReduceOp::Sum => g.expand(full),
        // The maxima share the gradient equally.
        ReduceOp::Max => {
            let hit = mask(&alu(AluOp::CmpEq, &[x, &out.expand(full)?])?, g.dtype());
            let count = hit.reduce(ReduceOp::Sum, axes)?;
            mul(&hit, &div(g, &count)?.expand(full)?)
        }
    }
}

/// The gradient of a strided view: place each gradient back at its source position, zeros in
/// between. Forward reads `x[i*k]` (or `x[(d-1) - i*|k|]` for a negative step), so per axis:
/// interleave with zeros by pad + reshape, trim to the source length, and flip last.
fn unstride(g: &LazyBuffer, steps: &[i64], full: &[Sint]) -> Result<LazyBuffer> {
    let flips: Vec<i64> = steps.iter().map(|&s| s.signum()).collect();
    let mut g = g.clone();
    for (axis, &s) in steps.iter().enumerate() {
        let k = s.unsigned_abs() as i64;
        if k == 1 {
            continue;
        }
        let shape: Vec<Sint> = g.shape().to_vec();
        let m = shape[axis].vmax();
        let mut split = shape.clone();
        split.insert(axis + 1, Sint::cst(1));
        let mut pad = alloc::vec![(0i64, 0i64); split.len()];
        pad[axis + 1] = (0, k - 1);
        let mut merged = shape.clone();
        merged[axis] = Sint::cst(m * k);
        g = g.reshape(&split)?.pad(&pad)?.reshape(&merged)?;
        let mut trim: Vec<(i64, i64)> = merged.iter().map(|d| (0, d.vmax())).collect();
        trim[axis] = (0, full[axis].vmax());
        g = g.shrink(&trim)?;
    }
    if flips.iter().any(|&s| s < 0) {
        g = g.stride(&flips)?;
    }
    if g.shape() != full {
        return Err(Error::shape(
            "stride backward",
            alloc::format!("gradient shape {:?} does not match {:?}", g.shape(), full),
        ));
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The integer-only ops have no gradient rule: asking for one is an error naming the op.
    #[test]
    fn integer_ops_refuse_a_gradient() {
        let dev: alloc::sync::Arc<dyn crate::device::Device> =
            alloc::sync::Arc::new(crate::interp::Interp::new());
        let c = |v: f64, dt: DType| {
            LazyBuffer::constant(
                &dev,
                Scalar::from_f64(v, dt),
                &[crate::symbolic::Node::cst(2)],
            )
        };
        let (a, acc) = (c(3.0, DType::I8), c(7.0, DType::I32));
        for (op, x) in [
            (AluOp::MulWide, alloc::vec![a.clone(), a]),
            (
                AluOp::Requant,
                alloc::vec![acc.clone(), acc.clone(), acc.clone()],
            ),
        ] {
            let e = alu_backward(op, &x, &acc, &acc).unwrap_err();
            assert!(alloc::format!("{e}").contains("no gradient"), "{e}");
        }
    }
}
