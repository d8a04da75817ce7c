//! Thread splitting: which loops of a lowered kernel are divided among cores.
//!
//! A kernel is split on one global loop per region: each core runs the iterations
//! `[end * core_id / core_count, end * (core_id + 1) / core_count)` of it, and every loop around
//! it whole. The C calling convention then ends in `int32_t core_id, int32_t core_count`
//! (DESIGN.md, "Kernel calling convention").
//!
//! The loop is the outermost one that divides evenly enough among the cores: a pointwise conv
//! over 3 blocks of channels, split on its channel loop, gives one core twice the other's work
//! (2 of 3 blocks: 1.33× the even share); split on the 14 rows inside it, each core takes 7 of
//! every block's rows. Every core then runs the loops around the split one, which hold only
//! index arithmetic.
//!
//! A region is an outermost loop holding side effects. Most kernels have one; a looped upcast
//! with a remainder (`Opt::LoopedUpcast` on an outermost axis: 96 channels 8 per step, then the
//! 4 left) has two sibling loops, and each core takes its share of both, one after the other.
//!
//! Invariant: a loop is splittable only when every side effect of its region (stores,
//! accumulator definitions and updates) happens inside it and its variable reaches a store's
//! index (a blocked reduce's block loop does not: each block adds to the same outputs), so its
//! iterations are independent
//! (each writes its own outputs, the same for every iteration of the loops around it) and
//! core 0 of 1 computes exactly the unsplit kernel. Several regions split only when no region
//! reads a buffer the kernel writes: a core may run its part of the second region before
//! another core has finished its part of the first.

use super::uops::{LinearKernel, UOp, UOpKind};
use alloc::vec::Vec;
use core::ops::Range;

/// A loop whose share per core is at least this fraction of the even share is split even when a
/// loop inside it would divide more evenly (the outer the split, the larger each core's
/// contiguous part).
const EVEN_ENOUGH: f64 = 0.9;

/// The `Loop` UOps to divide among `cores` cores, one per region (see the module doc), in
/// order, if every region has one: of the loops from the region's start that hold every side
/// effect of the region (nested one in the other), the outermost whose iterations divide evenly
/// enough ([`EVEN_ENOUGH`]), else the most even (the outer on a tie). A loop of symbolic length
/// counts as even.
pub fn split_loops(k: &LinearKernel, cores: usize) -> Option<Vec<usize>> {
    let regions = regions(k)?;
    if regions.len() > 1 && reads_own_output(k) {
        return None;
    }
    regions.into_iter().map(|r| split_in(k, r, cores)).collect()
}

/// Does the kernel store or update state here?
fn is_effect(u: &UOp) -> bool {
    matches!(
        u.kind,
        UOpKind::Store
            | UOpKind::VecStore { .. }
            | UOpKind::DefineAcc(_)
            | UOpKind::VecAcc { .. }
            | UOpKind::Assign
    )
}

/// The UOp ranges of the outermost loops holding side effects, `None` when a side effect lies
/// outside every loop (nothing to divide).
fn regions(k: &LinearKernel) -> Option<Vec<Range<usize>>> {
    let (mut regions, mut depth, mut open) = (Vec::new(), 0usize, 0usize);
    let mut effects = false;
    for (i, u) in k.uops.iter().enumerate() {
        match u.kind {
            UOpKind::Loop => {
                if depth == 0 {
                    (open, effects) = (i, false);
                }
                depth += 1;
            }
            UOpKind::EndLoop => {
                depth = depth.checked_sub(1)?;
                if depth == 0 && effects {
                    regions.push(open..i + 1);
                }
            }
            _ if is_effect(u) => {
                if depth == 0 {
                    return None;
                }
                effects = true;
            }
            _ => {}
        }
    }
    (!regions.is_empty()).then_some(regions)
}

/// Does any load read a buffer the kernel writes (the output, or an input aliasing it)?
fn reads_own_output(k: &LinearKernel) -> bool {
    let written: Vec<u32> = k
        .uops
        .iter()
        .filter(|u| matches!(u.kind, UOpKind::Store | UOpKind::VecStore { .. }))
        .filter_map(|u| u.src.first().copied())
        .collect();
    k.uops.iter().any(|u| {
        matches!(u.kind, UOpKind::Load | UOpKind::VecLoad { .. })
            && u.src.first().is_some_and(|b| written.contains(b))
    })
}

/// The loop to split in `region` (its first UOp is its outermost loop).
fn split_in(k: &LinearKernel, region: Range<usize>, cores: usize) -> Option<usize> {
    let body = &k.uops[region.clone()];
    let first = region.start + body.iter().position(is_effect)?;
    let last = region.start + body.iter().rposition(is_effect)?;
    let mut best: Option<(usize, f64)> = None;
    for i in region.start..first {
        if k.uops[i].kind != UOpKind::Loop || !starts_at_zero(k, i) || !indexes_stores(k, i) {
            continue;
        }
        let end = k.uops[i..region.end]
            .iter()
            .position(|e| e.kind == UOpKind::EndLoop && e.src.first() == Some(&(i as u32)))
            .map(|p| p + i)?;
        if end < last {
            continue;
        }
        let share = evenness(trip_count(k, i), cores);
        if share >= EVEN_ENOUGH {
            return Some(i);
        }
        if best.is_none_or(|(_, s)| share > s) {
            best = Some((i, share));
        }
    }
    best.map(|(i, _)| i)
}

/// Does loop `i`'s variable reach the index of a store? A loop whose iterations all write the
/// same outputs (the block loop of a blocked reduce, `Opt::ReduceBlock`, which carries each
/// output's sum from one iteration to the next) has dependent iterations and is never split.
fn indexes_stores(k: &LinearKernel, i: usize) -> bool {
    let mut reads = alloc::vec![false; k.uops.len()];
    reads[i] = true;
    for (j, u) in k.uops.iter().enumerate().skip(i + 1) {
        reads[j] = u.src.iter().any(|&s| reads[s as usize]);
        if matches!(u.kind, UOpKind::Store | UOpKind::VecStore { .. })
            && u.src.get(1).is_some_and(|&s| reads[s as usize])
        {
            return true;
        }
    }
    false
}

/// Does loop `i` start at the constant 0 (the split's bounds assume it)?
fn starts_at_zero(k: &LinearKernel, i: usize) -> bool {
    let start = k.uops[i].src.first().map(|&s| &k.uops[s as usize].kind);
    matches!(start, Some(UOpKind::Const(v)) if v.as_i64() == 0)
}

/// The constant trip count of loop `i` (`None`: symbolic).
fn trip_count(k: &LinearKernel, i: usize) -> Option<i64> {
    let end = k.uops[i].src.get(1).map(|&s| &k.uops[s as usize].kind);
    match end {
        Some(UOpKind::Const(v)) => Some(v.as_i64()),
        _ => None,
    }
}

/// The even share of `n` iterations over `cores` divided by the largest core's share: 1 when
/// the cores divide `n`, 0.75 for 3 over 2.
fn evenness(n: Option<i64>, cores: usize) -> f64 {
    let Some(n) = n.filter(|&n| n > 0) else {
        return 1.0;
    };
    let cores = cores.max(1) as i64;
    let largest = (n + cores - 1) / cores;
    n as f64 / (cores * largest) as f64
}
