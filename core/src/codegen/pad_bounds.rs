//! Padding by loop bounds: a UOp pass that splits a loop where the padding gates inside it
//! (integer comparisons on the loop variable, `0 < oy + ky`, `oy + ky < 9`) are statically true
//! or false, so the interior runs without gates and the borders are peeled (a one-iteration part
//! becomes straight-line code with the loop variable a constant). In each part, gates decided by
//! the part's bounds become constants and fold away: a load whose gate always holds is a plain
//! load, one whose gate never holds is the padding value 0 (a gated vector load: all its lanes'
//! gates holding is a plain vector load, none holding a vector of zeros), and a
//! multiply-accumulate of a constant zero (`fma(0, w, acc)`, in every lane for a vector) is the
//! accumulator itself: padding taps are never multiplied
//! (a dual multiply-accumulate keeps only its products without a zero factor).
//! An index `x % c` or `x / c` whose operand the part's bounds keep in `[k·c, (k+1)·c)` is
//! `x - k·c` or `k`.
//!
//! Invariants: the parts cover the loop's range in order, so every accumulator folds the same
//! values in the same order; the only values dropped are products with the constant 0 added to
//! an accumulator (integer ones, in a dual multiply-accumulate, exactly). Such a step is an exact no-op when the other factor is finite and the
//! accumulator is not `-0.0` — always the case unless a weight is ±inf or NaN (the product would
//! be NaN) or a fused sum of underflowing products rounded to `-0.0` (adding `+0` would give
//! `+0`). The README's numeric-semantics section says so. Loops with symbolic bounds, without
//! comparisons on their variable, or longer than [`MAX_TRIPS`] are left as they are, and so is a
//! loop that would split into more parts than the code budget (`max_copies`, the target's
//! `OptConfig::max_unrolled`: each part is a copy of the loop's body), which keeps its gates
//! instead. The budget bounds each split, not the product over a nest: speed mode's (32; 64 on
//! the FPU targets) is above [`MAX_PARTS`], so it splits as it always did; size mode's (2) keeps
//! the gates of a loop padded on both sides.

use alloc::vec;
use alloc::vec::Vec;

use super::c::uop_range;
use super::uops::{UOp, UOpKind};
use crate::dtype::DType;
use crate::ops::{eval_alu, AluOp, Scalar};

/// Loops longer than this are not split (the pass evaluates the gates once per iteration).
const MAX_TRIPS: i128 = 4096;
/// At most this many parts per loop (more would grow the code for little gain).
const MAX_PARTS: usize = 9;
/// At most this many UOp evaluations when deciding where to split one loop.
const MAX_WORK: i128 = 1 << 20;

type Range = Option<(i128, i128)>;

/// Splits loops at their padding gates and folds the decided gates (see the module doc), with
/// no code budget.
pub fn pad_bounds(uops: Vec<UOp>) -> Vec<UOp> {
    pad_bounds_within(uops, usize::MAX)
}

/// [`pad_bounds`] splitting a loop into at most `max_copies` parts (1: no split at all).
pub fn pad_bounds_within(uops: Vec<UOp>, max_copies: usize) -> Vec<UOp> {
    let ends = loop_ends(&uops);
    let mut e = Emitter {
        old: &uops,
        ends,
        map: vec![None; uops.len()],
        out: Vec::with_capacity(uops.len()),
        range: Vec::with_capacity(uops.len()),
        max_copies,
        forced: vec![None; uops.len()],
    };
    e.emit(0, uops.len());
    e.out
}

/// For each `Loop`, the index of its `EndLoop` (0 elsewhere).
fn loop_ends(uops: &[UOp]) -> Vec<usize> {
    let mut ends = vec![0; uops.len()];
    for (i, u) in uops.iter().enumerate() {
        if u.kind == UOpKind::EndLoop {
            if let Some(&l) = u.src.first() {
                ends[l as usize] = i;
            }
        }
    }
    ends
}

/// Re-emits the old UOps, splitting loops and folding decided gates on the way.
struct Emitter<'a> {
    old: &'a [UOp],
    ends: Vec<usize>,
    /// The new UOp standing for each old one (`None` before it is emitted).
    map: Vec<Option<u32>>,
    out: Vec<UOp>,
    /// Bounds of each new UOp's integer value, where known and within its dtype.
    range: Vec<Range>,
    /// The code budget: a loop is split into at most this many parts.
    max_copies: usize,
    /// Comparisons a symbolic split decided for the part being emitted (by old index).
    forced: Vec<Option<bool>>,
}

/// A comparison of a loop's variable with a loop-invariant `base + offset` (`base` an old UOp,
/// typically a kernel variable): `ridx < base + c` holds below the point `base + c`, and
/// `base + c < ridx` from the point `base + c + 1`.
struct SymGate {
    /// The comparison (old index).
    cmp: usize,
    /// Its point's offset from the base.
    point: i128,
    /// Does it hold below the point (`ridx < base + c`) rather than from it?
    below: bool,
}

impl Emitter<'_> {
    /// Emits old UOps `[from, to)`.
    fn emit(&mut self, from: usize, to: usize) {
        let mut i = from;
        while i < to {
            if self.old[i].kind == UOpKind::Loop {
                self.emit_loop(i);
                i = self.ends[i] + 1;
            } else {
                self.emit_one(i);
                i += 1;
            }
        }
    }

    fn emit_loop(&mut self, at: usize) {
        let end = self.ends[at];
        let runs = self.runs(at);
        match runs.as_deref() {
            Some(runs) if runs.len() > 1 && runs.len() <= self.max_copies => {
                for &(a, b) in runs {
                    self.emit_part(at, a, b);
                }
            }
            _ if self.split_symbolic(at) => {}
            _ => {
                let l = self.copy(at);
                self.emit(at + 1, end);
                self.push(UOp {
                    kind: UOpKind::EndLoop,
                    dtype: self.old[end].dtype,
                    src: vec![l],
                });
            }
        }
    }

    /// The loop `at` over `[a, b)`: straight-line code for one iteration, else a loop.
    fn emit_part(&mut self, at: usize, a: i128, b: i128) {
        let (end, dtype) = (self.ends[at], self.old[at].dtype);
        if b - a == 1 {
            let c = self.konst(Scalar::from_i64(a as i64, dtype));
            self.map[at] = Some(c);
            self.emit(at + 1, end);
            return;
        }
        if self.split_symbolic_in(at, a, b) {
            return;
        }
        let (lo, hi) = (
            self.konst(Scalar::from_i64(a as i64, dtype)),
            self.konst(Scalar::from_i64(b as i64, dtype)),
        );
        self.emit_loop_over(at, lo, hi);
    }

    /// The body of loop `at` inside a new loop from `lo` to `hi` (new UOps).
    fn emit_loop_over(&mut self, at: usize, lo: u32, hi: u32) {
        let end = self.ends[at];
        let l = self.push(UOp {
            kind: UOpKind::Loop,
            dtype: self.old[at].dtype,
            src: vec![lo, hi],
        });
        self.map[at] = Some(l);
        self.emit(at + 1, end);
        self.push(UOp {
            kind: UOpKind::EndLoop,
            dtype: self.old[end].dtype,
            src: vec![l],
        });
    }

    /// Splits loop `at` (constant bounds) at symbolic points: where its variable crosses
    /// `base + c` for the gates comparing it with one loop-invariant base plus constants (a KV
    /// cache's row `len - 1`: `len - 2 < ridx & ridx < len`). The points, clamped to the loop's
    /// range, are in the order of their offsets, so the parts cover the range in order (some
    /// possibly empty), and in each part every such gate is decided. `false` (nothing emitted)
    /// when no base is shared, the bounds are not constant or the budget is too small.
    fn split_symbolic(&mut self, at: usize) -> bool {
        let src = &self.old[at].src;
        let (Some(lo), Some(hi)) = (
            self.mapped_range(src[0]).and_then(exact),
            self.mapped_range(src[1]).and_then(exact),
        ) else {
            return false;
        };
        self.split_symbolic_in(at, lo, hi)
    }

    /// [`Emitter::split_symbolic`] over `[lo, hi)` (the loop's range, or one part of it).
    fn split_symbolic_in(&mut self, at: usize, lo: i128, hi: i128) -> bool {
        let Some((base, gates)) = self.sym_gates(at) else {
            return false;
        };
        let mut points: Vec<i128> = gates.iter().map(|g| g.point).collect();
        points.sort_unstable();
        points.dedup();
        if points.len() + 1 > self.max_copies.min(MAX_PARTS) || hi - lo < 2 {
            return false;
        }
        let dtype = self.old[at].dtype;
        let base = self.new_of(base as u32);
        // clamp(base + c) = max(lo, -max(-hi, -(base + c))): ops whose bounds are known.
        let mut bounds = vec![self.konst(Scalar::from_i64(lo as i64, dtype))];
        for &c in &points {
            let off = self.konst(Scalar::from_i64(c as i64, dtype));
            let x = self.alu(AluOp::Add, dtype, vec![base, off]);
            let nx = self.alu(AluOp::Neg, dtype, vec![x]);
            let nhi = self.konst(Scalar::from_i64(-(hi as i64), dtype));
            let m = self.alu(AluOp::Max, dtype, vec![nhi, nx]);
            let under = self.alu(AluOp::Neg, dtype, vec![m]);
            let lo_c = self.konst(Scalar::from_i64(lo as i64, dtype));
            bounds.push(self.alu(AluOp::Max, dtype, vec![lo_c, under]));
        }
        bounds.push(self.konst(Scalar::from_i64(hi as i64, dtype)));
        for part in 0..bounds.len() - 1 {
            // In part `j` the variable is at or past points 1..=j and before the others.
            for g in &gates {
                let past = points.iter().position(|&p| p == g.point).unwrap_or(0) < part;
                self.forced[g.cmp] = Some(past != g.below);
            }
            self.emit_loop_over(at, bounds[part], bounds[part + 1]);
        }
        for g in &gates {
            self.forced[g.cmp] = None;
        }
        true
    }

    /// The comparisons in loop `at`'s body of its variable with one kernel variable plus
    /// constants, and that variable; `None` when there are none or they have different ones.
    fn sym_gates(&self, at: usize) -> Option<(usize, Vec<SymGate>)> {
        let end = self.ends[at];
        let mut base = None;
        let mut gates = Vec::new();
        for (j, u) in self.old.iter().enumerate().take(end).skip(at + 1) {
            if !self.int_cmp(u) {
                continue;
            }
            let (a, b) = (u.src[0] as usize, u.src[1] as usize);
            let (other, below) = match (a == at, b == at) {
                (true, false) => (b, true),
                (false, true) => (a, false),
                _ => continue,
            };
            if self.reads_var(other, at)
                || self.mapped_range(other as u32).and_then(exact).is_some()
            {
                continue;
            }
            let (v, c) = self.base_offset(other);
            // Kernel variables only: fixed-shape kernels keep the splits they had.
            if !matches!(self.old[v].kind, UOpKind::DefineVar { .. }) {
                continue;
            }
            if *base.get_or_insert(v) != v {
                return None;
            }
            let point = if below { c } else { c + 1 };
            gates.push(SymGate {
                cmp: j,
                point,
                below,
            });
        }
        let base = base?;
        Some((base, gates))
    }

    /// Does old UOp `n` depend on loop `at`'s variable (or a loop inside it)?
    fn reads_var(&self, n: usize, at: usize) -> bool {
        n == at
            || (n > at
                && (self.old[n].kind == UOpKind::Loop
                    || self.old[n]
                        .src
                        .iter()
                        .any(|&s| self.reads_var(s as usize, at))))
    }

    /// An old UOp as `base + c`: through an integer `Add` of a constant, else itself + 0.
    fn base_offset(&self, n: usize) -> (usize, i128) {
        let u = &self.old[n];
        if u.kind == UOpKind::Alu(AluOp::Add) {
            let (a, b) = (u.src[0] as usize, u.src[1] as usize);
            let cst = |i: usize| match &self.old[i].kind {
                UOpKind::Const(s) => Some(i128::from(s.as_i64())),
                _ => None,
            };
            match (cst(a), cst(b)) {
                (None, Some(c)) => return (a, c),
                (Some(c), None) => return (b, c),
                _ => {}
            }
        }
        (n, 0)
    }

    fn alu(&mut self, op: AluOp, dtype: DType, src: Vec<u32>) -> u32 {
        self.push(UOp {
            kind: UOpKind::Alu(op),
            dtype,
            src,
        })
    }

    /// Where to split loop `at`: consecutive iterations with the same decided gates form one
    /// part. `None` when the loop is not split (symbolic bounds, no comparisons, too long).
    fn runs(&self, at: usize) -> Option<Vec<(i128, i128)>> {
        let end = self.ends[at];
        let src = &self.old[at].src;
        let (lo, hi) = (self.mapped_range(src[0])?, self.mapped_range(src[1])?);
        let (lo, hi) = (exact(lo)?, exact(hi)?);
        let body = &self.old[at + 1..end];
        let has_cmp = body.iter().any(|u| self.int_cmp(u));
        let trips = hi - lo;
        if !has_cmp || !(2..=MAX_TRIPS).contains(&trips) || trips * body.len() as i128 > MAX_WORK {
            return None;
        }
        let sigs: Vec<_> = (lo..hi).map(|v| self.signature(at, v)).collect();
        // An iteration where a gate on this loop's variable still depends on an inner loop is
        // its own part (with the variable a constant, the inner loop splits), unless that
        // makes too many parts (a gate that no bound decides, such as one on a remainder).
        let runs = [true, false]
            .into_iter()
            .map(|peel| parts(lo, &sigs, peel))
            .find(|r| r.len() <= MAX_PARTS)?;
        Some(runs)
    }

    /// The decided value of every integer comparison in loop `at`'s body with its variable at
    /// `v` (inner loops over their whole ranges), and whether one that reads the variable is
    /// left undecided.
    fn signature(&self, at: usize, v: i128) -> (Vec<Option<bool>>, bool) {
        let end = self.ends[at];
        let mut r: Vec<Range> = vec![None; end - at];
        let mut reads: Vec<bool> = vec![false; end - at];
        r[0] = Some((v, v));
        reads[0] = true;
        let (mut sig, mut open) = (Vec::new(), false);
        for j in at + 1..end {
            let u = &self.old[j];
            let src = |n: usize| {
                let s = *u.src.get(n)? as usize;
                if s >= at {
                    r[s - at]
                } else {
                    self.mapped_range(s as u32)
                }
            };
            reads[j - at] = u
                .src
                .iter()
                .any(|&s| s as usize >= at && reads[s as usize - at]);
            if self.int_cmp(u) {
                let d = decide(src(0), src(1));
                open |= d.is_none() && reads[j - at];
                sig.push(d);
            }
            r[j - at] = int_range(u, src);
        }
        (sig, open)
    }

    /// Is `u` a comparison of integers (a gate's building block)?
    fn int_cmp(&self, u: &UOp) -> bool {
        u.kind == UOpKind::Alu(AluOp::CmpLt) && self.old[u.src[0] as usize].dtype.is_int()
    }

    fn mapped_range(&self, old: u32) -> Range {
        self.map[old as usize].and_then(|n| self.range[n as usize])
    }

    /// The old UOp `i` with its sources renamed, pushed as it is.
    fn copy(&mut self, i: usize) -> u32 {
        let u = &self.old[i];
        let src = u.src.iter().map(|&s| self.new_of(s)).collect();
        let n = self.push(UOp {
            kind: u.kind.clone(),
            dtype: u.dtype,
            src,
        });
        self.map[i] = Some(n);
        n
    }

    fn new_of(&self, old: u32) -> u32 {
        // Sources come before their users, so each is emitted by now (verified IR).
        self.map[old as usize].unwrap_or(old)
    }

    /// Emits old UOp `i`, folding what the bounds decide.
    fn emit_one(&mut self, i: usize) {
        if let Some(d) = self.forced[i] {
            let c = self.konst(Scalar::from_bool(d));
            self.map[i] = Some(c);
            return;
        }
        let u = &self.old[i];
        let src: Vec<u32> = u.src.iter().map(|&s| self.new_of(s)).collect();
        let folded = match &u.kind {
            UOpKind::Alu(op) => self.fold_alu(*op, u.dtype, &src),
            UOpKind::Load if src.len() == 3 => match self.const_bool(src[2]) {
                Some(true) => Some(self.push(UOp {
                    kind: UOpKind::Load,
                    dtype: u.dtype,
                    src: vec![src[0], src[1]],
                })),
                Some(false) => Some(self.konst(Scalar::zero(u.dtype))),
                None => None,
            },
            // A gated vector load: every gate holding is a plain vector load (a padded row's
            // interior); none holding is a vector of zeros.
            UOpKind::VecLoad { lanes, .. } if src.len() == 2 + usize::from(*lanes) => {
                let gates: Vec<Option<bool>> =
                    src[2..].iter().map(|&g| self.const_bool(g)).collect();
                if gates.iter().all(|&g| g == Some(true)) {
                    Some(self.push(UOp {
                        kind: u.kind.clone(),
                        dtype: u.dtype,
                        src: vec![src[0], src[1]],
                    }))
                } else if gates.iter().all(|&g| g == Some(false)) {
                    let z = self.konst(Scalar::zero(u.dtype));
                    Some(self.push(UOp {
                        kind: UOpKind::Vectorize,
                        dtype: u.dtype,
                        src: vec![z; usize::from(*lanes)],
                    }))
                } else {
                    None
                }
            }
            // A vector padding tap: `fma(0, w, acc)` in every lane is `acc` (as in scalar code).
            UOpKind::VecAlu {
                op: AluOp::Fma | AluOp::MulAcc,
                ..
            } if u.dtype.is_float() && (self.zero_vec(src[0]) || self.zero_vec(src[1])) => {
                Some(src[2])
            }
            // An accumulator given its own value: a padding tap folded away.
            UOpKind::Assign if src[0] == src[1] => Some(src[0]),
            UOpKind::DualMac if src.len() == 5 => self.fold_dual_mac(&src),
            // An integer constant converted to an integer type (a padding zero widened before
            // its zero point is subtracted) folds, wrapping as C converts.
            UOpKind::Cast if u.dtype.is_int() => match self.const_of(src[0]) {
                Some(v) if v.dtype().is_int() => Some(self.konst(v.cast(u.dtype))),
                _ => None,
            },
            _ => None,
        };
        let n = match folded {
            Some(n) => n,
            None => self.push(UOp {
                kind: u.kind.clone(),
                dtype: u.dtype,
                src,
            }),
        };
        self.map[i] = Some(n);
    }

    /// Is new UOp `n` a vector of constant zeros (a `Vectorize` of them)?
    fn zero_vec(&self, n: u32) -> bool {
        let u = &self.out[n as usize];
        u.kind == UOpKind::Vectorize && u.src.iter().all(|&s| self.is_zero(s))
    }

    /// The value an ALU op folds to, if the bounds or constants decide it.
    fn fold_alu(&mut self, op: AluOp, dtype: DType, src: &[u32]) -> Option<u32> {
        let b = |e: &Self, n: usize| e.const_bool(src[n]);
        match op {
            AluOp::CmpLt if self.out[src[0] as usize].dtype.is_int() => {
                let d = decide(self.range[src[0] as usize], self.range[src[1] as usize])?;
                Some(self.konst(Scalar::from_bool(d)))
            }
            AluOp::And | AluOp::Mul if dtype == DType::Bool => match (b(self, 0), b(self, 1)) {
                (Some(false), _) | (_, Some(false)) => Some(self.konst(Scalar::from_bool(false))),
                (Some(true), _) => Some(src[1]),
                (_, Some(true)) => Some(src[0]),
                (None, None) => None,
            },
            AluOp::Where => b(self, 0).map(|c| if c { src[1] } else { src[2] }),
            // A padding tap: `0 * w + acc` is `acc` (module doc: exact for finite `w`).
            AluOp::Fma | AluOp::MulAcc
                if dtype.is_float() && (self.is_zero(src[0]) || self.is_zero(src[1])) =>
            {
                Some(src[2])
            }
            // x % c = x - k·c and x / c = k when k·c <= x < (k+1)·c, k >= 0 (a part's bounds
            // often prove it for a padded view's index that wraps the buffer's size,
            // `(i + 7995) % 8000`).
            AluOp::Mod | AluOp::FloorMod | AluOp::Div | AluOp::FloorDiv if dtype.is_int() => {
                match (self.quotient(src), op) {
                    (Some(0), AluOp::Mod | AluOp::FloorMod) => Some(src[0]),
                    (Some(k), AluOp::Mod | AluOp::FloorMod) => {
                        let c = self.const_of(src[1])?.as_i64();
                        let off = self.konst(Scalar::from_i64(-(k as i64) * c, dtype));
                        Some(self.push(UOp {
                            kind: UOpKind::Alu(AluOp::Add),
                            dtype,
                            src: vec![src[0], off],
                        }))
                    }
                    (Some(k), _) => Some(self.konst(Scalar::from_i64(k as i64, dtype))),
                    (None, _) => self.fold_int(op, dtype, src),
                }
            }
            _ if dtype.is_int() => self.fold_int(op, dtype, src),
            _ => None,
        }
    }

    /// A dual multiply-accumulate `acc + a0·b0 + a1·b1` with a padding tap (a constant zero
    /// factor): both products zero is `acc`; one is `acc + a·b` (a `MulWide` and an add, one
    /// multiply-accumulate in C instead of packing both pairs). Integers: exact.
    fn fold_dual_mac(&mut self, src: &[u32]) -> Option<u32> {
        let zero = |e: &Self, n: u32| e.const_of(n).is_some_and(|s| s.bits() == 0);
        let live: Vec<[u32; 2]> = [[src[1], src[2]], [src[3], src[4]]]
            .into_iter()
            .filter(|f| !zero(self, f[0]) && !zero(self, f[1]))
            .collect();
        match live[..] {
            [] => Some(src[0]),
            [[a, b]] => {
                let p = self.push(UOp {
                    kind: UOpKind::Alu(AluOp::MulWide),
                    dtype: DType::I32,
                    src: vec![a, b],
                });
                Some(self.push(UOp {
                    kind: UOpKind::Alu(AluOp::Add),
                    dtype: DType::I32,
                    src: vec![src[0], p],
                }))
            }
            _ => None,
        }
    }

    /// The quotient `k >= 0` of operand 0 by operand 1, a constant `c > 0`, when the bounds
    /// of operand 0 keep it within `[k·c, (k+1)·c)`.
    fn quotient(&self, src: &[u32]) -> Option<i128> {
        let c = i128::from(self.const_of(src[1])?.as_i64());
        let (lo, hi) = self.range[src[0] as usize]?;
        let k = lo.checked_div(c)?;
        (c > 0 && lo >= 0 && hi / c == k).then_some(k)
    }

    /// Integer arithmetic on constants (a peeled loop's variable) folds to a constant.
    fn fold_int(&mut self, op: AluOp, dtype: DType, src: &[u32]) -> Option<u32> {
        let vals: Option<Vec<Scalar>> = src.iter().map(|&s| self.const_of(s)).collect();
        let v = eval_alu(op, &vals?, dtype)?;
        Some(self.konst(v))
    }

    fn const_of(&self, n: u32) -> Option<Scalar> {
        match &self.out[n as usize].kind {
            UOpKind::Const(s) => Some(*s),
            _ => None,
        }
    }

    fn const_bool(&self, n: u32) -> Option<bool> {
        let u = &self.out[n as usize];
        match &u.kind {
            UOpKind::Const(s) if u.dtype == DType::Bool => Some(s.bits() != 0),
            _ => None,
        }
    }

    fn is_zero(&self, n: u32) -> bool {
        let u = &self.out[n as usize];
        matches!(&u.kind, UOpKind::Const(s) if u.dtype.is_float() && s.as_f64() == 0.0)
    }

    fn konst(&mut self, s: Scalar) -> u32 {
        self.push(UOp {
            kind: UOpKind::Const(s),
            dtype: s.dtype(),
            src: Vec::new(),
        })
    }

    fn push(&mut self, u: UOp) -> u32 {
        let r = int_range(&u, |n| {
            u.src
                .get(n)
                .and_then(|&s| self.range.get(s as usize).copied().flatten())
        });
        self.range.push(r);
        self.out.push(u);
        (self.out.len() - 1) as u32
    }
}

/// Consecutive iterations from `lo` with equal signatures, as `[a, b)` parts; with `peel`,
/// an iteration with an open gate is a part of its own.
fn parts(lo: i128, sigs: &[(Vec<Option<bool>>, bool)], peel: bool) -> Vec<(i128, i128)> {
    let mut runs: Vec<(i128, i128)> = Vec::new();
    for (i, (sig, open)) in sigs.iter().enumerate() {
        let v = lo + i as i128;
        let joins = i > 0 && sigs[i - 1].0 == *sig && !(peel && (*open || sigs[i - 1].1));
        match runs.last_mut() {
            Some(run) if joins => run.1 = v + 1,
            _ => runs.push((v, v + 1)),
        }
    }
    runs
}

/// A known single value.
fn exact(r: (i128, i128)) -> Option<i128> {
    (r.0 == r.1).then_some(r.0)
}

/// `a < b` when the bounds decide it.
fn decide(a: Range, b: Range) -> Option<bool> {
    let (a, b) = (a?, b?);
    if a.1 < b.0 {
        Some(true)
    } else if a.0 >= b.1 {
        Some(false)
    } else {
        None
    }
}

/// An integer UOp's bounds when known and within its dtype (so its C operation cannot wrap).
fn int_range(u: &UOp, src: impl Fn(usize) -> Range) -> Range {
    if !u.dtype.is_int() {
        return None;
    }
    uop_range(u, src).filter(|&(lo, hi)| lo >= u.dtype.int_min() && hi <= u.dtype.int_max())
}
