//! Running vector UOps lane by lane: before the interpreter lowers a kernel, every vector UOp
//! (`VecAcc`, `VecLoad`, `VecStore`, `VecAlu`, `Vectorize`, `Gep`, `PairWiden`, an `Assign` to
//! a vector accumulator) is expanded into one scalar UOp per lane, so the rest of the interpreter sees
//! scalar UOps only.
//!
//! Invariant: lane `k` of a vector UOp becomes exactly the scalar UOp the C renderer's vector
//! statement computes in lane `k` — a load (gated by the lane's gate, if any) or store at
//! `index + k`, the same ALU op on the
//! operands' lane `k` — so the interpreter stays the C backend's oracle for vector kernels.
//! `Vectorize` and `Gep` only rename values and emit nothing. Interpreter errors of an expanded
//! kernel name UOp positions of the expanded list.

use alloc::vec::Vec;

use crate::codegen::uops::{lanes, LinearKernel, UOp, UOpKind};
use crate::ops::{AluOp, Scalar};

/// The kernel with its vector UOps expanded lane by lane; `None` when it has none.
pub(super) fn scalarize(k: &LinearKernel) -> Option<LinearKernel> {
    if !k.uops.iter().any(|u| is_vector_kind(&u.kind)) {
        return None;
    }
    let mut out: Vec<UOp> = Vec::with_capacity(k.uops.len() * 2);
    // For each UOp of `k`: the new UOp of each of its lanes.
    let mut map: Vec<Vec<u32>> = Vec::with_capacity(k.uops.len());
    for (i, u) in k.uops.iter().enumerate() {
        let w = lanes(&k.uops, i);
        let lane = |s: u32, n: usize| map[s as usize][n];
        let scalar = |s: &[u32]| s.iter().map(|&s| lane(s, 0)).collect::<Vec<u32>>();
        let push = |out: &mut Vec<UOp>, kind: UOpKind, src: Vec<u32>| {
            out.push(UOp {
                kind,
                dtype: u.dtype,
                src,
            });
            (out.len() - 1) as u32
        };
        let new: Vec<u32> = match &u.kind {
            UOpKind::VecAcc { init, .. } => (0..w)
                .map(|_| push(&mut out, UOpKind::DefineAcc(*init), Vec::new()))
                .collect(),
            UOpKind::VecLoad { stride, .. } => {
                let (buf, base) = (lane(u.src[0], 0), lane(u.src[1], 0));
                (0..w)
                    .map(|n| {
                        let idx = offset(&mut out, base, n * usize::from(*stride));
                        // The gated form: lane `n` is a `Load` gated by source `2 + n`.
                        let mut src = alloc::vec![buf, idx];
                        src.extend(u.src.get(2 + n).map(|&g| lane(g, 0)));
                        push(&mut out, UOpKind::Load, src)
                    })
                    .collect()
            }
            UOpKind::VecStore { .. } => {
                let (buf, base) = (lane(u.src[0], 0), lane(u.src[1], 0));
                (0..w)
                    .map(|n| {
                        let idx = offset(&mut out, base, n);
                        let v = lane(u.src[2], n);
                        push(&mut out, UOpKind::Store, alloc::vec![buf, idx, v])
                    })
                    .collect()
            }
            UOpKind::VecAlu { op, .. } => (0..w)
                .map(|n| {
                    let src = u.src.iter().map(|&s| lane(s, n)).collect();
                    push(&mut out, UOpKind::Alu(*op), src)
                })
                .collect(),
            UOpKind::Assign => (0..w)
                .map(|n| {
                    let src = u.src.iter().map(|&s| lane(s, n)).collect();
                    push(&mut out, UOpKind::Assign, src)
                })
                .collect(),
            // The packed dual MAC (`acc`, two 4-lane words): two scalar `DualMac`s, lanes 0–1
            // then 2–3, the sum the C helper computes (integer sums wrap, so any order).
            UOpKind::DualMac if u.src.len() == 3 => {
                let (a, b) = (u.src[1], u.src[2]);
                let lo = alloc::vec![
                    lane(u.src[0], 0),
                    lane(a, 0),
                    lane(b, 0),
                    lane(a, 1),
                    lane(b, 1)
                ];
                let acc = push(&mut out, UOpKind::DualMac, lo);
                let hi = alloc::vec![acc, lane(a, 2), lane(b, 2), lane(a, 3), lane(b, 3)];
                alloc::vec![push(&mut out, UOpKind::DualMac, hi)]
            }
            UOpKind::Vectorize => scalar(&u.src),
            UOpKind::Gep(n) => alloc::vec![lane(u.src[0], usize::from(*n))],
            // Lanes (0, 2, 1, 3) of the word, each cast to the i16 it sign-extends to.
            UOpKind::PairWiden => [0, 2, 1, 3]
                .iter()
                .map(|&n| push(&mut out, UOpKind::Cast, alloc::vec![lane(u.src[0], n)]))
                .collect(),
            kind @ (UOpKind::DefineGlobal { .. }
            | UOpKind::DefineLocal { .. }
            | UOpKind::DefineVar { .. }
            | UOpKind::Const(_)
            | UOpKind::Loop
            | UOpKind::EndLoop
            | UOpKind::DefineAcc(_)
            | UOpKind::Load
            | UOpKind::Store
            | UOpKind::Alu(_)
            | UOpKind::Cast
            | UOpKind::Bitcast
            | UOpKind::DualMac) => {
                let src = scalar(&u.src);
                alloc::vec![push(&mut out, kind.clone(), src)]
            }
        };
        map.push(new);
    }
    Some(LinearKernel {
        uops: out,
        ..k.clone()
    })
}

/// Is `kind` one of the vector forms (a `Gep` or `Vectorize` included)?
fn is_vector_kind(kind: &UOpKind) -> bool {
    matches!(
        kind,
        UOpKind::VecAcc { .. }
            | UOpKind::VecLoad { .. }
            | UOpKind::VecStore { .. }
            | UOpKind::VecAlu { .. }
            | UOpKind::Vectorize
            | UOpKind::Gep(_)
            | UOpKind::PairWiden
    )
}

/// `base + n` in `base`'s dtype (`base` itself for lane 0).
fn offset(out: &mut Vec<UOp>, base: u32, n: usize) -> u32 {
    if n == 0 {
        return base;
    }
    let dtype = out[base as usize].dtype;
    out.push(UOp {
        kind: UOpKind::Const(Scalar::from_i64(n as i64, dtype)),
        dtype,
        src: Vec::new(),
    });
    let c = (out.len() - 1) as u32;
    out.push(UOp {
        kind: UOpKind::Alu(AluOp::Add),
        dtype,
        src: alloc::vec![base, c],
    });
    (out.len() - 1) as u32
}
