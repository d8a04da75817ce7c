//! Thread splitting: which loop of a lowered kernel is divided among cores.
//!
//! A kernel is split on one global loop: each core runs the iterations
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
//! Invariant: a loop is splittable only when every side effect of the kernel (stores,
//! accumulator definitions and updates) happens inside it, so its iterations are independent
//! (each writes its own outputs, the same for every iteration of the loops around it) and
//! core 0 of 1 computes exactly the unsplit kernel.

use super::uops::{LinearKernel, UOpKind};

/// A loop whose share per core is at least this fraction of the even share is split even when a
/// loop inside it would divide more evenly (the outer the split, the larger each core's
/// contiguous part).
const EVEN_ENOUGH: f64 = 0.9;

/// The index of the `Loop` UOp to divide among `cores` cores, if the kernel has one: of the
/// loops from 0 that hold every side effect (nested one in the other), the outermost whose
/// iterations divide evenly enough ([`EVEN_ENOUGH`]), else the most even (the outer on a tie).
/// A loop of symbolic length counts as even.
pub fn split_loop(k: &LinearKernel, cores: usize) -> Option<usize> {
    let effect = |u: &super::uops::UOp| {
        matches!(
            u.kind,
            UOpKind::Store
                | UOpKind::VecStore { .. }
                | UOpKind::DefineAcc(_)
                | UOpKind::VecAcc { .. }
                | UOpKind::Assign
        )
    };
    let first = k.uops.iter().position(effect)?;
    let last = k.uops.iter().rposition(effect)?;
    let mut best: Option<(usize, f64)> = None;
    for (i, u) in k.uops.iter().enumerate().take(first) {
        if u.kind != UOpKind::Loop || !starts_at_zero(k, i) {
            continue;
        }
        let end = k.uops[i..]
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
