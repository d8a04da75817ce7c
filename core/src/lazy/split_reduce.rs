//! The long-reduction rule: where a float sum splits (part of the numeric contract).
//!
//! A sequential f32 accumulator stops growing once it is 2^24 times larger than what it adds
//! (summed one by one, 16,781,312 ones give 16,777,216). So a float `Sum` whose *length* — the
//! product of its reduced dimensions — is above [`SPLIT_THRESHOLD`] is built in two levels:
//! the reduced axes are flattened (row-major, in their original order) into one axis of length
//! `L`; with `C` the smallest power of two ≥ √L, the first `q = L / C` blocks of `C`
//! consecutive elements are each summed, the `q` block sums are summed in order, and the sum of
//! the `r = L mod C` leftover elements (when there are any) is added last. Every reduce built
//! here goes through the same rule, so a level still longer than the threshold splits again
//! (`L` above 2^32). The error then grows with about 2√L additions instead of `L`.
//!
//! Why in the lazy graph, when the reduce node is made: the rule fixes the order of the
//! arithmetic, so it is part of the value the graph stands for, not an optimization. Built into
//! the graph it is the same on every device, in the interpreter, the JIT and export, and in the
//! unoptimized lowering; the kernel optimizer keeps each kernel's accumulation order, so
//! optimized kernels stay bit-identical to unoptimized ones. (The tensor frontend only composes
//! ops, and the scheduler only groups the graph's nodes into kernels: neither decides an order.)
//! The leftover elements are summed on their own rather than padded with zeros: the scheduler
//! realizes an unrealized source read through padding, which for `sum(a * b)` of a matmul would
//! be the whole product.
//!
//! Invariants: the result has the plain reduce's shape (reduced axes kept as 1); a reduce that is
//! not a float sum, not longer than the threshold, or over a tensor with a symbolic dimension is
//! the plain reduce node, unchanged.

use alloc::vec::Vec;

use super::LazyBuffer;
use crate::error::Result;
use crate::ops::{AluOp, ReduceOp};
use crate::shape::Sint;

/// Float sums longer than this split. 2^16: far below 2^24, where an f32 accumulator of ones
/// stops growing, and above the reductions of ordinary layers (a matmul's or a convolution's
/// inner length, a batch norm over a batch of images), whose kernels stay as they were — the
/// same order of magnitude as tinygrad's `REDUCEOP_SPLIT_THRESHOLD` (2^15).
pub const SPLIT_THRESHOLD: u64 = 1 << 16;

/// The block length for a reduction of length `len`: the smallest power of two ≥ √len, so both
/// levels are at most about 2√len long.
pub fn block_len(len: u64) -> u64 {
    let mut c = 1u64;
    while c.saturating_mul(c) < len {
        c *= 2;
    }
    c
}

/// The split form of `x.reduce(op, axes)` (axes sorted, deduplicated, in range) when the rule
/// applies, else `None`.
pub(super) fn split_sum(
    x: &LazyBuffer,
    op: ReduceOp,
    axes: &[usize],
) -> Result<Option<LazyBuffer>> {
    let Some(dims) = const_dims(x.shape()) else {
        return Ok(None);
    };
    let len: u64 = axes.iter().map(|&a| dims[a]).product();
    if op != ReduceOp::Sum || !x.dtype().is_float() || len <= SPLIT_THRESHOLD {
        return Ok(None);
    }
    let out_shape: Vec<Sint> = (dims.iter().enumerate())
        .map(|(i, &d)| Sint::cst(if axes.contains(&i) { 1 } else { d as i64 }))
        .collect();
    let keep: Vec<Sint> = (dims.iter().enumerate())
        .filter(|(i, _)| !axes.contains(i))
        .map(|(_, &d)| Sint::cst(d as i64))
        .collect();
    let rows = flatten(x, axes, &keep, len)?;
    let block = block_len(len);
    let (q, r) = (len / block, len % block);
    let total = sum_blocks(&rows, &keep, q, block)?;
    let total = if r > 0 {
        let rest = slice_last(&rows, &keep, q * block, len)?;
        let rest = rest.reduce(ReduceOp::Sum, &[keep.len()])?;
        total.alu(AluOp::Add, &[&rest])?
    } else {
        total
    };
    Ok(Some(total.reshape(&out_shape)?))
}

/// The dimensions, when all are constant.
fn const_dims(shape: &[Sint]) -> Option<Vec<u64>> {
    shape
        .iter()
        .map(|d| d.as_const().and_then(|v| u64::try_from(v).ok()))
        .collect()
}

/// `x` with the kept axes first and the reduced ones flattened into a last axis of `len`.
fn flatten(x: &LazyBuffer, axes: &[usize], keep: &[Sint], len: u64) -> Result<LazyBuffer> {
    let rank = x.shape().len();
    let mut order: Vec<usize> = (0..rank).filter(|a| !axes.contains(a)).collect();
    order.extend_from_slice(axes);
    let mut shape = keep.to_vec();
    shape.push(Sint::cst(len as i64));
    x.permute(&order)?.reshape(&shape)
}

/// The elements `[start, end)` of the last axis of `rows` (shape `keep + [len]`).
fn slice_last(rows: &LazyBuffer, keep: &[Sint], start: u64, end: u64) -> Result<LazyBuffer> {
    let mut arg: Vec<(i64, i64)> = keep
        .iter()
        .map(|d| (0, d.as_const().unwrap_or(0)))
        .collect();
    arg.push((start as i64, end as i64));
    rows.shrink(&arg)
}

/// The sum of the first `q` blocks of `block` elements of each row: each block summed, then the
/// block sums in order. Shape `keep + [1]`.
fn sum_blocks(rows: &LazyBuffer, keep: &[Sint], q: u64, block: u64) -> Result<LazyBuffer> {
    let k = keep.len();
    let mut blocks = keep.to_vec();
    blocks.extend([Sint::cst(q as i64), Sint::cst(block as i64)]);
    let sums = slice_last(rows, keep, 0, q * block)?
        .reshape(&blocks)?
        .reduce(ReduceOp::Sum, &[k + 1])?;
    blocks.truncate(k + 1);
    sums.reshape(&blocks)?.reduce(ReduceOp::Sum, &[k])
}
