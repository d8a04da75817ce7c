//! The scheduler: turns a lazy graph into kernels (one [`ScheduleItem`] per buffer to compute).
//!
//! Fusion rules: elementwise chains fuse; elementwise ops fuse into a reduce's input and after its
//! output. A kernel boundary is made (the source is realized into its own buffer) where an
//! unrealized source would be read through an expanding view (it would be recomputed per
//! element) or a padding view (ops applied to padding are not zero in general); at a second
//! reduce in one kernel; where a reduce's output is read through anything but a contiguous
//! reshape; and where a source holding a reduce has several consumers (no reduce runs twice).
//! Realized buffers and constants are read through any view.
//!
//! Invariant: items come in dependency order; every input of an item is realized before it or
//! produced by an earlier item.

use alloc::vec::Vec;

use hashbrown::{HashMap, HashSet};

use crate::ast::{Ast, AstOp};
use crate::error::{Error, Result};
use crate::lazy::{LazyBuffer, LazyOp};
use crate::shape::ShapeTracker;

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

/// Builds one kernel's AST; may add realize points it discovers (a second reduce).
struct AstBuilder<'a> {
    realize: &'a mut HashSet<usize>,
    consumers: &'a HashMap<usize, usize>,
    inputs: Vec<LazyBuffer>,
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
        if let Some(i) = self.inputs.iter().position(|x| x.ptr_eq(b)) {
            return i + 1;
        }
        self.inputs.push(b.clone());
        self.inputs.len()
    }

    fn mark(&mut self, b: &LazyBuffer, why: &str) {
        if self.realize.insert(b.id()) {
            crate::context::log(5, &alloc::format!("schedule: realize {b:?}: {why}"));
            self.grew = true;
        }
    }

    /// The AST reading `s` at the kernel's positions, where `top` maps kernel positions onto
    /// `s`'s shape.
    fn build(&mut self, s: &LazyBuffer, top: &ShapeTracker) -> Result<Ast> {
        let base = s.base();
        let st = s.st().concat(top)?;
        if let Some((LazyOp::Const(v), _)) = base.op() {
            return Ok(Ast::new(
                AstOp::Const { val: *v, st },
                base.dtype(),
                Vec::new(),
            ));
        }
        if base.realized().is_some() || self.realize.contains(&base.id()) {
            let buf = self.input_index(base);
            return Ok(Ast::new(AstOp::Load { buf, st }, base.dtype(), Vec::new()));
        }
        self.inline(base, &st, false)
    }

    /// The AST computing `base` itself at the positions `st` maps onto it. `root` is set for the
    /// base the kernel stores: it is computed here whatever its consumers are.
    fn inline(&mut self, base: &LazyBuffer, st: &ShapeTracker, root: bool) -> Result<Ast> {
        let Some((op, srcs)) = base.op() else {
            return Err(Error::Device("schedule: a view has no op".into()));
        };
        let many = !root && self.consumers.get(&base.id()).copied().unwrap_or(0) > 1;
        match op {
            LazyOp::Reduce(rop, axes) => {
                if !root && (self.reduce_out_shape.is_some() || many || !is_reshape_of(st, base)) {
                    self.mark(
                        base,
                        "a reduce that cannot fuse here (second reduce, shared, or reshaped view)",
                    );
                    return self.build(base, st);
                }
                self.reduce_out_shape = Some(base.shape().to_vec());
                let full = ShapeTracker::from_shape(srcs[0].shape());
                let inner = self.build(&srcs[0], &full)?;
                Ok(Ast::new(
                    AstOp::Reduce(*rop, axes.clone()),
                    base.dtype(),
                    alloc::vec![inner],
                ))
            }
            LazyOp::Alu(_) | LazyOp::Cast | LazyOp::Bitcast => {
                if many && subtree_has_reduce(base, self.realize) {
                    self.mark(base, "shared by several consumers and holds a reduce");
                    return self.build(base, st);
                }
                let ast_op = match op {
                    LazyOp::Alu(a) => AstOp::Alu(*a),
                    LazyOp::Cast => AstOp::Cast,
                    _ => AstOp::Bitcast,
                };
                let src = srcs
                    .iter()
                    .map(|x| self.build(x, st))
                    .collect::<Result<Vec<_>>>()?;
                Ok(Ast::new(ast_op, base.dtype(), src))
            }
            LazyOp::Buffer
            | LazyOp::Const(_)
            | LazyOp::Contiguous
            | LazyOp::Copy
            | LazyOp::Assign => {
                self.mark(base, "a materializing op");
                self.build(base, st)
            }
        }
    }
}

/// Does the AST read buffer 0 anywhere but at the position it stores (`out`)?
fn reads_elsewhere(ast: &Ast, out: &ShapeTracker) -> bool {
    match ast.op() {
        AstOp::Load { buf: 0, st } => st != out,
        _ => ast.src().iter().any(|s| reads_elsewhere(s, out)),
    }
}

/// Does `st` read all of `base`, in order (a plain reshape)? Contiguity alone is not enough: a
/// shrink to the first elements is contiguous too.
fn is_reshape_of(st: &ShapeTracker, base: &LazyBuffer) -> bool {
    st.contiguous() && crate::shape::prod(st.shape()) == crate::shape::prod(base.shape())
}

fn subtree_has_reduce(b: &LazyBuffer, realize: &HashSet<usize>) -> bool {
    match b.op() {
        Some((LazyOp::Reduce(..), _)) => true,
        Some((LazyOp::Alu(_) | LazyOp::Cast | LazyOp::Bitcast, srcs)) => srcs.iter().any(|s| {
            let sb = s.base();
            sb.realized().is_none()
                && !realize.contains(&sb.id())
                && subtree_has_reduce(sb, realize)
        }),
        _ => false,
    }
}

/// Builds the kernel that computes base `b`.
fn kernel_for(
    b: &LazyBuffer,
    realize: &mut HashSet<usize>,
    consumers: &HashMap<usize, usize>,
) -> Result<(ScheduleItem, bool)> {
    let out_st = ShapeTracker::from_shape(b.shape());
    let assign_target = match b.op() {
        Some((LazyOp::Assign, srcs)) => Some(srcs[0].clone()),
        _ => None,
    };
    let mut builder = AstBuilder {
        realize,
        consumers,
        inputs: Vec::new(),
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
        Some(_) => (builder.inline(b, &out_st, true)?, false),
        None => return Err(Error::Device("schedule: cannot compute a view".into())),
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
    };
    Ok((item, builder.grew))
}

/// Schedules everything needed to realize `outs`, in dependency order.
pub fn schedule(outs: &[LazyBuffer]) -> Result<Vec<ScheduleItem>> {
    let g = collect(outs);
    let mut realize = initial_realizes(outs, &g);
    // Building a kernel can discover new realize points; rebuild until none appear, so no kernel
    // inlined a reduce that another kernel also computes.
    let items = loop {
        let mut items = Vec::new();
        let mut grew = false;
        for b in &g.order {
            if !realize.contains(&b.id()) {
                continue;
            }
            let (item, g2) = kernel_for(b, &mut realize, &g.consumers)?;
            grew |= g2;
            items.push(item);
        }
        if !grew {
            break items;
        }
    };
    order_items(items)
}

/// Orders items so each runs after the items producing its inputs and — for an in-place assign —
/// after every item that reads the old value of the buffer it overwrites (write after read).
/// Stable: items keep their graph order where nothing forces a change.
fn order_items(items: Vec<ScheduleItem>) -> Result<Vec<ScheduleItem>> {
    let producer: HashMap<usize, usize> = items
        .iter()
        .enumerate()
        .map(|(i, it)| (it.out.id(), i))
        .collect();
    let mut deps: Vec<Vec<usize>> = items
        .iter()
        .map(|it| {
            it.inputs
                .iter()
                .filter_map(|b| producer.get(&b.id()).copied())
                .collect()
        })
        .collect();
    for (a, it) in items.iter().enumerate() {
        let Some((LazyOp::Assign, srcs)) = it.out.op() else {
            continue;
        };
        let target = srcs[0].base().id();
        for (r, reader) in items.iter().enumerate() {
            if r != a && reader.inputs.iter().any(|b| b.id() == target) {
                deps[a].push(r);
            }
        }
    }
    let mut done = alloc::vec![false; items.len()];
    let mut order = Vec::with_capacity(items.len());
    while order.len() < items.len() {
        let next = (0..items.len()).find(|&i| !done[i] && deps[i].iter().all(|&d| done[d]));
        let Some(i) = next else {
            return Err(Error::Device(
                "schedule: an assign's old value is read by a kernel that also needs its new value"
                    .into(),
            ));
        };
        done[i] = true;
        order.push(i);
    }
    let mut slots: Vec<Option<ScheduleItem>> = items.into_iter().map(Some).collect();
    Ok(order.into_iter().filter_map(|i| slots[i].take()).collect())
}
