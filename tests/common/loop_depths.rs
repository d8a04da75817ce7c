//! The loop nesting depth of each UOp of a lowered kernel, for tests that check where a value
//! is computed (hoisting).
//!
//! Invariant: a `Loop` and its `EndLoop` get the depth outside the loop; every UOp between
//! them one more.

#![allow(dead_code)]

use picograd::codegen::uops::{LinearKernel, UOpKind};

/// The loop nesting depth at each UOp (a `Loop` at its outer depth, an `EndLoop` too).
pub fn depths(lk: &LinearKernel) -> Vec<usize> {
    let mut d = 0;
    lk.uops
        .iter()
        .map(|u| match u.kind {
            UOpKind::Loop => {
                d += 1;
                d - 1
            }
            UOpKind::EndLoop => {
                d -= 1;
                d + 1
            }
            _ => d,
        })
        .collect()
}
