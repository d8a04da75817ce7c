//! The IR verifier run between lowering passes ([`super::lower`]) in debug builds: it checks
//! the invariants each IR promises its consumers, so a pass that breaks one is named at once
//! instead of surfacing later as a wrong result or a C compile error.
//!
//! - A [`Kernel`]: axis sections in order (`first_reduce <= first_upcast <= rank`), one
//!   `upcast_is_reduce` flag per upcast axis, every leaf ShapeTracker of the kernel's rank, and
//!   the root a store; a looped remainder's kernel the same, sharing the main kernel's outer
//!   loops.
//! - A [`LinearKernel`]'s UOps: SSA order (every source is an earlier UOp), scope (a value
//!   defined inside a loop is used only while that loop is open), balanced loops (each `EndLoop`
//!   closes the innermost open `Loop`; none left open), declarations (`DefineGlobal`s match the
//!   buffer list one to one, `DefineVar`s the variable list; loads and stores go through a
//!   declared buffer, stores only to writable ones), arity, dtypes (operands agree with the
//!   result, indices and loop bounds are integers, gates are bools), and lane counts (vector
//!   UOps take vectors of their own width, `Vectorize` scalars, `Gep` a lane that exists; every
//!   other UOp scalars).
//!
//! Invariant: the verifier only reads; a kernel it accepts is the kernel it was given.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use super::kernel::{visit_sts, Kernel};
use super::uops::{lanes, LinearKernel, UOp, UOpKind};
use crate::ast::AstOp;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::AluOp;

/// Checks a [`Kernel`] after `pass`; the error names the pass and the broken invariant.
pub fn verify_kernel(pass: &str, k: &Kernel) -> Result<()> {
    kernel_problem(k).map_or(Ok(()), |p| Err(broken(pass, &k.name(), p)))
}

/// Checks a [`LinearKernel`] after `pass`; the error names the pass, the kernel, the UOp and
/// the broken invariant.
pub fn verify_uops(pass: &str, lk: &LinearKernel) -> Result<()> {
    uops_problem(lk).map_or(Ok(()), |p| Err(broken(pass, &lk.name, p)))
}

fn broken(pass: &str, kernel: &str, problem: String) -> Error {
    Error::internal(format!(
        "lowering pass `{pass}` broke kernel {kernel}: {problem}"
    ))
}

fn kernel_problem(k: &Kernel) -> Option<String> {
    let rank = k.rank();
    if k.first_reduce > k.first_upcast || k.first_upcast > rank {
        return Some(format!(
            "axis sections out of order: first_reduce {} first_upcast {} rank {rank}",
            k.first_reduce, k.first_upcast
        ));
    }
    if k.upcast_is_reduce.len() != rank - k.first_upcast {
        return Some(format!(
            "{} upcast flags for {} upcast axes",
            k.upcast_is_reduce.len(),
            rank - k.first_upcast
        ));
    }
    if let Some(v) = k.vector_upcast {
        if k.upcast_is_reduce.get(v) != Some(&false) {
            return Some(format!("vector axis {v} is not a global upcast axis"));
        }
        let size = k.full_shape[k.first_upcast + v].as_const().unwrap_or(0);
        if k.vector_lanes < 2 || k.vector_lanes as i64 > size {
            return Some(format!(
                "vector axis {v} of size {size} with {} lanes",
                k.vector_lanes
            ));
        }
    }
    if !matches!(k.ast.op(), AstOp::Store { .. }) {
        return Some(String::from("the AST root is not a store"));
    }
    if let Some(r) = &k.remainder {
        // The shared loops are global axes of both parts, of the same sizes.
        let same = r.shared <= k.first_reduce
            && r.shared <= r.kernel.first_reduce
            && k.full_shape[..r.shared] == r.kernel.full_shape[..r.shared];
        if !same || r.kernel.remainder.is_some() {
            return Some(format!(
                "remainder {} does not share {} loops with {}",
                r.kernel.describe(),
                r.shared,
                k.describe()
            ));
        }
        if let Some(p) = kernel_problem(&r.kernel) {
            return Some(format!("remainder: {p}"));
        }
    }
    let mut bad = None;
    visit_sts(&k.ast, &mut |st| {
        if bad.is_none() && st.shape().len() != rank {
            bad = Some(format!(
                "a leaf of rank {} in a kernel of rank {rank}",
                st.shape().len()
            ));
        }
    });
    bad
}

/// Per-UOp facts gathered in one walk: the loop each value was defined in (its innermost open
/// loop), and which loops are still open.
struct Walk {
    defined_in: Vec<Option<usize>>,
    open: Vec<bool>,
    stack: Vec<usize>,
}

fn uops_problem(lk: &LinearKernel) -> Option<String> {
    let mut w = Walk {
        defined_in: Vec::with_capacity(lk.uops.len()),
        open: alloc::vec![false; lk.uops.len()],
        stack: Vec::new(),
    };
    let mut globals = alloc::vec![0usize; lk.bufs.len()];
    for (i, u) in lk.uops.iter().enumerate() {
        let at = |p: String| format!("uop {i} ({} {}): {p}", u.dtype.name(), u.kind);
        if let Some(p) = sources_problem(lk, &w, i, u) {
            return Some(at(p));
        }
        if let Some(p) = declaration_problem(lk, u, &mut globals) {
            return Some(at(p));
        }
        if let Some(p) = kind_problem(lk, u).or_else(|| lanes_problem(lk, i)) {
            return Some(at(p));
        }
        if let Some(p) = scope_step(&mut w, i, u) {
            return Some(at(p));
        }
    }
    if let Some(&l) = w.stack.last() {
        return Some(format!("loop {l} is never closed"));
    }
    if let Some(b) = globals.iter().position(|&n| n != 1) {
        return Some(format!(
            "buffer {b} is declared {} times (DEFINE_GLOBAL), not once",
            globals[b]
        ));
    }
    None
}

/// SSA order and scope: each source is an earlier UOp whose loop is still open.
fn sources_problem(lk: &LinearKernel, w: &Walk, i: usize, u: &UOp) -> Option<String> {
    for &s in &u.src {
        let s = s as usize;
        if s >= i {
            return Some(format!(
                "source {s} is not defined before its use (at or after {i})"
            ));
        }
        if let Some(l) = w.defined_in[s] {
            if !w.open[l] {
                return Some(format!(
                    "source {s} ({}) was defined inside loop {l}, which closed before this use",
                    lk.uops[s].kind
                ));
            }
        }
    }
    None
}

/// Records `u`'s scope and opens or closes loops.
fn scope_step(w: &mut Walk, i: usize, u: &UOp) -> Option<String> {
    w.defined_in.push(w.stack.last().copied());
    match u.kind {
        UOpKind::Loop => {
            w.open[i] = true;
            w.stack.push(i);
        }
        UOpKind::EndLoop => {
            let l = u.src.first().map(|&s| s as usize);
            if l.is_none() || w.stack.last().copied() != l {
                return Some(format!(
                    "closes {l:?}, but the innermost open loop is {:?}",
                    w.stack.last()
                ));
            }
            w.stack.pop();
            if let Some(l) = l {
                w.open[l] = false;
            }
        }
        UOpKind::DefineGlobal { .. }
        | UOpKind::DefineVar { .. }
        | UOpKind::DefineLocal { .. }
        | UOpKind::Const(_)
        | UOpKind::DefineAcc(_)
        | UOpKind::Load
        | UOpKind::Store
        | UOpKind::Alu(_)
        | UOpKind::Cast
        | UOpKind::Bitcast
        | UOpKind::Assign
        | UOpKind::DualMac
        | UOpKind::VecAcc { .. }
        | UOpKind::VecLoad { .. }
        | UOpKind::VecStore { .. }
        | UOpKind::VecAlu { .. }
        | UOpKind::Vectorize
        | UOpKind::Gep(_)
        | UOpKind::PairWiden => {}
    }
    None
}

/// `DefineGlobal`s against the buffer list, `DefineVar`s against the variable list.
fn declaration_problem(lk: &LinearKernel, u: &UOp, globals: &mut [usize]) -> Option<String> {
    match &u.kind {
        UOpKind::DefineGlobal { idx, writable } => {
            let Some(b) = lk.bufs.get(*idx) else {
                return Some(format!(
                    "buffer {idx} is not among the {} declared",
                    lk.bufs.len()
                ));
            };
            globals[*idx] += 1;
            (b.dtype != u.dtype || b.writable != *writable).then(|| {
                format!(
                    "buffer {idx} is declared {} writable={} but the kernel's list says {} writable={}",
                    u.dtype.name(),
                    writable,
                    b.dtype.name(),
                    b.writable
                )
            })
        }
        UOpKind::DefineVar { name, min, max } => {
            let declared = lk
                .vars
                .iter()
                .any(|(n, lo, hi)| n == name && lo == min && hi == max);
            (!declared)
                .then(|| format!("variable {name} [{min}, {max}] is not in the kernel's vars"))
        }
        UOpKind::DefineLocal { size } => (*size == 0).then(|| String::from("an empty local")),
        UOpKind::Const(_)
        | UOpKind::Loop
        | UOpKind::EndLoop
        | UOpKind::DefineAcc(_)
        | UOpKind::Load
        | UOpKind::Store
        | UOpKind::Alu(_)
        | UOpKind::Cast
        | UOpKind::Bitcast
        | UOpKind::Assign
        | UOpKind::DualMac
        | UOpKind::VecAcc { .. }
        | UOpKind::VecLoad { .. }
        | UOpKind::VecStore { .. }
        | UOpKind::VecAlu { .. }
        | UOpKind::Vectorize
        | UOpKind::Gep(_)
        | UOpKind::PairWiden => None,
    }
}

/// Arity and dtypes, per kind.
fn kind_problem(lk: &LinearKernel, u: &UOp) -> Option<String> {
    let dt = |s: usize| lk.uops[u.src[s] as usize].dtype;
    let arity = |n: usize| (u.src.len() != n).then(|| format!("{} sources, not {n}", u.src.len()));
    match &u.kind {
        UOpKind::DefineGlobal { .. }
        | UOpKind::DefineVar { .. }
        | UOpKind::DefineLocal { .. }
        | UOpKind::Const(_)
        | UOpKind::DefineAcc(_)
        | UOpKind::VecAcc { .. } => arity(0),
        UOpKind::PairWiden => arity(1).or_else(|| {
            (!is_word(lk, u.src[0]) || u.dtype != DType::I16).then(|| {
                format!(
                    "pair widening of {:?} giving {} (wants a 4-lane i8 load, gives i16)",
                    dts(lk, u),
                    u.dtype.name()
                )
            })
        }),
        UOpKind::Loop => arity(2).or_else(|| ints(&[dt(0), dt(1)], "loop bounds")),
        UOpKind::EndLoop => arity(1),
        UOpKind::Load => memory_problem(lk, u, false),
        // Ungated, or one bool gate per lane after the buffer and index.
        UOpKind::VecLoad { lanes, .. } => {
            let gated = u.src.len() == 2 + usize::from(*lanes);
            (if gated { None } else { arity(2) })
                .or_else(|| {
                    let base = UOp {
                        kind: u.kind.clone(),
                        dtype: u.dtype,
                        src: u.src[..2].to_vec(),
                    };
                    memory_problem(lk, &base, false)
                })
                .or_else(|| {
                    (2..u.src.len())
                        .find(|&s| dt(s) != DType::Bool)
                        .map(|s| format!("gate {} is {}, not bool", s - 2, dt(s).name()))
                })
        }
        UOpKind::VecStore { .. } => arity(3).or_else(|| memory_problem(lk, u, true)),
        UOpKind::VecAlu { op, .. } => {
            arity(op.arity()).or_else(|| alu_problem(*op, u.dtype, &dts(lk, u)))
        }
        UOpKind::Vectorize => {
            let mut all = dts(lk, u);
            all.push(u.dtype);
            same(&all, "vectorize")
        }
        UOpKind::Gep(_) => arity(1).or_else(|| same(&[dt(0), u.dtype], "gep")),
        UOpKind::Store => arity(3).or_else(|| memory_problem(lk, u, true)),
        UOpKind::Alu(op) => arity(op.arity()).or_else(|| alu_problem(*op, u.dtype, &dts(lk, u))),
        UOpKind::Cast => arity(1),
        UOpKind::Bitcast => arity(1).or_else(|| {
            (dt(0).itemsize() != u.dtype.itemsize())
                .then(|| format!("bitcast from {} changes the item size", dt(0).name()))
        }),
        UOpKind::Assign => arity(2).or_else(|| {
            let acc = &lk.uops[u.src[0] as usize];
            if !acc.kind.is_acc() {
                Some(format!("assigns to {} (not an accumulator)", acc.kind))
            } else {
                same(&[acc.dtype, dt(1), u.dtype], "assign")
            }
        }),
        // The packed form: an i32 accumulator and two `VecLoad`s of four i8 lanes, or two
        // 4-lane i16 values (widened pairs).
        UOpKind::DualMac if u.src.len() == 3 => {
            let word = |s: usize| is_word(lk, u.src[s]);
            let pairs = |s: usize| dt(s) == DType::I16 && lanes(&lk.uops, u.src[s] as usize) == 4;
            let operands = (word(1) && word(2)) || (pairs(1) && pairs(2));
            (u.dtype != DType::I32 || dt(0) != DType::I32 || !operands).then(|| {
                format!(
                    "packed dual multiply-accumulate of {:?} giving {} (wants i32 and two \
                     4-lane i8 loads or two 4-lane i16 values)",
                    dts(lk, u),
                    u.dtype.name()
                )
            })
        }
        UOpKind::DualMac => arity(5).or_else(|| {
            let lanes_fit = (1..5).all(|s| matches!(dt(s), DType::I8 | DType::U8 | DType::I16));
            (u.dtype != DType::I32 || dt(0) != DType::I32 || !lanes_fit).then(|| {
                format!(
                    "dual multiply-accumulate of {:?} giving {}",
                    dts(lk, u),
                    u.dtype.name()
                )
            })
        }),
    }
}

/// Lane counts: a vector kind has at least 2 lanes and takes vectors of its own width (a
/// `VecLoad`/`VecStore` takes a scalar buffer and index); `Vectorize` takes scalars; `Gep` takes
/// a vector wide enough for its lane; an `Assign` gives its accumulator a value as wide as it;
/// every other UOp takes scalars only.
fn lanes_problem(lk: &LinearKernel, i: usize) -> Option<String> {
    let u = &lk.uops[i];
    let n = |s: usize| lanes(&lk.uops, u.src[s] as usize);
    let want = |ok: &dyn Fn(usize, usize) -> bool, what: &str| {
        (0..u.src.len())
            .find(|&s| !ok(s, n(s)))
            .map(|s| format!("source {s} has {} lanes; {what}", n(s)))
    };
    let w = lanes(&lk.uops, i);
    let vector = |l: u8| (l < 2).then(|| format!("a vector of {l} lanes"));
    match &u.kind {
        UOpKind::VecAcc { lanes: l, .. } => vector(*l),
        UOpKind::VecLoad { lanes: l, stride } => vector(*l)
            .or_else(|| (!matches!(stride, 1 | 2)).then(|| format!("a load of stride {stride}")))
            .or_else(|| want(&|_, n| n == 1, "buffer and index are scalars")),
        UOpKind::VecStore { lanes: l } => vector(*l).or_else(|| {
            want(
                &|s, n| n == if s == 2 { w } else { 1 },
                "the value has the store's lanes, buffer and index are scalars",
            )
        }),
        UOpKind::VecAlu { lanes: l, .. } => {
            vector(*l).or_else(|| want(&|_, n| n == w, "operands have the op's lanes"))
        }
        UOpKind::Vectorize => (u.src.len() < 2)
            .then(|| format!("vectorize of {} sources", u.src.len()))
            .or_else(|| want(&|_, n| n == 1, "vectorize takes scalars")),
        UOpKind::Gep(lane) => want(
            &|_, n| usize::from(*lane) < n && n > 1,
            "gep reads a lane of a vector",
        ),
        UOpKind::Assign => want(&|_, n| n == w, "the value is as wide as the accumulator"),
        UOpKind::PairWiden => want(&|_, n| n == 4, "a pair widening takes a 4-lane word"),
        UOpKind::DualMac if u.src.len() == 3 => want(
            &|s, n| n == if s == 0 { 1 } else { 4 },
            "a packed dual MAC takes a scalar accumulator and two 4-lane words",
        ),
        UOpKind::DefineGlobal { .. }
        | UOpKind::DefineVar { .. }
        | UOpKind::DefineLocal { .. }
        | UOpKind::Const(_)
        | UOpKind::Loop
        | UOpKind::EndLoop
        | UOpKind::DefineAcc(_)
        | UOpKind::Load
        | UOpKind::Store
        | UOpKind::Alu(_)
        | UOpKind::Cast
        | UOpKind::Bitcast
        | UOpKind::DualMac => want(&|_, n| n == 1, "this op takes scalars"),
    }
}

/// Is UOp `i` a word of four consecutive i8 lanes (a packed `DualMac`'s or a `PairWiden`'s
/// operand)?
fn is_word(lk: &LinearKernel, i: u32) -> bool {
    let w = &lk.uops[i as usize];
    w.kind
        == UOpKind::VecLoad {
            lanes: 4,
            stride: 1,
        }
        && w.dtype == DType::I8
}

fn dts(lk: &LinearKernel, u: &UOp) -> Vec<DType> {
    u.src.iter().map(|&s| lk.uops[s as usize].dtype).collect()
}

/// A load (`[buf, idx]` or `[buf, idx, gate]`) or store (`[buf, idx, value]`).
fn memory_problem(lk: &LinearKernel, u: &UOp, store: bool) -> Option<String> {
    if u.src.len() < 2 || u.src.len() > 3 {
        return Some(format!("{} sources, not 2 or 3", u.src.len()));
    }
    let buf = &lk.uops[u.src[0] as usize];
    let (idx, writable) = match buf.kind {
        UOpKind::DefineGlobal { idx, writable } => (idx, writable),
        // A kernel's own scratch: always writable.
        UOpKind::DefineLocal { .. } => (u.src[0] as usize, true),
        _ => return Some(format!("addresses {} (not a declared buffer)", buf.kind)),
    };
    if store && !writable {
        return Some(format!("stores to read-only buffer {idx}"));
    }
    let src = dts(lk, u);
    if let Some(p) = ints(&src[1..2], "index") {
        return Some(p);
    }
    match src.get(2) {
        Some(&v) if store => same(&[buf.dtype, v, u.dtype], "store"),
        Some(&g) if g != DType::Bool => Some(format!("gate is {}, not bool", g.name())),
        _ => same(&[buf.dtype, u.dtype], "load"),
    }
}

/// ALU dtypes: comparisons give bool from operands that agree; `where` takes a bool condition
/// and two values of the result's dtype; every other op computes in its operands' dtype.
fn alu_problem(op: AluOp, result: DType, src: &[DType]) -> Option<String> {
    use AluOp::*;
    match op {
        CmpLt | CmpEq => (result != DType::Bool)
            .then(|| format!("comparison gives {}, not bool", result.name()))
            .or_else(|| same(src, op.name())),
        Where => (src[0] != DType::Bool)
            .then(|| format!("where's condition is {}, not bool", src[0].name()))
            .or_else(|| same(&[src[1], src[2], result], "where")),
        MulWide => (result != DType::I32 || !src.iter().all(|&d| op.defined_on(d)))
            .then(|| format!("mulwide of {src:?} gives {}", result.name())),
        Exp2 | Log2 | Sin | Sqrt | Neg | Recip | Add | Sub | Mul | Div | Max | Mod | Xor | And
        | Or | FloorDiv | FloorMod | MulAcc | Fma | Requant | Clamp => {
            let mut all = src.to_vec();
            all.push(result);
            same(&all, op.name())
        }
    }
}

fn same(dts: &[DType], what: &str) -> Option<String> {
    let first = *dts.first()?;
    dts.iter().any(|&d| d != first).then(|| {
        let names: Vec<&str> = dts.iter().map(|d| d.name()).collect();
        format!("{what} mixes dtypes {names:?}")
    })
}

fn ints(dts: &[DType], what: &str) -> Option<String> {
    dts.iter()
        .find(|d| !d.is_int())
        .map(|d| format!("{what} is {}, not an integer", d.name()))
}
