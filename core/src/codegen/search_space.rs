//! The candidate space of a measured kernel search: the hand-coded choice first, then register
//! tiles (upcasts of up to two output axes) combined with unrolls of the innermost reduce axes,
//! ordered by how close each is to the hand-coded choice (and whether its fastest-varying
//! accumulators are neighbouring outputs) so a time-bounded search tries the likeliest first.
//!
//! Invariants: every candidate applies cleanly to the kernel it was made for, no two candidates
//! lower to the same kernel, and each is made only of order-preserving opts — upcasts of output
//! axes (each accumulator is still its own) and unrolls that keep the reduce's digit order (an
//! unroll splits the least significant reduce digits off, and later unrolls take the next
//! digits outermost first) — so every candidate computes bit-identical results to the
//! unoptimized kernel.

use alloc::vec::Vec;

use hashbrown::HashSet;

use super::kernel::{Kernel, Opt};
use super::opt::{hand_coded, OptConfig};
use crate::ast::{Ast, AstOp};

/// At most this many unrolled reduce copies: beyond it the body grows without fewer loads.
const MAX_REDUCE_UNROLL: usize = 64;
/// Upcast amounts tried on an output axis (besides its whole size when it is small).
const TILE_AMOUNTS: [usize; 7] = [2, 4, 8, 16, 32, 64, 128];
/// Partial unroll amounts tried on a reduce axis (besides its whole size when it is small).
const UNROLL_AMOUNTS: [usize; 5] = [2, 4, 8, 16, 32];

/// Up to `limit` candidate opt lists for `k`, the hand-coded choice first, then the others
/// nearest to it first (none at all is among them). Each applies to a clone of `k` in order.
pub fn candidates(k: &Kernel, cfg: &OptConfig, limit: usize) -> Vec<Vec<Opt>> {
    let mut hand_k = k.clone();
    let hand = hand_coded(&mut hand_k, cfg);
    let target = products(&hand_k);
    let mut seen = HashSet::new();
    seen.insert(signature(&hand_k));
    let contiguous = output_contiguous_axis(k);
    let mut scored = Vec::new();
    for (tile, last) in tiles(k, cfg) {
        // Accumulators vectorize when the fastest-varying upcast is the output-contiguous axis;
        // other tiles are kept, but tried later.
        let penalty = if contiguous.is_some() && last != contiguous {
            4
        } else {
            0
        };
        for plan in unroll_plans(k) {
            let mut opts = tile.clone();
            opts.extend(plan.iter().copied());
            let Some(out) = applied(k, &opts) else {
                continue;
            };
            let (accs, body) = products(&out);
            if body > cfg.max_unrolled || !seen.insert(signature(&out)) {
                continue;
            }
            scored.push((distance((accs, body), target) + penalty, opts));
        }
    }
    // A stable sort keeps generation order (smaller tiles first) among equally near ones.
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
fn signature(k: &Kernel) -> (Ast, usize, usize, Vec<bool>) {
    (
        k.ast.clone(),
        k.first_reduce,
        k.first_upcast,
        k.upcast_is_reduce.clone(),
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

/// Upcast amounts for an axis of size `s`: the tried amounts that divide it, and the whole
/// axis when it is small.
fn amounts(s: usize, limit: usize, tried: &[usize]) -> Vec<usize> {
    let mut v: Vec<usize> = tried
        .iter()
        .copied()
        .filter(|&a| a <= limit && a <= s && s % a == 0)
        .collect();
    if s > 1 && s <= limit && !v.contains(&s) {
        v.push(s);
    }
    v
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

/// Register tiles as opt lists, each with the (original) axis upcast last: none, one output
/// axis, or two in either order (the last one varies fastest among the accumulators), within
/// `cfg.max_accs` accumulators.
fn tiles(k: &Kernel, cfg: &OptConfig) -> Vec<(Vec<Opt>, Option<usize>)> {
    let axes: Vec<usize> = (0..k.first_reduce).filter(|&a| size(k, a) > 1).collect();
    let mut out = alloc::vec![(Vec::new(), None)];
    for &a in &axes {
        for n in amounts(size(k, a), cfg.max_accs, &TILE_AMOUNTS) {
            out.push((upcasts(k, &[(a, n)]), Some(a)));
        }
    }
    for (i, &a) in axes.iter().enumerate() {
        for &b in &axes[i + 1..] {
            for n in amounts(size(k, a), cfg.max_accs, &TILE_AMOUNTS) {
                for m in amounts(size(k, b), cfg.max_accs / n, &TILE_AMOUNTS) {
                    out.push((upcasts(k, &[(a, n), (b, m)]), Some(b)));
                    out.push((upcasts(k, &[(b, m), (a, n)]), Some(a)));
                }
            }
        }
    }
    out
}

/// Upcasts of (original axis, amount) in order, renumbering axes as whole-axis upcasts remove
/// theirs.
fn upcasts(k: &Kernel, picks: &[(usize, usize)]) -> Vec<Opt> {
    let mut removed: Vec<usize> = Vec::new();
    let mut opts = Vec::new();
    for &(axis, amount) in picks {
        let shift = removed.iter().filter(|&&r| r < axis).count();
        opts.push(Opt::Upcast {
            axis: axis - shift,
            amount,
        });
        if amount == size(k, axis) {
            removed.push(axis);
        }
    }
    opts
}

/// Order-preserving unroll plans: none, or a pivot reduce axis unrolled (partly or wholly)
/// followed by every later reduce axis wholly, outermost first. The unrolled copies then run
/// with the pivot's digit slowest, exactly the digits the loops no longer cover, in order.
fn unroll_plans(k: &Kernel) -> Vec<Vec<Opt>> {
    let reduces: Vec<usize> = (k.first_reduce..k.first_upcast)
        .map(|a| size(k, a))
        .collect();
    let mut out = alloc::vec![Vec::new()];
    for pivot in (0..reduces.len()).rev() {
        let inner: usize = reduces[pivot + 1..].iter().product();
        if inner == 0 || inner > MAX_REDUCE_UNROLL {
            break;
        }
        let s = reduces[pivot];
        for a in amounts(s, MAX_REDUCE_UNROLL / inner, &UNROLL_AMOUNTS) {
            let mut plan = alloc::vec![Opt::Unroll {
                axis: pivot,
                amount: a
            }];
            // A whole-axis unroll removes the pivot, so the next axis takes its place.
            let next = if a == s { pivot } else { pivot + 1 };
            for &r in &reduces[pivot + 1..] {
                plan.push(Opt::Unroll {
                    axis: next,
                    amount: r,
                });
            }
            out.push(plan);
        }
    }
    out
}
