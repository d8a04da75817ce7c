//! Integer widening chains fuse through expanding and padding views. A quantized conv reads its
//! input as `cast(x, i16) - cast(zero_point, i16)` through the window view (an expand, and a
//! mask where it pads): realizing that value (the general rule for unsafe views) stores an i16
//! copy of every padded activation beside the int8 one, twice its RAM. A chain of at most
//! [`MAX_OPS`] integer casts that do not narrow, adds and subtracts is computed where it is
//! read instead, from its leaves (realized buffers, constants, or the bases this module says
//! to realize in its place). So is an integer pad with a value — `where(pad(true), pad(x), v)`
//! with a constant condition and a constant `v`, as [`crate::Tensor::try_pad_value`] builds it
//! (a quantized conv whose input is padded with its zero point, so that it multiplies the
//! stored 8-bit values as they are) — when the view reading the chain has no mask, and when
//! the padded source is itself the output of a kernel with a reduce (a previous conv's
//! requantized output, which is realized anyway). A padded source computed by elementwise ops
//! alone (a float input's quantize) is not fused: the select is realized, a padded copy of
//! one pass over the padded elements that the consumer reads unmasked (an unpadded conv's
//! reads, which a packed dual multiply-accumulate can take as words) instead of gating each
//! of its taps; it adds the padding's bytes while the copy lives.
//!
//! Invariant: fusing computes what realizing the chain would. A chain read through a mask must
//! be zero-preserving — every leaf read through a mask is 0 outside it (a gated load, a gated
//! constant), and an integer cast, add or subtract of zeros is 0 — so fusing it through
//! padding computes what realizing it and padding with 0 would: padding taps read 0 after the
//! zero point is subtracted, the exact padding value of a centered input. A select is not
//! zero-preserving (outside its condition's mask it gives `v`), so it is fused only where the
//! reading view masks nothing: there every position the chain is read at is one it computes,
//! the select's own masks included. Recomputing it per read costs at most [`MAX_OPS`] integer
//! ops.

use alloc::vec;
use alloc::vec::Vec;

use crate::lazy::{LazyBuffer, LazyOp};
use crate::ops::AluOp;

/// The longest chain fused through an expanding view (its ops are recomputed per read).
const MAX_OPS: usize = 3;

/// If `b` is a widening chain (see the module doc), the bases its kernel must read realized
/// (its unrealized, non-constant leaves); `None` when it is not one. `masked`: the view that
/// reads `b` has a mask (then a pad-with-value select is not fused).
pub(super) fn widening_leaves(b: &LazyBuffer, masked: bool) -> Option<Vec<LazyBuffer>> {
    let mut leaves: Vec<LazyBuffer> = Vec::new();
    let mut ops = 0;
    let mut select = false;
    let mut stack = vec![b.clone()];
    while let Some(n) = stack.pop() {
        let base = n.base();
        if base.realized().is_some() || matches!(base.op(), Some((LazyOp::Const(_), _))) {
            continue;
        }
        let (op, srcs) = base.op()?;
        if !chain_op(op, srcs, base, masked) {
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
        select |= matches!(op, LazyOp::Alu(AluOp::Where));
        stack.extend(srcs.iter().cloned());
    }
    // A padded value whose source is computed by elementwise ops alone is realized padded
    // instead (see the module doc).
    if select && leaves.iter().any(elementwise) {
        return None;
    }
    Some(leaves)
}

/// The most distinct nodes [`elementwise`] visits (it is called on a select's few leaves); a
/// longer chain counts as not elementwise.
const MAX_WALK: usize = 256;

/// Is unrealized `b` computed by elementwise ops alone from buffers and constants (no reduce
/// in the kernel that computes it)?
fn elementwise(b: &LazyBuffer) -> bool {
    let mut stack = vec![b.clone()];
    let mut seen: Vec<usize> = Vec::new();
    while let Some(n) = stack.pop() {
        let base = n.base();
        if base.realized().is_some() || seen.contains(&base.id()) {
            continue;
        }
        seen.push(base.id());
        if seen.len() > MAX_WALK {
            return false;
        }
        match base.op() {
            Some((LazyOp::Alu(_) | LazyOp::Cast | LazyOp::Bitcast, srcs)) => {
                stack.extend(srcs.iter().cloned())
            }
            // A buffer (a capture's input placeholder) is read, not computed.
            Some((LazyOp::Const(_) | LazyOp::Buffer, _)) => {}
            Some((LazyOp::Reduce(..) | LazyOp::Contiguous | LazyOp::Copy | LazyOp::Assign, _))
            | None => return false,
        }
    }
    true
}

/// Is `op` (computing `b` from `srcs`) one a widening chain may hold: an integer cast that
/// does not narrow, an integer add or subtract, or (read through no mask: `masked` false) an
/// integer select between constants' views and one source, a pad with a value?
fn chain_op(op: &LazyOp, srcs: &[LazyBuffer], b: &LazyBuffer, masked: bool) -> bool {
    let int = |x: &LazyBuffer| x.dtype().is_int();
    let constant = |x: Option<&LazyBuffer>| {
        x.is_some_and(|x| matches!(x.base().op(), Some((LazyOp::Const(_), _))))
    };
    match op {
        LazyOp::Cast => {
            srcs.first()
                .is_some_and(|s| int(s) && s.dtype().itemsize() <= b.dtype().itemsize())
                && int(b)
        }
        LazyOp::Alu(AluOp::Add | AluOp::Sub) => int(b),
        LazyOp::Alu(AluOp::Where) => {
            !masked && int(b) && constant(srcs.first()) && constant(srcs.get(2))
        }
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
