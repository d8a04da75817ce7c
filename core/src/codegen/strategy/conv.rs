//! Conv-shaped register tiles: the conv entry of the strategy table ([`super::STRATEGIES`]),
//! tried before the generic register tile ([`super::tile`]) on reduce kernels.
//!
//! A convolution's reduce kernel `[batch, cout, oy, ox | cin, ky, kx]` has three output axes
//! the weight broadcasts (batch, oy, ox) and one the input broadcasts (cout). The generic tile
//! pairs the output-contiguous axis (ox) with another axis the *weight* broadcasts (oy), so each
//! loaded input feeds one accumulator. Here ox is paired with cout instead, into a `c × w` tile
//! of accumulators, in one of two orientations:
//! - weights strided along cout (torch's `[cout, cin, k..]`): vectors run along ox — one vector
//!   of inputs `x[.., oy+ky, ox..ox+w]` times `c` broadcast weights;
//! - weights contiguous along cout (the scheduler copies a conv's weights into blocks of up to a
//!   vector width of channels, see `schedule/layout.rs`): vectors run along cout — one vector of `c` weights times `w`
//!   broadcast input pixels: one vector load per `w` multiply-adds instead of a broadcast load
//!   per multiply-add (onnxruntime's NCHWc kernels do the same; 15–25% faster on the bench's
//!   conv). Taken with the widest power-of-two lane count (up to the vector width) whose
//!   channels lie within one block.
//!
//! A 1×1 conv at batch 1 whose pixels the kernel merged into one row (`[cout, oy·ox | cin]`)
//! has no second axis its weight broadcasts — it is a matmul by shape — and takes this tile
//! only in the channel-lane orientation, where its weight sits in channel blocks
//! ([`pointwise_axes`]); a plain matmul keeps the generic register tile.
//!
//! Where the channel-lane tile would be taken but the reduce is short, its epilogue (a scalar
//! store per lane: the output is contiguous along the pixels) outweighs it, and the tile runs
//! the other way: channels × a vector of pixels ([`super::orientation`], a cost model per
//! output value).
//!
//! The axis upcast last carries the vector lanes: its upcast is an `Opt::Vectorize` (plus an
//! upcast by the rest) where the target has vector lanes, the output is f32 and a leaf is
//! contiguous along it ([`super::facts::vector_upcast`]).
//!
//! A pixel count that does not divide the row runs as a looped remainder
//! ([`Opt::LoopedUpcast`]: a loop of steps of that many pixels, then the pixels left over):
//! the heuristic's channel-lane tile takes one when it holds more accumulators, or as many with
//! fewer loads per multiply-add over the row (a 7-wide row: 2 channel vectors × 4 pixels, tail
//! 3, instead of 8 × 1). A weight vector counts as its lanes' values, not one load, when the
//! weights a pixel step reads over the whole reduce outgrow half the target's L2 (`OptConfig`'s
//! `l2_bytes`): they stream from further out, so more pixels per weight vector pay. A 3×3
//! window's taps with several channel vectors are unrolled step by step (the linearizer feeds
//! every accumulator from one tap's loads before the next, `steps_outermost` there), so those
//! vectors fit beside the accumulators.
//!
//! Search space: both orientations for every channel count up to [`MAX_CHANNELS`] dividing the
//! channel axis, times every pixel count dividing the output-contiguous axis,
//! within `max_accs` accumulators; every pixel count that does not divide it as a looped
//! remainder after the channels (channel lanes, or vector lanes along the pixels); and every
//! channel count that does not divide the channels as a looped remainder after a vector of
//! pixels.
//!
//! Invariant: only upcasts are applied (each accumulator keeps its summation order), so tiled
//! kernels compute bit-identical results to untiled ones.

use alloc::vec::Vec;

use super::facts::{size, try_opt, try_vector_upcast, vector_upcasts};
use super::Choice;
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;

/// The largest output-channel tile tried; 16 channels × 8 lanes fill half of AVX-512's 32
/// registers with accumulators, leaving room for the input vectors and broadcast weights.
const MAX_CHANNELS: usize = 16;

/// Tiles a conv-shaped kernel (see the module doc) over output channels × the output-contiguous
/// axis; returns false, changing nothing, when the kernel is not conv-shaped.
pub(super) fn choose(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    let Some((channel, wide)) = conv_axes(k).or_else(|| pointwise_axes(k, cfg)) else {
        return false;
    };
    let channel_tile = taken_channel_tile(k, cfg, (channel, wide));
    // A short reduce, or one the channel tile would run in blocks: pixel lanes, whose epilogue
    // stores vectors (`orientation.rs`).
    if let Some(tile) = channel_tile {
        let blocks = reduce_blocks(k, cfg, tile);
        if let Some((next, opts)) = super::orientation::pixel_lanes(k, cfg, (channel, wide), blocks)
        {
            *k = next;
            applied.extend(opts);
            return true;
        }
    }
    let tile = match channel_tile {
        Some(tile) => tile,
        None => {
            let lanes = wide_amount(size(k, wide), cfg.vec_width);
            let room = (cfg.max_accs / lanes.max(1)).min(MAX_CHANNELS);
            let divisor = largest_divisor(size(k, channel), room);
            if looped_channels(k, cfg, (channel, wide), (lanes, room), divisor, applied) {
                return true;
            }
            let Some(c) = divisor else {
                return false;
            };
            ((channel, c), (wide, lanes))
        }
    };
    apply_tile(k, cfg, tile, applied)
}

/// How many blocks the reduce-block strategy (`block.rs`) would run the reduce in after the
/// channel-lane `tile` (1: none): the tile's epilogue is paid once per block.
fn reduce_blocks(k: &Kernel, cfg: &OptConfig, tile: Tile) -> u64 {
    let mut tiled = k.clone();
    if !apply_tile(&mut tiled, cfg, tile, &mut Vec::new()) {
        return 1;
    }
    let len = size(&tiled, tiled.first_reduce).max(1) as u64;
    super::block::block_for(&tiled, cfg).map_or(1, |b| len.div_ceil(b.max(1) as u64))
}

/// Applies the tile `(first, second)` (the second upcast carries the vector lanes); false when
/// it does not fit.
fn apply_tile(
    k: &mut Kernel,
    cfg: &OptConfig,
    (first, second): Tile,
    applied: &mut Vec<Opt>,
) -> bool {
    // Pixels the row does not divide: the channel vectors first, then the pixels as a looped
    // remainder (which must be the last global opt).
    if size(k, first.0) % first.1 as i64 != 0 {
        let (pixels, channels) = (first, second);
        let Some((next, opts)) = vectors_then_looped(k, cfg, channels, pixels) else {
            return false;
        };
        *k = next;
        applied.extend(opts);
        return true;
    }
    let rank = k.rank();
    if first.1 > 1 && !try_opt(k, upcast(first), applied) {
        return false;
    }
    // An upcast that consumed its whole axis removed it (the rank is unchanged: one axis gone,
    // one upcast axis added): later axes moved down by one.
    let moved = first.1 > 1 && k.rank() == rank && first.0 < second.0;
    let second = (second.0 - usize::from(moved), second.1);
    if second.1 > 1 {
        try_vector_upcast(k, second, cfg, applied);
    }
    true
}

/// Vectors along the row and broadcast weights, when no channel count up to the accumulator
/// room divides the channels (100 channels, room for 8: the exact tile holds 5): a loop of
/// `room` channels per step, then the channels left over as a tail (`Opt::LoopedUpcast`), so
/// the body holds the accumulators that hide the multiply-add latency (oddnet's 3×3 conv to
/// 100 channels, llvm-mca on AVX2: 5 accumulators 1.24 multiply-adds per cycle; body 1.76,
/// tail 0.99). Only on vector targets (small cores keep their own tiles). With the channel
/// axis outermost (batch 1) the loop and its tail are sibling loops, which threads split one
/// after the other (`split.rs`). Applies nothing and returns false when it does not fit.
fn looped_channels(
    k: &mut Kernel,
    cfg: &OptConfig,
    (channel, wide): (usize, usize),
    (lanes, room): (usize, usize),
    divisor: Option<usize>,
    applied: &mut Vec<Opt>,
) -> bool {
    let n = size(k, channel);
    let more = divisor.unwrap_or(1) < room;
    if !cfg.vector_lanes
        || lanes < 2
        || room < 2
        || !more
        || n <= room as i64
        || n % room as i64 == 0
    {
        return false;
    }
    let Some((next, opts)) = vectors_then_looped(k, cfg, (wide, lanes), (channel, room)) else {
        return false;
    };
    *k = next;
    applied.extend(opts);
    true
}

/// `first` upcast (as vector lanes where they fit), then `looped` as a looped remainder
/// ([`Opt::LoopedUpcast`], the last global opt), its axis found where it is after the first
/// upcast (one that consumed its whole axis removed it, and later axes moved down). The kernel
/// and the opts, or `None` when either does not fit.
fn vectors_then_looped(
    k: &Kernel,
    cfg: &OptConfig,
    first: (usize, usize),
    looped: (usize, usize),
) -> Option<(Kernel, Vec<Opt>)> {
    let (mut next, mut opts) = (k.clone(), Vec::new());
    if !try_vector_upcast(&mut next, first, cfg, &mut opts) {
        return None;
    }
    let moved = next.first_reduce < k.first_reduce && first.0 < looped.0;
    let opt = Opt::LoopedUpcast {
        axis: looped.0 - usize::from(moved),
        amount: looped.1,
        lanes: 0,
    };
    try_opt(&mut next, opt, &mut opts).then_some((next, opts))
}

/// The channel-lane tile `((wide, pixels), (channel, m · lanes))` and its lane count — upcast
/// in that order, so the channels become the vector lanes — when a vector width of channels divides the channel axis
/// and the weights are contiguous within it with a plain stride across such groups (so the
/// renderer sees one vector load per tap).
pub(super) fn channel_lane_tile(
    k: &Kernel,
    cfg: &OptConfig,
    (channel, wide): (usize, usize),
) -> Option<(Tile, usize)> {
    // The widest power-of-two lane count that divides the channels and finds the weights
    // contiguous within it (the scheduler blocks weights by [`channel_lanes`] too, `schedule/layout.rs`).
    let mut c = channel_lanes(size(k, channel).max(0) as usize, cfg.vec_width);
    while c >= 2 && !weights_in_lanes(k, (channel, c)) {
        c /= 2;
    }
    if c < 2 || size(k, channel) % c as i64 != 0 {
        return None;
    }
    // The pixels are broadcast operands, not lanes: any count that divides the row serves (a
    // 14-wide row takes 7 accumulators, not the 2 a power of two would allow). One or more
    // vectors of channels (`m`) times the pixels: the most accumulators the budget holds (they
    // hide the multiply-add latency), then the fewest loads per multiply-add — each tap loads
    // `m` weight vectors and broadcasts `pixels` inputs for `m · pixels` multiply-adds, so 2 × 4
    // beats 1 × 8 (pointwise convs).
    let vectors = (cfg.max_accs / c).max(1);
    // Pixel counts that do not divide the row run as a looped remainder (a loop of `pixels`
    // per step, then the pixels left over: `Opt::LoopedUpcast`), so a 7-wide row may take
    // 2 × 4 (one step of 4 pixels, a tail of 3) where its divisors allow only 8 × 1 or 1 × 7.
    let n = size(k, wide);
    let ms = || {
        (1..=vectors)
            .rev()
            .filter(|&m| size(k, channel) % (m * c) as i64 == 0)
    };
    let mut exact = ms().map(|m| (m, largest_divisor(n, vectors / m).unwrap_or(1)));
    let mut looped = ms().flat_map(|m| {
        (2..=vectors / m)
            .filter(move |&p| (p as i64) < n && n % p as i64 != 0)
            .map(move |p| (m, p))
    });
    // Loads per row (each step loads `m` weight vectors and broadcasts `p` pixels; a tail of
    // `t` pixels loads the `m` vectors for fewer) and multiply-adds per row. A weight vector
    // counts as its `c` values when the weights one step reads over the whole reduce outgrow
    // half the L2 cache (which the input and output rows share): each pixel step then streams
    // them from further out, and reusing them over more pixels is what pays (a 3×3 conv over
    // 256 channels on a 14-wide row: 2 vectors × 4 pixels, 147 KiB of weights, not 4 × 2,
    // 295 KiB, which took about 20% more time in a profile of resnet18).
    let weight_cost = |m: usize| {
        let block = (m * c) as u64 * reduce_len(k) * k.ast.dtype().itemsize() as u64;
        if cfg.l2_bytes > 0 && 2 * block > cfg.l2_bytes as u64 {
            m * c
        } else {
            m
        }
    };
    let loads = |(m, p): (usize, usize)| {
        let (q, t) = (n as usize / p, n as usize % p);
        let w = weight_cost(m);
        (q * (w + p) + if t > 0 { w + t } else { 0 }, m * n as usize)
    };
    // Loads per multiply-add, compared without division.
    let fewer = |a: (usize, usize), b: (usize, usize)| {
        let ((a1, b1), (a2, b2)) = (loads(a), loads(b));
        (a2 * b1).cmp(&(a1 * b2))
    };
    // The most accumulators first, then the fewest loads per multiply-add; from the most
    // channel vectors down, so a tie keeps the fewest (`max_by` keeps the last).
    let best = |it: &mut dyn Iterator<Item = (usize, usize)>| {
        it.max_by(|&a, &b| (a.0 * a.1).cmp(&(b.0 * b.1)).then(fewer(a, b)))
    };
    let exact = best(&mut exact)?;
    // A remainder costs a second copy of the kernel body: taken only when it loads strictly
    // less per multiply-add with as many accumulators (a 3 × 3 conv's 1 × 8 over a 28-wide
    // row loads as much per multiply-add as its 1 × 7, so it keeps 1 × 7).
    let (m, pixels) = match best(&mut looped) {
        Some(l) if l.0 * l.1 >= exact.0 * exact.1 && fewer(l, exact).is_gt() => l,
        _ => exact,
    };
    Some((((wide, pixels), (channel, c * m)), c))
}

/// Reduce positions per output: the product of the reduce axes, looped or upcast (0 when one
/// is symbolic).
pub(super) fn reduce_len(k: &Kernel) -> u64 {
    (k.first_reduce..k.rank())
        .filter(|&a| a < k.first_upcast || k.upcast_is_reduce[a - k.first_upcast])
        .map(|a| size(k, a).max(0) as u64)
        .product()
}

/// The channel-lane tile the heuristic takes, if any. Vectors of channels narrower than the
/// target's (100 channels in blocks of 4 on 8 lanes) do half the work per multiply-add of full
/// vectors along a row the vector width divides: that row takes the lanes instead (no tile).
fn taken_channel_tile(
    k: &Kernel,
    cfg: &OptConfig,
    (channel, wide): (usize, usize),
) -> Option<Tile> {
    let full_row = size(k, wide) % cfg.vec_width.max(1) as i64 == 0;
    channel_lane_tile(k, cfg, (channel, wide))
        .filter(|&(_, lanes)| lanes >= cfg.vec_width || !full_row)
        .map(|(tile, _)| tile)
}

/// Two upcasts `(axis, amount)`, applied in order (the second carries the vector lanes).
pub(super) type Tile = ((usize, usize), (usize, usize));

/// The conv tiles of the module doc, each with the (original) axis it upcasts last.
pub(super) fn space(k: &Kernel, cfg: &OptConfig) -> Vec<Choice> {
    let Some((channel, wide)) = conv_axes(k).or_else(|| pointwise_axes(k, cfg)) else {
        return Vec::new();
    };
    let (nc, nw) = (size(k, channel), size(k, wide));
    let pixels = (1..=cfg.max_accs).filter(|&w| nw % w as i64 == 0);
    let mut out = Vec::new();
    for w in pixels {
        for c in (2..=MAX_CHANNELS).filter(|&c| nc % c as i64 == 0 && c * w <= cfg.max_accs) {
            let tile = |picks: &[(usize, usize)]| {
                let picks: Vec<(usize, usize)> =
                    picks.iter().copied().filter(|p| p.1 > 1).collect();
                vector_upcasts(k, &picks, cfg)
            };
            out.push(Choice::new(tile(&[(channel, c), (wide, w)]), Some(wide)));
            out.push(Choice::new(tile(&[(wide, w), (channel, c)]), Some(channel)));
        }
    }
    // Pixel counts the row does not divide, as a looped remainder after the channels: the
    // channels as vector lanes where they fit, or the pixels as lanes (broadcast weights).
    let v = cfg.vec_width;
    let looped = (2..=cfg.max_accs).filter(|&w| (w as i64) < nw && nw % w as i64 != 0);
    for w in looped {
        for c in (1..=MAX_CHANNELS).filter(|&c| nc % c as i64 == 0 && c * w <= cfg.max_accs) {
            let after = |lanes: usize, channel_opts: Vec<Opt>| {
                let mut next = k.clone();
                let fits = channel_opts.iter().all(|&o| next.apply_opt(o).is_ok());
                let moved = next.first_reduce < k.first_reduce && channel < wide;
                let mut opts = channel_opts;
                opts.push(Opt::LoopedUpcast {
                    axis: wide - usize::from(fits && moved),
                    amount: w,
                    lanes,
                });
                Choice::new(opts, Some(wide))
            };
            let channels = if c > 1 {
                vector_upcasts(k, &[(channel, c)], cfg)
            } else {
                Vec::new()
            };
            out.push(after(0, channels));
            if cfg.vector_lanes && v >= 2 && w % v == 0 {
                let plain = if c > 1 {
                    alloc::vec![upcast((channel, c))]
                } else {
                    Vec::new()
                };
                out.push(after(v, plain));
            }
        }
    }
    // Channel counts the channels do not divide, as a looped remainder after a vector of
    // pixels (see [`looped_channels`]).
    let lanes = wide_amount(nw, v);
    if cfg.vector_lanes && lanes >= 2 {
        let cs = (2..=MAX_CHANNELS).filter(|&c| (c as i64) < nc && nc % c as i64 != 0);
        for c in cs.filter(|&c| c * lanes <= cfg.max_accs) {
            if let Some((_, opts)) = vectors_then_looped(k, cfg, (wide, lanes), (channel, c)) {
                out.push(Choice::new(opts, Some(channel)));
            }
        }
    }
    out
}

/// Channel lanes of a conv tile (and of the scheduler's weight blocks): the widest power of two
/// up to the vector width (at most [`MAX_CHANNELS`]) that divides the channel count, so every
/// block is whole and a vector of channels is one load (100 channels on 8 lanes: 4). 1 when no
/// such width exists (odd counts).
pub(crate) fn channel_lanes(channels: usize, vec_width: usize) -> usize {
    let v = vec_width.clamp(1, MAX_CHANNELS);
    let mut w = if v.is_power_of_two() {
        v
    } else {
        v.next_power_of_two() / 2
    };
    while w > 1 && channels % w != 0 {
        w /= 2;
    }
    w
}

fn upcast((axis, amount): (usize, usize)) -> Opt {
    Opt::Upcast { axis, amount }
}

/// Split `channel` by `amount`: does some load read consecutive elements along the split-off
/// channels and move by a plain stride along the rest? Asked of the split, since a panelled
/// weight is contiguous only within a panel.
fn weights_in_lanes(k: &Kernel, (channel, amount): (usize, usize)) -> bool {
    let mut probe = k.clone();
    if probe.apply_opt(upcast((channel, amount))).is_err() {
        return false;
    }
    let last = probe.rank() - 1;
    let rest_is_plain = |l: &[Option<i64>]| {
        // The rest of the channel axis is still at `channel` unless the split consumed it.
        probe.rank() == k.rank() || matches!(l.get(channel), Some(Some(_)))
    };
    // The weight, not a bias after the reduce: it moves along some reduce axis.
    let in_reduce = |l: &[Option<i64>]| {
        (probe.first_reduce..probe.first_upcast).any(|a| l.get(a) != Some(&Some(0)))
    };
    let (_, loads) = probe.leaf_strides();
    loads
        .iter()
        .any(|l| l.get(last) == Some(&Some(1)) && rest_is_plain(l) && in_reduce(l))
}

/// `(channel axis, output-contiguous axis)` of a conv-shaped kernel: the output is contiguous
/// on `wide`; a load broadcasting `wide` (the weight) also broadcasts another output axis (a
/// spatial or batch one) — a plain matmul has no such axis — and reads along `channel`, which a
/// load reading along `wide` (the input) broadcasts.
fn conv_axes(k: &Kernel) -> Option<(usize, usize)> {
    weight_input_axes(k, true)
}

/// The axes of a kernel shaped as [`conv_axes`] asks but for the other output axis: a 1×1
/// conv at batch 1, whose pixels the kernel merged into one row (`[cout, oy·ox | cin]`), is a
/// matmul by shape. It takes the conv tile only where its channel-lane tile does — the weight
/// contiguous in vectors of channels, as the scheduler blocks a conv's weights — so a plain
/// matmul (whose broadcast operand reads with a row stride) keeps the generic register tile.
fn pointwise_axes(k: &Kernel, cfg: &OptConfig) -> Option<(usize, usize)> {
    let axes = weight_input_axes(k, false)?;
    taken_channel_tile(k, cfg, axes).map(|_| axes)
}

/// [`conv_axes`]; with `other` false, the weight need not broadcast a second output axis.
fn weight_input_axes(k: &Kernel, other: bool) -> Option<(usize, usize)> {
    let (store, loads) = k.leaf_strides();
    let big = |a: usize| size(k, a) > 1;
    let wide = (0..k.first_reduce)
        .rev()
        .find(|&a| big(a) && store.get(a) == Some(&Some(1)))?;
    let zero = |l: &[Option<i64>], a: usize| l.get(a) == Some(&Some(0));
    let weight = loads.iter().find(|l| {
        zero(l, wide) && (!other || (0..k.first_reduce).any(|a| a != wide && big(a) && zero(l, a)))
    })?;
    // Any load reading along `wide` may be the input: a residual added after the reduce reads
    // along `wide` too, but along the channel axis as well, so it names no channel.
    loads.iter().filter(|l| !zero(l, wide)).find_map(|input| {
        (0..k.first_reduce)
            .rev()
            .find(|&a| big(a) && zero(input, a) && !zero(weight, a))
            .map(|channel| (channel, wide))
    })
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
pub(super) fn largest_divisor(n: i64, max: usize) -> Option<usize> {
    (2..=max).rev().find(|&d| n % d as i64 == 0)
}
