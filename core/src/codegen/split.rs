//! Thread splitting: which loop of a lowered kernel may be divided among cores.
//!
//! A kernel is split on its outermost global loop: each core runs the iterations
//! `[end * core_id / core_count, end * (core_id + 1) / core_count)`. The C calling convention
//! then ends in `int32_t core_id, int32_t core_count` (DESIGN.md, "Kernel calling convention").
//!
//! Invariant: a loop is splittable only when every side effect of the kernel (stores,
//! accumulator definitions and updates) happens inside it, so its iterations are independent
//! (each writes its own outputs) and core 0 of 1 computes exactly the unsplit kernel.

use super::uops::{LinearKernel, UOpKind};

/// The index of the `Loop` UOp to split across cores, if the kernel has one.
pub fn outer_split(k: &LinearKernel) -> Option<usize> {
    let mut depth = 0usize;
    let mut found = None;
    for (i, u) in k.uops.iter().enumerate() {
        match u.kind {
            UOpKind::Loop => {
                if depth == 0 {
                    if found.is_some() {
                        return None;
                    }
                    found = Some(i);
                }
                depth += 1;
            }
            UOpKind::EndLoop => depth = depth.saturating_sub(1),
            UOpKind::Store
            | UOpKind::VecStore { .. }
            | UOpKind::DefineAcc(_)
            | UOpKind::VecAcc { .. }
            | UOpKind::Assign
                if depth == 0 =>
            {
                return None;
            }
            _ => {}
        }
    }
    found
}
