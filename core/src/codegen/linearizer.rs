//! The Linearizer: lowers an arranged [`Kernel`] to a flat list of UOps.
//!
//! Layout of the output: buffer and variable definitions; one loop per global axis; one
//! accumulator per unrolled output position; the reduce loops, inside which each unrolled
//! position's value is folded into its accumulator (a `MULACC` when a sum reduces a product, or
//! an `FMA` — one rounding — when the device has hardware fused multiply-add);
//! then the post-reduce ops and the stores, once per unrolled output position.
//!
//! Invariants: UOps are hash-consed (common subexpressions share one UOp) but only within the
//! loop they were made in — entries made inside a loop are forgotten when it closes, so nothing
//! computed per iteration is used after its loop; UOps that read an accumulator are never shared.
//! Values stay where the kernel computes them: moving loop-invariant ones out is the `hoist`
//! pass that runs after this one ([`super::lower`]).

use alloc::string::String;
use alloc::sync::Arc;
use alloc::vec::Vec;

use hashbrown::HashMap;

use self::lanes::LaneVal;
use super::kernel::{visit_sts, Kernel};
use super::uops::{BufParam, KernelCost, LinearKernel, UOp, UOpKind};
use crate::ast::{Ast, AstOp};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::ops::{AluOp, ReduceOp, Scalar};
use crate::symbolic::{Kind, Node};

mod lanes;
mod stage;

struct Lin {
    uops: Vec<UOp>,
    cse: HashMap<UOp, u32>,
    cse_log: Vec<UOp>,
    /// Index variables (loop counters, kernel variables) by name.
    vars: HashMap<String, u32>,
    idx_dtype: DType,
    /// Product of the trip counts of the open loops, and the log marks where they opened.
    trips: Vec<(u64, usize)>,
    cost: KernelCost,
    /// Fold float sums of products with `Fma` (one rounding) rather than `MulAcc`.
    fused: bool,
    /// Pair the products of integer sums into `DualMac`s (the target has `smlad`).
    dual_mac: bool,
    /// The first broken invariant met while lowering (an index variable with no loop or
    /// argument): [`linearize`] returns it instead of a kernel.
    error: Option<Error>,
    /// The block loop of a blocked reduce ([`Kernel::reduce_block`]), open around everything.
    block: Option<Block>,
    /// The kernel's staged-weights local and its size in elements, once declared (a looped
    /// remainder's second part reuses the first's).
    local: Option<(u32, usize)>,
}

/// A blocked reduce ([`Opt::ReduceBlock`](super::kernel::Opt::ReduceBlock)): the outermost
/// loop runs over the blocks; the first reduce loop covers one block per iteration of it.
///
/// The two conditional parts — the accumulators loaded from the output on every block but the
/// first, the ops after the reduce on the last block only — are loops of at most one
/// iteration whose bounds come from the block variable. They need no new UOp, every pass
/// already treats them right (`hoist` moves no load out of a loop that may not run, nor out of
/// one that stores to its buffer; the thread split never divides a loop whose variable no
/// store index reads), and their bounds use no comparison, so `pad_bounds` never peels the
/// block loop into copies of the kernel.
#[derive(Clone, Copy)]
struct Block {
    /// The block loop's `Loop` UOp.
    var: u32,
    /// Iterations of the reduce loop per block.
    steps: i64,
    /// The reduce loop's length.
    len: i64,
    /// How many blocks (the last may be shorter).
    blocks: i64,
}

impl Lin {
    fn trip(&self) -> u64 {
        self.trips.last().map_or(1, |t| t.0)
    }

    fn push(&mut self, kind: UOpKind, dtype: DType, src: Vec<u32>) -> u32 {
        let shareable = matches!(
            kind,
            UOpKind::Const(_)
                | UOpKind::Alu(_)
                | UOpKind::Cast
                | UOpKind::Bitcast
                | UOpKind::Load
                | UOpKind::VecLoad { .. }
                | UOpKind::VecAlu { .. }
                | UOpKind::Vectorize
                | UOpKind::Gep(_)
                | UOpKind::PairWiden
        ) && !src.iter().any(|&s| self.uops[s as usize].kind.is_acc());
        let u = UOp { kind, dtype, src };
        if shareable {
            if let Some(&i) = self.cse.get(&u) {
                return i;
            }
        }
        let i = self.uops.len() as u32;
        self.uops.push(u.clone());
        if shareable {
            self.cse.insert(u.clone(), i);
            self.cse_log.push(u);
        }
        i
    }

    fn konst(&mut self, v: Scalar) -> u32 {
        self.push(UOpKind::Const(v), v.dtype(), Vec::new())
    }

    fn open_loop(&mut self, name: String, extent: &Node) -> u32 {
        let start = self.konst(Scalar::zero(self.idx_dtype));
        let end = self.node(extent);
        let l = self.push(UOpKind::Loop, self.idx_dtype, alloc::vec![start, end]);
        self.vars.insert(name, l);
        let trips = self.trip().saturating_mul(extent.vmax().max(0) as u64);
        self.trips.push((trips, self.cse_log.len()));
        l
    }

    /// A loop over `[start, end)` (UOps), of at most `trips` iterations.
    fn open_range(&mut self, name: String, start: u32, end: u32, trips: u64) -> u32 {
        let l = self.push(UOpKind::Loop, self.idx_dtype, alloc::vec![start, end]);
        self.vars.insert(name, l);
        let trips = self.trip().saturating_mul(trips);
        self.trips.push((trips, self.cse_log.len()));
        l
    }

    /// `min(a, c)` for a constant `c`, as `c - max(c - a, 0)`: no comparison (see [`Block`]).
    fn min_const(&mut self, a: u32, c: i64) -> u32 {
        let d = self.idx_dtype;
        let (c, zero) = (
            self.konst(Scalar::from_i64(c, d)),
            self.konst(Scalar::zero(d)),
        );
        let over = self.alu(AluOp::Sub, d, alloc::vec![c, a]);
        let over = self.alu(AluOp::Max, d, alloc::vec![over, zero]);
        self.alu(AluOp::Sub, d, alloc::vec![c, over])
    }

    /// The first reduce loop of a blocked kernel: `[b·steps, min((b+1)·steps, len))` for block
    /// `b`.
    fn open_block_loop(&mut self, name: String, b: Block) -> u32 {
        let d = self.idx_dtype;
        let steps = self.konst(Scalar::from_i64(b.steps, d));
        let start = self.alu(AluOp::Mul, d, alloc::vec![b.var, steps]);
        let end = self.alu(AluOp::Add, d, alloc::vec![start, steps]);
        let end = self.min_const(end, b.len);
        self.open_range(name, start, end, b.steps as u64)
    }

    /// A loop of one iteration on every block but the first (`[0, min(b, 1))`), `None` when
    /// the reduce is not blocked: the accumulators' loads from the output go inside it.
    fn open_unless_first(&mut self) -> Option<u32> {
        let b = self.block?;
        let zero = self.konst(Scalar::zero(self.idx_dtype));
        let end = self.min_const(b.var, 1);
        Some(self.open_range(String::from("rblk_resume"), zero, end, 1))
    }

    /// A loop of one iteration on the last block only (`[blocks - 1, b + 1)`), `None` when the
    /// reduce is not blocked: the ops after the reduce go inside it.
    fn open_if_last(&mut self) -> Option<u32> {
        let b = self.block?;
        let d = self.idx_dtype;
        let (last, one) = (
            self.konst(Scalar::from_i64(b.blocks - 1, d)),
            self.konst(Scalar::from_i64(1, d)),
        );
        let end = self.alu(AluOp::Add, d, alloc::vec![b.var, one]);
        Some(self.open_range(String::from("rblk_last"), last, end, 1))
    }

    fn close_loop(&mut self, l: u32) {
        self.push(UOpKind::EndLoop, self.idx_dtype, alloc::vec![l]);
        if let Some((_, mark)) = self.trips.pop() {
            for u in self.cse_log.drain(mark..) {
                self.cse.remove(&u);
            }
        }
    }

    fn alu(&mut self, op: AluOp, dtype: DType, src: Vec<u32>) -> u32 {
        // Constant operands fold (exact ops only; see `eval_alu`).
        let consts: Option<Vec<Scalar>> = src
            .iter()
            .map(|&s| match self.uops[s as usize].kind {
                UOpKind::Const(v) => Some(v),
                _ => None,
            })
            .collect();
        if let Some(v) = consts.and_then(|c| crate::ops::eval_alu(op, &c, dtype)) {
            return self.konst(v);
        }
        // x + 0 = x and x * 1 = x for ints (for floats, -0.0 + 0.0 is +0.0, so only x * 1);
        // a widening product with a zero factor is 0 (integers: exact).
        if let [a, b] = src[..] {
            let is = |u: u32, v: i64| matches!(self.uops[u as usize].kind, UOpKind::Const(c) if c == Scalar::from_i64(v, dtype));
            match op {
                AluOp::Add if dtype.is_int() && is(b, 0) => return a,
                AluOp::Add if dtype.is_int() && is(a, 0) => return b,
                AluOp::Mul if is(b, 1) && self.uops[a as usize].dtype == dtype => return a,
                AluOp::Mul if is(a, 1) && self.uops[b as usize].dtype == dtype => return b,
                AluOp::MulWide if self.is_zero(a) || self.is_zero(b) => {
                    return self.konst(Scalar::zero(dtype))
                }
                _ => {}
            }
        }
        if op == AluOp::Neg {
            if let Some((x, y, lo, h)) = self.negated_clamp(src[0], dtype) {
                // -max(-x, c) = min(x, -c) with x = max(y, lo): a clamp of y to [lo, -c].
                // On i32 (a requantize's) it is one `Clamp`, which the renderer prints as a
                // saturate where the target has one; elsewhere `x < -c ? x : -c`.
                if AluOp::Clamp.defined_on(dtype) {
                    return self.push(UOpKind::Alu(AluOp::Clamp), dtype, alloc::vec![y, lo, h]);
                }
                let below = self.alu(AluOp::CmpLt, DType::Bool, alloc::vec![x, h]);
                return self.alu(AluOp::Where, dtype, alloc::vec![below, x, h]);
            }
        }
        self.push(UOpKind::Alu(op), dtype, src)
    }

    /// Is `u` the constant zero (of any dtype)?
    fn is_zero(&self, u: u32) -> bool {
        matches!(self.uops[u as usize].kind, UOpKind::Const(c) if c.bits() == 0)
    }

    /// `(x, y, lo, -c)` (the last two as constant UOps) when `m` is `max(-x, c)` (either
    /// operand order) in a signed integer `dtype` with `c` a constant other than the dtype's
    /// minimum and `x` itself `max(y, lo)` with a constant `lo` above the minimum: then no
    /// negation in `-max(-x, c)` wraps, and it equals `min(x, -c)` = `min(max(y, lo), -c)` for
    /// every `y` (a requantize's clamp to `[lo, -c]` is written this way,
    /// `Tensor::try_requantize`). `None` otherwise.
    fn negated_clamp(&mut self, m: u32, dtype: DType) -> Option<(u32, u32, u32, u32)> {
        if !dtype.is_int() || dtype.is_unsigned() {
            return None;
        }
        let min = dtype.int_min() as i64;
        let konst = |lin: &Self, u: u32| match lin.uops[u as usize].kind {
            UOpKind::Const(v) if v.dtype() == dtype && v.as_i64() != min => Some(v.as_i64()),
            _ => None,
        };
        let max_of = |lin: &Self, u: u32| {
            let op = &lin.uops[u as usize];
            match (&op.kind, &op.src[..]) {
                (UOpKind::Alu(AluOp::Max), &[a, b]) if op.dtype == dtype => {
                    match (konst(lin, a), konst(lin, b)) {
                        (_, Some(c)) => Some((a, c)),
                        (Some(c), None) => Some((b, c)),
                        (None, None) => None,
                    }
                }
                _ => None,
            }
        };
        let (neg, c) = max_of(self, m)?;
        let x = match (
            &self.uops[neg as usize].kind,
            &self.uops[neg as usize].src[..],
        ) {
            (UOpKind::Alu(AluOp::Neg), &[x]) => x,
            _ => return None,
        };
        let (y, lo) = max_of(self, x)?;
        let lo = self.konst(Scalar::from_i64(lo, dtype));
        Some((x, y, lo, self.konst(Scalar::from_i64(-c, dtype))))
    }

    /// UOps computing an index expression.
    fn node(&mut self, n: &Node) -> u32 {
        let d = self.idx_dtype;
        match n.kind() {
            Kind::Const(v) => self.konst(Scalar::from_i64(*v, d)),
            Kind::Var(name) => match self.vars.get(&**name) {
                Some(&u) => u,
                None => {
                    self.error.get_or_insert_with(|| {
                        Error::internal(alloc::format!(
                            "linearizer: index variable `{name}` has no loop or kernel argument"
                        ))
                    });
                    self.konst(Scalar::zero(d))
                }
            },
            Kind::Sum(ts) => {
                let mut acc = self.node(&ts[0]);
                for t in &ts[1..] {
                    let x = self.node(t);
                    acc = self.alu(AluOp::Add, d, alloc::vec![acc, x]);
                }
                acc
            }
            Kind::Mul(a, b) => {
                let (a, b) = (self.node(a), self.node(b));
                self.alu(AluOp::Mul, d, alloc::vec![a, b])
            }
            Kind::Div(a, c) | Kind::Mod(a, c) => {
                let op = match (n.kind(), a.vmin() >= 0) {
                    (Kind::Div(..), true) => AluOp::Div,
                    (Kind::Div(..), false) => AluOp::FloorDiv,
                    (_, true) => AluOp::Mod,
                    (_, false) => AluOp::FloorMod,
                };
                let (a, c) = (self.node(a), self.konst(Scalar::from_i64(*c, d)));
                self.alu(op, d, alloc::vec![a, c])
            }
            Kind::Lt(a, b) => {
                let (a, b) = (self.node(a), self.node(b));
                self.alu(AluOp::CmpLt, DType::Bool, alloc::vec![a, b])
            }
            Kind::And(ts) => {
                let mut acc = self.node(&ts[0]);
                for t in &ts[1..] {
                    let x = self.node(t);
                    acc = self.alu(AluOp::And, DType::Bool, alloc::vec![acc, x]);
                }
                acc
            }
        }
    }

    fn count_flop(&mut self) {
        self.cost.flops = self.cost.flops.saturating_add(self.trip());
    }

    /// UOps computing the AST's value at the positions `idxs`; `acc` stands for the reduce.
    /// `memo` holds the nodes already lowered at these positions: each distinct node is lowered
    /// once, in the order a recursive walk would first finish it (an AST is a DAG and may be
    /// deep, so the walk is iterative and never re-expands a shared node).
    fn value(
        &mut self,
        ast: &Ast,
        idxs: &[Node],
        acc: Option<u32>,
        memo: &mut HashMap<usize, u32>,
    ) -> Result<u32> {
        for n in ast.toposort_until(|n| matches!(n.op(), AstOp::Reduce(..))) {
            if !memo.contains_key(&n.id()) {
                let v = self.value_of(n, idxs, acc, memo)?;
                memo.insert(n.id(), v);
            }
        }
        Ok(memo[&ast.id()])
    }

    /// The UOp of one node whose operands are in `memo`.
    fn value_of(
        &mut self,
        ast: &Ast,
        idxs: &[Node],
        acc: Option<u32>,
        memo: &HashMap<usize, u32>,
    ) -> Result<u32> {
        let dtype = ast.dtype();
        let src = |i: usize| memo[&ast.src()[i].id()];
        match ast.op() {
            AstOp::Load { buf, st } => {
                let (idx, valid) = st.expr_idxs(idxs);
                let b = self.buf_uop(*buf);
                match valid.as_const() {
                    Some(0) => Ok(self.konst(Scalar::zero(dtype))),
                    Some(_) => {
                        let i = self.node(&idx);
                        Ok(self.push(UOpKind::Load, dtype, alloc::vec![b, i]))
                    }
                    None => {
                        let (i, g) = (self.node(&idx), self.node(&valid));
                        Ok(self.push(UOpKind::Load, dtype, alloc::vec![b, i, g]))
                    }
                }
            }
            AstOp::Const { val, st } => {
                let (_, valid) = st.expr_idxs(idxs);
                let c = self.konst(val.cast(dtype));
                match valid.as_const() {
                    Some(0) => Ok(self.konst(Scalar::zero(dtype))),
                    Some(_) => Ok(c),
                    None => {
                        let (g, z) = (self.node(&valid), self.konst(Scalar::zero(dtype)));
                        Ok(self.alu(AluOp::Where, dtype, alloc::vec![g, c, z]))
                    }
                }
            }
            AstOp::Reduce(..) => {
                acc.ok_or_else(|| Error::internal("linearizer: reduce outside its kernel"))
            }
            AstOp::Alu(op) => {
                let src = (0..ast.src().len()).map(src).collect();
                self.count_flop();
                Ok(self.alu(*op, dtype, src))
            }
            AstOp::Cast | AstOp::Bitcast => {
                let x = src(0);
                let kind = if matches!(ast.op(), AstOp::Cast) {
                    UOpKind::Cast
                } else {
                    UOpKind::Bitcast
                };
                // An integer constant cast to an integer type folds (wrapping, as C converts):
                // a padded input's centered zero then folds away from the sums it feeds.
                if let UOpKind::Const(v) = self.uops[x as usize].kind {
                    if kind == UOpKind::Cast && v.dtype().is_int() && dtype.is_int() {
                        return Ok(self.konst(v.cast(dtype)));
                    }
                }
                Ok(self.push(kind, dtype, alloc::vec![x]))
            }
            AstOp::Store { .. } => Err(Error::internal("linearizer: nested store")),
        }
    }

    fn buf_uop(&self, buf: usize) -> u32 {
        // DefineGlobals are the first UOps, one per buffer, in buffer order.
        buf as u32
    }

    /// Folds one value of the reduce's input into `acc`.
    fn accumulate(
        &mut self,
        op: ReduceOp,
        src: &Ast,
        idxs: &[Node],
        acc: u32,
        dtype: DType,
    ) -> Result<()> {
        let new = match (op, src.op()) {
            // sum(a*b): acc = a*b + acc, rounded twice like the unfused form, or once when fused.
            (ReduceOp::Sum, AstOp::Alu(AluOp::Mul)) => {
                // One memo for both factors: a node they share is lowered once.
                let mut memo = HashMap::new();
                let a = self.value(&src.src()[0], idxs, None, &mut memo)?;
                let b = self.value(&src.src()[1], idxs, None, &mut memo)?;
                self.count_flop();
                let op = if self.fused && dtype.is_float() {
                    AluOp::Fma
                } else {
                    AluOp::MulAcc
                };
                self.alu(op, dtype, alloc::vec![a, b, acc])
            }
            _ => {
                let v = self.value(src, idxs, None, &mut HashMap::new())?;
                self.alu(op.alu(), dtype, alloc::vec![acc, v])
            }
        };
        self.count_flop();
        self.cost.reduce_ops = self.cost.reduce_ops.saturating_add(self.trip());
        self.push(UOpKind::Assign, dtype, alloc::vec![acc, new]);
        Ok(())
    }

    /// Folds the products of `src` (a `MulWide`) at two positions into `acc` with one
    /// `DualMac`. Integer sums wrap, so this is the same value as two single steps.
    /// A product with a constant zero factor (a padded input) is dropped: the other one takes a
    /// single step, and a pair of two such products emits nothing.
    fn accumulate_pair(&mut self, src: &Ast, pair: [&[Node]; 2], acc: u32) -> Result<()> {
        let mut lanes = Vec::with_capacity(5);
        lanes.push(acc);
        for idxs in pair {
            let mut memo = HashMap::new();
            lanes.push(self.value(&src.src()[0], idxs, None, &mut memo)?);
            lanes.push(self.value(&src.src()[1], idxs, None, &mut memo)?);
        }
        (0..4).for_each(|_| self.count_flop());
        self.cost.reduce_ops = self.cost.reduce_ops.saturating_add(2 * self.trip());
        let live: Vec<[u32; 2]> = [[lanes[1], lanes[2]], [lanes[3], lanes[4]]]
            .into_iter()
            .filter(|f| !self.is_zero(f[0]) && !self.is_zero(f[1]))
            .collect();
        let new = match live[..] {
            [] => return Ok(()),
            [[a, b]] => {
                let p = self.alu(AluOp::MulWide, DType::I32, alloc::vec![a, b]);
                self.alu(AluOp::Add, DType::I32, alloc::vec![acc, p])
            }
            _ => self.push(UOpKind::DualMac, DType::I32, lanes),
        };
        self.push(UOpKind::Assign, DType::I32, alloc::vec![acc, new]);
        Ok(())
    }
}

impl Lin {
    /// Folds the products of `src` (a `MulWide`) at four reduce positions into `acc` with one
    /// packed `DualMac`, when each factor is an ungated i8 load of four consecutive elements
    /// there (one 32-bit word per factor); false, emitting nothing, when they are not.
    fn accumulate_packed(&mut self, src: &Ast, quad: &[Vec<Node>], acc: u32) -> Result<bool> {
        let mut words = Vec::with_capacity(2);
        for f in &src.src()[..2] {
            let AstOp::Load { buf, st } = f.op() else {
                return Ok(false);
            };
            if f.dtype() != DType::I8 {
                return Ok(false);
            }
            let (idxs, valid): (Vec<Node>, Vec<Node>) =
                quad.iter().map(|p| st.expr_idxs(p)).unzip();
            let ungated = valid.iter().all(|v| v.as_const().is_some_and(|c| c != 0));
            if !ungated || !lanes::consecutive(&idxs) {
                return Ok(false);
            }
            words.push((*buf, idxs[0].clone()));
        }
        let mut srcs = alloc::vec![acc];
        for (buf, idx) in words {
            let (b, i) = (self.buf_uop(buf), self.node(&idx));
            srcs.push(self.push(
                UOpKind::VecLoad {
                    lanes: 4,
                    stride: 1,
                },
                DType::I8,
                alloc::vec![b, i],
            ));
        }
        (0..8).for_each(|_| self.count_flop());
        self.cost.reduce_ops = self.cost.reduce_ops.saturating_add(4 * self.trip());
        let new = self.push(UOpKind::DualMac, DType::I32, srcs);
        self.push(UOpKind::Assign, DType::I32, alloc::vec![acc, new]);
        Ok(true)
    }
}

/// The reduce upcast (an index into `reduce_up`) along which both i8 factors of a pairable
/// integer sum ([`dual_mac_fits`]) are consecutive in memory, its size a multiple of 4: the
/// axis a packed `DualMac` reads a word along (`None` without one, or without `dual_mac`).
/// The last such axis is taken (the innermost order it already had, when it is the last).
fn packed_upcast(dual_mac: bool, k: &Kernel, reduce_up: &[usize]) -> Option<usize> {
    let red = k.ast.find_reduce()?;
    let AstOp::Reduce(rop, _) = red.op() else {
        return None;
    };
    let src = red.src().first()?;
    if !dual_mac || !dual_mac_fits(*rop, src, red.dtype()) {
        return None;
    }
    let strides: Vec<Vec<Option<Node>>> = src
        .src()
        .iter()
        .map(|f| match f.op() {
            AstOp::Load { st, .. } if f.dtype() == DType::I8 => Some(st.real_strides()),
            _ => None,
        })
        .collect::<Option<_>>()?;
    let unit = |a: usize| {
        strides
            .iter()
            .all(|s| s.get(a).and_then(|n| n.as_ref()?.as_const()) == Some(1))
    };
    (0..reduce_up.len()).rev().find(|&j| {
        let a = k.first_upcast + reduce_up[j];
        let n = k.full_shape[a].as_const().unwrap_or(0);
        n > 0 && n % 4 == 0 && unit(a)
    })
}

/// The reduce positions `sizes` ordered so that consecutive pairs are neighbours along axis
/// `along` (positions 0 and 1, 2 and 3, … of each run along it), the runs' odd ones out after
/// all pairs, in order (they then pair with each other across the run).
fn paired_along(sizes: &[i64], along: usize) -> Vec<Vec<i64>> {
    let run = usize::try_from(sizes[along]).unwrap_or(1).max(1);
    let (mut pairs, mut rest) = (Vec::new(), Vec::new());
    for c in combos_fastest(sizes, along).chunks(run) {
        let even = c.len() - c.len() % 2;
        pairs.extend_from_slice(&c[..even]);
        rest.extend_from_slice(&c[even..]);
    }
    pairs.extend(rest);
    pairs
}

/// The product an integer sum of `k` pairs into `DualMac`s (`dual_mac` on and
/// [`dual_mac_fits`]), if any.
fn paired_src<'a>(l: &Lin, k: &'a Kernel) -> Option<&'a Ast> {
    let red = k.ast.find_reduce()?;
    let AstOp::Reduce(rop, _) = red.op() else {
        return None;
    };
    let src = red.src().first()?;
    (l.dual_mac && dual_mac_fits(*rop, src, red.dtype())).then_some(src)
}

/// The index and validity expressions of every view under one factor at one position.
type Reads = Vec<(Node, Node)>;

/// The index and validity expressions every view under each factor of `src` (a `MulWide`)
/// reads at `pos`: two positions whose lists are equal read the same values.
fn factor_idxs(src: &Ast, pos: &[Node]) -> [Reads; 2] {
    let mut out: [Reads; 2] = [Vec::new(), Vec::new()];
    for (f, o) in src.src().iter().zip(out.iter_mut()) {
        visit_sts(f, &mut |st| {
            o.push(st.expr_idxs(&pos[..st.shape().len().min(pos.len())]))
        });
    }
    out
}

/// How many distinct packed operands pairing the reduce positions `red` two by two (as the
/// emission does) makes over the output positions `out`: each `DualMac` of a scalar pair packs
/// each factor's two values into one register (one instruction where they are not constants
/// or hoisted), and a pair of values read at the same indices for another output of the tile
/// is the same operand, made once. Counted per factor; the order with fewest is taken, which
/// for a depthwise window pairs vertically adjacent taps (`(ky, kx)`, `(ky + 1, kx)`), whose
/// input pair the row's neighbouring outputs share (each input column serves `kx` outputs),
/// rather than horizontal ones, whose pair is different for every output.
fn pack_count(
    out: &[Vec<i64>],
    red: &[Vec<i64>],
    key: impl Fn(&[i64], &[i64]) -> [Reads; 2],
) -> usize {
    let mut seen: [hashbrown::HashSet<(Reads, Reads)>; 2] = Default::default();
    for pair in red.chunks(2) {
        let [r0, r1] = pair else { continue };
        for g in out {
            let ([a0, b0], [a1, b1]) = (key(g, r0), key(g, r1));
            seen[0].insert((a0, a1));
            seen[1].insert((b0, b1));
        }
    }
    seen[0].len() + seen[1].len()
}

/// [`combos`] with axis `fastest` varying fastest (the others in their order), each combo
/// still listing its positions in the axes' order.
fn combos_fastest(sizes: &[i64], fastest: usize) -> Vec<Vec<i64>> {
    let mut order: Vec<usize> = (0..sizes.len()).filter(|&a| a != fastest).collect();
    order.push(fastest);
    let permuted: Vec<i64> = order.iter().map(|&a| sizes[a]).collect();
    combos(&permuted)
        .into_iter()
        .map(|c| {
            let mut out = alloc::vec![0; sizes.len()];
            for (i, &a) in order.iter().enumerate() {
                out[a] = c[i];
            }
            out
        })
        .collect()
}

/// Is `src`, summed by `op` into `dtype`, a product of two values that fit signed 16-bit lanes
/// (an int8 conv or matmul's `MulWide`), so two of its steps can be one `DualMac`?
fn dual_mac_fits(op: ReduceOp, src: &Ast, dtype: DType) -> bool {
    let lane = |a: &Ast| matches!(a.dtype(), DType::I8 | DType::U8 | DType::I16);
    op == ReduceOp::Sum
        && dtype == DType::I32
        && matches!(src.op(), AstOp::Alu(AluOp::MulWide))
        && src.src().iter().all(lane)
}

/// The output combinations grouped by all coordinates but `lane_axis`'s: each group lists its
/// combinations (indices into `combos`) in lane order, groups in order of first appearance.
fn lane_groups(combos: &[Vec<i64>], lane_axis: usize) -> Vec<Vec<usize>> {
    let mut groups: Vec<(Vec<i64>, Vec<usize>)> = Vec::new();
    for (i, c) in combos.iter().enumerate() {
        let mut key = c.clone();
        key.remove(lane_axis);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(i),
            None => groups.push((key, alloc::vec![i])),
        }
    }
    groups.into_iter().map(|(_, g)| g).collect()
}

/// The narrowest vector a tail is cut into: 4 f32 lanes, the 128-bit registers every SIMD
/// target has (with a fused multiply-add). Narrower vectors have no instructions of their own on
/// x86 (a 2-lane multiply-add is lane-by-lane code, slower than two scalars: measured, mobilenet_v2
/// 102.6 M -> 118.1 M instructions per run with 2-lane tails).
const MIN_TAIL_LANES: usize = 4;

/// Each lane group cut into vectors of `lanes` positions; the positions left over (an axis the
/// lanes do not divide) into narrower power-of-two vectors of at least [`MIN_TAIL_LANES`],
/// widest first (a row of 14 on 8 lanes: 8, 4, then two scalars), the rest as one-position
/// groups (scalars). Each lane computes what its scalar would, so the cut changes no result.
fn vector_chunks(groups: Vec<Vec<usize>>, lanes: usize) -> Vec<Vec<usize>> {
    let lanes = lanes.max(2);
    let mut out = Vec::new();
    for g in groups {
        let body = g.len() - g.len() % lanes;
        out.extend(g[..body].chunks(lanes).map(<[usize]>::to_vec));
        let mut rest = &g[body..];
        while !rest.is_empty() {
            // The widest power of two that fits what is left, if wide enough; else a scalar.
            let w = match 1usize << rest.len().ilog2() {
                w if w >= MIN_TAIL_LANES => w,
                _ => 1,
            };
            out.push(rest[..w].to_vec());
            rest = &rest[w..];
        }
    }
    out
}

/// Every combination of positions of the unrolled axes `sizes`, first axis slowest.
fn combos(sizes: &[i64]) -> Vec<Vec<i64>> {
    let mut out = alloc::vec![Vec::new()];
    for &s in sizes {
        out = out
            .into_iter()
            .flat_map(|c| {
                (0..s).map(move |i| {
                    let mut c = c.clone();
                    c.push(i);
                    c
                })
            })
            .collect();
    }
    out
}

/// Chooses i32 index arithmetic unless some index expression of the kernel may leave its range.
fn index_dtype(k: &Kernel, loop_idxs: &[Node]) -> DType {
    // A loop's trip count is an index value too: a loop of 2^31 or more steps needs 64 bits
    // even when it reads one element (a broadcast constant).
    let mut wide = k.full_shape.iter().any(|d| d.vmax() > i64::from(i32::MAX));
    let fits = |n: &Node| n.vmin() >= i64::from(i32::MIN) && n.vmax() <= i64::from(i32::MAX);
    visit_sts(&k.ast, &mut |st| {
        let (idx, valid) = st.expr_idxs(&loop_idxs[..st.shape().len().min(loop_idxs.len())]);
        wide |= !fits(&idx) || !fits(&valid) || subnodes_exceed(&idx) || subnodes_exceed(&valid);
    });
    if wide {
        DType::I64
    } else {
        DType::I32
    }
}

fn subnodes_exceed(n: &Node) -> bool {
    let out = n.vmin() < i64::from(i32::MIN) || n.vmax() > i64::from(i32::MAX);
    out || match n.kind() {
        Kind::Sum(ts) | Kind::And(ts) => ts.iter().any(subnodes_exceed),
        Kind::Mul(a, b) | Kind::Lt(a, b) => subnodes_exceed(a) || subnodes_exceed(b),
        // The divisor is printed as a constant of the index type too.
        Kind::Div(a, c) | Kind::Mod(a, c) => *c > i64::from(i32::MAX) || subnodes_exceed(a),
        _ => false,
    }
}

/// Lowers a kernel to UOps (the `linearize` pass of [`super::lower`]; loop-invariant code is
/// moved out by the later `hoist` pass). `bufs` describes buffer 0 (the output) and the inputs. `fused`:
/// float sums of products accumulate with one rounding per step ([`AluOp::Fma`]), for devices
/// with hardware FMA ([`Device::fused_mulacc`](crate::device::Device::fused_mulacc)).
/// `dual_mac`: pair the products of integer sums into [`UOpKind::DualMac`]s (a target with
/// `smlad`, [`OptConfig::dual_mac`](super::opt::OptConfig::dual_mac)); the reduce's unrolled
/// positions pair in order, an odd one out takes a single step.
pub fn linearize(
    k: &Kernel,
    bufs: Vec<BufParam>,
    name: String,
    fused: bool,
    dual_mac: bool,
) -> Result<LinearKernel> {
    lower(k, bufs, name, [fused, dual_mac], &kernel_vars(k))
}

/// The kernel's symbolic variables (every leaf's views and the full shape), each once, sorted
/// by name: they become the kernel's arguments.
fn kernel_vars(k: &Kernel) -> Vec<Node> {
    let mut vars: Vec<Node> = Vec::new();
    visit_sts(&k.ast, &mut |st| vars.extend(st.vars()));
    k.full_shape.iter().for_each(|d| vars.extend(d.vars()));
    vars.sort_by(|a, b| a.var_name().cmp(&b.var_name()));
    vars.dedup_by(|a, b| a.var_name() == b.var_name());
    vars
}

/// [`linearize`] with the kernel arguments `vars` given: an index variable that is neither one
/// of them nor a loop counter is an [`Error::Internal`], never a silent 0.
fn lower(
    k: &Kernel,
    bufs: Vec<BufParam>,
    name: String,
    [fused, dual_mac]: [bool; 2],
    vars: &[Node],
) -> Result<LinearKernel> {
    let rem = k.remainder.as_deref();
    // One index type for both parts of a looped remainder (they share loops).
    let idx_dtype = match (index_dtype(k, &loop_idxs(k)), rem) {
        (DType::I32, Some(r)) => index_dtype(&r.kernel, &loop_idxs(&r.kernel)),
        (d, _) => d,
    };
    let mut l = Lin {
        uops: Vec::new(),
        cse: HashMap::new(),
        cse_log: Vec::new(),
        vars: HashMap::new(),
        idx_dtype,
        trips: Vec::new(),
        cost: KernelCost::default(),
        fused,
        dual_mac,
        error: None,
        block: None,
        local: None,
    };
    for (i, b) in bufs.iter().enumerate() {
        l.push(
            UOpKind::DefineGlobal {
                idx: i,
                writable: b.writable,
            },
            b.dtype,
            Vec::new(),
        );
    }
    for v in vars {
        let name: Arc<str> = Arc::from(v.var_name().unwrap_or("v"));
        let u = l.push(
            UOpKind::DefineVar {
                name: name.clone(),
                min: v.vmin(),
                max: v.vmax(),
            },
            DType::I32,
            Vec::new(),
        );
        l.vars.insert(String::from(&*name), u);
    }
    // Staged weights' local, before any loop (see `linearizer/stage.rs`).
    if let Some(n) = stage_size(k).filter(|_| dual_mac) {
        let u = l.push(UOpKind::DefineLocal { size: n }, DType::I16, Vec::new());
        l.local = Some((u, n));
    }
    // A looped remainder: the loops of the axes before its axis are shared, the main part
    // runs first inside them, then the remainder.
    let shared = rem.map_or(0, |r| r.shared);
    let idxs = loop_idxs(k);
    let mut loops = Vec::new();
    // A blocked reduce: the block loop is the outermost (see [`Block`]).
    if let Some(steps) = k.reduce_block {
        let len = k.full_shape[k.first_reduce]
            .as_const()
            .filter(|_| steps >= 1)
            .ok_or_else(|| Error::internal("linearizer: a blocked reduce of symbolic length"))?;
        let steps = steps as i64;
        let blocks = (len + steps - 1) / steps;
        let var = l.open_loop(String::from("rblk"), &Node::cst(blocks));
        loops.push(var);
        l.block = Some(Block {
            var,
            steps,
            len,
            blocks,
        });
    }
    for (i, idx) in idxs.iter().enumerate().take(shared) {
        loops.push(l.open_loop(String::from(idx.var_name().unwrap_or("")), &k.full_shape[i]));
    }
    emit(&mut l, k, shared)?;
    if let Some(r) = rem {
        emit(&mut l, &r.kernel, shared)?;
    }
    for lp in loops.into_iter().rev() {
        l.close_loop(lp);
    }
    finish(l, bufs, name, vars)
}

/// Will the linearizer stage the weights of `k` (marked [`Kernel::staged`], on a target with
/// `dual_mac`), in its main part and in its looped remainder if any? The strategy that marks a
/// kernel asks, so a tile chosen for staging is never lowered without it.
pub(crate) fn stageable(k: &Kernel) -> bool {
    let outer = k.remainder.as_deref().map_or(0, |r| r.shared);
    staging(k, outer).is_some()
        && k.remainder
            .as_deref()
            .is_none_or(|r| staging(&r.kernel, outer).is_some())
}

/// Elements of the local the staged parts of `k` share (the larger part's), if any stages:
/// declared before any loop, so both parts of a looped remainder see it.
fn stage_size(k: &Kernel) -> Option<usize> {
    let outer = k.remainder.as_deref().map_or(0, |r| r.shared);
    let main = staging(k, outer).map(|s| s.size());
    let rem = k
        .remainder
        .as_deref()
        .and_then(|r| staging(&r.kernel, outer));
    main.into_iter().chain(rem.map(|s| s.size())).max()
}

/// The staging [`emit`] makes of `k` (one part; `outer` global loops open before it), on a
/// target with `dual_mac`.
fn staging(k: &Kernel, outer: usize) -> Option<stage::Stage> {
    let up: Vec<i64> = k.full_shape[k.first_upcast..]
        .iter()
        .map(|d| d.as_const().unwrap_or(1))
        .collect();
    let idxs = loop_idxs(k);
    let pick = |reduce: bool| -> Vec<usize> {
        (0..up.len())
            .filter(|&u| k.upcast_is_reduce[u] == reduce)
            .collect()
    };
    let (global_up, reduce_up) = (pick(false), pick(true));
    let sizes = |which: &[usize]| which.iter().map(|&u| up[u]).collect::<Vec<_>>();
    let (Some(j), Some(red)) = (packed_upcast(true, k, &reduce_up), k.ast.find_reduce()) else {
        return None;
    };
    let out = combos(&sizes(&global_up));
    let reds = combos_fastest(&sizes(&reduce_up), j);
    let positions = |g: &[i64], r: &[i64], _: bool| -> Vec<Node> {
        let mut p = idxs.clone();
        for (n, &u) in global_up.iter().enumerate() {
            p[k.first_upcast + u] = Node::cst(g[n]);
        }
        for (n, &u) in reduce_up.iter().enumerate() {
            p[k.first_upcast + u] = Node::cst(r[n]);
        }
        p
    };
    stage::plan(k, &red.src()[0], outer, &out, &reds, &positions)
}

/// Index variables of `k`: loop counters for looped axes, placeholders for unrolled ones (for
/// bounds).
fn loop_idxs(k: &Kernel) -> Vec<Node> {
    let var_for = |i: usize| {
        let prefix = if i < k.first_reduce {
            "gidx"
        } else if i < k.first_upcast {
            "ridx"
        } else {
            "uidx"
        };
        Node::var(
            &alloc::format!("{prefix}{i}"),
            0,
            (k.full_shape[i].vmax() - 1).max(0),
        )
    };
    (0..k.rank()).map(var_for).collect()
}

/// Emits the UOps of `k` (without its remainder), the loops of its first `outer` global axes
/// being open already.
fn emit(l: &mut Lin, k: &Kernel, outer: usize) -> Result<()> {
    let up_sizes: Vec<i64> = k.full_shape[k.first_upcast..]
        .iter()
        .map(|d| d.as_const().unwrap_or(1))
        .collect();
    let loop_idxs = loop_idxs(k);
    let mut loops = Vec::new();
    let global_up: Vec<usize> = (0..up_sizes.len())
        .filter(|&u| !k.upcast_is_reduce[u])
        .collect();
    let reduce_up: Vec<usize> = (0..up_sizes.len())
        .filter(|&u| k.upcast_is_reduce[u])
        .collect();
    let sizes = |which: &[usize]| which.iter().map(|&u| up_sizes[u]).collect::<Vec<_>>();
    let mut out_combos = combos(&sizes(&global_up));
    // A packed dual multiply-accumulate reads four consecutive reduce positions of each
    // factor: its axis runs fastest (integer sums wrap, so the order changes no value).
    let packed = packed_upcast(l.dual_mac, k, &reduce_up);
    let mut red_combos = match packed {
        Some(j) => combos_fastest(&sizes(&reduce_up), j),
        None => combos(&sizes(&reduce_up)),
    };
    // Positions for one unrolled combination; reduce axes at 0 when reading outside the reduce.
    let positions = |g: &[i64], r: &[i64], inside: bool| -> Vec<Node> {
        let mut p = loop_idxs.clone();
        for (j, &u) in global_up.iter().enumerate() {
            p[k.first_upcast + u] = Node::cst(g[j]);
        }
        for (j, &u) in reduce_up.iter().enumerate() {
            p[k.first_upcast + u] = Node::cst(if inside { r[j] } else { 0 });
        }
        if !inside {
            (k.first_reduce..k.first_upcast).for_each(|i| p[i] = Node::cst(0));
        }
        p
    };
    // Scalar pairs (no packed word): the pairing whose packed operands the tile's outputs
    // share most (see [`pack_count`]).
    if packed.is_none() && k.vector_upcast.is_none() && reduce_up.len() > 1 {
        if let Some(src) = paired_src(l, k) {
            let key = |g: &[i64], r: &[i64]| factor_idxs(src, &positions(g, r, true));
            let n = sizes(&reduce_up);
            red_combos = (0..reduce_up.len())
                .rev()
                .flat_map(|j| [combos_fastest(&n, j), paired_along(&n, j)])
                .min_by_key(|c| pack_count(&out_combos, c, key))
                .unwrap_or(red_combos);
        }
    }

    // Staged weights: the global loops the weight moves along first, its staging, then the
    // rest (see `linearizer/stage.rs`).
    let staged = match (packed, k.ast.find_reduce()) {
        (Some(_), Some(red)) => stage::plan(
            k,
            &red.src()[0],
            outer,
            &out_combos,
            &red_combos,
            &positions,
        ),
        _ => None,
    };
    let split = staged.as_ref().map_or(k.first_reduce, |s| s.split);
    let open_globals = |l: &mut Lin, loops: &mut Vec<u32>, from: usize, to: usize| {
        for (i, idx) in loop_idxs.iter().enumerate().take(to).skip(from) {
            loops.push(l.open_loop(String::from(idx.var_name().unwrap_or("")), &k.full_shape[i]));
        }
    };
    open_globals(l, &mut loops, outer, split);
    let staged = match (staged, k.ast.find_reduce()) {
        (Some(st), Some(red)) => match l.stage_local(&st) {
            Some(local) => {
                let (o, r) = (&out_combos[..], &red_combos[..]);
                l.stage_weights(
                    k,
                    (&st, local),
                    &red.src()[0],
                    (o, r),
                    &positions,
                    &loop_idxs,
                );
                Some((st, local))
            }
            None => None,
        },
        _ => None,
    };
    open_globals(l, &mut loops, split.max(outer), k.first_reduce);

    let store = &k.ast;
    let AstOp::Store { st: out_st, .. } = store.op() else {
        return Err(Error::internal("linearizer: the AST root is not a store"));
    };
    if let Some(v) = k.vector_upcast {
        let Some(lane_axis) = global_up.iter().position(|&u| u == v) else {
            return Err(Error::internal(
                "linearizer: the vector axis is not a global upcast",
            ));
        };
        let groups = vector_chunks(lane_groups(&out_combos, lane_axis), k.vector_lanes);
        let lanes_of = |g: &[usize], r: &[i64], inside: bool| -> Vec<Vec<Node>> {
            g.iter()
                .map(|&c| positions(&out_combos[c], r, inside))
                .collect()
        };
        // A one-position group is the scalar tail: scalar accumulator, ops and store.
        let mut accs: Vec<LaneVal> = Vec::new();
        if let Some(red) = store.find_reduce() {
            let AstOp::Reduce(rop, _) = red.op() else {
                unreachable!()
            };
            let dtype = red.dtype();
            for g in &groups {
                accs.push(match g.len() {
                    1 => LaneVal::Uni(l.push(
                        UOpKind::DefineAcc(rop.identity(dtype)),
                        dtype,
                        Vec::new(),
                    )),
                    w => l.lane_acc(rop.identity(dtype), dtype, w),
                });
            }
            if let Some(t) = l.open_unless_first() {
                for (gi, g) in groups.iter().enumerate() {
                    let idxs: Vec<Node> = lanes_of(g, &[], false)
                        .iter()
                        .map(|p| out_st.expr_idxs(p).0)
                        .collect();
                    l.resume_acc(&idxs, &accs[gi], dtype);
                }
                l.close_loop(t);
            }
            let rloops = open_reduce_loops(l, k, &loop_idxs);
            let src = &red.src()[0];
            // Each accumulator's terms keep their order in either nesting (see
            // [`steps_outermost`]).
            let order: Vec<(usize, usize)> = if steps_outermost(k, &global_up, v) {
                (0..red_combos.len())
                    .flat_map(|r| (0..groups.len()).map(move |g| (g, r)))
                    .collect()
            } else {
                (0..groups.len())
                    .flat_map(|g| (0..red_combos.len()).map(move |r| (g, r)))
                    .collect()
            };
            for (gi, ri) in order {
                let (g, r) = (&groups[gi], &red_combos[ri]);
                match (&g[..], &accs[gi]) {
                    ([c], LaneVal::Uni(acc)) => {
                        let p = positions(&out_combos[*c], r, true);
                        l.accumulate(*rop, src, &p, *acc, dtype)?;
                    }
                    _ => l.lane_accumulate(*rop, src, &lanes_of(g, r, true), &accs[gi], dtype)?,
                }
            }
            for lp in rloops.into_iter().rev() {
                l.close_loop(lp);
            }
        }
        let last = match store.find_reduce() {
            Some(red) if l.block.is_some() => {
                // Every block stores its raw sums; the ops after the reduce run on the last.
                for (gi, g) in groups.iter().enumerate() {
                    let idxs: Vec<Node> = lanes_of(g, &[], false)
                        .iter()
                        .map(|p| out_st.expr_idxs(p).0)
                        .collect();
                    match &accs[gi] {
                        LaneVal::Uni(a) => {
                            let i = l.node(&idxs[0]);
                            l.push(UOpKind::Store, red.dtype(), alloc::vec![0, i, *a]);
                        }
                        acc => l.lane_store(&idxs, acc, red.dtype()),
                    }
                }
                if store.src()[0] == *red {
                    None
                } else {
                    l.open_if_last()
                }
            }
            _ => None,
        };
        let raw_only = l.block.is_some() && last.is_none() && store.find_reduce().is_some();
        for (gi, g) in groups.iter().enumerate() {
            if raw_only {
                break;
            }
            if let [c] = &g[..] {
                let p = positions(&out_combos[*c], &[], false);
                let acc = match accs.get(gi) {
                    Some(LaneVal::Uni(a)) => Some(*a),
                    _ => None,
                };
                let v = l.value(&store.src()[0], &p, acc, &mut HashMap::new())?;
                let (idx, _) = out_st.expr_idxs(&p);
                let i = l.node(&idx);
                l.push(UOpKind::Store, store.dtype(), alloc::vec![0, i, v]);
                continue;
            }
            let lanes = lanes_of(g, &[], false);
            let v = l.lane_value(&store.src()[0], &lanes, accs.get(gi), &mut HashMap::new())?;
            let idxs: Vec<Node> = lanes.iter().map(|p| out_st.expr_idxs(p).0).collect();
            l.lane_store(&idxs, &v, store.dtype());
        }
        if let Some(t) = last {
            l.close_loop(t);
        }
        for lp in loops.into_iter().rev() {
            l.close_loop(lp);
        }
        return Ok(());
    }
    let mut accs = Vec::new();
    let mut out_value = store.src()[0].clone();
    if let Some(red) = store.find_reduce() {
        let AstOp::Reduce(rop, _) = red.op() else {
            unreachable!()
        };
        let dtype = red.dtype();
        // A blocked sum starts each block from the output; its bias is added after the last.
        let bias = bias_as_start(&out_value, red).filter(|_| l.block.is_none());
        for g in &out_combos {
            let acc = l.push(UOpKind::DefineAcc(rop.identity(dtype)), dtype, Vec::new());
            if let Some((_, b)) = &bias {
                let v = l.value(b, &positions(g, &[], false), None, &mut HashMap::new())?;
                l.push(UOpKind::Assign, dtype, alloc::vec![acc, v]);
            }
            accs.push(acc);
        }
        if let Some((v, _)) = bias {
            out_value = v;
        }
        if let Some(t) = l.open_unless_first() {
            for (gi, g) in out_combos.iter().enumerate() {
                let (idx, _) = out_st.expr_idxs(&positions(g, &[], false));
                l.resume_acc(&[idx], &LaneVal::Uni(accs[gi]), dtype);
            }
            l.close_loop(t);
        }
        let rloops = open_reduce_loops(l, k, &loop_idxs);
        let src = &red.src()[0];
        let paired = l.dual_mac && dual_mac_fits(*rop, src, dtype);
        // Unrolled reduce steps outermost: each step's operands feed every accumulator and are
        // then dead, so only one step's loads are live at once (accumulator-major order would
        // keep every step's loads live and spill on a small register file). Each accumulator
        // still receives its terms in `red_combos` order, so results are unchanged.
        // Paired: four positions at a time, one packed `DualMac` where both factors are four
        // consecutive bytes there, else two pairs (the last chunk may be shorter: a pair and
        // an odd position taking a single step).
        for (q, quad) in red_combos.chunks(if paired { 4 } else { 1 }).enumerate() {
            for (gi, g) in out_combos.iter().enumerate() {
                if let (Some((st, local)), 4) = (&staged, quad.len()) {
                    let first = positions(g, &quad[0], true);
                    let at = (q, gi);
                    l.accumulate_staged(k, (st, *local), src, at, &first, &loop_idxs, accs[gi])?;
                    continue;
                }
                if quad.len() == 4 {
                    let ps: Vec<Vec<Node>> = quad.iter().map(|r| positions(g, r, true)).collect();
                    if l.accumulate_packed(src, &ps, accs[gi])? {
                        continue;
                    }
                }
                for rs in quad.chunks(if paired { 2 } else { 1 }) {
                    if let [r0, r1] = rs {
                        let (p0, p1) = (positions(g, r0, true), positions(g, r1, true));
                        l.accumulate_pair(src, [&p0, &p1], accs[gi])?;
                    } else {
                        l.accumulate(*rop, src, &positions(g, &rs[0], true), accs[gi], dtype)?;
                    }
                }
            }
        }
        for lp in rloops.into_iter().rev() {
            l.close_loop(lp);
        }
    }
    let mut last = None;
    if let (Some(red), true) = (store.find_reduce(), l.block.is_some()) {
        // Every block stores its raw sums; the ops after the reduce run on the last.
        for (gi, g) in out_combos.iter().enumerate() {
            let (idx, _) = out_st.expr_idxs(&positions(g, &[], false));
            let i = l.node(&idx);
            l.push(UOpKind::Store, red.dtype(), alloc::vec![0, i, accs[gi]]);
        }
        if out_value == *red {
            out_combos.clear();
        } else {
            last = l.open_if_last();
        }
    }
    for (gi, g) in out_combos.iter().enumerate() {
        let p = positions(g, &[], false);
        let v = l.value(&out_value, &p, accs.get(gi).copied(), &mut HashMap::new())?;
        let (idx, _) = out_st.expr_idxs(&p);
        let i = l.node(&idx);
        l.push(UOpKind::Store, store.dtype(), alloc::vec![0, i, v]);
    }
    if let Some(t) = last {
        l.close_loop(t);
    }
    for lp in loops.into_iter().rev() {
        l.close_loop(lp);
    }
    Ok(())
}

/// Opens the reduce loops of `k` (the first one over the current block when the reduce is
/// blocked), outermost first.
fn open_reduce_loops(l: &mut Lin, k: &Kernel, loop_idxs: &[Node]) -> Vec<u32> {
    let mut rloops = Vec::new();
    for (i, idx) in loop_idxs
        .iter()
        .enumerate()
        .take(k.first_upcast)
        .skip(k.first_reduce)
    {
        let name = String::from(idx.var_name().unwrap_or(""));
        rloops.push(match l.block {
            Some(b) if i == k.first_reduce => l.open_block_loop(name, b),
            _ => l.open_loop(name, &k.full_shape[i]),
        });
    }
    rloops
}

/// Whether a vector kernel's unrolled reduce steps run outermost (each step's loads feed every
/// accumulator, then die) rather than its accumulators (each runs through every step): steps
/// outermost when a step loads several vectors of one operand — a load contiguous along the
/// lanes that moves along another unrolled output axis, as a conv tile's weights over several
/// channel vectors do — since accumulators outermost keeps every step's vectors live (a 3×3
/// window's taps × the channel vectors). Otherwise accumulators outermost: what later steps
/// share is then the broadcast operand (a window sliding along one channel vector's pixels),
/// which steps outermost would keep live instead. Measured on the gcc/clang code of resnet18's
/// and oddnet's 3×3 convs (llvm-mca, an AVX2 core: FMAs per cycle): 2 vectors × 4 pixels 1.59
/// accumulators outermost, 1.99 steps outermost; 1 vector × 8 pixels 1.83 and 1.26.
fn steps_outermost(k: &Kernel, global_up: &[usize], lane_up: usize) -> bool {
    let lane_axis = k.first_upcast + lane_up;
    let others: Vec<usize> = global_up
        .iter()
        .filter(|&&u| u != lane_up && k.full_shape[k.first_upcast + u].as_const() != Some(1))
        .map(|&u| k.first_upcast + u)
        .collect();
    k.leaf_strides().1.iter().any(|strides| {
        let stride = |a: usize| strides.get(a).copied().flatten();
        stride(lane_axis) == Some(1) && others.iter().any(|&a| stride(a) != Some(0))
    })
}

/// An integer sum's bias as its accumulators' start: for a store value reading the reduce `red`
/// once, through `red + b` (either order) with `b` outside the reduce, the value with that add
/// replaced by `red`, and `b`. Exact: integer sums wrap, so `(b + x0) + x1 … = (x0 + x1 …) + b`
/// bit for bit; a float sum would round in another order, so it is left alone. Saves the add
/// after the reduce and keeps `b`'s load out of the requantize path.
fn bias_as_start(value: &Ast, red: &Ast) -> Option<(Ast, Ast)> {
    let AstOp::Reduce(ReduceOp::Sum, _) = red.op() else {
        return None;
    };
    if !red.dtype().is_int() {
        return None;
    }
    let nodes = value.nodes();
    let mut readers = nodes.iter().filter(|n| n.src().iter().any(|s| s == red));
    let (add, None) = (readers.next()?, readers.next()) else {
        return None;
    };
    let [a, b] = add.src() else {
        return None;
    };
    if add.op() != &AstOp::Alu(AluOp::Add) || add.dtype() != red.dtype() {
        return None;
    }
    let bias = if a == red { b } else { a };
    if bias == red || bias.find_reduce().is_some() {
        return None;
    }
    Some((replace_node(value, add, red), bias.clone()))
}

/// `ast` with every node equal to `old` outside its reduces replaced by `new` (shared nodes stay
/// shared).
fn replace_node(ast: &Ast, old: &Ast, new: &Ast) -> Ast {
    fn go(n: &Ast, old: &Ast, new: &Ast, memo: &mut HashMap<usize, Ast>) -> Ast {
        if n == old {
            return new.clone();
        }
        // Below a reduce lies its own input, never the store value's add.
        if matches!(n.op(), AstOp::Reduce(..)) {
            return n.clone();
        }
        if let Some(m) = memo.get(&n.id()) {
            return m.clone();
        }
        let src: Vec<Ast> = n.src().iter().map(|s| go(s, old, new, memo)).collect();
        let out = if src.iter().zip(n.src()).all(|(a, b)| a.id() == b.id()) {
            n.clone()
        } else {
            Ast::new(n.op().clone(), n.dtype(), src)
        };
        memo.insert(n.id(), out.clone());
        out
    }
    go(ast, old, new, &mut HashMap::new())
}

/// The kernel from the lowered UOps: bytes moved, arguments, or the first broken invariant.
fn finish(mut l: Lin, bufs: Vec<BufParam>, name: String, vars: &[Node]) -> Result<LinearKernel> {
    l.cost.bytes = bufs
        .iter()
        .map(|b| (b.size * b.dtype.itemsize()) as u64)
        .sum();
    let vars = vars
        .iter()
        .map(|v| (Arc::from(v.var_name().unwrap_or("v")), v.vmin(), v.vmax()))
        .collect();
    if let Some(e) = l.error {
        return Err(e);
    }
    Ok(LinearKernel {
        name,
        uops: l.uops,
        bufs,
        vars,
        cost: l.cost,
    })
}

#[cfg(test)]
mod tests {
    //! The unknown-variable invariant: a kernel whose index reads a variable it does not bind is
    //! refused with [`Error::Internal`] naming the variable (it once read 0 in silence).

    use super::*;
    use crate::shape::{ShapeTracker, View};

    /// `out[i] = in[i + n]` over 4 elements, `n` a symbolic offset in `[0, 3]`.
    fn shifted_copy() -> (Kernel, Vec<BufParam>) {
        let n = Node::var("n", 0, 3);
        let dims = [Node::cst(4)];
        let view = View::new(dims.to_vec(), alloc::vec![Node::cst(1)], n, None);
        let load = Ast::new(
            AstOp::Load {
                buf: 1,
                st: ShapeTracker::from_view(view),
            },
            DType::F32,
            Vec::new(),
        );
        let store = AstOp::Store {
            buf: 0,
            st: ShapeTracker::from_shape(&dims),
        };
        let k = Kernel {
            ast: Ast::new(store, DType::F32, alloc::vec![load]),
            full_shape: dims.to_vec(),
            first_reduce: 1,
            first_upcast: 1,
            upcast_is_reduce: Vec::new(),
            vector_upcast: None,
            vector_lanes: 0,
            remainder: None,
            reduce_block: None,
            staged: false,
        };
        let buf = |size, writable| BufParam {
            dtype: DType::F32,
            size,
            writable,
        };
        (k, alloc::vec![buf(4, true), buf(7, false)])
    }

    #[test]
    fn a_bound_variable_becomes_a_kernel_argument() {
        let (k, bufs) = shifted_copy();
        let lk = linearize(&k, bufs, "shifted".into(), false, false).expect("n is bound");
        let names: Vec<&str> = lk.vars.iter().map(|v| &*v.0).collect();
        assert_eq!(names, ["n"]);
        let defined = lk
            .uops
            .iter()
            .any(|u| matches!(&u.kind, UOpKind::DefineVar { name, .. } if &**name == "n"));
        assert!(defined, "no DefineVar for n in {:?}", lk.uops);
    }

    #[test]
    fn an_unbound_index_variable_is_an_internal_error() {
        let (k, bufs) = shifted_copy();
        // Lower with no kernel arguments: `n` in the load's offset has no loop and no argument.
        match lower(&k, bufs, "shifted".into(), [false, false], &[]) {
            Err(Error::Internal(m)) => {
                assert!(m.contains("`n`"), "message does not name the variable: {m}");
                assert!(m.contains("no loop or kernel argument"), "message: {m}");
            }
            Err(e) => panic!("expected Error::Internal, got {e:?}"),
            Ok(lk) => panic!("lowered with an unbound variable: {:?}", lk.uops),
        }
    }
}
