//! The scheduler: turns a lazy graph into kernels (one [`ScheduleItem`] per buffer to compute).
//!
//! Fusion rules: elementwise chains fuse; elementwise ops fuse into a reduce's input and after its
//! output. A kernel boundary is made (the source is realized into its own buffer) where an
//! unrealized source would be read through an expanding view (it would be recomputed per
//! element) or a padding view (ops applied to padding are not zero in general); at a second
//! reduce in one kernel; where a reduce's output is read through anything but a contiguous
//! reshape; and where a source holding a reduce has several consumers (no reduce runs twice).
//! Realized buffers and constants are read through any view, and so are short integer widening
//! chains over them (`widen.rs`: a quantized conv's centered input). Two depth rules bound a kernel's
//! size and the work two kernels may repeat: no fused expression is deeper than
//! [`MAX_FUSED_DEPTH`] ops, and a node read by a reduce and by another op no deeper than
//! [`MAX_SHARED_DEPTH`]; and a node several kernels compute is realized when
//! [`MAX_SHARED_NESTING`] such nodes that fan out nest in its chain (an unrolled RNN's cell
//! state).
//!
//! Kernels that differ only in where their loads start in a buffer (an unrolled RNN's steps)
//! take those offsets as variable arguments and are one kernel (`offsets.rs`).
//!
//! Cost: linear in the graph. Every walk is iterative (graph depth never meets the call stack)
//! and a kernel's AST is built memoized, one node per (graph node, view) however often it is
//! read, so shared subexpressions are never unfolded into a tree.
//!
//! Invariant: items come in dependency order; every input of an item is realized before it or
//! produced by an earlier item.

use alloc::collections::BinaryHeap;
use alloc::vec::Vec;
use core::cmp::Reverse;

use hashbrown::{HashMap, HashSet};

use crate::ast::{Ast, AstOp};
use crate::codegen::opt::OptConfig;
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::lazy::{LazyBuffer, LazyOp};
use crate::shape::ShapeTracker;

pub mod interleave;
mod layout;
mod offsets;
mod vars;
mod widen;

pub use layout::{LayoutOption, LayoutStep, MIN_REUSE_VECTORS, UNPAD_MIN_READS};

/// One unit of work: a kernel computing `out`, or a copy between devices.
#[derive(Clone, Debug)]
pub struct ScheduleItem {
    /// The kernel's AST (for a copy, a plain load/store of the source).
    pub ast: Ast,
    /// The base this item computes (buffer 0).
    pub out: LazyBuffer,
    /// The bases it reads (buffers 1..), in first-use order.
    pub inputs: Vec<LazyBuffer>,
    /// Is it a device-to-device copy rather than a kernel?
    pub is_copy: bool,
    /// For a kernel the layout pass rewrote: its AST before the rewrite, and how many of
    /// `inputs` that AST reads (the layout copies come after them). Export lowers it for targets
    /// without caches, dropping the copies.
    pub plain: Option<(Ast, usize)>,
    /// Is it a copy the layout pass made (its output is read only by the kernels it was made for)?
    pub layout_copy: bool,
    /// The values of the variables the (unbound) AST mentions, sorted by name: the kernel's
    /// variable arguments (see `schedule/vars.rs`).
    pub var_vals: crate::symbolic::VarVals,
}

/// The graph facts the fusion rules need.
struct Graph {
    /// Unrealized bases reachable from the outputs, sources before consumers.
    order: Vec<LazyBuffer>,
    /// How many consumer edges each base has.
    consumers: HashMap<usize, usize>,
}

fn collect(outs: &[LazyBuffer]) -> Graph {
    let mut g = Graph {
        order: Vec::new(),
        consumers: HashMap::new(),
    };
    let mut seen = HashSet::new();
    // Iterative post-order DFS (deep graphs must not overflow a small stack).
    let mut stack: Vec<(LazyBuffer, bool)> =
        outs.iter().map(|o| (o.base().clone(), false)).collect();
    while let Some((b, expanded)) = stack.pop() {
        if expanded {
            g.order.push(b);
            continue;
        }
        if b.realized().is_some() || !seen.insert(b.id()) {
            continue;
        }
        stack.push((b.clone(), true));
        if let Some((_, srcs)) = b.op() {
            for s in srcs {
                *g.consumers.entry(s.base().id()).or_insert(0) += 1;
                stack.push((s.base().clone(), false));
            }
        }
    }
    g
}

fn is_const(b: &LazyBuffer) -> bool {
    matches!(b.op(), Some((LazyOp::Const(_), _)))
}

/// The initial realize set: outputs, forced boundaries, and sources read through unsafe views.
fn initial_realizes(outs: &[LazyBuffer], g: &Graph) -> HashSet<usize> {
    let mut r: HashSet<usize> = outs.iter().map(|o| o.base().id()).collect();
    for b in &g.order {
        let Some((op, srcs)) = b.op() else { continue };
        if matches!(op, LazyOp::Contiguous | LazyOp::Copy | LazyOp::Assign) {
            r.insert(b.id());
        }
        for s in srcs {
            let sb = s.base();
            if sb.realized().is_some() || is_const(sb) {
                continue;
            }
            let reduce_src = matches!(sb.op(), Some((LazyOp::Reduce(..), _)));
            let unsafe_view = s.st().has_expand() || s.st().has_mask();
            if unsafe_view {
                // An integer widening chain (a quantized conv's centered input) is computed
                // where it is read; its leaves are the boundary instead (`widen.rs`).
                if let Some(leaves) = widen::widening_leaves(sb, s.st().has_mask()) {
                    for l in leaves {
                        crate::context::log(
                            5,
                            &alloc::format!("schedule: realize {l:?}: a widening chain's leaf"),
                        );
                        r.insert(l.id());
                    }
                    continue;
                }
            }
            let reduce_needs = reduce_src
                && (g.consumers.get(&sb.id()).copied().unwrap_or(0) > 1 || !s.st().contiguous());
            if unsafe_view || reduce_needs || matches!(op, LazyOp::Copy) {
                let why = if unsafe_view {
                    "read through an expanding or padding view"
                } else {
                    "a reduce read by several consumers or through a view"
                };
                crate::context::log(5, &alloc::format!("schedule: realize {sb:?}: {why}"));
                r.insert(sb.id());
            }
        }
    }
    r
}

/// No fused kernel computes an expression more than this many ops deep. Counting ops up from the
/// nearest buffer (a realized input, a constant, or a node realized by the rules above), the
/// node at this depth is realized into its own buffer and the ops above it read that buffer.
/// Why: a fused kernel holds its whole expression, so an unbounded chain (100,000 adds) would
/// become one function of that many statements, slow for a C compiler to optimize. The rule
/// depends on the graph alone (the same cuts on every device); like any kernel boundary it can
/// change results only for f16/bf16, which are rounded when stored.
pub const MAX_FUSED_DEPTH: usize = 256;

/// The depth limit, instead of [`MAX_FUSED_DEPTH`], for a node that a reduce reads and another
/// op reads too. Such a node is computed by two kernels (the reduce's, and the one of the other
/// reader, which cannot fuse after the reduce when it reads it back through an expand, as
/// softmax and `h = f(h, sum(h))` do), so each recomputes the chain below it; realizing it when
/// that chain is deeper than this bounds the recomputation, while short chains (an activation,
/// a scale) stay fused into both.
pub const MAX_SHARED_DEPTH: usize = 16;

/// A node that the fused parts of several kernels hold is computed by each of them, with the
/// fused chain below it. When such nodes nest — the cell state of an unrolled RNN: `c[t]` is
/// computed by the kernel of `h[t]` and, through `c[t+1]`, by every later step's — each level
/// multiplies that recomputation, and over T steps each
/// step's kernel would hold the whole history: kernels grow with T, none is like another, and
/// compiling them costs quadratic time. A level is a shared node that fans out (read by several
/// ops, as `c[t]` is); the ops of a chain the same kernels hold (a gate's negate, exp, add and
/// reciprocal) add none. A shared node with this many levels nested in its fused chain (itself
/// included) is realized. Like the depth rules it depends on the graph alone.
pub const MAX_SHARED_NESTING: usize = 2;

/// Adds the realize points of the depth rules ([`MAX_FUSED_DEPTH`], [`MAX_SHARED_DEPTH`]) and of
/// the nesting rule ([`MAX_SHARED_NESTING`]) to `r`: one pass over the graph in dependency order.
fn depth_cuts(g: &Graph, r: &mut HashSet<usize>) {
    let read_by_reduce: HashSet<usize> = g
        .order
        .iter()
        .filter_map(|b| match b.op() {
            Some((LazyOp::Reduce(..), srcs)) => Some(srcs[0].base().id()),
            _ => None,
        })
        .collect();
    let computed_by = kernels_computing(g, r);
    let mut depth: HashMap<usize, usize> = HashMap::new();
    let mut nesting: HashMap<usize, usize> = HashMap::new();
    for b in &g.order {
        let Some((op, srcs)) = b.op() else { continue };
        if r.contains(&b.id()) || matches!(op, LazyOp::Const(_) | LazyOp::Buffer) {
            continue;
        }
        let below = srcs
            .iter()
            .map(|s| depth.get(&s.base().id()).copied().unwrap_or(0))
            .max()
            .unwrap_or(0);
        let read_often = computed_by.get(&b.id()) == Some(&Owner::Many);
        // A level of recomputation is added where a shared node fans out (an LSTM's `c[t]`,
        // read by `h[t]` and `c[t+1]`), not at each op of a chain the same kernels hold (the
        // negate, exp, add and reciprocal of one sigmoid).
        let fans_out = g.consumers.get(&b.id()).copied().unwrap_or(0) > 1;
        let nest = usize::from(read_often && fans_out)
            + srcs
                .iter()
                .map(|s| nesting.get(&s.base().id()).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
        if read_often && nest >= MAX_SHARED_NESTING {
            crate::context::log(
                5,
                &alloc::format!("schedule: realize {b:?}: {nest} shared nodes nested"),
            );
            r.insert(b.id());
            continue;
        }
        nesting.insert(b.id(), nest);
        let shared =
            read_by_reduce.contains(&b.id()) && g.consumers.get(&b.id()).copied().unwrap_or(0) > 1;
        let limit = if shared {
            MAX_SHARED_DEPTH
        } else {
            MAX_FUSED_DEPTH
        };
        if below + 1 >= limit {
            crate::context::log(
                5,
                &alloc::format!("schedule: realize {b:?}: {limit} fused ops deep"),
            );
            r.insert(b.id());
        } else {
            depth.insert(b.id(), below + 1);
        }
    }
}

/// Which kernels compute a node: one (its root's id), or several.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Owner {
    One(usize),
    Many,
}

/// For each unrealized node, the kernels that compute it as the realize set `r` stands: a node
/// in `r` is its own kernel's root; any other node is computed by every kernel that computes a
/// reader of it. One pass, consumers before sources.
fn kernels_computing(g: &Graph, r: &HashSet<usize>) -> HashMap<usize, Owner> {
    let mut owner: HashMap<usize, Owner> = HashMap::new();
    for b in g.order.iter().rev() {
        let Some((_, srcs)) = b.op() else { continue };
        let own = if r.contains(&b.id()) {
            Owner::One(b.id())
        } else {
            match owner.get(&b.id()) {
                Some(&o) => o,
                None => continue,
            }
        };
        for s in srcs {
            let sb = s.base();
            if sb.realized().is_some() || is_const(sb) {
                continue;
            }
            owner
                .entry(sb.id())
                .and_modify(|o| {
                    if *o != own {
                        *o = Owner::Many;
                    }
                })
                .or_insert(own);
        }
    }
    owner
}

/// One step of [`AstBuilder`]'s walk.
enum Step {
    /// Read source `s` at the kernel positions `top` maps onto its shape; leaves the AST on the
    /// value stack.
    Read(LazyBuffer, ShapeTracker),
    /// Make the node for `base` read at `st` from the `n` ASTs on top of the value stack.
    Finish {
        base: LazyBuffer,
        st: ShapeTracker,
        op: AstOp,
        n: usize,
    },
}

/// Builds one kernel's AST; may add realize points it discovers (a second reduce).
///
/// The walk is iterative (an explicit stack, so graph depth never meets the call stack) and
/// memoized by (base, view): a node read twice at the same positions (`x*x`, `max(x, -x)`) is
/// built once and shared, so the AST is as large as the fused part of the graph, not as its
/// unfolding into a tree. Decisions are made when a node is first reached, as a recursive walk
/// would make them.
struct AstBuilder<'a> {
    realize: &'a mut HashSet<usize>,
    consumers: &'a HashMap<usize, usize>,
    /// Does a base's fused part hold a reduce (see [`AstBuilder::holds_reduce`])? Valid while
    /// the realize set does not grow; cleared when it does.
    reduce_memo: &'a mut HashMap<usize, bool>,
    /// Graph nodes visited (reads of a source, and nodes walked looking for a reduce).
    visits: &'a mut u64,
    inputs: Vec<LazyBuffer>,
    input_ids: HashMap<usize, usize>,
    /// The ASTs built so far, by base and then by the view it is read through (a base is read
    /// through few distinct views, so they are compared rather than hashed).
    built: HashMap<usize, Vec<(ShapeTracker, Ast)>>,
    reduce_out_shape: Option<Vec<crate::shape::Sint>>,
    grew: bool,
    /// For an assign kernel: the target, whose buffer is the output (buffer 0) and is read there.
    assign_target: Option<LazyBuffer>,
}

impl AstBuilder<'_> {
    fn input_index(&mut self, b: &LazyBuffer) -> usize {
        if self.assign_target.as_ref().is_some_and(|t| t.ptr_eq(b)) {
            return 0;
        }
        if let Some(&i) = self.input_ids.get(&b.id()) {
            return i;
        }
        self.inputs.push(b.clone());
        self.input_ids.insert(b.id(), self.inputs.len());
        self.inputs.len()
    }

    fn mark(&mut self, b: &LazyBuffer, why: &str) {
        if self.realize.insert(b.id()) {
            crate::context::log(5, &alloc::format!("schedule: realize {b:?}: {why}"));
            self.grew = true;
            self.reduce_memo.clear();
        }
    }

    /// The AST reading `s` at the kernel's positions, where `top` maps kernel positions onto
    /// `s`'s shape.
    fn build(&mut self, s: &LazyBuffer, top: &ShapeTracker) -> Result<Ast> {
        self.run(Step::Read(s.clone(), top.clone()))
    }

    /// The AST computing `base` itself at the positions `st` maps onto it, whatever its
    /// consumers are (the base the kernel stores).
    fn inline_root(&mut self, base: &LazyBuffer, st: &ShapeTracker) -> Result<Ast> {
        let mut steps = Vec::new();
        let mut vals = Vec::new();
        self.enter(base, st, true, &mut steps, &mut vals)?;
        self.walk(steps, vals)
    }

    fn run(&mut self, first: Step) -> Result<Ast> {
        self.walk(alloc::vec![first], Vec::new())
    }

    fn walk(&mut self, mut steps: Vec<Step>, mut vals: Vec<Ast>) -> Result<Ast> {
        while let Some(step) = steps.pop() {
            match step {
                Step::Read(s, top) => {
                    *self.visits += 1;
                    let base = s.base();
                    let st = s.st().concat(&top)?;
                    if let Some(a) = self.built_for(base, &st) {
                        vals.push(a);
                        continue;
                    }
                    if let Some((LazyOp::Const(v), _)) = base.op() {
                        let a = Ast::new(
                            AstOp::Const {
                                val: *v,
                                st: st.clone(),
                            },
                            base.dtype(),
                            Vec::new(),
                        );
                        self.remember(base, st, &a);
                        vals.push(a);
                    } else if base.realized().is_some() || self.realize.contains(&base.id()) {
                        vals.push(self.load(base, st));
                    } else {
                        self.enter(base, &st, false, &mut steps, &mut vals)?;
                    }
                }
                Step::Finish { base, st, op, n } => {
                    let src = vals.split_off(vals.len() - n);
                    let a = Ast::new(op, base.dtype(), src);
                    self.remember(&base, st, &a);
                    vals.push(a);
                }
            }
        }
        vals.pop()
            .ok_or_else(|| Error::internal("schedule: an empty kernel"))
    }

    fn built_for(&self, base: &LazyBuffer, st: &ShapeTracker) -> Option<Ast> {
        let views = self.built.get(&base.id())?;
        views.iter().find(|(s, _)| s == st).map(|(_, a)| a.clone())
    }

    fn remember(&mut self, base: &LazyBuffer, st: ShapeTracker, a: &Ast) {
        self.built
            .entry(base.id())
            .or_default()
            .push((st, a.clone()));
    }

    /// A load of the realized (or to be realized) `base` through `st`.
    fn load(&mut self, base: &LazyBuffer, st: ShapeTracker) -> Ast {
        let buf = self.input_index(base);
        let a = Ast::new(
            AstOp::Load {
                buf,
                st: st.clone(),
            },
            base.dtype(),
            Vec::new(),
        );
        self.remember(base, st, &a);
        a
    }

    /// Decides how `base` (unrealized, read at `st`) enters the kernel: as a load of a new
    /// realize point (pushed on `vals` now) or inlined (its operands' reads and its own
    /// `Finish` pushed on `steps`). `root` is set for the base the kernel stores.
    fn enter(
        &mut self,
        base: &LazyBuffer,
        st: &ShapeTracker,
        root: bool,
        steps: &mut Vec<Step>,
        vals: &mut Vec<Ast>,
    ) -> Result<()> {
        let Some((op, srcs)) = base.op() else {
            return Err(Error::internal("schedule: a view has no op"));
        };
        let many = !root && self.consumers.get(&base.id()).copied().unwrap_or(0) > 1;
        let (ast_op, reads) = match op {
            LazyOp::Reduce(rop, axes) => {
                if !root && (self.reduce_out_shape.is_some() || many || !is_reshape_of(st, base)) {
                    self.mark(
                        base,
                        "a reduce that cannot fuse here (second reduce, shared, or reshaped view)",
                    );
                    vals.push(self.load(base, st.clone()));
                    return Ok(());
                }
                self.reduce_out_shape = Some(base.shape().to_vec());
                let full = ShapeTracker::from_shape(srcs[0].shape());
                let reads = alloc::vec![Step::Read(srcs[0].clone(), full)];
                (AstOp::Reduce(*rop, axes.clone()), reads)
            }
            LazyOp::Alu(_) | LazyOp::Cast | LazyOp::Bitcast => {
                if !root && narrowing_int_cast(op, srcs, base.dtype()) && self.holds_reduce(base) {
                    self.mark(
                        base,
                        "a reduce's result cast to a narrow integer: stored narrow",
                    );
                    vals.push(self.load(base, st.clone()));
                    return Ok(());
                }
                if many && self.holds_reduce(base) {
                    self.mark(base, "shared by several consumers and holds a reduce");
                    vals.push(self.load(base, st.clone()));
                    return Ok(());
                }
                let ast_op = match op {
                    LazyOp::Alu(a) => AstOp::Alu(*a),
                    LazyOp::Cast => AstOp::Cast,
                    _ => AstOp::Bitcast,
                };
                let reads = srcs
                    .iter()
                    .map(|x| Step::Read(x.clone(), st.clone()))
                    .collect();
                (ast_op, reads)
            }
            LazyOp::Buffer
            | LazyOp::Const(_)
            | LazyOp::Contiguous
            | LazyOp::Copy
            | LazyOp::Assign => {
                self.mark(base, "a materializing op");
                vals.push(self.load(base, st.clone()));
                return Ok(());
            }
        };
        steps.push(Step::Finish {
            base: base.clone(),
            st: st.clone(),
            op: ast_op,
            n: reads.len(),
        });
        // Reversed, so operands are read first to last (inputs numbered in first-use order).
        steps.extend(reads.into_iter().rev());
        Ok(())
    }

    /// Does `b`'s fused part (through unrealized elementwise ops) hold a reduce? Walked
    /// iteratively and memoized across the kernels of one pass: the answer for a node changes
    /// only when the realize set grows, and then the memo is cleared.
    fn holds_reduce(&mut self, b: &LazyBuffer) -> bool {
        let mut stack = alloc::vec![(b.clone(), false)];
        while let Some((n, expanded)) = stack.pop() {
            if self.reduce_memo.contains_key(&n.id()) {
                continue;
            }
            *self.visits += 1;
            let kids: Vec<LazyBuffer> = match n.op() {
                Some((LazyOp::Reduce(..), _)) => {
                    self.reduce_memo.insert(n.id(), true);
                    continue;
                }
                Some((LazyOp::Alu(_) | LazyOp::Cast | LazyOp::Bitcast, srcs)) => srcs
                    .iter()
                    .map(|s| s.base().clone())
                    .filter(|sb| sb.realized().is_none() && !self.realize.contains(&sb.id()))
                    .collect(),
                _ => {
                    self.reduce_memo.insert(n.id(), false);
                    continue;
                }
            };
            if expanded {
                let any = kids
                    .iter()
                    .any(|k| self.reduce_memo.get(&k.id()) == Some(&true));
                self.reduce_memo.insert(n.id(), any);
            } else {
                stack.push((n, true));
                stack.extend(kids.into_iter().map(|k| (k, false)));
            }
        }
        self.reduce_memo.get(&b.id()) == Some(&true)
    }
}

/// Is `op` a cast from a wider integer to an 8- or 16-bit one? When such a cast holds a reduce
/// (a quantized conv's requantized int8 output), it is its kernel's stored value: the buffer
/// between kernels is then the narrow one, never the reduce's i32 accumulator (a consumer that
/// cannot fuse the reduce would otherwise realize the reduce itself, 4× the memory in an
/// exported arena). A widening cast after it (int8 → i16 to center) is not a boundary: it fuses
/// into its reader. Integers are exact, so the boundary changes no value.
fn narrowing_int_cast(op: &LazyOp, srcs: &[LazyBuffer], dt: DType) -> bool {
    let narrow = matches!(dt, DType::I8 | DType::U8 | DType::I16 | DType::U16);
    let wider_int = |s: &LazyBuffer| s.dtype().is_int() && s.dtype().itemsize() > dt.itemsize();
    matches!(op, LazyOp::Cast) && narrow && srcs.first().is_some_and(wider_int)
}

/// Does the AST read buffer 0 anywhere but at the position it stores (`out`)?
fn reads_elsewhere(ast: &Ast, out: &ShapeTracker) -> bool {
    ast.nodes()
        .iter()
        .any(|n| matches!(n.op(), AstOp::Load { buf: 0, st } if st != out))
}

/// Does `st` read all of `base`, in order (a plain reshape)? Contiguity alone is not enough: a
/// shrink to the first elements is contiguous too.
fn is_reshape_of(st: &ShapeTracker, base: &LazyBuffer) -> bool {
    st.contiguous() && crate::shape::prod(st.shape()) == crate::shape::prod(base.shape())
}

/// Builds the kernel that computes base `b`.
fn kernel_for(
    b: &LazyBuffer,
    realize: &mut HashSet<usize>,
    consumers: &HashMap<usize, usize>,
    reduce_memo: &mut HashMap<usize, bool>,
    visits: &mut u64,
) -> Result<(ScheduleItem, bool)> {
    let out_st = ShapeTracker::from_shape(b.shape());
    let assign_target = match b.op() {
        Some((LazyOp::Assign, srcs)) => Some(srcs[0].clone()),
        _ => None,
    };
    let mut builder = AstBuilder {
        realize,
        consumers,
        reduce_memo,
        visits,
        inputs: Vec::new(),
        input_ids: HashMap::new(),
        built: HashMap::new(),
        reduce_out_shape: None,
        grew: false,
        assign_target,
    };
    let (value, is_copy) = match b.op() {
        Some((LazyOp::Assign, srcs)) => {
            let value = builder.build(&srcs[1], &out_st)?;
            // Writing in place is safe only if every read of the target is at the position being
            // written; otherwise compute the value into its own buffer first.
            if reads_elsewhere(&value, &out_st) {
                let vb = srcs[1].base();
                if vb.realized().is_none() && !is_const(vb) {
                    builder.mark(vb, "an assign whose value reads the target elsewhere");
                }
            }
            (value, false)
        }
        Some((LazyOp::Copy | LazyOp::Contiguous, srcs)) => {
            let is_copy = matches!(b.op(), Some((LazyOp::Copy, _)));
            (builder.build(&srcs[0], &out_st)?, is_copy)
        }
        Some(_) => (builder.inline_root(b, &out_st)?, false),
        None => return Err(Error::internal("schedule: cannot compute a view")),
    };
    let mut ast = Ast::new(
        AstOp::Store { buf: 0, st: out_st },
        b.dtype(),
        alloc::vec![value],
    );
    // The reduce fixed the kernel's output shape; a consumer that reshaped it reads it back in
    // that shape, so every post-reduce leaf is reshaped to match.
    if let Some(shape) = builder.reduce_out_shape.clone() {
        if shape.as_slice() != b.shape() {
            let mut err = None;
            ast = ast.map_sts(&mut |st, inside| {
                if inside {
                    return st.clone();
                }
                st.reshape(&shape).unwrap_or_else(|e| {
                    err = Some(e);
                    st.clone()
                })
            });
            if let Some(e) = err {
                return Err(e);
            }
        }
    }
    let item = ScheduleItem {
        ast,
        out: b.clone(),
        inputs: builder.inputs,
        is_copy,
        plain: None,
        layout_copy: false,
        var_vals: crate::symbolic::VarVals::new(),
    };
    Ok((item, builder.grew))
}

/// Schedules everything needed to realize `outs`, in dependency order, with the layout each
/// kernel's device asks for ([`Device::opt_config`](crate::device::Device::opt_config)).
pub fn schedule(outs: &[LazyBuffer]) -> Result<Vec<ScheduleItem>> {
    schedule_with_visits(outs).map(|(items, _)| items)
}

/// [`schedule`] with the layout transforms of `cfg` for every kernel (`None`: none), whatever
/// the devices ask for — to compare layouts, or to schedule for another target.
pub fn schedule_for(outs: &[LazyBuffer], cfg: Option<&OptConfig>) -> Result<Vec<ScheduleItem>> {
    let cfg = cfg.copied();
    let policy = layout::Policy {
        cfg_for: &|_| cfg,
        measures: &|_| false,
        pick: &|_, _| None,
    };
    schedule_with_policy(outs, &policy)
}

/// [`schedule_for`], taking the layout `pick` chooses among each reduce kernel's alternatives
/// ([`LayoutOption`]s, the rules' choice first; `None`: the rules') — what a device that
/// measures layouts does ([`Device::choose_layout`](crate::device::Device::choose_layout)).
/// Every option gives bit-identical results.
pub fn schedule_with_layouts(
    outs: &[LazyBuffer],
    cfg: Option<&OptConfig>,
    pick: &dyn Fn(&[LayoutOption]) -> Option<usize>,
) -> Result<Vec<ScheduleItem>> {
    let cfg = cfg.copied();
    let policy = layout::Policy {
        cfg_for: &|_| cfg,
        measures: &|_| true,
        pick: &|_, options| pick(options),
    };
    schedule_with_policy(outs, &policy)
}

/// The kernels of `outs` laid out as `policy` says, offsets shared and variables unbound.
fn schedule_with_policy(
    outs: &[LazyBuffer],
    policy: &layout::Policy<'_>,
) -> Result<Vec<ScheduleItem>> {
    let (items, _) = schedule_kernels(outs)?;
    let mut items = layout::apply(items, policy)?;
    offsets::share_offsets(&mut items)?;
    vars::unbind_items(&mut items)?;
    Ok(items)
}

/// [`schedule`], also returning how many graph nodes it visited: the work it did, which is
/// linear in the graph (each kernel reads each of its nodes once, see the module doc).
pub fn schedule_with_visits(outs: &[LazyBuffer]) -> Result<(Vec<ScheduleItem>, u64)> {
    let (items, visits) = schedule_kernels(outs)?;
    let policy = layout::Policy {
        cfg_for: &|it| it.out.device().opt_config(),
        measures: &|it| it.out.device().measures_layouts(),
        pick: &|it, options| it.out.device().choose_layout(options),
    };
    let mut items = layout::apply(items, &policy)?;
    offsets::share_offsets(&mut items)?;
    vars::unbind_items(&mut items)?;
    Ok((items, visits))
}

/// The kernels (fusion decisions only, no layout transforms) and the nodes visited.
fn schedule_kernels(outs: &[LazyBuffer]) -> Result<(Vec<ScheduleItem>, u64)> {
    let g = collect(outs);
    let mut visits = g.order.len() as u64;
    let mut realize = initial_realizes(outs, &g);
    depth_cuts(&g, &mut realize);
    let mut reduce_memo = HashMap::new();
    // Building a kernel can discover new realize points; rebuild until none appear, so no kernel
    // inlined a reduce that another kernel also computes.
    let items = loop {
        let mut items = Vec::new();
        let mut grew = false;
        for b in &g.order {
            if !realize.contains(&b.id()) {
                continue;
            }
            let (item, g2) =
                kernel_for(b, &mut realize, &g.consumers, &mut reduce_memo, &mut visits)?;
            grew |= g2;
            items.push(item);
        }
        if !grew {
            break items;
        }
    };
    Ok((order_items(items)?, visits))
}

/// Orders items so each runs after the items producing its inputs and — for an in-place assign —
/// after every item that reads the old value of the buffer it overwrites (write after read).
/// Stable: items keep their graph order where nothing forces a change (of the items ready to
/// run, the first in graph order runs first).
fn order_items(items: Vec<ScheduleItem>) -> Result<Vec<ScheduleItem>> {
    let producer: HashMap<usize, usize> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.out.id(), i))
        .collect();
    let mut readers: HashMap<usize, Vec<usize>> = HashMap::new();
    for (r, it) in items.iter().enumerate() {
        for b in &it.inputs {
            readers.entry(b.id()).or_default().push(r);
        }
    }
    // users[d]: the items that must wait for item d; waiting[i]: how many items i waits for.
    let mut users: Vec<Vec<usize>> = alloc::vec![Vec::new(); items.len()];
    let mut waiting = alloc::vec![0usize; items.len()];
    for (i, it) in items.iter().enumerate() {
        for b in &it.inputs {
            if let Some(&d) = producer.get(&b.id()) {
                users[d].push(i);
                waiting[i] += 1;
            }
        }
        if let Some((LazyOp::Assign, srcs)) = it.out.op() {
            for &r in readers.get(&srcs[0].base().id()).into_iter().flatten() {
                if r != i {
                    users[r].push(i);
                    waiting[i] += 1;
                }
            }
        }
    }
    let mut ready: BinaryHeap<Reverse<usize>> = (0..items.len())
        .filter(|&i| waiting[i] == 0)
        .map(Reverse)
        .collect();
    let mut order = Vec::with_capacity(items.len());
    while let Some(Reverse(i)) = ready.pop() {
        order.push(i);
        for &u in &users[i] {
            waiting[u] -= 1;
            if waiting[u] == 0 {
                ready.push(Reverse(u));
            }
        }
    }
    if order.len() < items.len() {
        return Err(Error::Device(
            "schedule: an assign's old value is read by a kernel that also needs its new value"
                .into(),
        ));
    }
    let mut slots: Vec<Option<ScheduleItem>> = items.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}
