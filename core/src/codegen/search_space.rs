//! The candidate space of a measured kernel search, drawn from the strategy table
//! ([`super::strategy::STRATEGIES`]): the hand-coded choice first, then every `Tile` entry's
//! alternatives combined with every `Unroll` entry's (each pair with every `Block` entry's
//! alternative for it), ordered by how close each is to the
//! hand-coded choice (and whether its fastest-varying accumulators are neighbouring outputs) so
//! a time-bounded search tries the likeliest first.
//!
//! Invariants: every candidate applies cleanly to the kernel it was made for, no two candidates
//! lower to the same kernel, and each is made only of the strategies' order-preserving opts,
//! so every candidate computes bit-identical results to the unoptimized kernel.

use alloc::vec::Vec;

use hashbrown::HashSet;

use super::kernel::{Kernel, Opt};
use super::opt::OptConfig;
use super::strategy::{hand_coded, space, Stage};
use crate::ast::{Ast, AstOp};

/// Up to `limit` candidate opt lists for `k`, the hand-coded choice first, then the others
/// nearest to it first (none at all is among them). Each applies to a clone of `k` in order.
pub fn candidates(k: &Kernel, cfg: &OptConfig, limit: usize) -> Vec<Vec<Opt>> {
    let mut hand_k = k.clone();
    let hand = hand_coded(&mut hand_k, cfg);
    let target = products(&hand_k);
    let mut seen = HashSet::new();
    seen.insert(signature(&hand_k));
    let contiguous = output_contiguous_axis(k);
    let unrolls = space(k, cfg, Stage::Unroll);
    let mut scored = Vec::new();
    for tile in space(k, cfg, Stage::Tile) {
        // Accumulators vectorize when the fastest-varying upcast is the output-contiguous axis;
        // other tiles are kept, but tried later.
        let penalty = if contiguous.is_some() && tile.fastest != contiguous {
            4
        } else {
            0
        };
        for plan in &unrolls {
            let mut opts = tile.opts.clone();
            opts.extend(plan.opts.iter().copied());
            let Some(out) = applied(k, &opts) else {
                continue;
            };
            let (accs, body) = products(&out);
            if body > cfg.max_unrolled {
                continue;
            }
            // Each tile and unroll, with each block of its outermost reduce loop (none first).
            for block in space(&out, cfg, Stage::Block) {
                let mut opts = opts.clone();
                opts.extend(block.opts.iter().copied());
                let Some(out) = applied(k, &opts) else {
                    continue;
                };
                if !seen.insert(signature(&out)) {
                    continue;
                }
                let d = distance((accs, body), target) + penalty;
                // A block the hand-coded choice did not make is tried after the same tile
                // without one.
                let d = d + u32::from(out.reduce_block != hand_k.reduce_block);
                scored.push((d, opts));
            }
        }
    }
    // A stable sort keeps generation order (table order, smaller tiles first) among equally
    // near ones.
    scored.sort_by_key(|(d, _)| *d);
    let mut out = alloc::vec![hand];
    out.extend(scored.into_iter().map(|(_, o)| o));
    out.truncate(limit.max(1));
    out
}

/// `opts` applied to a clone of `k`, or `None` if one does not fit.
fn applied(k: &Kernel, opts: &[Opt]) -> Option<Kernel> {
    let mut out = k.clone();
    opts.iter()
        .try_for_each(|o| out.apply_opt(*o).ok())
        .map(|_| out)
}

/// What identifies the lowered kernel: the rearranged AST and the section layout.
fn signature(k: &Kernel) -> (Ast, usize, usize, Vec<bool>, Option<usize>) {
    (
        k.ast.clone(),
        k.first_reduce,
        k.first_upcast,
        k.upcast_is_reduce.clone(),
        k.reduce_block,
    )
}

fn size(k: &Kernel, axis: usize) -> usize {
    k.full_shape[axis]
        .as_const()
        .map_or(0, |s| s.max(0) as usize)
}

/// (accumulators, unrolled body copies): the products of the output and of all upcast sizes.
fn products(k: &Kernel) -> (usize, usize) {
    let mut accs = 1;
    let mut body = 1;
    for (i, &red) in k.upcast_is_reduce.iter().enumerate() {
        let s = size(k, k.first_upcast + i).max(1);
        body *= s;
        if !red {
            accs *= s;
        }
    }
    (accs, body)
}

/// How far a candidate's (accumulators, body) is from the hand-coded one's, in doublings.
fn distance(c: (usize, usize), h: (usize, usize)) -> u32 {
    let log = |n: usize| usize::BITS - n.max(1).leading_zeros();
    log(c.0).abs_diff(log(h.0)) + log(c.1).abs_diff(log(h.1))
}

/// The global axis the output is stored contiguously along (stride 1), if any.
fn output_contiguous_axis(k: &Kernel) -> Option<usize> {
    let AstOp::Store { st, .. } = k.ast.op() else {
        return None;
    };
    let strides = st.real_strides();
    (0..k.first_reduce).rev().find(|&a| {
        size(k, a) > 1
            && strides
                .get(a)
                .and_then(|s| s.as_ref().and_then(|n| n.as_const()))
                == Some(1)
    })
}
