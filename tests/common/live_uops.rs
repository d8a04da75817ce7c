//! Which UOps of a lowered kernel a store reads, directly or through other UOps: the ones the
//! C renderer prints (a value a rewrite replaced stays in the list, unread).
//!
//! Invariant: `live[i]` is true exactly when UOp `i` is a store or an operand, at any depth,
//! of one.

#![allow(dead_code)]

use picograd::codegen::uops::{UOp, UOpKind};

/// One flag per UOp of `uops`: does a store read it?
pub fn live_uops(uops: &[UOp]) -> Vec<bool> {
    let mut live = vec![false; uops.len()];
    for (i, u) in uops.iter().enumerate().rev() {
        if u.kind == UOpKind::Store || live[i] {
            live[i] = true;
            u.src.iter().for_each(|&s| live[s as usize] = true);
        }
    }
    live
}
