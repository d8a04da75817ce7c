//! Vectorizing an elementwise kernel: the axis the output is contiguous on is upcast by the
//! target's vector width, so each iteration loads, computes and stores one vector.
//!
//! - Heuristic: the widest power of two from the vector width down to 4 that splits the axis
//!   (and is smaller than it), as vector lanes ([`Opt::Vectorize`]) when the output is f32.
//! - Search space: the same axis upcast by each power of two from 2 to the vector width that
//!   divides it.
//!
//! Invariant: only an upcast of an output axis (no reduce), so results are bit-identical.

use alloc::vec::Vec;

use super::facts::{size, try_vector_upcast, vector_upcasts};
use super::Choice;
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::opt::OptConfig;

/// The last global axis the output is stored contiguously along (stride 1).
fn contiguous_axis(k: &Kernel) -> Option<usize> {
    let (store, _) = k.leaf_strides();
    (0..k.first_reduce)
        .rev()
        .find(|&a| store.get(a) == Some(&Some(1)))
}

/// Upcasts the output-contiguous axis by the vector width (or a divisor of it); always taken.
pub(super) fn choose(k: &mut Kernel, cfg: &OptConfig, applied: &mut Vec<Opt>) -> bool {
    let Some(axis) = contiguous_axis(k) else {
        return true;
    };
    let mut amt = cfg.vec_width;
    while amt >= 4 {
        let n = size(k, axis);
        if n > amt as i64 && n % amt as i64 == 0 && try_vector_upcast(k, (axis, amt), cfg, applied)
        {
            return true;
        }
        amt /= 2;
    }
    true
}

/// The output-contiguous axis upcast by each power of two up to the vector width dividing it.
pub(super) fn space(k: &Kernel, cfg: &OptConfig) -> Vec<Choice> {
    let Some(axis) = contiguous_axis(k) else {
        return Vec::new();
    };
    let n = size(k, axis);
    let widths =
        core::iter::successors(Some(2usize), |w| Some(w * 2)).take_while(|&w| w <= cfg.vec_width);
    widths
        .filter(|&w| n > 1 && n % w as i64 == 0)
        .map(|w| Choice::new(vector_upcasts(k, &[(axis, w)], cfg), Some(axis)))
        .collect()
}
