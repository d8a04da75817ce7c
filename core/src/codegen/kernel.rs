//! `Kernel`: a scheduled AST arranged for lowering — the kernel's full shape, its axes ordered
//! global-then-reduce, adjacent axes merged where every buffer allows it, and optimizations
//! ([`Opt`]) applied by splitting axes.
//!
//! Invariants: every leaf ShapeTracker has the kernel's rank; axes are laid out as
//! `[global | reduce | upcast]`: `[0, first_reduce)` loop over the output, `[first_reduce,
//! first_upcast)` loop inside the accumulator, and `[first_upcast, rank)` are unrolled into
//! straight-line code (an upcast axis is either a global one, whose copies store separately, or a
//! reduce one, whose copies fold into the accumulator). Leaves outside the reduce have size 1 on
//! reduce axes.
//! At most one upcast axis, a global one, is the kernel's vector axis ([`Opt::Vectorize`]): its
//! positions are the lanes of vector UOps, `vector_lanes` at a time; positions left over when
//! the lanes do not divide the axis are a scalar tail.
//! A kernel may carry a looped remainder ([`Opt::LoopedUpcast`], [`Kernel::remainder`]): the
//! kernel itself covers the positions of one global axis that its upcast divides, and a second
//! kernel the positions left over; both share the loops of the axes before that one.
//! A kernel may block its outermost reduce loop ([`Opt::ReduceBlock`], [`Kernel::reduce_block`]):
//! the shape is unchanged; the linearizer runs that loop in blocks from a loop outside all the
//! others, carrying the sums through the output between blocks.

use alloc::string::String;
use alloc::vec::Vec;

use crate::ast::{Ast, AstOp};
use crate::error::{Error, Result};
use crate::ops::ReduceOp;
use crate::shape::{ShapeTracker, Sint};

/// An optimization, applied by splitting an axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Opt {
    /// Split global axis `axis` by `amount` and unroll the inner part (several outputs per
    /// iteration).
    Upcast {
        /// Global axis index.
        axis: usize,
        /// Split factor (must divide the axis).
        amount: usize,
    },
    /// Split reduce axis `axis` (counted from the first reduce axis) by `amount` and unroll the
    /// inner part (several accumulations per iteration).
    Unroll {
        /// Reduce axis index, 0 being the first reduce axis.
        axis: usize,
        /// Split factor (must divide the axis).
        amount: usize,
    },
    /// Split global axis `axis` by `amount` and make the inner part the lanes of vector UOps:
    /// the linearizer computes the `amount` outputs with one vector load, op and store where
    /// the elements are consecutive, and lane by lane where not. At most one per kernel.
    /// An axis the lanes do not divide is unrolled whole: groups of `amount` lanes, then the
    /// remaining positions as a scalar tail.
    Vectorize {
        /// Global axis index.
        axis: usize,
        /// Lanes (at least 2; an axis they do not divide must be larger than them).
        amount: usize,
    },
    /// Split global axis `axis` (size `n`) by an `amount` that does not divide it, as a loop of
    /// `n / amount` steps of `amount` unrolled positions (their innermost `lanes` positions
    /// vector lanes when `lanes >= 2`), then the `n % amount` positions left over, unrolled
    /// whole (as scalars, or with `lanes >= 2` as the widest vector of at least 4 lanes that
    /// fits them and scalars after it): a looped remainder ([`Kernel::remainder`]). Both parts
    /// run inside the loops of the axes before `axis`. It must be the kernel's last global opt (only
    /// [`Opt::Unroll`]s may follow; they apply to both parts).
    LoopedUpcast {
        /// Global axis index.
        axis: usize,
        /// Positions per loop step (at least 2, less than the axis, not dividing it).
        amount: usize,
        /// Vector lanes among them (0 or 1: none; else it divides `amount`).
        lanes: usize,
    },
    /// Run the outermost reduce loop (`axis` 0, counted from the first reduce axis; its looped
    /// part, after any unroll) in blocks of `amount` iterations, the last block shorter when
    /// `amount` does not divide it, from a loop placed outside every other loop of the kernel:
    /// each block runs the whole kernel over its slice of the reduce, so that slice's operands
    /// stay in cache across the output loops. The sums live in the output between blocks:
    /// loaded into the accumulators before a block (every block but the first), stored raw after
    /// it, and the ops after the reduce (bias, residual, activation) run on the last block only.
    /// Every output still adds its terms in the same order, and a float survives the round trip
    /// through memory exactly, so the result is bit-identical. Only for a sum whose accumulator
    /// has the output's dtype, in a kernel that does not read its own output; no `Unroll` may
    /// follow it.
    ReduceBlock {
        /// Reduce axis index: 0 (only the outermost reduce loop keeps each output's order).
        axis: usize,
        /// Iterations of that loop per block (at least 1, less than the loop's length).
        amount: usize,
    },
    /// Stage the weights of a packed int8 sum ([`Kernel::staged`]): the factor that does not
    /// vary along the inner output loops is widened once into a stack local of i16 pairs before
    /// those loops, and each reduce step reads its pre-widened pairs there. Changes no value
    /// (integer sums wrap); applies to both parts of a looped remainder; the linearizer stages
    /// only where the kernel's shape allows it (see `linearizer/stage.rs`).
    StageWeights,
}

/// The positions of a [`Opt::LoopedUpcast`] axis that its upcast does not divide.
#[derive(Clone, Debug)]
pub struct Remainder {
    /// The kernel over those positions (its axis shrunk to them, upcast whole); its first
    /// `shared` axes are the same loops as the main kernel's.
    pub kernel: Kernel,
    /// The global axes, outermost first, whose loops both kernels share.
    pub shared: usize,
}

/// A kernel being prepared for the linearizer.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// The AST; its leaf ShapeTrackers are kept in step with the axes below.
    pub ast: Ast,
    /// The size of each axis.
    pub full_shape: Vec<Sint>,
    /// The first reduce axis (= rank of the global section).
    pub first_reduce: usize,
    /// The first upcast (unrolled) axis.
    pub first_upcast: usize,
    /// For each upcast axis: does it come from the reduce section?
    pub upcast_is_reduce: Vec<bool>,
    /// The upcast axis (counted from `first_upcast`) whose positions are the lanes of vector
    /// UOps ([`Opt::Vectorize`]), if any.
    pub vector_upcast: Option<usize>,
    /// The lanes of one vector on that axis: its size, or less when they do not divide it
    /// (the last `size % lanes` positions are then a scalar tail).
    pub vector_lanes: usize,
    /// The looped remainder ([`Opt::LoopedUpcast`]), lowered after this kernel's body inside
    /// the loops both share.
    pub remainder: Option<alloc::boxed::Box<Remainder>>,
    /// Iterations per block of the first reduce loop ([`Opt::ReduceBlock`]), if it is blocked.
    pub reduce_block: Option<usize>,
    /// The weights of its packed int8 sum are staged as widened pairs ([`Opt::StageWeights`]).
    pub staged: bool,
}

impl Kernel {
    /// The constant stride of every leaf on each axis: `(strides of the store, strides of each
    /// distinct load, in pre-order)`; `None` where a stride is not a constant (masked,
    /// multi-view or symbolic).
    pub fn leaf_strides(&self) -> (Vec<Option<i64>>, Vec<Vec<Option<i64>>>) {
        let consts = |st: &ShapeTracker| {
            st.real_strides()
                .iter()
                .map(|s| s.as_ref().and_then(|n| n.as_const()))
                .collect::<Vec<_>>()
        };
        let (mut store, mut loads) = (Vec::new(), Vec::new());
        for n in self.ast.nodes() {
            match n.op() {
                AstOp::Store { st, .. } => store = consts(st),
                AstOp::Load { st, .. } => loads.push(consts(st)),
                _ => {}
            }
        }
        (store, loads)
    }

    /// Arranges a scheduled AST: reduce axes last, size-1 axes dropped, mergeable neighbours
    /// merged.
    pub fn new(ast: &Ast) -> Result<Kernel> {
        let (full_shape, reduce_axes) = match ast.find_reduce() {
            Some(r) => {
                let AstOp::Reduce(_, axes) = r.op() else {
                    return Err(Error::internal("kernel: reduce node without axes"));
                };
                (leaf_shape(&r.src()[0])?, axes.clone())
            }
            None => (leaf_shape(ast)?, Vec::new()),
        };
        let rank = full_shape.len();
        let mut order: Vec<usize> = (0..rank).filter(|a| !reduce_axes.contains(a)).collect();
        let first_reduce = order.len();
        order.extend(reduce_axes.iter().copied());
        let ast = map_all(ast, |st| st.permute(&order))?;
        let full_shape = order.iter().map(|&a| full_shape[a].clone()).collect();
        let mut k = Kernel {
            ast,
            full_shape,
            first_reduce,
            first_upcast: rank,
            upcast_is_reduce: Vec::new(),
            vector_upcast: None,
            vector_lanes: 0,
            remainder: None,
            reduce_block: None,
            staged: false,
        };
        k.drop_ones()?;
        k.merge_adjacent()?;
        Ok(k)
    }

    /// The rank.
    pub fn rank(&self) -> usize {
        self.full_shape.len()
    }

    /// Is there a reduce?
    pub fn has_reduce(&self) -> bool {
        self.ast.find_reduce().is_some()
    }

    /// Reshapes every leaf so axis `i` of the kernel is replaced by `new_dims` (for leaves, size
    /// 1 axes of the reduce section stay size 1).
    fn reshape_axes(
        &mut self,
        new_full: Vec<Sint>,
        map: &dyn Fn(&[Sint]) -> Vec<Sint>,
    ) -> Result<()> {
        self.ast = map_all(&self.ast, |st| st.reshape(&map(st.shape())))?;
        self.full_shape = new_full;
        Ok(())
    }

    fn drop_ones(&mut self) -> Result<()> {
        let keep: Vec<bool> = self
            .full_shape
            .iter()
            .map(|s| s.as_const() != Some(1))
            .collect();
        if keep.iter().all(|k| *k) {
            return Ok(());
        }
        let dropped_before = |n: usize| (0..n).filter(|&i| !keep[i]).count();
        self.first_reduce -= dropped_before(self.first_reduce);
        self.first_upcast -= dropped_before(self.first_upcast);
        let filt = |s: &[Sint]| {
            s.iter()
                .zip(&keep)
                .filter(|(_, k)| **k)
                .map(|(d, _)| d.clone())
                .collect::<Vec<_>>()
        };
        let new_full = filt(&self.full_shape);
        self.reshape_axes(new_full, &filt)
    }

    /// Merges axis `i` into axis `i-1` where, in every leaf, stepping `i-1` by one is the same as
    /// stepping `i` through its whole length (so one loop covers both).
    fn merge_adjacent(&mut self) -> Result<()> {
        let mut i = self.first_upcast;
        while i > 1 {
            i -= 1;
            if i == self.first_reduce || !self.mergeable(i) {
                continue;
            }
            let merge = |s: &[Sint]| {
                let mut v = s.to_vec();
                let m = &v[i - 1] * &v[i];
                v[i - 1] = m;
                v.remove(i);
                v
            };
            let new_full = merge(&self.full_shape);
            self.reshape_axes(new_full, &merge)?;
            if i < self.first_reduce {
                self.first_reduce -= 1;
            }
            self.first_upcast -= 1;
        }
        Ok(())
    }

    /// Can axis `i` merge into `i-1`? In every leaf, stepping `i-1` by one must be stepping `i`
    /// through its whole length, and nothing may be masked. For a leaf of stacked views this is
    /// asked of the last view — the one the merge reshapes; the views below read its flat
    /// positions, which a reshape keeps — not of the strides through all views: a weight in
    /// channel blocks (`[cout/8, cin, 8]` read as `[cout, oy, ox, cin]`) has no single stride
    /// along `cout`, yet it broadcasts `oy` and `ox`, so a 1×1 conv's pixels merge into one row.
    fn mergeable(&self, i: usize) -> bool {
        let mut ok = true;
        visit_sts(&self.ast, &mut |st| {
            if st.has_mask() {
                ok = false;
                return;
            }
            let Some(last) = st.views().last() else {
                ok = false;
                return;
            };
            let (strides, shape) = (last.strides(), last.shape());
            ok &= strides[i - 1] == &strides[i] * &shape[i];
        });
        ok
    }

    /// Applies an optimization, or explains why it does not fit.
    pub fn apply_opt(&mut self, opt: Opt) -> Result<()> {
        if let Opt::LoopedUpcast {
            axis,
            amount,
            lanes,
        } = opt
        {
            return self.looped_upcast(axis, amount, lanes);
        }
        if let Opt::StageWeights = opt {
            if let Some(rem) = &mut self.remainder {
                rem.kernel.staged = true;
            }
            self.staged = true;
            return Ok(());
        }
        if let Opt::ReduceBlock { axis, amount } = opt {
            if let Some(rem) = &mut self.remainder {
                rem.kernel.block_reduce(axis, amount)?;
            }
            return self.block_reduce(axis, amount);
        }
        if self.reduce_block.is_some() && matches!(opt, Opt::Unroll { .. }) {
            // The block counts iterations of the reduce loop an unroll would reshape.
            return Err(Error::axis(
                "apply_opt",
                alloc::format!("{opt:?} after a reduce block in {}", self.describe()),
            ));
        }
        if let Some(rem) = &mut self.remainder {
            // After a looped remainder only reduce unrolls, applied to both parts (their
            // reduce sections are the same).
            if !matches!(opt, Opt::Unroll { .. }) {
                return Err(Error::axis(
                    "apply_opt",
                    alloc::format!(
                        "{opt:?} after a looped remainder in {} (only unrolls may follow it)",
                        self.describe()
                    ),
                ));
            }
            rem.kernel.apply_opt(opt)?;
        }
        let (axis, amount, is_reduce) = match opt {
            Opt::Upcast { axis, amount } if axis < self.first_reduce => (axis, amount, false),
            Opt::Vectorize { axis, amount }
                if axis < self.first_reduce && self.vector_upcast.is_none() =>
            {
                (axis, amount, false)
            }
            Opt::Unroll { axis, amount } if self.first_reduce + axis < self.first_upcast => {
                (self.first_reduce + axis, amount, true)
            }
            Opt::Upcast { .. }
            | Opt::Vectorize { .. }
            | Opt::Unroll { .. }
            | Opt::LoopedUpcast { .. }
            | Opt::ReduceBlock { .. }
            | Opt::StageWeights => {
                return Err(Error::axis(
                    "apply_opt",
                    alloc::format!(
                        "{opt:?} names no such axis in {} (or a second vector axis)",
                        self.describe()
                    ),
                ))
            }
        };
        let size = self.full_shape[axis].as_const().unwrap_or(0);
        let lanes = amount;
        // Vector lanes that do not divide their axis: the axis is unrolled whole, with a tail.
        let tail = matches!(opt, Opt::Vectorize { .. })
            && amount >= 2
            && size > amount as i64
            && size % amount as i64 != 0;
        let amount = if tail { size as usize } else { amount };
        if amount < 2 || size <= 0 || size % amount as i64 != 0 {
            return Err(Error::shape(
                "apply_opt",
                alloc::format!(
                    "{opt:?}: axis of size {} does not split by {amount}",
                    self.full_shape[axis]
                ),
            ));
        }
        let amt = amount as i64;
        // Split the axis into (size/amount, amount), then move the inner part to the end.
        let split = |s: &[Sint]| {
            let mut v = s.to_vec();
            let outer = match v[axis].as_const() {
                Some(1) => (Sint::cst(1), Sint::cst(1)),
                _ => (Sint::cst(size / amt), Sint::cst(amt)),
            };
            v[axis] = outer.0;
            v.insert(axis + 1, outer.1);
            v
        };
        let new_full = split(&self.full_shape);
        self.reshape_axes(new_full, &split)?;
        let rank = self.rank();
        let mut order: Vec<usize> = (0..rank).filter(|&a| a != axis + 1).collect();
        order.push(axis + 1);
        self.ast = map_all(&self.ast, |st| st.permute(&order))?;
        self.full_shape = order.iter().map(|&a| self.full_shape[a].clone()).collect();
        // The split added an axis to its section and the move took it out again, so the global
        // and reduce sections keep their sizes; only the upcast section grows.
        self.upcast_is_reduce.push(is_reduce);
        if let Opt::Vectorize { .. } = opt {
            self.vector_upcast = Some(self.upcast_is_reduce.len() - 1);
            self.vector_lanes = lanes;
        }
        // Upcast axes are the last ones, one per applied opt.
        self.first_upcast = rank - self.upcast_is_reduce.len();
        // A split by the whole axis leaves a size-1 outer part: no loop for it.
        self.drop_ones()
    }

    /// [`Opt::ReduceBlock`]: checks that blocking keeps every output's value (see the opt) and
    /// records it; the shape does not change.
    fn block_reduce(&mut self, axis: usize, amount: usize) -> Result<()> {
        let why = self.block_misfit(axis, amount);
        if let Some(why) = why {
            return Err(Error::axis(
                "apply_opt",
                alloc::format!(
                    "ReduceBlock {{ axis: {axis}, amount: {amount} }} on {}: {why}",
                    self.describe()
                ),
            ));
        }
        self.reduce_block = Some(amount);
        Ok(())
    }

    /// Why [`Opt::ReduceBlock`] does not fit, or `None` when it does.
    fn block_misfit(&self, axis: usize, amount: usize) -> Option<&'static str> {
        let Some(red) = self.ast.find_reduce() else {
            return Some("no reduce");
        };
        let AstOp::Reduce(op, _) = red.op() else {
            return Some("no reduce");
        };
        let len = self
            .full_shape
            .get(self.first_reduce)
            .filter(|_| self.first_reduce < self.first_upcast)
            .and_then(|d| d.as_const());
        let reads_output = self
            .ast
            .nodes()
            .iter()
            .any(|n| matches!(n.op(), AstOp::Load { buf: 0, .. }));
        match () {
            _ if self.reduce_block.is_some() => Some("already blocked"),
            _ if axis != 0 => Some("only the outermost reduce loop keeps each output's order"),
            _ if *op != ReduceOp::Sum => Some("only a sum starts from zero like a gated load"),
            _ if red.dtype() != self.ast.dtype() => {
                Some("the accumulator's dtype differs from the output's")
            }
            _ if reads_output => Some("the kernel reads its output"),
            _ => match len {
                Some(n) if amount >= 1 && (amount as i64) < n => None,
                _ => Some("the loop is not longer than one block (or not constant)"),
            },
        }
    }

    /// [`Opt::LoopedUpcast`]: this kernel keeps the positions of `axis` that `amount` divides,
    /// upcast by it (the innermost `lanes` as vector lanes); the rest become the remainder
    /// kernel, upcast whole.
    fn looped_upcast(&mut self, axis: usize, amount: usize, lanes: usize) -> Result<()> {
        let size = match self.full_shape.get(axis) {
            Some(d) if axis < self.first_reduce => d.as_const().unwrap_or(0),
            _ => 0,
        };
        let vector = lanes >= 2;
        let fits = self.remainder.is_none()
            && amount >= 2
            && size > amount as i64
            && size % amount as i64 != 0
            && (!vector || (amount % lanes == 0 && self.vector_upcast.is_none()));
        if !fits {
            return Err(Error::shape(
                "apply_opt",
                alloc::format!(
                    "LoopedUpcast {{ axis: {axis}, amount: {amount}, lanes: {lanes} }} does not fit {} (or a remainder exists)",
                    self.describe()
                ),
            ));
        }
        let split = size - size % amount as i64;
        let shrink = |k: &Kernel, from: i64, to: i64| -> Result<Kernel> {
            let rank = k.rank();
            let mut out = k.clone();
            out.ast = map_all(&k.ast, |st| {
                let arg: Vec<(i64, i64)> = (0..rank)
                    .map(|a| {
                        if a == axis {
                            (from, to)
                        } else {
                            (0, st.shape()[a].as_const().unwrap_or(0))
                        }
                    })
                    .collect();
                st.shrink(&arg)
            })?;
            out.full_shape[axis] = Sint::cst(to - from);
            Ok(out)
        };
        if self.full_shape.iter().any(|d| d.as_const().is_none()) {
            return Err(Error::shape(
                "apply_opt",
                alloc::format!(
                    "a looped remainder needs constant axes: {}",
                    self.describe()
                ),
            ));
        }
        let mut tail = shrink(self, split, size)?;
        let left = (size - split) as usize;
        // A vector body's tail takes the widest vector of at least 4 lanes that fits it (a
        // 196-pixel row on 8 lanes: 24 steps, then one 4-lane vector, not 4 scalars); the
        // positions past it stay scalars.
        let tail_lanes = [16, 8, 4]
            .into_iter()
            .find(|&w| vector && w <= lanes && w <= left);
        match tail_lanes {
            Some(w) => {
                tail.apply_opt(Opt::Vectorize { axis, amount: w })?;
                if left % w == 0 && left > w {
                    tail.apply_opt(Opt::Upcast {
                        axis,
                        amount: left / w,
                    })?;
                }
            }
            None if left >= 2 => tail.apply_opt(Opt::Upcast { axis, amount: left })?,
            None => tail.drop_ones()?,
        }
        let mut body = shrink(self, 0, split)?;
        if vector {
            body.apply_opt(Opt::Vectorize {
                axis,
                amount: lanes,
            })?;
        }
        let rest = if vector { amount / lanes } else { amount };
        if rest >= 2 {
            body.apply_opt(Opt::Upcast { axis, amount: rest })?;
        }
        body.remainder = Some(alloc::boxed::Box::new(Remainder {
            kernel: tail,
            shared: axis,
        }));
        *self = body;
        Ok(())
    }

    /// A short description: `shape [global | reduce | upcast]`.
    pub fn describe(&self) -> String {
        let dims = |r: core::ops::Range<usize>| {
            self.full_shape[r]
                .iter()
                .map(|d| alloc::format!("{d}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        let main = alloc::format!(
            "[{} | {} | {}]",
            dims(0..self.first_reduce),
            dims(self.first_reduce..self.first_upcast),
            dims(self.first_upcast..self.rank())
        );
        let main = match self.reduce_block {
            Some(b) => alloc::format!("{main} reduce blocks of {b}"),
            None => main,
        };
        match &self.remainder {
            Some(r) => alloc::format!("{main} + {}", r.kernel.describe()),
            None => main,
        }
    }

    /// A C-identifier name from the shape: `E_` for elementwise kernels, `r_` for reductions.
    pub fn name(&self) -> String {
        let mut s = String::from(if self.has_reduce() { "r" } else { "E" });
        for d in &self.full_shape {
            s.push('_');
            match d.as_const() {
                Some(v) => s.push_str(&alloc::format!("{v}")),
                None => {
                    let var = d
                        .vars()
                        .first()
                        .and_then(|v| v.var_name().map(String::from));
                    s.push_str(&var.unwrap_or_default());
                }
            }
        }
        s
    }
}

fn leaf_shape(ast: &Ast) -> Result<Vec<Sint>> {
    let mut shape = None;
    visit_sts(ast, &mut |st| {
        if shape.is_none() {
            shape = Some(st.shape().to_vec());
        }
    });
    shape.ok_or_else(|| Error::internal("kernel: AST without buffers"))
}

/// Calls `f` on every leaf's ShapeTracker (the store's included), once per distinct leaf, in
/// pre-order (iterative: a kernel's AST may be deep).
pub fn visit_sts(ast: &Ast, f: &mut dyn FnMut(&ShapeTracker)) {
    for n in ast.nodes() {
        match n.op() {
            AstOp::Load { st, .. } | AstOp::Const { st, .. } | AstOp::Store { st, .. } => f(st),
            _ => {}
        }
    }
}

fn map_all(ast: &Ast, f: impl Fn(&ShapeTracker) -> Result<ShapeTracker>) -> Result<Ast> {
    let mut err = None;
    let out = ast.map_sts(&mut |st, _| match f(st) {
        Ok(s) => s,
        Err(e) => {
            err.get_or_insert(e);
            st.clone()
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}
