//! Facts about a kernel that the strategies read (axis sizes, the constant strides of its
//! leaves, the size of its unrolled body) and the two ways they change it: applying one opt
//! if it fits, and renumbering planned upcasts as whole-axis upcasts remove axes.
//!
//! Invariant: everything here only reads the kernel, except [`try_opt`], which changes it only
//! when the opt applies.

use alloc::vec::Vec;

use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;
use crate::dtype::DType;

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

/// The vector lanes for upcasting output axis `axis` by `amount`: the widest of 16, 8 and 4
/// within the target's vector width that divides `amount` — or, when none does and `amount` is
/// the whole axis, the widest smaller than it (the positions left over are a scalar tail) —
/// when the output is f32 and, once split off, the lanes are contiguous in the store or some
/// load (so a lane group is one vector load or store; checked after the split, since a blocked
/// layout — a conv's weights in channel blocks — is contiguous within a block only); `None`
/// otherwise (a plain upcast: scalar copies).
fn vector_lanes(k: &Kernel, axis: usize, amount: usize, cfg: &OptConfig) -> Option<usize> {
    if !cfg.vector_lanes || k.ast.dtype() != DType::F32 {
        return None;
    }
    let n = size(k, axis);
    let whole = amount as i64 == n;
    let contiguous = |w: usize| {
        let mut split = k.clone();
        split.apply_opt(Opt::Vectorize { axis, amount: w }).is_ok() && {
            let (store, loads) = split.leaf_strides();
            let lane = split.rank() - 1;
            let unit = |s: &Vec<Option<i64>>| s.get(lane) == Some(&Some(1));
            unit(&store) || loads.iter().any(unit)
        }
    };
    let widths = || [16, 8, 4].into_iter().filter(|&w| w <= cfg.vec_width);
    widths()
        // Lanes that split the axis; a tail (the axis unrolled whole) only where the caller
        // upcasts the whole axis anyway, never for a long axis lanes merely do not divide.
        .find(|&w| amount % w == 0 && n % w as i64 == 0 && contiguous(w))
        .or_else(|| widths().find(|&w| whole && amount > w && amount % w != 0 && contiguous(w)))
}

/// The opts that upcast output axis `axis` by `amount` with its innermost lanes as vector UOps
/// ([`vector_lanes`]): an [`Opt::Vectorize`] by the lanes, then an upcast by the rest (none
/// when the lanes are the whole amount); a plain upcast when no lanes fit. `axis` is numbered
/// for the kernel the opts apply to.
pub(super) fn vector_upcast(
    k: &Kernel,
    (axis, amount): (usize, usize),
    cfg: &OptConfig,
) -> Vec<Opt> {
    match vector_lanes(k, axis, amount, cfg) {
        Some(w) if amount % w != 0 => alloc::vec![Opt::Vectorize { axis, amount: w }],
        Some(w) if w < amount => alloc::vec![
            Opt::Vectorize { axis, amount: w },
            Opt::Upcast {
                axis,
                amount: amount / w
            }
        ],
        Some(w) => alloc::vec![Opt::Vectorize { axis, amount: w }],
        None => alloc::vec![Opt::Upcast { axis, amount }],
    }
}

/// Applies [`vector_upcast`]'s opts if they all fit, else a plain upcast if it fits; returns
/// whether an opt was applied.
pub(super) fn try_vector_upcast(
    k: &mut Kernel,
    pick: (usize, usize),
    cfg: &OptConfig,
    applied: &mut Vec<Opt>,
) -> bool {
    let (mut next, mut opts) = (k.clone(), Vec::new());
    if vector_upcast(k, pick, cfg)
        .into_iter()
        .all(|o| try_opt(&mut next, o, &mut opts))
    {
        *k = next;
        applied.extend(opts);
        return true;
    }
    let (axis, amount) = pick;
    try_opt(k, Opt::Upcast { axis, amount }, applied)
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

/// [`upcasts`], with the last pick's innermost lanes as vector UOps when they fit
/// ([`vector_upcast`]): the search's tiles vectorize as the heuristic's do.
pub(super) fn vector_upcasts(k: &Kernel, picks: &[(usize, usize)], cfg: &OptConfig) -> Vec<Opt> {
    let Some((&last, rest)) = picks.split_last() else {
        return Vec::new();
    };
    let mut opts = upcasts(k, rest);
    let mut next = k.clone();
    if opts.iter().any(|&o| next.apply_opt(o).is_err()) {
        // An opt that does not fit: the plain upcasts, for the search to reject.
        return upcasts(k, picks);
    }
    let removed = rest
        .iter()
        .filter(|&&(a, n)| a < last.0 && n as i64 == size(k, a))
        .count();
    opts.extend(vector_upcast(&next, (last.0 - removed, last.1), cfg));
    opts
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
