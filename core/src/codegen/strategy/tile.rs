//! The register tile: output values kept in registers across the reduce, so one loaded value
//! feeds several accumulators (a matmul's broadcast operands).
//!
//! - Heuristic: the global axis the output is contiguous on and some input broadcasts
//!   (stride 0) is upcast by about a vector or more, a second broadcast axis by up to 8; on a
//!   vector target the two-axis tile is the one with the fewest loads per multiply-add within
//!   `max_accs` (4 rows × 2 vectors rather than 8 × 1; `two_axis_tile`). Alone
//!   (a matrix-vector product), it takes several vectors whose count divides it (5 vectors of
//!   8 of 1000 outputs), so more than one accumulator hides the multiply-add latency. With
//!   no broadcast axis (row sums), the output-contiguous axis takes vector lanes as an
//!   elementwise kernel's does (`vectorize.rs`): one row per lane. On a
//!   small core (`float_registers > 0`) a lone broadcast axis is upcast by its longest divisor
//!   whose accumulators fit the register file less the operands (16 of a 16-output layer).
//! - Search space: every tile of none, one or two output axes (in either order; the axis upcast
//!   last varies fastest among the accumulators) within `max_accs` accumulators.
//!
//! Invariant: only upcasts of output axes, so each accumulator keeps its summation order and
//! a tiled kernel computes bit-identical results to the untiled one.

use alloc::vec::Vec;

use super::facts::{amounts, size, try_opt, try_vector_upcast, upcast_product, vector_upcasts};
use super::Choice;
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;
use crate::dtype::DType;

/// Upcast amounts the search tries on an output axis (besides its whole size when small).
const TILE_AMOUNTS: [usize; 7] = [2, 4, 8, 16, 32, 64, 128];
/// Bytes of immediate load offset every small target reaches from one base register (Thumb-2
/// `vldr`: ±1020; RISC-V `flw`: ±2047).
const SMALL_CORE_LOAD_REACH: i64 = 1020;
/// Float registers a small core's one-axis tile leaves for its operands (the broadcast value
/// and a weight) and the compiler's temporaries.
const SMALL_CORE_OPERANDS: usize = 4;

/// Global axes some load broadcasts (stride 0): upcasting them lets one loaded value feed
/// several accumulators. The output-contiguous one first.
fn broadcast_axes(k: &Kernel) -> Vec<usize> {
    let (store, loads) = k.leaf_strides();
    let mut axes: Vec<usize> = (0..k.first_reduce)
        .filter(|&a| size(k, a) > 1)
        .filter(|&a| loads.iter().any(|l| l.get(a) == Some(&Some(0))))
        .collect();
    axes.sort_by_key(|&a| (store.get(a) != Some(&Some(1)), usize::MAX - a));
    axes
}

/// Upcasts up to two broadcast axes into an output tile of at most `max_accs` values: the
/// second axis first (by up to 8), then the output-contiguous one (by about a vector), so that
/// neighbouring accumulators are neighbouring outputs. Always taken (the fallback tile).
pub(super) fn choose(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    let axes = broadcast_axes(k);
    let v = cfg.vec_width;
    let Some(&wide) = axes.first() else {
        // No operand is broadcast (a row sum, softmax's sum of exps): no value feeds several
        // accumulators, but rows summed side by side as vector lanes — each lane its own row in
        // order — still break the one accumulator's add chain and compute the rows'
        // elementwise ops (the exps) as vectors.
        return super::vectorize::choose(k, cfg, applied);
    };
    if let Some(&other) = axes.get(1) {
        if v > 1 && two_axis_tile(k, (other, wide), cfg, applied) {
            return true;
        }
    }
    let mut wide = wide;
    if let Some(&other) = axes.get(1) {
        let (rank, n) = (k.rank(), applied.len());
        let room = cfg.max_accs / v.max(1);
        for amt in [8, 4, 2] {
            if amt <= room
                && try_opt(
                    k,
                    Opt::Upcast {
                        axis: other,
                        amount: amt,
                    },
                    applied,
                )
            {
                break;
            }
        }
        // An upcast that consumed its whole axis removed it: later axes moved down by one.
        if applied.len() > n && k.rank() == rank && other < wide {
            wide -= 1;
        }
    }
    let room = cfg.max_accs / upcast_product(k).max(1);
    // A one-axis tile (a matrix-vector product) needs several vector accumulators to hide the
    // multiply-add latency: 4, 3 or 2 vectors, else any count up to the room that divides the
    // axis (1000 outputs on 8 lanes: 125 vectors, taken 5 at a time) before a lone vector.
    // (Targets without vector lanes keep 4, then 2 values per accumulator row.)
    let amounts: Vec<usize> = if axes.len() > 1 {
        alloc::vec![v, 8, 4, 2]
    } else if cfg.vector_lanes && v >= 4 {
        [4, 3, 2]
            .into_iter()
            .chain(5..=room / v)
            .map(|m| m * v)
            .chain([v, 8, 4, 2])
            .collect()
    } else {
        alloc::vec![4 * v, 2 * v, v, 8, 4, 2]
    };
    // A short output axis (an MLP's 10 logits) is upcast whole: its width is the best vector
    // available, where a divisor (2 for 10) would leave scalar code.
    let whole = size(k, wide) as usize;
    let short = (whole > 2 && whole <= 2 * v && !amounts.contains(&whole)).then_some(whole);
    // On a small core a one-axis tile (a matrix-vector product) loads one broadcast value and
    // one weight per accumulator each step, both dead after use, so the accumulators may fill
    // the register file less those two and the compiler's temporaries (`SMALL_CORE_OPERANDS`):
    // the longest such divisor of the axis within the code budget.
    // The tile's loads must also stay within one base register's immediate offsets
    // (`SMALL_CORE_LOAD_REACH`), else each costs an address add (clang) and the wider tile
    // loses; beyond that the usual `max_accs` tile is taken.
    let registers = super::facts::tile_registers(k, cfg);
    let float = k.ast.find_reduce().is_none_or(|r| r.dtype() == DType::F32);
    let (_, loads) = k.leaf_strides();
    let step = loads
        .iter()
        .map(|l| l.get(wide).copied().flatten().map_or(i64::MAX, i64::abs))
        .max()
        .unwrap_or(0)
        .saturating_mul(4);
    let small = (registers > 0 && float && axes.len() == 1)
        .then(|| {
            let fit = registers
                .saturating_sub(SMALL_CORE_OPERANDS)
                .min(cfg.max_unrolled)
                / upcast_product(k).max(1);
            (2..=fit.min(whole)).rev().find(|&d| {
                whole % d == 0 && step.saturating_mul(d as i64 - 1) <= SMALL_CORE_LOAD_REACH
            })
        })
        .flatten()
        .filter(|&d| d > room);
    let room = if small.is_some() { whole } else { room };
    for amt in small
        .into_iter()
        .chain(short)
        .chain(amounts.iter().copied())
    {
        if amt <= room && try_vector_upcast(k, (wide, amt), cfg, applied) {
            return true;
        }
    }
    true
}

/// Two broadcast axes on a vector target (a matmul's rows and columns): each reduce step loads
/// one value per tile row (broadcast to a vector) and one vector per column group, and does
/// `rows * groups` vector multiply-adds, so among the tiles within `max_accs` the one with the
/// fewest loads per multiply-add is taken (4 rows × 2 vectors: 6 loads per 8 products, where
/// 8 rows × 1 vector needs 9), then the larger, then the taller. The rows are upcast first, so
/// neighbouring accumulators are neighbouring outputs. `false` (nothing applied) when no such
/// tile applies; the caller's one-axis fallback then runs.
fn two_axis_tile(
    k: &mut Kernel,
    (other, wide): (usize, usize),
    cfg: &OptConfig,
    applied: &mut Vec<Opt>,
) -> bool {
    let v = cfg.vec_width;
    let room = cfg.max_accs / v.max(1);
    let mut tiles: Vec<(usize, usize)> = [8usize, 4, 2]
        .iter()
        .flat_map(|&r| [1usize, 2, 4].map(|c| (r, c)))
        .filter(|&(r, c)| r * c <= room)
        .collect();
    // Fewest loads per product first: (r + c) / (r c) ascending, compared without division.
    tiles.sort_by(|&(r1, c1), &(r2, c2)| {
        ((r1 + c1) * r2 * c2)
            .cmp(&((r2 + c2) * r1 * c1))
            .then((r2 * c2).cmp(&(r1 * c1)))
            .then(r2.cmp(&r1))
    });
    for (rows, groups) in tiles {
        let (mut next, mut opts) = (k.clone(), Vec::new());
        let rank = next.rank();
        let up = Opt::Upcast {
            axis: other,
            amount: rows,
        };
        if !try_opt(&mut next, up, &mut opts) {
            continue;
        }
        // An upcast that consumed its whole axis removed it: later axes moved down by one.
        let wide = if next.rank() < rank && other < wide {
            wide - 1
        } else {
            wide
        };
        if groups * v > size(&next, wide) as usize {
            continue;
        }
        let before = opts.len();
        if try_vector_upcast(&mut next, (wide, groups * v), cfg, &mut opts)
            && opts[before..]
                .iter()
                .any(|o| matches!(o, Opt::Vectorize { .. }))
        {
            *k = next;
            applied.extend(opts);
            return true;
        }
    }
    false
}

/// Every tile of none, one or two output axes within `cfg.max_accs` accumulators, each with
/// the (original) axis it upcasts last.
pub(super) fn space(k: &Kernel, cfg: &OptConfig) -> Vec<Choice> {
    let axes: Vec<usize> = (0..k.first_reduce).filter(|&a| size(k, a) > 1).collect();
    let sz = |a: usize| size(k, a).max(0) as usize;
    let mut out = alloc::vec![Choice::none()];
    for &a in &axes {
        for n in amounts(sz(a), cfg.max_accs, &TILE_AMOUNTS) {
            out.push(Choice::new(vector_upcasts(k, &[(a, n)], cfg), Some(a)));
        }
    }
    for (i, &a) in axes.iter().enumerate() {
        for &b in &axes[i + 1..] {
            for n in amounts(sz(a), cfg.max_accs, &TILE_AMOUNTS) {
                for m in amounts(sz(b), cfg.max_accs / n, &TILE_AMOUNTS) {
                    out.push(Choice::new(
                        vector_upcasts(k, &[(a, n), (b, m)], cfg),
                        Some(b),
                    ));
                    out.push(Choice::new(
                        vector_upcasts(k, &[(b, m), (a, n)], cfg),
                        Some(a),
                    ));
                }
            }
        }
    }
    out
}
