//! Conv-shaped register tiles, hooked from [`super::opt::hand_coded`].
//!
//! A convolution's reduce kernel `[batch, cout, oy, ox | cin, ky, kx]` has three output axes
//! the weight broadcasts (batch, oy, ox) and one the input broadcasts (cout). The generic tile
//! pairs the output-contiguous axis (ox) with another axis the *weight* broadcasts (oy), so each
//! loaded input feeds one accumulator. Here ox is paired with cout instead: one contiguous
//! vector of inputs `x[.., oy+ky, ox..ox+w]` is multiplied by `c` broadcast weights into a
//! `c × w` tile of accumulators, which clang turns into `c` vector multiply-adds per vector load.
//!
//! Invariant: only upcasts are applied (each accumulator keeps its summation order), so tiled
//! kernels compute bit-identical results to untiled ones.

use alloc::vec::Vec;

use super::kernel::{Kernel, Opt};
use super::opt::{size, strides, try_opt, OptConfig};

/// The largest output-channel tile tried; 16 channels × 8 lanes fill half of AVX-512's 32
/// registers with accumulators, leaving room for the input vectors and broadcast weights.
const MAX_CHANNELS: usize = 16;

/// Tiles a conv-shaped kernel (see the module doc) over output channels × the output-contiguous
/// axis; returns false, changing nothing, when the kernel is not conv-shaped.
pub(super) fn conv_tile(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    let Some((channel, wide)) = conv_axes(k) else {
        return false;
    };
    let lanes = wide_amount(size(k, wide), cfg.vec_width);
    let room = (cfg.max_accs / lanes.max(1)).min(MAX_CHANNELS);
    let Some(c) = largest_divisor(size(k, channel), room) else {
        return false;
    };
    let rank = k.rank();
    if !try_opt(
        k,
        Opt::Upcast {
            axis: channel,
            amount: c,
        },
        applied,
    ) {
        return false;
    }
    // An upcast that consumed its whole axis removed it: later axes moved down by one.
    let wide = if k.rank() == rank && channel < wide {
        wide - 1
    } else {
        wide
    };
    if lanes > 1 {
        try_opt(
            k,
            Opt::Upcast {
                axis: wide,
                amount: lanes,
            },
            applied,
        );
    }
    true
}

/// `(channel axis, output-contiguous axis)` of a conv-shaped kernel: the output is contiguous
/// on `wide`; a load broadcasting `wide` (the weight) also broadcasts another output axis (a
/// spatial or batch one) — a plain matmul has no such axis — and reads along `channel`, which a
/// load reading along `wide` (the input) broadcasts.
fn conv_axes(k: &Kernel) -> Option<(usize, usize)> {
    let (store, loads) = strides(k);
    let big = |a: usize| size(k, a) > 1;
    let wide = (0..k.first_reduce)
        .rev()
        .find(|&a| big(a) && store.get(a) == Some(&Some(1)))?;
    let zero = |l: &[Option<i64>], a: usize| l.get(a) == Some(&Some(0));
    let weight = loads.iter().find(|l| {
        zero(l, wide) && (0..k.first_reduce).any(|a| a != wide && big(a) && zero(l, a))
    })?;
    let input = loads.iter().find(|l| !zero(l, wide))?;
    (0..k.first_reduce)
        .rev()
        .find(|&a| big(a) && zero(input, a) && !zero(weight, a))
        .map(|channel| (channel, wide))
}

/// Lanes along the output-contiguous axis: a power of two up to the vector width that divides
/// `n`, or all of `n` when it is at most the vector width and nothing larger than 1 divides.
fn wide_amount(n: i64, vec_width: usize) -> usize {
    let mut amt = vec_width.max(1);
    while amt >= 2 {
        if n % amt as i64 == 0 {
            return amt;
        }
        amt /= 2;
    }
    if n >= 2 && n <= vec_width as i64 {
        n as usize
    } else {
        1
    }
}

/// The largest `d` in `2..=max` dividing `n`.
fn largest_divisor(n: i64, max: usize) -> Option<usize> {
    (2..=max).rev().find(|&d| n % d as i64 == 0)
}
