//! Layout transforms: the scheduler's choice of the memory layout a reduce kernel reads its
//! operands in, made by one set of rules for every matmul- or conv-shaped kernel (batched or
//! not, any column or channel count) from the target's [`OptConfig`] — never from a model, a
//! layer or a fixed size. The tensor frontend only composes ops; this pass decides.
//!
//! A choice inserts a realized copy — a new buffer holding the operand's elements in another
//! layout — before the kernel, and rewrites the kernel's load to read the copy. The rules, for
//! each load inside a kernel's reduce (`V` = the target's vector width):
//!
//! - **Padded source** (conv inputs): a load that reads through a padding mask is gated where
//!   `pad_bounds.rs` cannot peel the borders off. The padded source (the views up to the last
//!   mask, with broadcast axes collapsed) is copied into its own buffer, which the kernel reads
//!   unmasked — when the kernel reads each element often enough ([`UNPAD_MIN_READS`]).
//! - **Channel blocks** (conv weights): in a conv-shaped kernel — the operand broadcasts the
//!   output's contiguous axis and another output axis, varies along a channel axis that another
//!   operand broadcasts (the shape `codegen/strategy/conv.rs` tiles) — a weight strided along its
//!   channel axis is copied into blocks of `c` channels, `[.., channels / c, reduce.., c]`, so the
//!   conv tile loads a vector of consecutive channels per tap; `c` is the widest power of two up
//!   to `V` that divides the channel count (24 and 40 channels on 8 lanes: 8; 100: 4; odd
//!   counts: no blocks, the tile then vectorizes along the output width instead) — and when
//!   `c < V`, only if `V` does not divide the output row (else the tile vectorizes the row).
//! - **Panels** (matmul operands): in any other reduce, the operand that varies along the output's
//!   contiguous axis (the register tile's vector lanes) is copied into panels of `P` columns,
//!   `[.., columns / P, reduce.., P]`, when its lanes are strided (a transposed weight: each
//!   vector would be a gather) or when it overflows L2 and every reduce step jumps a whole row
//!   (then a panel, `reduce × P` elements, stays in L2 while the rows of the other operand pass
//!   over it). `P` is the widest of `4V, 2V, V` whose panel fills at most half of L2. When the
//!   operand overflows L2 and `P` divides the columns, the kernel's loops are reordered too —
//!   panels outermost — so each panel is used by every row before the next is loaded.
//!
//! A panel remainder (columns not a multiple of `P`, e.g. 1000 on 32) gets a zero-padded last
//! panel; the kernel never reads the padding (its view shrinks back to the real count).
//!
//! Cost rule: a weight or panel copy is made only when the kernel does at least
//! [`MIN_REUSE_VECTORS`]` × V` multiply-adds per copied element (the copy costs about one pass
//! over its elements, so it stays a small fraction of the kernel's time; a batch-1 linear layer
//! reads each weight once and gets none) — except copies of a constant
//! ([`crate::device::Buffer::mark_constant`]: an ONNX model's weights), which a capture makes
//! once and its replays skip: a panel copy whose lanes are strided (an LSTM's recurrent weight
//! read transposed: the gathers it replaces would cost every call) and a conv weight's channel
//! blocks (a batch-1 conv over 7 × 7 pixels uses each weight 49 times, under the 64 that 16
//! lanes ask, and without blocks its tile cannot load channel vectors: mobilenet_v2's late
//! pointwise convs ran scalar on AVX-512, 2026-11-28); a padded copy when the kernel reads at least
//! [`UNPAD_MIN_READS`] values per copied element. Only on targets with an L2 cache
//! (`OptConfig::l2_bytes > 0`): a microcontroller's scarce resource is its static arena, which a
//! copy would grow.
//!
//! The rules are the heuristic; a device that measures layouts
//! ([`Device::measures_layouts`](crate::device::Device::measures_layouts): the measured search)
//! is offered every alternative instead ([`options`]: the rules' choice first) and picks one.
//!
//! Invariant: only memory layout changes. The copy holds the same values (padding zeros where
//! the mask gave zeros) and the kernel reads each of them at the same iteration, so every
//! accumulator sums the same values in the same order: results are bit-identical to the
//! untransformed schedule. Each rewritten item keeps its untransformed AST ([`ScheduleItem::plain`])
//! so export can undo the choice for a target without caches.

use alloc::string::String;
use alloc::vec::Vec;

use hashbrown::HashSet;

use super::ScheduleItem;
use crate::ast::{Ast, AstOp};
use crate::codegen::opt::OptConfig;
use crate::codegen::strategy::conv::channel_lanes;
use crate::error::Result;
use crate::lazy::LazyBuffer;
use crate::shape::{ShapeTracker, Sint};
use crate::symbolic::Node;

mod options;

pub use options::{LayoutOption, LayoutStep};

/// Copies are made when the kernel does at least this many vectors' worth of multiply-adds per
/// copied element: the copy is then at most about 1/4 of the kernel's memory work.
pub const MIN_REUSE_VECTORS: usize = 4;

/// A padded source is copied when the kernel reads at least this many values per copied element
/// (a 3×3 conv reads each input pixel 9 times per output channel). Loops over masked reads are
/// split into border and interior parts (`codegen/pad_bounds.rs`), so the interior reads
/// unmasked anyway; the copy then pays only where the kernel reads each element many times. A
/// depthwise 3×3 conv reads each about 9 times: at 4 its inputs were copied, a memory pass
/// that cost mobilenet_v2 4% of its time on one thread and 9% on two (min of 100 runs, four
/// interleaved pairs each, AVX-512, 2026-11-28); the measured search had picked no copy for
/// those convs. A conv with 2 or more output channels per input reads 18 or more: copied.
pub const UNPAD_MIN_READS: usize = 16;

/// What a rule chose for one load of a reduce kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Choice {
    /// Realize the load's padded source into its own buffer.
    Unpad,
    /// Copy the load's elements into blocks of `width` along kernel axis `axis`.
    Blocks { axis: usize, width: usize },
}

/// The facts about one reduce kernel the rules read.
struct Facts {
    /// The reduce's input shape (every load inside the reduce has it).
    full: Vec<usize>,
    /// The reduced axes.
    reduce: Vec<usize>,
    /// The axis the output is contiguous on (stride 1, size > 1), if any.
    wide: Option<usize>,
    /// The loads inside the reduce: buffer number, view, constant strides (`None` where not).
    loads: Vec<(usize, ShapeTracker, Vec<Option<i64>>)>,
    /// Per load: does it read a buffer marked constant ([`crate::device::Buffer::mark_constant`])?
    constant: Vec<bool>,
    /// Bytes per element of the loads.
    elem: usize,
}

fn consts(dims: &[Sint]) -> Option<Vec<usize>> {
    dims.iter()
        .map(|d| d.as_const().and_then(|v| usize::try_from(v).ok()))
        .collect()
}

fn const_strides(st: &ShapeTracker) -> Vec<Option<i64>> {
    st.real_strides()
        .iter()
        .map(|s| s.as_ref().and_then(Node::as_const))
        .collect()
}

/// The facts of a reduce kernel's AST reading `inputs` (buffers 1..), or `None` when it has no
/// reduce or a symbolic shape.
fn facts(ast: &Ast, inputs: &[LazyBuffer]) -> Option<Facts> {
    let AstOp::Store { st: store, .. } = ast.op() else {
        return None;
    };
    let red = ast.find_reduce()?;
    let AstOp::Reduce(_, axes) = red.op() else {
        return None;
    };
    let mut loads: Vec<(usize, ShapeTracker, Vec<Option<i64>>)> = Vec::new();
    let mut elem = 0;
    for n in red.nodes() {
        if let AstOp::Load { buf, st } = n.op() {
            if *buf > 0 && !loads.iter().any(|(b, s, _)| b == buf && s == st) {
                loads.push((*buf, st.clone(), const_strides(st)));
                elem = elem.max(n.dtype().itemsize());
            }
        }
    }
    let full = consts(loads.first()?.1.shape())?;
    let store_strides = const_strides(store);
    if store.shape().len() != full.len() || loads.iter().any(|l| l.1.shape().len() != full.len()) {
        return None;
    }
    let wide = (0..full.len())
        .rev()
        .find(|&a| !axes.contains(&a) && full[a] > 1 && store_strides[a] == Some(1));
    let constant = loads
        .iter()
        .map(|(buf, _, _)| {
            inputs
                .get(buf - 1)
                .and_then(LazyBuffer::realized)
                .is_some_and(|b| b.is_constant())
        })
        .collect();
    Some(Facts {
        full,
        reduce: axes.clone(),
        wide,
        loads,
        constant,
        elem,
    })
}

impl Facts {
    fn global(&self, a: usize) -> bool {
        !self.reduce.contains(&a)
    }
    fn big(&self, a: usize) -> bool {
        self.full[a] > 1
    }
    /// Big axes the load with strides `s` broadcasts (stride 0).
    fn broadcasts(&self, s: &[Option<i64>]) -> Vec<usize> {
        (0..self.full.len())
            .filter(|&a| self.big(a) && s[a] == Some(0))
            .collect()
    }
    /// Big axes the load with strides `s` moves along.
    fn varies(&self, s: &[Option<i64>]) -> Vec<usize> {
        (0..self.full.len())
            .filter(|&a| self.big(a) && s[a] != Some(0))
            .collect()
    }
    /// How many times the kernel reads each element of a load broadcasting `bcast`.
    fn reuse(&self, bcast: &[usize]) -> usize {
        bcast.iter().map(|&a| self.full[a]).product()
    }
    fn work(&self) -> usize {
        self.full.iter().product()
    }
}

/// The choices for one kernel: `(load index, choice)` for each transformed load, and the loop
/// reorder `(axis, width)` a panel asked for.
type Plan = (Vec<(usize, Choice)>, Option<(usize, usize)>);

/// The choices for every load of a reduce kernel.
fn choose(f: &Facts, cfg: &OptConfig) -> Plan {
    let v = cfg.vec_width.max(1);
    let min_reuse = MIN_REUSE_VECTORS * v;
    let mut out = Vec::new();
    let mut reorder = None;
    let conv = f.loads.iter().any(|l| conv_weight(f, &l.2).is_some());
    for (i, (_, st, s)) in f.loads.iter().enumerate() {
        if st.has_mask() {
            if unpad_size(st).is_some_and(|n| n * UNPAD_MIN_READS <= f.work()) {
                out.push((i, Choice::Unpad));
            }
            continue;
        }
        if st.views().len() != 1 || s.iter().any(Option::is_none) {
            continue;
        }
        if conv {
            if let Some(axis) = conv_weight(f, s) {
                let reuse = f.reuse(&f.broadcasts(s));
                let width = channel_lanes(f.full[axis], v);
                // The conv tile puts narrower channel vectors than the target's on the row
                // instead when the vector width divides the row (`strategy/conv.rs`): no blocks
                // then, so its broadcast weights keep a plain index.
                let row_lanes = f.wide.is_some_and(|w| f.full[w] % v == 0);
                // A constant's blocks are copied once per capture: no reuse needed.
                let used = width == v || !row_lanes;
                if s[axis] != Some(1) && (reuse >= min_reuse || f.constant[i]) && width > 1 && used
                {
                    out.push((i, Choice::Blocks { axis, width }));
                }
            }
            continue;
        }
        // A constant's copy is made once per capture, so strided lanes pay for it without
        // reuse.
        let plan = panels(f, s, cfg, min_reuse, false)
            .or_else(|| f.constant[i].then(|| panels(f, s, cfg, 1, true)).flatten());
        if let Some((width, panels_outermost)) = plan {
            let axis = f.wide.unwrap_or(0);
            out.push((i, Choice::Blocks { axis, width }));
            if panels_outermost && reorder.is_none() {
                reorder = Some((axis, width));
            }
        }
    }
    (out, reorder)
}

/// The channel axis of a conv weight (strides `s`): the load broadcasts the output-contiguous
/// axis and another big output axis, and moves along a last output axis that another load
/// broadcasts while moving along the output-contiguous axis (the input).
fn conv_weight(f: &Facts, s: &[Option<i64>]) -> Option<usize> {
    let wide = f.wide?;
    let bc = f.broadcasts(s);
    if !bc.contains(&wide) || !bc.iter().any(|&a| a != wide && f.global(a)) {
        return None;
    }
    let channel = *f.varies(s).iter().rev().find(|&&a| f.global(a))?;
    let input = f
        .loads
        .iter()
        .any(|l| l.2[wide] != Some(0) && l.2[channel] == Some(0));
    input.then_some(channel)
}

/// The panel width for the operand with strides `s` that varies along the output-contiguous
/// axis, and whether the panels should be the kernel's outermost loop (see the module doc).
/// `once`: the copy of a constant, made once per capture — only for strided lanes, whatever
/// the reuse (a matrix-vector product reads each element once).
fn panels(
    f: &Facts,
    s: &[Option<i64>],
    cfg: &OptConfig,
    min_reuse: usize,
    once: bool,
) -> Option<(usize, bool)> {
    let wide = f.wide?;
    let v = cfg.vec_width.max(1);
    let stride = s[wide]?;
    let bc = f.broadcasts(s);
    let reused = bc.iter().any(|&a| f.global(a)) && f.reuse(&bc) >= min_reuse;
    if stride == 0 || (once && stride == 1) || !(once || reused) {
        return None;
    }
    let vary = f.varies(s);
    let taps: usize = vary
        .iter()
        .filter(|&&a| !f.global(a))
        .map(|&a| f.full[a])
        .product();
    let overflows = overflows(f, s, cfg);
    let rows_apart = vary
        .iter()
        .filter(|&&a| !f.global(a))
        .all(|&a| s[a].is_some_and(|x| x.unsigned_abs() as usize >= v));
    if taps <= 1 || !(stride != 1 || (overflows && rows_apart)) {
        return None;
    }
    // A copy made for its lanes alone (a constant read once per row of the batch) holds one
    // vector per panel, which any tile's lanes along the row divide evenly (wider panels
    // than a tile's vectors leave div/mod in its index: 1.9× the instructions at batch 8).
    let widths: &[usize] = if once { &[v] } else { &[4 * v, 2 * v, v] };
    let width = widths
        .iter()
        .copied()
        .find(|&p| taps * p * f.elem <= cfg.l2_bytes / 2)
        .unwrap_or(v);
    Some((width, outermost(f, s, width, cfg)))
}

/// Should panels of `width` of the operand with strides `s` be the kernel's outermost loop? When
/// the operand overflows L2 and the panels divide the output row: then each panel is used by
/// every row before the next is loaded.
fn outermost(f: &Facts, s: &[Option<i64>], width: usize, cfg: &OptConfig) -> bool {
    let Some(wide) = f.wide else {
        return false;
    };
    overflows(f, s, cfg) && f.full[wide] % width == 0 && f.full[wide] > width
}

/// Do the elements the operand with strides `s` reads outgrow the L2?
fn overflows(f: &Facts, s: &[Option<i64>], cfg: &OptConfig) -> bool {
    let footprint = f.varies(s).iter().map(|&a| f.full[a]).product::<usize>() * f.elem;
    footprint > cfg.l2_bytes
}

/// Elements of the padded source a masked load reads (its views up to the last mask, broadcast
/// axes collapsed), or `None` when a broadcast axis is itself masked (then collapsing it would
/// change which reads are padding).
fn unpad_size(st: &ShapeTracker) -> Option<usize> {
    let (_, shape, _) = unpad_view(st)?;
    Some(shape.iter().product())
}

/// `(index of the last masked view, the copy's shape, the collapsed axes)`.
fn unpad_view(st: &ShapeTracker) -> Option<(usize, Vec<usize>, Vec<usize>)> {
    let i = st.views().iter().rposition(|v| v.mask().is_some())?;
    let v = &st.views()[i];
    let shape = consts(v.shape())?;
    let mask = v.mask()?;
    let mut collapsed = Vec::new();
    for (a, (&d, s)) in shape.iter().zip(v.strides()).enumerate() {
        if d > 1 && s.as_const() == Some(0) {
            let (b, e) = (&mask[a].0, &mask[a].1);
            if b.as_const() != Some(0) || e.as_const() != Some(d as i64) {
                return None;
            }
            collapsed.push(a);
        }
    }
    let copy = shape
        .iter()
        .enumerate()
        .map(|(a, &d)| if collapsed.contains(&a) { 1 } else { d })
        .collect();
    Some((i, copy, collapsed))
}

fn sints(dims: &[usize]) -> Vec<Sint> {
    dims.iter().map(|&d| Node::cst(d as i64)).collect()
}

/// The padded copy of `base` read through `st`, and the view the kernel reads it through.
fn unpad(base: &LazyBuffer, st: &ShapeTracker) -> Result<Option<(LazyBuffer, ShapeTracker)>> {
    let Some((i, copy_shape, collapsed)) = unpad_view(st) else {
        return Ok(None);
    };
    let views = st.views();
    let Some(inner) = ShapeTracker::from_views(views[..=i].to_vec()) else {
        return Ok(None);
    };
    let keep: Vec<(i64, i64)> = inner
        .shape()
        .iter()
        .enumerate()
        .map(|(a, d)| {
            let end = if collapsed.contains(&a) {
                1
            } else {
                d.as_const().unwrap_or(1)
            };
            (0, end)
        })
        .collect();
    let copy = base.view_through(inner).shrink(&keep)?.contiguous();
    // The copy is row-major in `copy_shape`; the collapsed axes read it with stride 0.
    let top = ShapeTracker::from_shape(&sints(&copy_shape)).expand(views[i].shape())?;
    let mut read = top.views().to_vec();
    read.extend(views[i + 1..].iter().cloned());
    let Some(read) = ShapeTracker::from_views(read) else {
        return Ok(None);
    };
    Ok(Some((copy, read.simplify())))
}

/// The blocked copy of `base` read through the single-view `st` (shape `f.full`): the elements
/// along the axes the load moves on, laid out `[other output axes.., axis / width, reduce..,
/// width]` (the last block zero-padded), and the view the kernel reads it through.
fn blocks(
    f: &Facts,
    base: &LazyBuffer,
    st: &ShapeTracker,
    s: &[Option<i64>],
    (axis, width): (usize, usize),
) -> Result<(LazyBuffer, ShapeTracker)> {
    let vary = f.varies(s);
    let keep: Vec<(i64, i64)> = (0..f.full.len())
        .map(|a| {
            (
                0,
                if vary.contains(&a) {
                    f.full[a] as i64
                } else {
                    1
                },
            )
        })
        .collect();
    let dims: Vec<usize> = vary.iter().map(|&a| f.full[a]).collect();
    let at = vary.iter().position(|&a| a == axis).unwrap_or(0);
    let n = f.full[axis];
    let padded = n.div_ceil(width) * width;
    let mut pad = alloc::vec![(0usize, 0usize); dims.len()];
    pad[at] = (0, padded - n);
    let mut split = dims.clone();
    split[at] = padded / width;
    split.insert(at + 1, width);
    // Order: output axes (but `axis`), the block index, the reduce axes, the lane.
    let mut order: Vec<usize> = Vec::new();
    let pos = |k: usize| if k <= at { k } else { k + 1 };
    order.extend(
        (0..dims.len())
            .filter(|&k| k != at && f.global(vary[k]))
            .map(pos),
    );
    order.push(at);
    order.extend((0..dims.len()).filter(|&k| !f.global(vary[k])).map(pos));
    order.push(at + 1);
    let mut v = base
        .view_through(st.clone())
        .shrink(&keep)?
        .reshape(&sints(&dims))?;
    if padded != n {
        let p: Vec<(i64, i64)> = pad.iter().map(|&(b, e)| (b as i64, e as i64)).collect();
        v = v.pad(&p)?;
    }
    let copy = v.reshape(&sints(&split))?.permute(&order)?.contiguous();
    let mut inverse = alloc::vec![0; order.len()];
    for (new, &old) in order.iter().enumerate() {
        inverse[old] = new;
    }
    let copy_shape: Vec<usize> = order.iter().map(|&k| split[k]).collect();
    let mut padded_dims = dims.clone();
    padded_dims[at] = padded;
    let mut shrink: Vec<(i64, i64)> = padded_dims.iter().map(|&d| (0, d as i64)).collect();
    shrink[at] = (0, n as i64);
    let ones: Vec<usize> = (0..f.full.len())
        .map(|a| if vary.contains(&a) { f.full[a] } else { 1 })
        .collect();
    let read = ShapeTracker::from_shape(&sints(&copy_shape))
        .permute(&inverse)?
        .reshape(&sints(&padded_dims))?
        .shrink(&shrink)?
        .reshape(&sints(&ones))?
        .expand(&sints(&f.full))?;
    Ok((copy, read))
}

/// The kernel's loops reordered so `axis`, split into `(axis / width, width)`, runs its blocks
/// outermost: every leaf's view and the reduce's axes are mapped (the store then writes the
/// same output positions, panel by panel).
fn reorder(ast: &Ast, (axis, width): (usize, usize)) -> Result<Ast> {
    let mut err = None;
    let mut map = |st: &ShapeTracker| -> ShapeTracker {
        let shape = st.shape();
        let mut split: Vec<Sint> = shape.to_vec();
        let n = split[axis].as_const().unwrap_or(0) as usize;
        split[axis] = Node::cst((n / width) as i64);
        split.insert(axis + 1, Node::cst(width as i64));
        let mut order = alloc::vec![axis];
        order.extend(0..axis);
        order.extend(axis + 1..split.len());
        match st.reshape(&split).and_then(|s| s.permute(&order)) {
            Ok(s) => s,
            Err(e) => {
                err = Some(e);
                st.clone()
            }
        }
    };
    let out = ast.map_ops(&mut |op, _| match op {
        AstOp::Load { buf, st } => AstOp::Load {
            buf: *buf,
            st: map(st),
        },
        AstOp::Const { val, st } => AstOp::Const {
            val: *val,
            st: map(st),
        },
        AstOp::Store { buf, st } => AstOp::Store {
            buf: *buf,
            st: map(st),
        },
        // Every axis moves one place up: the panel index went first, and the split added one
        // axis before every axis after `axis` (reduce axes are never `axis` itself).
        AstOp::Reduce(r, axes) => AstOp::Reduce(*r, axes.iter().map(|&a| a + 1).collect()),
        other => other.clone(),
    });
    match err {
        Some(e) => Err(e),
        None => Ok(out),
    }
}

/// A copy kernel: `copy`'s source view stored row-major into `copy`.
fn copy_item(copy: &LazyBuffer) -> Result<Option<ScheduleItem>> {
    let Some((_, srcs)) = copy.op() else {
        return Ok(None);
    };
    let src = &srcs[0];
    let dtype = copy.dtype();
    let load = Ast::new(
        AstOp::Load {
            buf: 1,
            st: src.st().clone(),
        },
        dtype,
        Vec::new(),
    );
    let ast = Ast::new(
        AstOp::Store {
            buf: 0,
            st: ShapeTracker::from_shape(copy.shape()),
        },
        dtype,
        alloc::vec![load],
    );
    Ok(Some(ScheduleItem {
        ast,
        out: copy.clone(),
        inputs: alloc::vec![src.base().clone()],
        is_copy: false,
        plain: None,
        layout_copy: true,
        var_vals: crate::symbolic::VarVals::new(),
    }))
}

/// How the layout pass is steered: the configuration each item's target asks for, and, for
/// items whose device measures layouts, who picks among the alternatives
/// ([`options::space`]).
pub(super) struct Policy<'a> {
    /// The target's configuration for an item (`None`: leave the item as it is).
    pub cfg_for: &'a dyn Fn(&ScheduleItem) -> Option<OptConfig>,
    /// Does someone measure this item's layouts? Then every alternative is built and offered to
    /// `pick`; otherwise only the rules' choice is built.
    pub measures: &'a dyn Fn(&ScheduleItem) -> bool,
    /// The index of the option to take (the rules' choice is option 0); `None`: the rules'.
    pub pick: &'a dyn Fn(&ScheduleItem, &[LayoutOption]) -> Option<usize>,
}

/// Applies the layout rules (or, where `policy` measures, its pick among the alternatives) to
/// every reduce kernel of `items` (in dependency order). Copies run right before the kernel that
/// reads them; a copy several kernels share is made once.
pub(super) fn apply(items: Vec<ScheduleItem>, policy: &Policy<'_>) -> Result<Vec<ScheduleItem>> {
    let mut out = Vec::with_capacity(items.len());
    let mut made: HashSet<usize> = HashSet::new();
    for it in items {
        let cfg = match (policy.cfg_for)(&it) {
            Some(c) if c.l2_bytes > 0 && !it.is_copy => c,
            _ => {
                out.push(it);
                continue;
            }
        };
        transform(it, &cfg, policy, &mut made, &mut out)?;
    }
    Ok(out)
}

/// Lays out one item: pushes the chosen option's copies (those not made yet) and then its kernel.
fn transform(
    it: ScheduleItem,
    cfg: &OptConfig,
    policy: &Policy<'_>,
    made: &mut HashSet<usize>,
    out: &mut Vec<ScheduleItem>,
) -> Result<()> {
    let Some(f) = facts(&it.ast, &it.inputs) else {
        out.push(it);
        return Ok(());
    };
    let plans = if (policy.measures)(&it) {
        options::space(&f, cfg)
    } else {
        alloc::vec![choose(&f, cfg)]
    };
    let mut opts: Vec<LayoutOption> = Vec::new();
    for plan in &plans {
        let o = build(&it, &f, plan)?;
        if !opts.iter().any(|x| x.kernel.ast == o.kernel.ast) {
            opts.push(o);
        }
    }
    let pick = if opts.len() > 1 {
        (policy.pick)(&it, &opts).filter(|&i| i < opts.len())
    } else {
        None
    };
    let chosen = opts.swap_remove(pick.unwrap_or(0));
    if chosen.kernel.plain.is_some() {
        crate::context::log(
            5,
            &alloc::format!("schedule: layout of {:?}: {}", it.out, chosen.label),
        );
    }
    for c in chosen.copies {
        if made.insert(c.out.id()) {
            out.push(c);
        }
    }
    out.push(chosen.kernel);
    Ok(())
}

/// The item laid out by `plan`: its copies (those not realized yet) and the rewritten kernel,
/// or the item itself when the plan changes nothing.
fn build(it: &ScheduleItem, f: &Facts, (choices, order): &Plan) -> Result<LayoutOption> {
    let mut kernel = it.clone();
    let mut copies: Vec<ScheduleItem> = Vec::new();
    let mut swaps: Vec<(usize, ShapeTracker, usize, ShapeTracker)> = Vec::new();
    for (i, choice) in choices {
        let (buf, st, s) = &f.loads[*i];
        let base = it.inputs[*buf - 1].clone();
        let made_copy = match choice {
            Choice::Unpad => unpad(&base, st)?,
            Choice::Blocks { axis, width } => Some(blocks(f, &base, st, s, (*axis, *width))?),
        };
        let Some((copy, read)) = made_copy else {
            continue;
        };
        if copy.realized().is_none() && !copies.iter().any(|c| c.out.ptr_eq(&copy)) {
            copies.extend(copy_item(&copy)?);
        }
        let nb = match kernel.inputs.iter().position(|b| b.ptr_eq(&copy)) {
            Some(p) => p + 1,
            None => {
                kernel.inputs.push(copy);
                kernel.inputs.len()
            }
        };
        swaps.push((*buf, st.clone(), nb, read));
    }
    if swaps.is_empty() {
        return Ok(LayoutOption::new(
            String::from("plain"),
            Vec::new(),
            it.clone(),
        ));
    }
    let mut ast = it.ast.map_ops(&mut |op, inside| match op {
        AstOp::Load { buf, st } if inside => swaps
            .iter()
            .find(|(b, s, _, _)| b == buf && s == st)
            .map_or_else(
                || op.clone(),
                |(_, _, nb, read)| AstOp::Load {
                    buf: *nb,
                    st: read.clone(),
                },
            ),
        other => other.clone(),
    });
    if let Some(o) = order {
        ast = reorder(&ast, *o)?;
    }
    kernel.ast = ast;
    kernel.plain = Some((it.ast.clone(), it.inputs.len()));
    let label = options::label(f, choices, *order);
    Ok(LayoutOption::new(label, copies, kernel))
}
