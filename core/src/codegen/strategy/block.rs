//! Reduce blocking for the L1 cache: when the operands of one output step (a pointwise conv's
//! weight rows, read again for every step of pixels, and that step's pixels) span more than
//! the target's L1 over the whole reduce, the outermost reduce loop runs in blocks
//! ([`Opt::ReduceBlock`]) whose slice of them fits half of it; each block then reads the reused
//! weights from the L1 for every output step instead of streaming them from the L2 each time.
//!
//! - Heuristic: the bytes one iteration of the outermost reduce loop reads, of the loads that
//!   keep their place along the innermost output loop (`reused`: a conv's weights) and of those
//!   that move along it (`streamed`: its input). When one output step's operands over the
//!   whole reduce, `(reused + streamed) × len`, outgrow `OptConfig::l1_bytes`, and the reused
//!   ones alone, `reused × len`, half of it (a block gains nothing on streamed operands, each
//!   read once per step anyway: a matrix-vector product's weights), blocks of
//!   `l1_bytes / 2 / (reused + streamed)` iterations, evened out over the blocks they make
//!   (a 960-channel reduce of 32 channels × 2 pixels: 136 bytes an iteration, blocks of 120).
//!   Nothing on a target without a data cache (`l1_bytes` 0), for a loop too short to split
//!   into blocks of at least [`MIN_BLOCK`] iterations, where no output loop reuses anything,
//!   or where the register tile already feeds each reused element to [`MIN_REUSE`] or more
//!   multiply-adds (the L2 then keeps up with it).
//!   Measured (2026-11-28, BENCH.md): a 160-channel reduce whose 20 KiB of weights fit the
//!   L1 whole ran 24% slower in two blocks, hence the whole L1 as the threshold.
//! - Search space: no block, or the heuristic's block halved or doubled.
//!
//! Invariant: a block only regroups the iterations of the outermost reduce loop over an outer
//! loop; each output still adds its terms in the same order (the kernel's check), so results are
//! bit-identical.

use alloc::vec::Vec;

use super::facts::{size, try_opt};
use super::Choice;
use crate::ast::AstOp;
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;

/// A tile whose multiply-adds per reused element loaded reach this is not blocked: its
/// register tile already reuses each weight enough that the L2 keeps up. Measured (2026-11-28,
/// BENCH.md): pointwise convs whose channel tile feeds each weight to 2 pixels ran 21–26%
/// faster in blocks; resnet18's 3×3 convs, whose tile feeds each weight to 4 pixels, ran
/// 4–13% slower in 3 of 4 shapes.
const MIN_REUSE: usize = 4;

/// Fewer iterations per block than this are not worth a block: each block loads and stores
/// every output once more.
const MIN_BLOCK: usize = 16;

/// The heuristic's block (see the module doc), taken when it fits.
pub(super) fn choose(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    match block_for(k, cfg) {
        Some(amount) => try_opt(k, Opt::ReduceBlock { axis: 0, amount }, applied),
        None => false,
    }
}

/// No block first, then the heuristic's block, halved and doubled (each where it fits).
pub(super) fn space(k: &Kernel, cfg: &OptConfig) -> Vec<Choice> {
    let mut out = alloc::vec![Choice::none()];
    let Some(b) = block_for(k, cfg) else {
        return out;
    };
    for amount in [b, b / 2, b * 2] {
        let opt = Opt::ReduceBlock { axis: 0, amount };
        if amount >= MIN_BLOCK && k.clone().apply_opt(opt).is_ok() {
            out.push(Choice::new(alloc::vec![opt], None));
        }
    }
    out
}

/// Iterations per block of the outermost reduce loop, or `None` for no block.
pub(super) fn block_for(k: &Kernel, cfg: &OptConfig) -> Option<usize> {
    let half = cfg.l1_bytes / 2;
    let (r, rank) = (k.first_reduce, k.rank());
    if half == 0 || r >= k.first_upcast || k.reduce_block.is_some() {
        return None;
    }
    let len = usize::try_from(size(k, r)).ok()?;
    // The innermost output loop: the loads that keep their place along it are reused by it.
    let inner = (0..r).rev().find(|&a| size(k, a) > 1)?;
    // Bytes one iteration of the reduce loop reads, of the loads the innermost output loop
    // reuses (they keep their place along it) and of those it streams.
    let (mut reused, mut streamed, mut reused_elems) = (0usize, 0usize, 0usize);
    for n in k.ast.nodes() {
        let AstOp::Load { st, .. } = n.op() else {
            continue;
        };
        let strides: Vec<Option<i64>> = st
            .real_strides()
            .iter()
            .map(|s| s.as_ref().and_then(|x| x.as_const()))
            .collect();
        let moves = |a: usize| strides.get(a).copied().flatten() != Some(0);
        if !moves(r) {
            continue;
        }
        // The elements one iteration of the reduce loop reads: every inner reduce loop and
        // every unrolled copy this load moves along.
        let elems: usize = (r + 1..rank)
            .filter(|&a| moves(a))
            .map(|a| size(k, a).max(1) as usize)
            .product();
        let bytes = elems * n.dtype().itemsize();
        if moves(inner) {
            streamed += bytes;
        } else {
            reused += bytes;
            reused_elems += elems;
        }
    }
    // Multiply-adds one iteration of the reduce loop makes: every output of the tile times
    // every inner reduce position.
    let products: usize = (r + 1..rank).map(|a| size(k, a).max(1) as usize).product();
    // Only where each reused element feeds few multiply-adds in registers is streaming it from
    // the L2 for every output step what bounds the kernel (a block keeps it in the L1).
    if products >= MIN_REUSE * reused_elems {
        return None;
    }
    // One output step's operands over the whole reduce fit the L1 (every step after the first
    // finds the reused ones there already), or the reused ones are few (a matrix-vector
    // product's vector): a block would only add its loads and stores of the sums.
    let step = reused + streamed;
    if reused.saturating_mul(len) <= half || step.saturating_mul(len) <= cfg.l1_bytes {
        return None;
    }
    // A block's operands take half the L1 (the rest holds what the output loops bring in).
    let b = half / step;
    if b < MIN_BLOCK || b >= len {
        return None;
    }
    // Even blocks: as many as `b` needs, each as long as that many need.
    let blocks = len.div_ceil(b);
    Some(len.div_ceil(blocks))
}
