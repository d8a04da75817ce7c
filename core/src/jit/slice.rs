//! Image-major replays. A capture of a batch runs each step over every image before the next
//! step starts, so at batch 8 a network's intermediates are eight times larger than at batch 1
//! and fall out of the caches between one step and the next (mobilenet_v2: 107 MiB of
//! intermediates at batch 8 against 13.7 MiB at batch 1, with the same instructions and L1
//! misses per image and twice the last-level misses). Where consecutive steps treat every image
//! apart, [`image_major`] makes them a segment that runs over a slice of images at a time —
//! every step of the segment over images 0..g, then over g..2g, and so on — in slice-sized
//! buffers for the values that live only inside the segment, so one slice's values stay in
//! cache from the step that writes them to the step that reads them. `g` is the device's core
//! count ([`Device::parallelism`]): a sliced kernel still has an image per core to split by.
//!
//! Invariants: a step joins a segment only when, for every buffer computed from the inputs, the
//! index it reads or writes is `image · S + rest` with `S` the buffer's size per image and
//! `rest` free of the image (so image `a`'s part of the step touches image `a`'s part of the
//! buffer, at the same places for every image: the kernel's own bounds put `rest` in
//! `[0, S)`), and its weights, constants and masks do not depend on the image; its kernel binds
//! no variables and does not reduce over images. Each element's arithmetic is unchanged, only
//! the order in which whole slices of kernels run, so a sliced replay computes the same bits.
//! Values computed from weights alone are left where they are (frozen steps, export's fold).

use alloc::format;
use alloc::sync::Arc;
use alloc::vec::Vec;

use super::{constants, CapturedStep};
use crate::ast::{Ast, AstOp};
use crate::codegen::uops::BufParam;
use crate::device::{Buffer, Device};
use crate::error::{Error, Result};
use crate::shape::ShapeTracker;
use crate::symbolic::Node;

/// The variable a sliced kernel takes: which slice of images it runs on.
pub(crate) const SLICE_VAR: &str = "_slice";

/// The image variable of the separability proof (never in a kernel).
const IMAGE_VAR: &str = "_image";

/// A capture's steps and slot table made image-major ([`image_major`]).
pub(super) struct Sliced {
    /// The steps: those outside segments as they were, each segment's steps repeated once per
    /// slice (the slice in their recorded variable values).
    pub steps: Vec<CapturedStep>,
    /// The slot table: the old slots (a segment-private value's old full-batch slot keeps a
    /// one-element placeholder) and one slice-sized slot per private value and slice.
    pub slots: Vec<Arc<Buffer>>,
    /// The slots some step allocates: the old ones and the new private slots.
    pub fresh: Vec<usize>,
    /// How many segments were sliced.
    pub segments: usize,
}

/// Who a slot is to a step being checked.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    /// Computed from the inputs: indexed image by image.
    Batch,
    /// A weight or a value computed from weights alone: the same for every image.
    Shared,
}

/// The capture's steps made image-major, or `None` when no segment is worth slicing: `n`
/// images (the inputs' common leading dimension), slices of `dev.parallelism()` images (or
/// fewer, dividing `n`), a segment sliced only when the full-batch values private to it exceed
/// every core's L2 (below that the batch already stays in cache, and slicing would only add
/// kernel calls).
#[allow(clippy::too_many_arguments)]
pub(super) fn image_major(
    steps: &[CapturedStep],
    slots: &[Arc<Buffer>],
    inputs: &[usize],
    input_batch: Option<i64>,
    outputs: &[usize],
    fresh: &[usize],
    dev: &Arc<dyn Device>,
) -> Result<Option<Sliced>> {
    let Some(n) = input_batch.filter(|&n| n >= 2) else {
        return Ok(None);
    };
    let cfg = dev.opt_config();
    let budget = cfg.map_or(0, |c| c.l2_bytes) * dev.parallelism().max(1);
    if budget == 0 {
        // No cache to keep values in (a microcontroller), or an unoptimizing device.
        return Ok(None);
    }
    let g = gcd(n, dev.parallelism().max(1) as i64);
    if n / g < 2 {
        return Ok(None);
    }
    let (constant, _) = constants(steps, slots.len(), inputs, outputs, true);
    let lens: Vec<usize> = slots.iter().map(|b| b.len()).collect();
    let separable: Vec<bool> = steps
        .iter()
        .map(|st| separable(st, n, &constant, &lens))
        .collect();
    // Segments: maximal runs of separable steps, steps over weights alone passed over.
    let mut segments: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    for (i, st) in steps.iter().enumerate() {
        let over_weights = st.slots.first().is_some_and(|&o| constant[o]);
        if separable[i] {
            current.push(i);
        } else if !over_weights {
            if crate::context::debug() >= 5 {
                let name = st.kernel.as_ref().map_or("copy", |k| k.name.as_str());
                crate::context::log(5, &format!("image-major: step {i} ({name}) ends a segment"));
            }
            segments.push(core::mem::take(&mut current));
        }
    }
    segments.push(current);
    segments.retain(|s| !s.is_empty());
    let mut touched_by: Vec<Vec<usize>> = alloc::vec![Vec::new(); slots.len()];
    for (i, st) in steps.iter().enumerate() {
        for &s in &st.slots {
            if touched_by[s].last() != Some(&i) {
                touched_by[s].push(i);
            }
        }
    }
    // The segments worth slicing, with the values private to each.
    let mut plans: Vec<(Vec<usize>, Vec<usize>)> = Vec::new();
    for seg in segments {
        let private: Vec<usize> = (0..slots.len())
            .filter(|&s| {
                fresh.contains(&s)
                    && !inputs.contains(&s)
                    && !outputs.contains(&s)
                    && !constant[s]
                    && !touched_by[s].is_empty()
                    && touched_by[s].iter().all(|i| seg.contains(i))
            })
            .collect();
        let private_bytes: usize = private.iter().map(|&s| slots[s].nbytes()).sum();
        if seg.len() >= 2 && private_bytes > budget {
            plans.push((seg, private));
        }
    }
    if plans.is_empty() {
        return Ok(None);
    }
    let mut out: Vec<CapturedStep> = Vec::new();
    let mut new_slots: Vec<Arc<Buffer>> = slots.to_vec();
    let mut new_fresh: Vec<usize> = fresh.to_vec();
    let mut i = 0;
    while i < steps.len() {
        let Some((seg, private)) = plans.iter().find(|(seg, _)| seg[0] == i) else {
            out.push(steps[i].clone());
            i += 1;
            continue;
        };
        let last = seg[seg.len() - 1];
        // Steps over weights alone inside the segment's span run first, in their order.
        out.extend(
            (i..=last)
                .filter(|x| !seg.contains(x))
                .map(|x| steps[x].clone()),
        );
        expand(
            steps,
            seg,
            private,
            n,
            g,
            &constant,
            dev,
            &mut out,
            &mut new_slots,
            &mut new_fresh,
        )?;
        for &s in private {
            // Nothing touches the full-batch slot any more: a placeholder frees its memory.
            let old = &slots[s];
            new_slots[s] = Arc::new(Buffer::new(old.device().clone(), old.dtype(), 1)?);
        }
        i = last + 1;
    }
    Ok(Some(Sliced {
        steps: out,
        slots: new_slots,
        fresh: new_fresh,
        segments: plans.len(),
    }))
}

/// Appends segment `seg`'s steps once per slice of `g` images to `out`: its kernels lowered for
/// a slice and compiled once, each slice's private values (`private`) in new slice-sized slots.
#[allow(clippy::too_many_arguments)]
fn expand(
    steps: &[CapturedStep],
    seg: &[usize],
    private: &[usize],
    n: i64,
    g: i64,
    constant: &[bool],
    dev: &Arc<dyn Device>,
    out: &mut Vec<CapturedStep>,
    slots: &mut Vec<Arc<Buffer>>,
    fresh: &mut Vec<usize>,
) -> Result<()> {
    let mut kernels = Vec::with_capacity(seg.len());
    for &i in seg {
        kernels.push(sliced_kernel(&steps[i], n, g, constant, private, dev)?);
    }
    let refs: Vec<&crate::codegen::uops::LinearKernel> =
        kernels.iter().map(|(k, _, _)| k).collect();
    let programs = dev.compile_many(&refs)?;
    for slice in 0..n / g {
        let mut home: Vec<(usize, usize)> = Vec::with_capacity(private.len());
        for &s in private {
            let old = &slots[s];
            let len = old.len() / n as usize * g as usize;
            let buf = Buffer::for_overwrite(old.device().clone(), old.dtype(), len)?;
            slots.push(Arc::new(buf));
            fresh.push(slots.len() - 1);
            home.push((s, slots.len() - 1));
        }
        for ((&i, (k, ast, plain)), p) in seg.iter().zip(&kernels).zip(&programs) {
            let st = &steps[i];
            let here = |s: usize| home.iter().find(|(o, _)| *o == s).map_or(s, |&(_, h)| h);
            let mut var_vals = st.var_vals.clone();
            crate::symbolic::merge_val(&mut var_vals, SLICE_VAR, slice)?;
            out.push(CapturedStep {
                ast: Some(ast.clone()),
                kernel: Some(k.clone()),
                program: Some(p.clone()),
                slots: st.slots.iter().map(|&s| here(s)).collect(),
                plain: plain.clone(),
                layout_copy: st.layout_copy,
                var_vals,
            });
        }
    }
    Ok(())
}

/// Does every image's part of `st` touch only that image's part of the values computed from the
/// inputs (see the module doc)? `constant` marks the slots computed from weights alone.
fn separable(st: &CapturedStep, n: i64, constant: &[bool], lens: &[usize]) -> bool {
    let (Some(ast), Some(k), Some(_)) = (&st.ast, &st.kernel, &st.program) else {
        return false;
    };
    if !k.vars.is_empty() || !st.var_vals.is_empty() {
        return false;
    }
    let over_images = |a: &Ast| {
        a.nodes()
            .iter()
            .any(|x| matches!(x.op(), AstOp::Reduce(_, axes) if axes.contains(&0)))
    };
    let plain_ok = st.plain.as_ref().is_none_or(|(p, reads)| {
        st.slots
            .get(..=*reads)
            .is_some_and(|slots| !over_images(p) && leaves_ok(p, slots, n, constant, lens))
    });
    plain_ok && !over_images(ast) && leaves_ok(ast, &st.slots, n, constant, lens)
}

/// [`leaf_ok`] for every leaf of `ast`, whose buffer `b` is slot `slots[b]`.
fn leaves_ok(ast: &Ast, slots: &[usize], n: i64, constant: &[bool], lens: &[usize]) -> bool {
    ast.nodes().iter().all(|x| match x.op() {
        AstOp::Load { buf, st: ls } | AstOp::Store { buf, st: ls } => {
            let Some(&slot) = slots.get(*buf) else {
                return false;
            };
            let role = if constant[slot] {
                Role::Shared
            } else {
                Role::Batch
            };
            leaf_ok(ls, Some((role, lens[slot])), n)
        }
        AstOp::Const { st: ls, .. } => leaf_ok(ls, None, n),
        AstOp::Alu(_) | AstOp::Reduce(..) | AstOp::Cast | AstOp::Bitcast => true,
    })
}

/// The proof for one leaf: its shape leads with `n` images; a batch buffer's index is
/// `image · S + rest` with `rest` and the validity free of the image; anything else (a weight,
/// a constant) does not depend on the image at all.
fn leaf_ok(ls: &ShapeTracker, buf: Option<(Role, usize)>, n: i64) -> bool {
    let shape = ls.shape();
    let Some(dims) = shape
        .iter()
        .map(Node::as_const)
        .collect::<Option<Vec<i64>>>()
    else {
        return false;
    };
    if dims.first() != Some(&n) {
        return false;
    }
    let image = Node::var(IMAGE_VAR, 0, n - 1);
    let idxs: Vec<Node> = dims
        .iter()
        .enumerate()
        .map(|(j, &d)| match (j, d) {
            (0, _) => image.clone(),
            (_, d) if d <= 1 => Node::cst(0),
            (j, d) => Node::var(&format!("_i{j}"), 0, d - 1),
        })
        .collect();
    let (idx, valid) = ls.expr_idxs(&idxs);
    let mentions = |x: &Node| x.vars().iter().any(|v| v.var_name() == Some(IMAGE_VAR));
    if mentions(&valid) {
        return false;
    }
    match buf {
        None | Some((Role::Shared, _)) => !mentions(&idx),
        Some((Role::Batch, len)) => {
            let len = len as i64;
            if len % n != 0 {
                return false;
            }
            let rest = idx.sub_node(&image.mul_node(&Node::cst(len / n)));
            !mentions(&rest)
        }
    }
}

/// `ast` (over the slots `slots`, by buffer number) over a slice of `g` images: batch buffers
/// shared beyond the segment indexed from image `SLICE_VAR · g`, private ones (`private` slots)
/// from 0 in a buffer of `g` images, weights and constants as for images 0..g.
fn slice_ast(
    ast: &Ast,
    slots: &[usize],
    n: i64,
    g: i64,
    constant: &[bool],
    private: &[usize],
) -> Result<Ast> {
    let slice = Node::var(SLICE_VAR, 0, n / g - 1);
    let start = slice.mul_node(&Node::cst(g));
    let window = |ls: &ShapeTracker, from: &Node| -> Result<ShapeTracker> {
        let mut arg: Vec<(Node, Node)> = ls
            .shape()
            .iter()
            .map(|d| (Node::cst(0), d.clone()))
            .collect();
        arg[0] = (from.clone(), from.add_node(&Node::cst(g)));
        ls.shrink_nodes(&arg)
    };
    let zero = Node::cst(0);
    let mut failed: Option<Error> = None;
    let sliced = ast.map_ops(&mut |op, _| {
        let from = |buf: usize| match slots.get(buf) {
            Some(&slot) if !constant[slot] && !private.contains(&slot) => &start,
            _ => &zero,
        };
        let mut shrink = |ls: &ShapeTracker, from: &Node| match window(ls, from) {
            Ok(s) => s,
            Err(e) => {
                failed.get_or_insert(e);
                ls.clone()
            }
        };
        match op {
            AstOp::Load { buf, st: ls } => AstOp::Load {
                buf: *buf,
                st: shrink(ls, from(*buf)),
            },
            AstOp::Store { buf, st: ls } => AstOp::Store {
                buf: *buf,
                st: shrink(ls, from(*buf)),
            },
            AstOp::Const { val, st: ls } => AstOp::Const {
                val: *val,
                st: shrink(ls, &zero),
            },
            other => other.clone(),
        }
    });
    match failed {
        Some(e) => Err(e),
        None => Ok(sliced),
    }
}

/// `st`'s kernel over a slice of `g` images ([`slice_ast`]), lowered for `dev`; its AST, and
/// its AST before the scheduler's layout transforms (for export), sliced alike.
#[allow(clippy::type_complexity)]
fn sliced_kernel(
    st: &CapturedStep,
    n: i64,
    g: i64,
    constant: &[bool],
    private: &[usize],
    dev: &Arc<dyn Device>,
) -> Result<(
    crate::codegen::uops::LinearKernel,
    Ast,
    Option<(Ast, usize)>,
)> {
    let (Some(ast), Some(k)) = (&st.ast, &st.kernel) else {
        return Err(Error::internal("image-major: a sliced step has no kernel"));
    };
    let sliced = slice_ast(ast, &st.slots, n, g, constant, private)?;
    let plain = match &st.plain {
        Some((p, reads)) => Some((
            slice_ast(p, &st.slots[..=*reads], n, g, constant, private)?,
            *reads,
        )),
        None => None,
    };
    let bufs: Vec<BufParam> = k
        .bufs
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let private_here = st.slots.get(i).is_some_and(|s| private.contains(s));
            BufParam {
                size: if private_here {
                    b.size / n as usize * g as usize
                } else {
                    b.size
                },
                ..*b
            }
        })
        .collect();
    let cfg = dev.opt_config();
    let chosen = cfg.and_then(|_| dev.choose_opts(&sliced, &bufs));
    let lk = crate::codegen::lower::lower_ast_with(
        &sliced,
        bufs,
        cfg.as_ref(),
        chosen.as_deref(),
        dev.fused_mulacc(),
    )?;
    Ok((lk, sliced, plain))
}

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}
