//! Reduce blocking for the L1 cache: when the operands one kernel body reuses across its
//! innermost output loop (a pointwise conv's weight rows, read again for every step of
//! pixels) span more than half the target's L1 over the whole reduce, the outermost reduce loop
//! runs in blocks ([`Opt::ReduceBlock`]) whose slice of those operands fits that half; each
//! block then reads them from the L1 for every output step instead of streaming them from the
//! L2 each time.
//!
//! - Heuristic: bytes per iteration of the outermost reduce loop of the loads that do not move
//!   with the innermost global loop and do move with the reduce (`reused`); when `reused × len`
//!   exceeds `OptConfig::l1_bytes / 2`, blocks of `l1_bytes / 2 / reused` iterations, evened out
//!   over the blocks they make (960 iterations by 128 → 8 blocks of 120). Nothing on a target
//!   without a data cache (`l1_bytes` 0), for a loop too short to split into blocks of at least
//!   [`MIN_BLOCK`] iterations, or where no output loop reuses anything.
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
fn block_for(k: &Kernel, cfg: &OptConfig) -> Option<usize> {
    let half = cfg.l1_bytes / 2;
    let (r, rank) = (k.first_reduce, k.rank());
    if half == 0 || r >= k.first_upcast || k.reduce_block.is_some() {
        return None;
    }
    let len = usize::try_from(size(k, r)).ok()?;
    // The innermost output loop: the loads that keep their place along it are reused by it.
    let inner = (0..r).rev().find(|&a| size(k, a) > 1)?;
    let mut reused = 0usize;
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
        if moves(inner) || !moves(r) {
            continue;
        }
        // The elements one iteration of the reduce loop reads: every inner reduce loop and
        // every unrolled copy this load moves along.
        let elems: usize = (r + 1..rank)
            .filter(|&a| moves(a))
            .map(|a| size(k, a).max(1) as usize)
            .product();
        reused += elems * n.dtype().itemsize();
    }
    if reused == 0 || reused.saturating_mul(len) <= half {
        return None;
    }
    let b = half / reused;
    if b < MIN_BLOCK || b >= len {
        return None;
    }
    // Even blocks: as many as `b` needs, each as long as that many need.
    let blocks = len.div_ceil(b);
    Some(len.div_ceil(blocks))
}
