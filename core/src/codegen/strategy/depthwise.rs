//! Row tiles for depthwise (and other per-channel windowed) convs on cores without float SIMD,
//! sized by the target's float registers ([`OptConfig::float_registers`]; an integer sum's by
//! [`OptConfig::int_registers`]): a strategy-table
//! entry tried after the small-core conv tile ([`super::small_core`]), which takes the convs
//! whose input is shared by several output channels.
//!
//! A depthwise conv's reduce kernel `[channel, oy, ox | ky, kx]` has a weight that broadcasts
//! the pixels and an input that no output axis shares, so the only reuse is along a row:
//! neighbouring outputs read overlapping inputs. Upcasting the row axis by `w` — the
//! output-contiguous axis, or, when the output is stored channel-interleaved (contiguous along
//! its channels), the innermost output axis that is a row — lets one row of `w + kx - 1`
//! loaded inputs and `kx` weights feed `w·kx` multiply-adds (the linearizer loads each
//! distinct input once). `w` is the largest divisor of the row (at most [`MAX_ROW`]) whose
//! accumulators, inputs and weights, `w + (w + kx - 1) + kx` (for an integer sum `w + 2 + kx`:
//! each input feeds its accumulators as it is loaded, two in flight), fit the register file
//! less [`RESERVED`], and at most the code budget (`max_unrolled`; size mode lowers it).
//!
//! Invariant: only an upcast of an output axis, so each accumulator keeps its summation order
//! and a tiled kernel computes bit-identical results to the untiled one.

use alloc::vec::Vec;

use super::facts::{size, try_opt};
use super::Choice;
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;

/// Float registers left for the compiler's temporaries.
const RESERVED: usize = 2;
/// The longest row tile tried (bounds the unrolled code).
const MAX_ROW: usize = 16;

/// Upcasts the output row of a depthwise-shaped kernel (see the module doc); false, changing
/// nothing, when the configuration names no registers or the kernel is not of that shape.
pub(super) fn choose(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    match rows(k, cfg).first() {
        Some(&(axis, amount)) => try_opt(k, Opt::Upcast { axis, amount }, applied),
        None => false,
    }
}

/// Every row tile that fits, longest first.
pub(super) fn space(k: &Kernel, cfg: &OptConfig) -> Vec<Choice> {
    rows(k, cfg)
        .into_iter()
        .map(|(axis, amount)| Choice::new(alloc::vec![Opt::Upcast { axis, amount }], Some(axis)))
        .collect()
}

/// `(output-contiguous axis, w)` for each fitting `w > 1`, longest first.
fn rows(k: &Kernel, cfg: &OptConfig) -> Vec<(usize, usize)> {
    let Some(wide) = row_axis(k) else {
        return Vec::new();
    };
    let registers = super::facts::tile_registers(k, cfg);
    if registers == 0 {
        return Vec::new();
    }
    let room = registers.saturating_sub(RESERVED);
    // The innermost reduce axis is the window's row when it is small (unrolled later).
    let kx = match k.first_upcast.checked_sub(1) {
        Some(a) if a >= k.first_reduce && (1..=8).contains(&size(k, a)) => size(k, a) as usize,
        _ => 1,
    };
    let n = size(k, wide);
    // An integer sum's inputs are used as they are loaded (each feeds its `kx` accumulators
    // at once), so two in flight; a float tile counts the whole row of inputs.
    let integer = k.ast.find_reduce().is_some_and(|r| !r.dtype().is_float());
    let live = |w: usize| {
        if integer {
            w + 2 + kx
        } else {
            w + (w + kx - 1) + kx
        }
    };
    (2..=MAX_ROW)
        .rev()
        // A row of `w` is `w` copies of the body: the code budget bounds it (size mode).
        .filter(|&w| n % w as i64 == 0 && live(w) <= room && w <= cfg.max_unrolled)
        .map(|w| (wide, w))
        .collect()
}

/// The row axis of a depthwise-shaped reduce kernel: an output axis that some load (the
/// weight) broadcasts along with another output axis, that some load (the input) reads along,
/// while no load that reads along it broadcasts another output axis (else the small-core conv
/// tile applies). The output-contiguous axis when it is one; else (an output stored
/// channel-interleaved, contiguous along its channels, which the weight does not broadcast)
/// the innermost such axis — the image row.
fn row_axis(k: &Kernel) -> Option<usize> {
    if k.first_reduce == k.first_upcast {
        return None;
    }
    let (store, loads) = k.leaf_strides();
    let big = |a: usize| size(k, a) > 1;
    let zero = |l: &[Option<i64>], a: usize| l.get(a) == Some(&Some(0));
    let row = |wide: usize| {
        let others = || (0..k.first_reduce).filter(move |&a| a != wide && big(a));
        let weight = loads
            .iter()
            .any(|l| zero(l, wide) && others().any(|a| zero(l, a)));
        let inputs: Vec<&Vec<Option<i64>>> = loads.iter().filter(|l| !zero(l, wide)).collect();
        let shared = inputs.iter().any(|l| others().any(|a| zero(l, a)));
        big(wide) && weight && !inputs.is_empty() && !shared
    };
    let contiguous = (0..k.first_reduce)
        .rev()
        .find(|&a| big(a) && store.get(a) == Some(&Some(1)))?;
    if row(contiguous) {
        return Some(contiguous);
    }
    (0..k.first_reduce).rev().find(|&a| row(a))
}
