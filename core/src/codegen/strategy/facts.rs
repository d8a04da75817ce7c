//! Facts about a kernel that the strategies read (axis sizes, the constant strides of its
//! leaves, the size of its unrolled body) and the two ways they change it: applying one opt
//! if it fits, and renumbering planned upcasts as whole-axis upcasts remove axes.
//!
//! Invariant: everything here only reads the kernel, except [`try_opt`], which changes it only
//! when the opt applies.

use alloc::vec::Vec;

use crate::ast::{Ast, AstOp};
use crate::codegen::kernel::{Kernel, Opt};

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

/// The register file a register tile of `k` fills: the general-purpose registers when its
/// reduce sums integers (a quantized conv's i32 accumulators), the float registers otherwise.
pub(super) fn tile_registers(k: &Kernel, cfg: &crate::codegen::opt::OptConfig) -> usize {
    match k.ast.find_reduce() {
        Some(r) if !r.dtype().is_float() => cfg.int_registers,
        _ => cfg.float_registers,
    }
}

/// The size of `axis` (0 when it is symbolic).
pub(super) fn size(k: &Kernel, axis: usize) -> i64 {
    k.full_shape[axis].as_const().unwrap_or(0)
}

/// The number of unrolled copies of the kernel body: the product of the upcast axes' sizes.
pub(super) fn upcast_product(k: &Kernel) -> usize {
    (k.first_upcast..k.rank())
        .map(|a| size(k, a).max(1) as usize)
        .product()
}

/// Split amounts for an axis of size `s`: the `tried` amounts up to `limit` that divide it,
/// and the whole axis when it is small.
pub(super) fn amounts(s: usize, limit: usize, tried: &[usize]) -> Vec<usize> {
    let mut v: Vec<usize> = tried
        .iter()
        .copied()
        .filter(|&a| a <= limit && a <= s && s % a == 0)
        .collect();
    if s > 1 && s <= limit && !v.contains(&s) {
        v.push(s);
    }
    v
}

/// Upcasts of (original axis, amount) in order, renumbering axes as whole-axis upcasts remove
/// theirs.
pub(super) fn upcasts(k: &Kernel, picks: &[(usize, usize)]) -> Vec<Opt> {
    let mut removed: Vec<usize> = Vec::new();
    let mut opts = Vec::new();
    for &(axis, amount) in picks {
        let shift = removed.iter().filter(|&&r| r < axis).count();
        opts.push(Opt::Upcast {
            axis: axis - shift,
            amount,
        });
        if amount as i64 == size(k, axis) {
            removed.push(axis);
        }
    }
    opts
}
