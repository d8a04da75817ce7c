//! Unrolling the innermost reduce axes: a conv's window (3×3) becomes straight-line code, so
//! its taps need no loop and the compiler sees every multiply-add.
//!
//! - Heuristic: the innermost reduce axes (up to two) are unrolled whole while they are small
//!   (at most 8) and the unrolled body stays within `max_unrolled` copies. On a small core
//!   (`float_registers > 0`) a reduce whose whole nest times the body fits `max_unrolled`
//!   is unrolled entirely, whatever its axes' sizes (a 16-term dot product).
//! - Search space: no unroll, or a pivot reduce axis unrolled (partly or wholly) followed by
//!   every later reduce axis wholly, outermost first, within [`MAX_REDUCE_UNROLL`] copies.
//!
//! Invariant: unrolls keep the reduce's digit order (an unroll splits the least significant
//! reduce digits off, and later unrolls take the next digits outermost first; unrolled copies
//! run with the first unrolled axis slowest), so each accumulator sums in the same order and
//! results stay bit-identical.

use alloc::vec::Vec;

use super::facts::{amounts, size, try_opt, upcast_product};
use super::Choice;
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;

/// At most this many unrolled reduce copies in the search: beyond it the body grows without
/// fewer loads.
const MAX_REDUCE_UNROLL: usize = 64;
/// Partial unroll amounts the search tries on a reduce axis (besides its whole size).
const UNROLL_AMOUNTS: [usize; 5] = [2, 4, 8, 16, 32];

/// Fully unrolls the innermost small reduce axes (see the module doc); always taken.
pub(super) fn choose(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    let reduces = k.first_upcast - k.first_reduce;
    let mut body = upcast_product(k);
    // On a small core, a reduce whose whole nest fits the budget becomes straight-line code:
    // its loop overhead is a large share of so few steps.
    let whole: usize = (k.first_reduce..k.first_upcast)
        .map(|a| size(k, a).max(0) as usize)
        .product();
    let tiny = cfg.float_registers > 0 && whole > 1 && body * whole <= cfg.max_unrolled;
    let depth = if tiny { reduces } else { 2.min(reduces) };
    let mut count = 0;
    while count < depth {
        let s = size(k, k.first_upcast - 1 - count);
        if s <= 1 || (s > 8 && !tiny) || body * s as usize > cfg.max_unrolled {
            break;
        }
        body *= s as usize;
        count += 1;
    }
    // A full unroll removes its axis, so the next one moves into the same place.
    let axis = reduces - count;
    for _ in 0..count {
        let amount = size(k, k.first_reduce + axis) as usize;
        if !try_opt(k, Opt::Unroll { axis, amount }, applied) {
            return true;
        }
    }
    true
}

/// The order-preserving unroll plans of the module doc, no unroll first.
pub(super) fn space(k: &Kernel, _cfg: &OptConfig) -> Vec<Choice> {
    let reduces: Vec<usize> = (k.first_reduce..k.first_upcast)
        .map(|a| size(k, a).max(0) as usize)
        .collect();
    let mut out = alloc::vec![Choice::none()];
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
            out.push(Choice::new(plan, None));
        }
    }
    out
}
