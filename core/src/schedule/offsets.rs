//! Load offsets as kernel arguments: kernels of one schedule that differ only in where their
//! loads start in a buffer (an unrolled RNN's step `t` reads row `t` of the input sequence) become
//! one kernel whose start is a variable argument, so they are lowered and compiled once.
//!
//! For every load of an input buffer through a tracker without variables, the range of offsets
//! of the buffer-facing view that keep every index inside the buffer is computed from the view's
//! other fields and the buffer's length alone (never from the offset). Items whose ASTs become
//! equal once those offsets are replaced by variables over their ranges, and that were not equal
//! before, get the offsets as bound internal variables (`_off0`, `_off1`, … in AST order, see
//! [`crate::symbolic::is_internal_var`]); the unbinding pass after this one turns them into
//! kernel arguments, with the values in [`ScheduleItem::var_vals`]. A kernel that no other kernel
//! of the schedule repeats keeps its constant offsets (nothing to share, and constants fold).
//!
//! Invariant: a rewritten AST indexes exactly the elements the original did (each variable is
//! bound to the offset it replaces, inside its range), and every value of a variable's range keeps
//! every index it takes in `[0, buffer length)` — so the shared kernel, its search and export's
//! bounds checks are safe at every value.

use alloc::format;
use alloc::vec::Vec;

use hashbrown::HashMap;

use super::ScheduleItem;
use crate::ast::{Ast, AstOp};
use crate::error::Result;
use crate::lazy::LazyBuffer;
use crate::shape::ShapeTracker;
use crate::symbolic::{bound_internal, Node};

/// Rewrites the items that repeat another item up to load offsets (see the module doc).
pub(super) fn share_offsets(items: &mut [ScheduleItem]) -> Result<()> {
    // key (offsets as unbound variables) → items with that key
    let mut groups: HashMap<Ast, Vec<usize>> = HashMap::new();
    for (i, it) in items.iter().enumerate() {
        if it.is_copy {
            continue;
        }
        if let Some(key) = parametrize(&it.ast, &it.inputs, false, "_off")? {
            groups.entry(key).or_default().push(i);
        }
    }
    for members in groups.values() {
        let first = &items[members[0]].ast;
        if members.iter().all(|&i| items[i].ast == *first) {
            continue;
        }
        for &i in members {
            if let Some(ast) = parametrize(&items[i].ast, &items[i].inputs, true, "_off")? {
                items[i].ast = ast;
            }
            // The kernel before its layout copies (what an export for a target without caches,
            // or any relowering that undoes them, compiles) takes its offsets as arguments too,
            // named apart: its loads need not number as the transformed kernel's do.
            if let Some((plain, n)) = &items[i].plain {
                let inputs = &items[i].inputs[..*n];
                if let Some(p) = parametrize(plain, inputs, true, "_poff")? {
                    items[i].plain = Some((p, *n));
                }
            }
        }
    }
    Ok(())
}

/// `ast` with every eligible load's offset a variable named `prefix` and its number (`bound`:
/// bound to the offset it replaces; else unbound, the grouping key), or `None` when no load is
/// eligible.
fn parametrize(ast: &Ast, inputs: &[LazyBuffer], bound: bool, prefix: &str) -> Result<Option<Ast>> {
    let mut n = 0usize;
    let mut err = None;
    let out = ast.map_ops(&mut |op, _| match op {
        AstOp::Load { buf, st } if *buf >= 1 => {
            let Some((lo, hi, off)) = inputs.get(buf - 1).and_then(|b| offset_range(st, b)) else {
                return op.clone();
            };
            let name = format!("{prefix}{n}");
            n += 1;
            let var = if bound {
                match bound_internal(&name, lo, hi, off) {
                    Ok(v) => v,
                    Err(e) => {
                        err.get_or_insert(e);
                        return op.clone();
                    }
                }
            } else {
                Node::var(&name, lo, hi)
            };
            AstOp::Load {
                buf: *buf,
                st: st.with_buffer_offset(var),
            }
        }
        other => other.clone(),
    });
    match err {
        Some(e) => Err(e),
        None => Ok((n > 0).then_some(out)),
    }
}

/// `(lo, hi, offset)`: the offsets of `st`'s buffer-facing view that keep every index of the
/// tracker inside `buf` (whatever the validity), when there are at least two and the current
/// constant offset is one of them.
fn offset_range(st: &ShapeTracker, buf: &LazyBuffer) -> Option<(i64, i64, i64)> {
    if !st.vars().is_empty() {
        return None;
    }
    let off = st.views()[0].offset().as_const()?;
    let len = match buf.realized() {
        Some(b) => b.len(),
        None if buf.shape().iter().all(Node::is_const) => buf
            .shape()
            .iter()
            .map(|d| d.vmax().max(0) as usize)
            .product(),
        None => return None,
    };
    let len = i64::try_from(len).ok()?;
    let at_zero = st.with_buffer_offset(Node::cst(0));
    let (idx, valid) = at_zero.expr_idxs(&at_zero.idx_vars());
    if valid.vmax() == 0 || len == 0 {
        return None;
    }
    let lo = idx.vmin().checked_neg()?.max(0);
    let hi = len.checked_sub(1)?.checked_sub(idx.vmax())?;
    (lo < hi && (lo..=hi).contains(&off)).then_some((lo, hi, off))
}
