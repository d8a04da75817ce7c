//! Conv register tiles for cores without float SIMD, sized by the target's float register file
//! ([`OptConfig::float_registers`]), or for an integer sum by its general-purpose registers
//! ([`OptConfig::int_registers`]): the first entry of the strategy table, taken only when the
//! configuration names a register count.
//!
//! With a dual multiply-accumulate ([`OptConfig::dual_mac`]), an int8 sum whose two factors are
//! both consecutive bytes along a reduce axis (a pointwise conv over channel-interleaved
//! activations, see `schedule/interleave.rs`) also gets that axis unrolled by 4, so the
//! linearizer reads each factor as one 32-bit word per four products; its tile is sized as
//! packed words use registers: `c·w` accumulators, two halfword-pair registers for each word of
//! the operand reused across the tile (`min(c, w)` words), two for the word in use, and the two
//! factors' addresses. A packed tile's pixel count need not divide the row: the pixels left
//! over run after a loop of at least two steps as a looped remainder ([`Opt::LoopedUpcast`],
//! then the reduce unroll, which applies to both parts), and tiles are ranked by the loads of
//! the whole row, tail included (KWS DS-CNN's pointwise convs, 125 pixels on 14 registers:
//! 2 × 3 with a 2-pixel tail, 0.84 loaded words per packed step and output instead of the 1.2
//! of the 1 × 5 its divisors allowed; a packed tile may fill the register file, the
//! [`RESERVED`] registers are kept for float tiles' temporaries).
//!
//! A reduce kernel with two output axes that each of two loads broadcasts — a conv's output
//! channels (the input broadcasts them) and pixels (the weight does), for pointwise,
//! first-layer and strided convs alike, or a batched matmul's rows and columns — is tiled `c`
//! channels × `w` pixels (the output-contiguous axis): per reduce step, `c` weights and `w`
//! inputs are loaded into registers and feed `c·w` accumulators. The tile is the
//! one loading the fewest values per multiply-add, `(c + w) / (c·w)`, whose accumulators and
//! operands, `c·w + c + w`, fit the register file less [`RESERVED`] and whose `c·w` copies of
//! the body (plus a packed tile's tail) fit the code budget (`max_unrolled`; size mode lowers
//! it) (ties: the larger tile, then the one without a remainder). A
//! 64-channel pointwise conv over 125 pixels on 32 registers gets 4 × 5 (0.45 loads per MAC
//! instead of the 1.25 of a 4 × 1 tile).
//!
//! Invariant: only upcasts of output axes (and, for a packed integer sum, an unroll of a reduce
//! axis, whose wrapping sum is the same in any order), so each float accumulator keeps its
//! summation order and a tiled kernel computes bit-identical results to the untiled one.

use alloc::vec::Vec;

use super::facts::{size, try_opt, upcasts};
use super::Choice;
use crate::ast::AstOp;
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;
use crate::dtype::DType;
use crate::ops::AluOp;

/// Float registers left for the compiler's temporaries (a product, a spilled bias).
const RESERVED: usize = 2;
/// The largest tile side tried (bounds the unrolled code).
const MAX_SIDE: usize = 16;

/// Tiles a conv-shaped kernel by the register file; false, changing nothing, when the
/// configuration names no registers or the kernel is not conv-shaped.
pub(super) fn choose(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    if let Some(opts) = staged(k, cfg) {
        let mut next = k.clone();
        let mut done = Vec::new();
        if opts.iter().all(|&o| try_opt(&mut next, o, &mut done)) {
            *k = next;
            applied.extend(done);
            return true;
        }
    }
    // The first tile whose opts apply (a looped remainder needs constant axes).
    for tile in tiles(k, cfg) {
        let mut next = k.clone();
        let mut opts = Vec::new();
        if tile_opts(k, tile, cfg)
            .into_iter()
            .all(|o| try_opt(&mut next, o, &mut opts))
        {
            *k = next;
            applied.extend(opts);
            return true;
        }
    }
    false
}

/// The tiles of the module doc that fit, best first, as the search's alternatives.
pub(super) fn space(k: &Kernel, cfg: &OptConfig) -> Vec<Choice> {
    let staged = staged(k, cfg).map(|opts| Choice::new(opts, tile_axes(k).map(|a| a.0)));
    staged
        .into_iter()
        .chain(
            tiles(k, cfg)
                .into_iter()
                .map(|tile| Choice::new(tile_opts(k, tile, cfg), Some(tile.1 .0))),
        )
        .collect()
}

/// Registers a staged tile's reduce loop holds besides its `c` accumulators: the input word's
/// two widened pairs, the weight pair one `ldrd` loads, and the input address, the local's
/// address and the loop's end.
const STAGED_FIXED: usize = 7;

/// The staged tile of a packed int8 sum ([`Opt::StageWeights`]), on a target with a dual
/// multiply-accumulate and a stack budget for scratch ([`OptConfig::stack_scratch`]): `c`
/// output channels × 1 pixel, the channels' weights widened once per channel group into the
/// stack (`c` × the reduce length × 2 bytes) and read as pre-widened pairs, so a packed step
/// costs one input word widened once and, per channel, one pair load and two `smlad`s (17
/// instructions per 16 multiply-adds at `c` = 4 instead of the word tiles' 32 per 24,
/// measured by hand on the KWS DS-CNN's pointwise convs under gcc -O2). `c` is the largest
/// whose accumulators and [`STAGED_FIXED`] registers fit the integer registers, whose local
/// fits the budget, and whose `c` (plus a remainder group's) copies of the packed body fit the
/// code budget; a `c` that does not divide the channels leaves a remainder group after a loop
/// of at least two groups ([`Opt::LoopedUpcast`] on the channel axis). `None` when nothing fits
/// or the linearizer would not stage the result (`linearizer::stageable`: gated or
/// non-consecutive words, a weight that moves with the pixels).
fn staged(k: &Kernel, cfg: &OptConfig) -> Option<Vec<Opt>> {
    let integer = k.ast.find_reduce().is_some_and(|r| !r.dtype().is_float());
    if !integer || !cfg.dual_mac || cfg.stack_scratch == 0 {
        return None;
    }
    packed_axis(k)?;
    let registers = super::facts::tile_registers(k, cfg);
    let (channel, _) = tile_axes(k)?;
    let n = size(k, channel);
    let reduce: i64 = (k.first_reduce..k.first_upcast)
        .map(|a| size(k, a))
        .product();
    if n < 2 || reduce <= 0 {
        return None;
    }
    (2..=MAX_SIDE.min(n as usize)).rev().find_map(|c| {
        let rem = (n % c as i64) as usize;
        let fits = c + STAGED_FIXED <= registers
            && c as i64 * reduce * 2 <= cfg.stack_scratch as i64
            && (rem == 0 || n >= 2 * c as i64)
            && c * PACK <= cfg.max_unrolled;
        if !fits {
            return None;
        }
        let mut opts = alloc::vec![if rem == 0 {
            Opt::Upcast {
                axis: channel,
                amount: c,
            }
        } else {
            Opt::LoopedUpcast {
                axis: channel,
                amount: c,
                lanes: 0,
            }
        }];
        let mut next = k.clone();
        next.apply_opt(opts[0]).ok()?;
        let unroll = packed_unroll(packed_axis(&next)?);
        next.apply_opt(unroll).ok()?;
        opts.push(unroll);
        // Two words per reduce iteration where the innermost reduce loop halves, the body
        // fits the code budget and the second word's widened pair fits the registers: the
        // loop's end test (3 instructions) is then paid once per 16c multiply-adds instead of
        // per 8c (KWS DS-CNN, Cortex-M4, gcc -O2: 21 instructions per 20 multiply-adds at
        // c = 5 with one word, pointwise convs 2,621,280 -> 2,518,188; the first conv at c = 7,
        // whose registers are full, spilled: 437,630 -> 484,201). The linearizer keeps the
        // packed axis fastest, so each word stays four consecutive bytes.
        let inner = (next.first_reduce..next.first_upcast)
            .rev()
            .find(|&a| size(&next, a) % 2 == 0)
            .filter(|_| c * PACK * 2 <= cfg.max_unrolled && c + STAGED_FIXED + 2 <= registers);
        if let Some(a) = inner {
            let twice = Opt::Unroll {
                axis: a - next.first_reduce,
                amount: 2,
            };
            if next.apply_opt(twice).is_ok() {
                opts.push(twice);
            }
        }
        next.apply_opt(Opt::StageWeights).ok()?;
        crate::codegen::linearizer::stageable(&next).then(|| {
            opts.push(Opt::StageWeights);
            opts
        })
    })
}

/// The opts of one tile: the channel upcast, then the pixel upcast — a looped remainder
/// ([`Opt::LoopedUpcast`], which must be the last global opt) when `w` does not divide the
/// pixel axis — then, for a packed dual multiply-accumulate, the reduce unroll by [`PACK`]
/// (an unroll may follow a looped remainder; it applies to both parts).
fn tile_opts(
    k: &Kernel,
    ((channel, c), (wide, w)): ((usize, usize), (usize, usize)),
    cfg: &OptConfig,
) -> Vec<Opt> {
    let mut opts = if w > 1 && size(k, wide) % w as i64 != 0 {
        let mut opts = Vec::new();
        let mut moved = false;
        if c > 1 {
            opts.push(Opt::Upcast {
                axis: channel,
                amount: c,
            });
            // An upcast of the whole channel axis removes it: later axes move down.
            moved = c as i64 == size(k, channel) && channel < wide;
        }
        opts.push(Opt::LoopedUpcast {
            axis: wide - usize::from(moved),
            amount: w,
            lanes: 0,
        });
        opts
    } else {
        let picks: Vec<(usize, usize)> = [(channel, c), (wide, w)]
            .into_iter()
            .filter(|p| p.1 > 1)
            .collect();
        upcasts(k, &picks)
    };
    let mut next = k.clone();
    if cfg.dual_mac && opts.iter().all(|&o| next.apply_opt(o).is_ok()) {
        opts.extend(packed_axis(&next).map(packed_unroll));
    }
    opts
}

/// `((channel axis, c), (pixel axis, w))` for every tile within the register file that tiles
/// something, best first (fewest loads per multiply-add, then the larger tile).
fn tiles(k: &Kernel, cfg: &OptConfig) -> Vec<((usize, usize), (usize, usize))> {
    // An integer sum (a quantized conv) lives in the integer registers; with a dual
    // multiply-accumulate its reduce is left to unroll so the linearizer can pair products.
    let integer = k.ast.find_reduce().is_some_and(|r| !r.dtype().is_float());
    let registers = super::facts::tile_registers(k, cfg);
    // A packed dual multiply-accumulate (both factors four consecutive bytes along a reduce
    // axis) is tiled too: each word loaded is widened into two registers of halfword pairs.
    let packed = integer && cfg.dual_mac && packed_axis(k).is_some();
    if registers == 0 {
        return Vec::new();
    }
    let Some((channel, wide)) = tile_axes(k) else {
        return Vec::new();
    };
    // A packed tile's model already counts every register its loop keeps (accumulators, the
    // widened words, both addresses): it may fill the file. The reserve is for a float
    // tile's temporaries; on the KWS pointwise convs (Cortex-M4, 14 registers) the 2 × 3
    // tile it admits costs gcc -O2 one stack load per step (the loop's end) and ran
    // 3,830,965 → 3,662,600 instructions against the 2 × 2 tile the reserve left.
    let room = if packed {
        registers
    } else {
        registers.saturating_sub(RESERVED)
    };
    let sides = |n: i64| {
        (1..=MAX_SIDE)
            .filter(move |&d| n % d as i64 == 0)
            .collect::<Vec<_>>()
    };
    let n = size(k, wide);
    let mut out: Vec<(usize, usize)> = Vec::new();
    for c in sides(size(k, channel)) {
        // A packed tile's pixel count need not divide the row: the pixels left over
        // (`n % w`) run as a looped remainder, a `c × (n % w)` tile after a loop of at least
        // two steps (with one step the row is straight code, `c·n` bodies: a tile wider than
        // the register file's, split in two). Unpacked tiles keep to divisors: on the KWS
        // first conv (int8, 5-pixel rows peeled at their padded borders) a looped 2 × 3 tile
        // cost 2.6 % fewer instructions for twice the code, a looped 2 × 2 6.7 % more; float
        // tiles were not measured with remainders.
        let fits = |w: usize| n % w as i64 == 0 || (packed && n >= 2 * w as i64);
        for w in (1..=MAX_SIDE).filter(|&w| w as i64 <= n && fits(w)) {
            let tail = (n % w as i64) as usize;
            // The tile is `c·w` copies of the body, its tail `c·(n % w)` more: the code
            // budget bounds them (size mode).
            // Packed: the operand reused across the tile's other side stays widened (two
            // halfword-pair registers per word), the other's two are live only while used,
            // and each factor walks its own address (gcc spilled accumulators of an 8 × 1
            // tile, counted without those: 6.14 M instructions in the KWS pointwise convs).
            let (live, copies) = if packed {
                (c * w + 2 * c.min(w) + 2 + PACKED_ADDRESSES, PACK)
            } else {
                (c * w + c + w, 1)
            };
            if c * w > 1 && live <= room && c * (w + tail) * copies <= cfg.max_unrolled {
                out.push((c, w));
            }
        }
    }
    // Loads per multiply-add over the whole row, `n / w` steps of `c + w` loads and a tail
    // of `c + n % w`, over `c·n` multiply-adds; compared exactly by cross-multiplying (`n`
    // cancels). Ties: the larger tile, then the one without a remainder.
    let loads = |(c, w): (usize, usize)| {
        let (steps, tail) = (n as usize / w, n as usize % w);
        steps * (c + w) + if tail > 0 { c + tail } else { 0 }
    };
    out.sort_by(|&a, &b| {
        (loads(a) * b.0)
            .cmp(&(loads(b) * a.0))
            .then((b.0 * b.1).cmp(&(a.0 * a.1)))
            .then((n % a.1 as i64 != 0).cmp(&(n % b.1 as i64 != 0)))
    });
    out.into_iter()
        .map(|(c, w)| ((channel, c), (wide, w)))
        .collect()
}

/// Registers a packed tile's two factor addresses hold while its reduce runs.
const PACKED_ADDRESSES: usize = 2;

/// Reduce positions one packed dual multiply-accumulate takes (four i8 lanes: one word).
const PACK: usize = 4;

/// The reduce axis (counted from the first reduce axis) along which both factors of an int8
/// product sum are consecutive in memory, its size a whole number of [`PACK`]-byte words: the
/// axis the linearizer's packed dual multiply-accumulate reads (`None` without one).
fn packed_axis(k: &Kernel) -> Option<usize> {
    let src = k.ast.find_reduce()?.src().first()?.clone();
    if !matches!(src.op(), AstOp::Alu(AluOp::MulWide)) {
        return None;
    }
    let mut strides = Vec::new();
    for f in src.src() {
        let AstOp::Load { st, .. } = f.op() else {
            return None;
        };
        if f.dtype() != DType::I8 {
            return None;
        }
        strides.push(st.real_strides());
    }
    let unit = |s: &Vec<Option<crate::symbolic::Node>>, a: usize| {
        s.get(a).and_then(|n| n.as_ref()?.as_const()) == Some(1)
    };
    (k.first_reduce..k.first_upcast)
        .rev()
        .find(|&a| {
            size(k, a) > 0 && size(k, a) % PACK as i64 == 0 && strides.iter().all(|s| unit(s, a))
        })
        .map(|a| a - k.first_reduce)
}

/// The unroll that gives the linearizer [`PACK`] consecutive positions of the packed axis.
fn packed_unroll(axis: usize) -> Opt {
    Opt::Unroll { axis, amount: PACK }
}

/// `(channel, pixel)` axes: the pixel axis is the output-contiguous one, read along by some
/// load (the input) that broadcasts the channel axis, which another load (the weight) reads
/// along while broadcasting the pixel axis.
fn tile_axes(k: &Kernel) -> Option<(usize, usize)> {
    let (store, loads) = k.leaf_strides();
    let big = |a: usize| size(k, a) > 1;
    let zero = |l: &[Option<i64>], a: usize| l.get(a) == Some(&Some(0));
    let wide = (0..k.first_reduce)
        .rev()
        .find(|&a| big(a) && store.get(a) == Some(&Some(1)))?;
    // Any load reading along `wide` may be the input (a residual added after the reduce reads
    // along the channel axis too, so it names none).
    loads.iter().filter(|l| !zero(l, wide)).find_map(|input| {
        let channel = (0..k.first_reduce).rev().find(|&a| {
            a != wide
                && big(a)
                && zero(input, a)
                && loads.iter().any(|l| zero(l, wide) && !zero(l, a))
        })?;
        Some((channel, wide))
    })
}
