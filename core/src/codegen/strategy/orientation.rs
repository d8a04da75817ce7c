//! Which side of a conv tile carries the vector lanes when the reduce is short: the conv
//! tile's channel-lane orientation ([`super::conv`]: one vector of output channels per weight
//! load, the input pixels broadcast) against pixel lanes (one vector of output pixels per input
//! load, the weights broadcast), compared by a cost per output value that counts the tile's
//! epilogue as well as its reduce.
//!
//! The output of a conv is contiguous along its pixels, not its channels, so a channel-lane
//! accumulator leaves the kernel as one scalar store per lane (and a residual added after the
//! reduce, read along the pixels, as one scalar load per lane), where a pixel-lane accumulator
//! is one vector store. Over a long reduce that epilogue is noise; over a short one it is most
//! of the work: a 1×1 conv from 16 channels to 96 over 112² pixels took 878 µs with 2 channel
//! vectors × 4 pixels and 516 µs with 8 channels × one vector of pixels (C copies of both
//! tiles, AVX2, minimum of 200 calls pinned to one core, 2026-11-28). The model, in issue
//! slots per output value, with multiply-adds and loads issuing at the same rate (two a cycle)
//! and a store costing two (one store port against two load and two multiply-add ports, on the
//! x86 and Arm cores these tiles target):
//! - reduce: `K · max(multiply-adds, loads)` per tile (`K` the reduce length);
//! - epilogue: a store per accumulator lane for channel lanes, per accumulator for pixel lanes;
//!   half that per elementwise operand read along the pixels after the reduce;
//! - reduce blocks: a reduce long enough that the channel-lane tile would run it in blocks
//!   (`block.rs`: its weight vectors outgrow the L1) pays that epilogue once per block, and
//!   loads the partial sums back, lane by lane, in every block after the first (pixel-lane
//!   tiles broadcast their weights and are not blocked). mobilenet_v2's 7 × 7 pointwise convs
//!   over 320 and 960 input channels (6 and 16 blocks) take pixel lanes with this term, as the
//!   measured search picked for them on AVX-512; in the model's run (1 thread, `perf`,
//!   2026-11-28) their share of the time went 5.79 → 5.27% and 4.17 → 3.93%;
//! - input: when the input one block of output channels reads outgrows the L1
//!   (`OptConfig::l1_bytes`), it streams from the L2 once per block, `K` values per output
//!   over the block's channels — pixel lanes hold fewer channels (8 against 16), so they
//!   stream it twice as often (1×1 convs to 384 and 576 channels over 14² pixels: 13% slower
//!   with pixel lanes before this term).
//!
//! Over mobilenet_v2's pointwise shapes (reduce 16–960, 7²–112² pixels) it picks pixel lanes
//! for reduces of 16–32 over 28²–112² pixels (each kernel 22–34% faster alone) and into 24
//! output channels, where the channel tile holds one vector (19–23%), and keeps channel lanes
//! for the rest, where they were as fast or faster (`BENCH.md`, after the seventh
//! measurement; AVX2). On 16 lanes it also picks pixel lanes for the reduces of 320 and 960
//! over 7² pixels, which the channel tile would run in blocks (above).
//!
//! A stride-2 conv reads its input two pixels apart: a vector of pixels then costs two loads
//! and a shuffle (`pixel_vector_loads`), which the model counts; with a short reduce pixel
//! lanes still win on 16-lane targets, whose channel-lane epilogue stores 16 scalars per
//! accumulator (mobilenet_v2's first conv, 27 taps: 435 → 231 µs on AVX-512, 2026-11-28).
//!
//! The pixel-lane tile holds `c` output channels × one vector of pixels, or — where the target
//! counts its vector registers ([`OptConfig::vec_registers`]) — × two vectors of pixels when
//! the same model rates that lower (fewer loads per multiply-add: [`pixel_tiles`]).
//!
//! Invariant: only upcasts are applied, so the kernel stays bit-identical to the untiled one.

use alloc::vec::Vec;

use super::conv::{channel_lane_tile, largest_divisor, reduce_len};
use super::facts::{size, try_opt};
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;
use crate::dtype::DType;

/// The bytes the L2 cache hands the L1 per cycle (a 64-byte line every two cycles on the x86
/// and Arm cores vector tiles target), for the cost of streaming a tile's input from the L2.
const L2_BYTES_PER_CYCLE: f64 = 32.0;

/// One orientation of a tile, as the cost model sees it (module doc).
struct Shape {
    /// Multiply-adds per reduce step (the accumulators).
    accs: u64,
    /// Loads per reduce step.
    loads: u64,
    /// Output values per accumulator.
    lanes: u64,
    /// Stores per accumulator after the reduce.
    stores: u64,
    /// Epilogue loads per accumulator (elementwise operands read along the pixels).
    reads: u64,
    /// Output channels per tile: the input is streamed once per channel block.
    channels: u64,
    /// Reduce blocks (`block.rs`): the epilogue's stores are paid once per block, and every
    /// block after the first loads the partial sums back.
    blocks: u64,
}

/// Issue slots per output value (a load or multiply-add 1, a store 2; module doc) over a
/// reduce of `reduce` steps, plus the input streamed from the L2 once per channel block when
/// one block's input (`input_bytes`) outgrows the L1 (`l1_bytes`, 0 when unknown).
fn cost(t: &Shape, reduce: u64, itemsize: u64, input_bytes: u64, l1_bytes: u64) -> f64 {
    let blocks = t.blocks.max(1);
    let epilogue = 2 * t.stores * blocks + t.stores * (blocks - 1) + t.reads;
    let tile = reduce * t.accs.max(t.loads) + t.accs * epilogue;
    let compute = tile as f64 / (t.accs * t.lanes) as f64;
    let streamed = l1_bytes > 0 && input_bytes > l1_bytes;
    // Two slots per cycle: the L2 hands over `L2_BYTES_PER_CYCLE` per two slots.
    let input = if streamed {
        2.0 * (reduce * itemsize) as f64 / (t.channels as f64 * L2_BYTES_PER_CYCLE)
    } else {
        0.0
    };
    compute + input
}

/// Loads along `wide` after the reduce (a residual): zero stride on every reduce axis, unit
/// stride on `wide`. Each costs a load per lane in the channel-lane epilogue.
fn epilogue_reads(k: &Kernel, wide: usize) -> u64 {
    let (_, loads) = k.leaf_strides();
    let reduce = k.first_reduce..k.first_upcast;
    loads
        .iter()
        .filter(|l| l.get(wide) == Some(&Some(1)))
        .filter(|l| reduce.clone().all(|a| l.get(a) == Some(&Some(0))))
        .count() as u64
}

/// The widest stride along `wide` of the loads that move along it — 1 when each is one plain
/// vector load per vector of pixels — when the store is contiguous along `wide` and every
/// stride is a constant up to [`MAX_PIXEL_STRIDE`]; else `None`.
fn pixel_stride(k: &Kernel, wide: usize) -> Option<u64> {
    let (store, loads) = k.leaf_strides();
    if store.get(wide) != Some(&Some(1)) {
        return None;
    }
    loads.iter().try_fold(1, |widest, l| match l.get(wide) {
        Some(Some(s)) if s.unsigned_abs() <= MAX_PIXEL_STRIDE => Some(widest.max(s.unsigned_abs())),
        _ => None,
    })
}

/// The widest input stride along the pixels a pixel-lane tile takes (a stride-2 conv's input);
/// wider ones would gather a vector from as many lines.
const MAX_PIXEL_STRIDE: u64 = 2;

/// Issue slots of one vector of pixels read `stride` elements apart: one load when contiguous;
/// else the `stride` vector loads that cover it and the `stride - 1` two-source shuffles that
/// pick its lanes (AVX-512's `vpermt2ps`, AVX2's `vshufps` + `vpermpd` pairs counted as one).
/// A 3×3 stride-2 conv from 3 channels to 32 over 112² output pixels (mobilenet_v2's first)
/// ran in 231 µs as 8 channels × 16 strided pixels against 435 µs as 32 channel lanes × 4 pixels
/// (AVX-512, the measured search, 2026-11-28).
fn pixel_vector_loads(stride: u64) -> u64 {
    2 * stride.max(1) - 1
}

/// The pixel-lane tile — `c` output channels (the largest count up to the accumulator room
/// that divides them) × one vector of pixels, a row the lanes do not divide looping with a
/// tail — when the cost model (module doc) rates it below the conv tile's channel-lane tile;
/// the kernel and opts to take, or `None` to keep the channel-lane tile.
pub(super) fn pixel_lanes(
    k: &Kernel,
    cfg: &OptConfig,
    (channel, wide): (usize, usize),
    channel_blocks: u64,
) -> Option<(Kernel, Vec<Opt>)> {
    let v = cfg.vec_width;
    if !cfg.vector_lanes || v < 2 || k.ast.dtype() != DType::F32 {
        return None;
    }
    let per_vector = pixel_vector_loads(pixel_stride(k, wide)?);
    let (((_, pixels), (_, channels)), lanes) = channel_lane_tile(k, cfg, (channel, wide))?;
    let n = size(k, wide);
    if n < v as i64 {
        return None;
    }
    let reduce = reduce_len(k);
    let reads = epilogue_reads(k, wide);
    let itemsize = k.ast.dtype().itemsize() as u64;
    let input_bytes = reduce * n as u64 * itemsize;
    let l1 = cfg.l1_bytes as u64;
    let m = (channels / lanes) as u64;
    let by_channels = Shape {
        accs: m * pixels as u64,
        loads: m + pixels as u64,
        lanes: lanes as u64,
        stores: lanes as u64,
        reads: lanes as u64 * reads,
        channels: channels as u64,
        blocks: channel_blocks,
    };
    let by_pixels = |(c, p): (usize, usize)| Shape {
        accs: (c * p) as u64,
        loads: c as u64 + p as u64 * per_vector,
        lanes: v as u64,
        stores: 1,
        reads,
        channels: c as u64,
        blocks: 1,
    };
    let rate = |t: &Shape| cost(t, reduce, itemsize, input_bytes, l1);
    // The fewest issue slots per output; on a tie the single vector of pixels.
    let (c, vectors) = pixel_tiles(k, cfg, channel, n)
        .into_iter()
        .min_by(|a, b| rate(&by_pixels(*a)).total_cmp(&rate(&by_pixels(*b))))?;
    if rate(&by_pixels((c, vectors))) >= rate(&by_channels) {
        return None;
    }
    let (mut next, mut opts) = (k.clone(), Vec::new());
    if !try_opt(
        &mut next,
        Opt::Upcast {
            axis: channel,
            amount: c,
        },
        &mut opts,
    ) {
        return None;
    }
    // An upcast by the whole channel axis removed it: later axes moved down by one.
    let wide = wide - usize::from(next.first_reduce < k.first_reduce && channel < wide);
    let last = if n % v as i64 == 0 {
        Opt::Vectorize {
            axis: wide,
            amount: v,
        }
    } else {
        Opt::LoopedUpcast {
            axis: wide,
            amount: v,
            lanes: v,
        }
    };
    if !try_opt(&mut next, last, &mut opts) {
        return None;
    }
    if vectors > 1
        && !try_opt(
            &mut next,
            Opt::Upcast {
                axis: wide,
                amount: vectors,
            },
            &mut opts,
        )
    {
        return None;
    }
    Some((next, opts))
}

/// The pixel-lane tiles to rate, as (output channels, vectors of pixels): one vector with as
/// many channels as the accumulator room holds (the largest count dividing the channels), and
/// where the target counts its vector registers and the row divides into pairs of vectors, two
/// vectors with as many channels as fit beside them (`2c` accumulators, two pixel vectors and
/// a broadcast weight). Two vectors load `c + 2` values per `2c` multiply-adds where one loads
/// `c + 1` per `c`: a 1×1 conv from 144 channels to 24 over 56² pixels ran in 329–366 µs with 6
/// channels × 2 vectors against 439–487 µs with 8 × 1, one from 16 to 96 over 112² in 491–585
/// against 654–679 µs (C copies of both tiles, AVX2, minimum of 200 calls pinned to one core,
/// three rounds, 2026-11-28).
fn pixel_tiles(k: &Kernel, cfg: &OptConfig, channel: usize, n: i64) -> Vec<(usize, usize)> {
    let v = cfg.vec_width;
    let channels = size(k, channel);
    let mut tiles: Vec<(usize, usize)> = largest_divisor(channels, (cfg.max_accs / v).max(1))
        .map(|c| (c, 1))
        .into_iter()
        .collect();
    let room = cfg.vec_registers.saturating_sub(3) / 2;
    if room > 0 && n % (2 * v as i64) == 0 {
        tiles.extend(largest_divisor(channels, room).map(|c| (c, 2)));
    }
    tiles
}
