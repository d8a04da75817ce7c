//! The hand-coded kernel optimizer: picks [`Opt`]s from a kernel's shape and strides so clang
//! gets register-blocked, vectorizable straight-line code.
//!
//! - Reductions (matmul, conv): an output register tile — the global axis the output is
//!   contiguous on and some input broadcasts (stride 0) is upcast by about a vector or more, a
//!   second broadcast axis by up to 8 — then small reduce axes (kernel windows) are unrolled.
//!   Conv-shaped kernels get their own tile instead ([`super::opt_conv`]).
//! - Elementwise kernels: the output's contiguous axis is upcast by the vector width.
//!
//! Invariant: only upcasts and unrolls are chosen, and both keep each accumulator's summation
//! order, so an optimized kernel computes bit-identical results to the unoptimized one.

use alloc::vec::Vec;

use super::kernel::{Kernel, Opt};
use crate::ast::{Ast, AstOp};

/// How the optimizer shapes kernels for a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OptConfig {
    /// f32 lanes in one SIMD register (4 for SSE/NEON, 8 for AVX2, 16 for AVX-512).
    pub vec_width: usize,
    /// At most this many accumulators (output values kept in registers per iteration).
    pub max_accs: usize,
    /// At most this many unrolled copies of the kernel body (upcasts times unrolls).
    pub max_unrolled: usize,
    /// Bytes of one core's L1 data cache; 0 when the target has no data cache.
    pub l1_bytes: usize,
    /// Bytes of one core's L2 cache; 0 when the target has none. The scheduler's layout
    /// transforms (`schedule/layout.rs`) size panels by it, and make no copies when it is 0 (a
    /// microcontroller's scarce resource is its static arena, which a copy would grow).
    pub l2_bytes: usize,
}

impl OptConfig {
    /// For 32-bit microcontrollers (16–32 registers, no float SIMD): output tiles of up to 8
    /// accumulators. The export default; `examples/device_bench.rs` measured it best of the
    /// settings tried on Cortex-M4 and RV32IMAFC.
    pub fn small_device() -> OptConfig {
        OptConfig {
            vec_width: 2,
            max_accs: 8,
            max_unrolled: 32,
            l1_bytes: 0,
            l2_bytes: 0,
        }
    }

    /// A configuration for a vector width, with register budgets that suit it and the caches of
    /// a typical desktop core ([`OptConfig::DEFAULT_L1_BYTES`], [`OptConfig::DEFAULT_L2_BYTES`];
    /// a device that knows better sets them with [`OptConfig::with_caches`]).
    pub fn for_vec_width(vec_width: usize) -> OptConfig {
        let vec_width = vec_width.clamp(1, 16);
        OptConfig {
            vec_width,
            max_accs: (vec_width * 8).max(16),
            max_unrolled: 512,
            l1_bytes: OptConfig::DEFAULT_L1_BYTES,
            l2_bytes: OptConfig::DEFAULT_L2_BYTES,
        }
    }

    /// L1 data cache assumed when a desktop target does not say (32 KiB: x86-64 and most
    /// AArch64 cores of the last decade).
    pub const DEFAULT_L1_BYTES: usize = 32 * 1024;
    /// L2 cache assumed when a desktop target does not say (512 KiB: the smallest per-core L2 of
    /// current x86-64 server and desktop cores; a smaller guess only makes panels narrower).
    pub const DEFAULT_L2_BYTES: usize = 512 * 1024;

    /// The same configuration with the given cache sizes (bytes; 0 = no such cache).
    pub fn with_caches(self, l1_bytes: usize, l2_bytes: usize) -> OptConfig {
        OptConfig {
            l1_bytes,
            l2_bytes,
            ..self
        }
    }
}

/// Chooses and applies optimizations; returns the ones applied, in order.
pub fn hand_coded(k: &mut Kernel, cfg: &OptConfig) -> Vec<Opt> {
    let mut applied = Vec::new();
    if k.has_reduce() {
        if !super::opt_conv::conv_tile(k, cfg, &mut applied) {
            register_tile(k, cfg, &mut applied);
        }
        unroll_small_reduces(k, cfg, &mut applied);
    } else {
        vectorize_elementwise(k, cfg, &mut applied);
    }
    applied
}

/// Applies `opt` if it fits, recording it.
pub(super) fn try_opt(k: &mut Kernel, opt: Opt, applied: &mut Vec<Opt>) -> bool {
    let mut next = k.clone();
    if next.apply_opt(opt).is_err() {
        return false;
    }
    *k = next;
    applied.push(opt);
    true
}

/// The constant stride of every leaf on each axis: `(strides of the store, strides of each
/// load)`; `None` where a stride is not a constant (masked, multi-view or symbolic).
pub(super) fn strides(k: &Kernel) -> (Vec<Option<i64>>, Vec<Vec<Option<i64>>>) {
    let mut store = Vec::new();
    let mut loads = Vec::new();
    collect_strides(&k.ast, &mut store, &mut loads);
    (store, loads)
}

fn collect_strides(ast: &Ast, store: &mut Vec<Option<i64>>, loads: &mut Vec<Vec<Option<i64>>>) {
    let consts = |st: &crate::shape::ShapeTracker| {
        st.real_strides()
            .iter()
            .map(|s| s.as_ref().and_then(|n| n.as_const()))
            .collect::<Vec<_>>()
    };
    // Each distinct leaf once, in pre-order.
    for n in ast.nodes() {
        match n.op() {
            AstOp::Store { st, .. } => *store = consts(st),
            AstOp::Load { st, .. } => loads.push(consts(st)),
            _ => {}
        }
    }
}

pub(super) fn size(k: &Kernel, axis: usize) -> i64 {
    k.full_shape[axis].as_const().unwrap_or(0)
}

/// Global axes some load broadcasts (stride 0): upcasting them lets one loaded value feed
/// several accumulators. The output-contiguous one first.
fn broadcast_axes(k: &Kernel) -> Vec<usize> {
    let (store, loads) = strides(k);
    let mut axes: Vec<usize> = (0..k.first_reduce)
        .filter(|&a| size(k, a) > 1)
        .filter(|&a| loads.iter().any(|l| l.get(a) == Some(&Some(0))))
        .collect();
    axes.sort_by_key(|&a| (store.get(a) != Some(&Some(1)), usize::MAX - a));
    axes
}

fn upcast_product(k: &Kernel) -> usize {
    (k.first_upcast..k.rank())
        .map(|a| size(k, a).max(1) as usize)
        .product()
}

/// Upcasts up to two broadcast axes into an output tile of at most `max_accs` values: the
/// second axis first (by up to 8), then the output-contiguous one (by about a vector), so that
/// neighbouring accumulators are neighbouring outputs.
fn register_tile(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) {
    let axes = broadcast_axes(k);
    let v = cfg.vec_width;
    let Some(&wide) = axes.first() else {
        return;
    };
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
    let amounts: &[usize] = if axes.len() > 1 {
        &[v, 8, 4, 2]
    } else {
        &[4 * v, 2 * v, v, 8, 4, 2]
    };
    // A short output axis (an MLP's 10 logits) is upcast whole: its width is the best vector
    // available, where a divisor (2 for 10) would leave scalar code.
    let whole = size(k, wide) as usize;
    let whole = (whole > 2 && whole <= 2 * v && !amounts.contains(&whole)).then_some(whole);
    for amt in whole.into_iter().chain(amounts.iter().copied()) {
        if amt <= room
            && try_opt(
                k,
                Opt::Upcast {
                    axis: wide,
                    amount: amt,
                },
                applied,
            )
        {
            return;
        }
    }
}

/// Fully unrolls the innermost reduce axes (up to two) while they are small (a conv's window)
/// and the unrolled body stays within budget. They are unrolled outermost first: unrolled copies
/// run with the first unrolled axis slowest, so this keeps the summation order.
fn unroll_small_reduces(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) {
    let reduces = k.first_upcast - k.first_reduce;
    let mut body = upcast_product(k);
    let mut count = 0;
    while count < 2.min(reduces) {
        let s = size(k, k.first_upcast - 1 - count);
        if s <= 1 || s > 8 || body * s as usize > cfg.max_unrolled {
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
            return;
        }
    }
}

/// Upcasts the axis the output is contiguous on by the vector width (or a divisor of it).
fn vectorize_elementwise(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) {
    let (store, _) = strides(k);
    let Some(axis) = (0..k.first_reduce)
        .rev()
        .find(|&a| store.get(a) == Some(&Some(1)))
    else {
        return;
    };
    let mut amt = cfg.vec_width;
    while amt >= 4 {
        if size(k, axis) > amt as i64 && try_opt(k, Opt::Upcast { axis, amount: amt }, applied) {
            return;
        }
        amt /= 2;
    }
}
