//! Integer widening chains fuse through expanding and padding views. A quantized conv reads its
//! input as `cast(x, i16) - cast(zero_point, i16)` through the window view (an expand, and a
//! mask where it pads): realizing that value (the general rule for unsafe views) stores an i16
//! copy of every padded activation beside the int8 one, twice its RAM. A chain of at most
//! [`MAX_OPS`] integer casts that do not narrow, adds and subtracts is computed where it is
//! read instead, from its leaves (realized buffers, constants, or the bases this module says
//! to realize in its place).
//!
//! Invariant: such a chain is zero-preserving — every leaf read through a mask is 0 outside it
//! (a gated load, a gated constant), and an integer cast, add or subtract of zeros is 0 — so
//! fusing it through padding computes what realizing it and padding with 0 would: padding taps
//! read 0 after the zero point is subtracted, the exact padding value of a centered input.
//! Recomputing it per read costs at most [`MAX_OPS`] integer ops.

use alloc::vec;
use alloc::vec::Vec;

use crate::lazy::{LazyBuffer, LazyOp};
use crate::ops::AluOp;

/// The longest chain fused through an expanding view (its ops are recomputed per read).
const MAX_OPS: usize = 3;

/// If `b` is a widening chain (see the module doc), the bases its kernel must read realized
/// (its unrealized, non-constant leaves); `None` when it is not one.
pub(super) fn widening_leaves(b: &LazyBuffer) -> Option<Vec<LazyBuffer>> {
    let mut leaves: Vec<LazyBuffer> = Vec::new();
    let mut ops = 0;
    let mut stack = vec![b.clone()];
    while let Some(n) = stack.pop() {
        let base = n.base();
        if base.realized().is_some() || matches!(base.op(), Some((LazyOp::Const(_), _))) {
            continue;
        }
        let (op, srcs) = base.op()?;
        if !chain_op(op, srcs, base) {
            if base.ptr_eq(b) {
                return None;
            }
            if !leaves.iter().any(|l| l.ptr_eq(base)) {
                leaves.push(base.clone());
            }
            continue;
        }
        ops += 1;
        if ops > MAX_OPS {
            return None;
        }
        stack.extend(srcs.iter().cloned());
    }
    Some(leaves)
}

/// Is `op` (computing `b` from `srcs`) one a widening chain may hold: an integer cast that
/// does not narrow, or an integer add or subtract?
fn chain_op(op: &LazyOp, srcs: &[LazyBuffer], b: &LazyBuffer) -> bool {
    let int = |x: &LazyBuffer| x.dtype().is_int();
    match op {
        LazyOp::Cast => {
            srcs.first()
                .is_some_and(|s| int(s) && s.dtype().itemsize() <= b.dtype().itemsize())
                && int(b)
        }
        LazyOp::Alu(AluOp::Add | AluOp::Sub) => int(b),
        LazyOp::Alu(_)
        | LazyOp::Bitcast
        | LazyOp::Reduce(..)
        | LazyOp::Buffer
        | LazyOp::Const(_)
        | LazyOp::Contiguous
        | LazyOp::Copy
        | LazyOp::Assign => false,
    }
}
