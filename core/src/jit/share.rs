//! Which buffer each slot of a replay runs in: intermediates whose lives do not overlap share
//! one buffer, as an arena planner would place them, so a replay's working set is the largest
//! set of values alive at once instead of every value the model ever computes (a mobilenet
//! keeps about 30 MB of intermediates at batch 1, far beyond a desktop's L2 and most of its
//! L3; each kernel then wrote to memory no recent kernel had touched).
//!
//! Invariants: a slot shares another's buffer only when both are intermediates of the replay —
//! allocated by the step that first touches them (which does not read them: no value survives
//! from one replay to the next), written whole by a kernel without variables (a concrete
//! shape: every element is stored, so nothing relies on a zeroed buffer; an image-major slice's
//! kernel may read through internal variables its store does not mention), neither an input, an
//! output nor a value computed from weights alone (export and frozen steps read those from
//! their own slots), not held by anything but the capture, on the same device, and no larger
//! than the buffer they join; and the shared buffer's previous occupant was last touched by an
//! earlier call than the new one's first. The capture's slot table is unchanged (export plans
//! its own memory from it); only the handles a replay passes move.

use alloc::sync::Arc;
use alloc::vec;
use alloc::vec::Vec;

use super::CapturedStep;
use crate::ast::AstOp;
use crate::device::Buffer;
use crate::symbolic::is_internal_var;

/// Per slot, the slot whose buffer a replay uses for it (itself unless shared). `frozen` marks
/// the steps a replay skips; `inputs` and `outputs` are the capture's input and output slots,
/// `fresh` the slots some step allocated.
pub(super) fn homes(
    steps: &[CapturedStep],
    frozen: &[bool],
    slots: &[Arc<Buffer>],
    inputs: &[usize],
    outputs: &[usize],
    fresh: &[usize],
) -> Vec<usize> {
    let n = slots.len();
    let calls: Vec<usize> = (0..steps.len())
        .filter(|&i| !frozen.get(i).copied().unwrap_or(false))
        .collect();
    let mut home: Vec<usize> = (0..n).collect();
    let span = spans(steps, &calls, n);
    let (derived, _) = super::constants(steps, n, inputs, outputs, true);
    let mut shareable = vec![false; n];
    for &s in fresh {
        shareable[s] = !inputs.contains(&s)
            && !outputs.contains(&s)
            && !derived[s]
            && span[s].is_some_and(|(first, _)| written_whole_at(&steps[calls[first]], s));
    }
    let mut order: Vec<usize> = (0..n).filter(|&s| shareable[s]).collect();
    order.sort_by_key(|&s| span[s].map(|x| x.0));
    // Buffers that may host others: (owning slot, last call that touches any occupant).
    let mut pool: Vec<(usize, usize)> = Vec::new();
    for s in order {
        let Some((first, last)) = span[s] else {
            continue;
        };
        let fits = |&&(h, free): &&(usize, usize)| {
            free < first
                && slots[h].nbytes() >= slots[s].nbytes()
                && Arc::ptr_eq(slots[h].device(), slots[s].device())
        };
        let best = pool
            .iter()
            .filter(fits)
            .min_by_key(|(h, _)| slots[*h].nbytes())
            .map(|&(h, _)| h);
        match best {
            Some(h) => {
                home[s] = h;
                if let Some(entry) = pool.iter_mut().find(|(o, _)| *o == h) {
                    entry.1 = last;
                }
            }
            None => pool.push((s, last)),
        }
    }
    if crate::context::debug() >= 2 {
        let bytes = |pred: &dyn Fn(usize) -> bool| -> usize {
            (0..n).filter(|&s| pred(s)).map(|s| slots[s].nbytes()).sum()
        };
        let shared = bytes(&|s| shareable[s]);
        let used = bytes(&|s| shareable[s] && home[s] == s);
        crate::context::log(
            2,
            &alloc::format!(
                "replay memory: {} intermediates ({} KiB) in {} buffers ({} KiB)",
                (0..n).filter(|&s| shareable[s]).count(),
                shared / 1024,
                (0..n).filter(|&s| shareable[s] && home[s] == s).count(),
                used / 1024
            ),
        );
    }
    home
}

/// The first and last replayed call that touches each slot (`None`: no call does).
fn spans(steps: &[CapturedStep], calls: &[usize], n: usize) -> Vec<Option<(usize, usize)>> {
    let mut span: Vec<Option<(usize, usize)>> = vec![None; n];
    for (c, &i) in calls.iter().enumerate() {
        for &s in &steps[i].slots {
            span[s].get_or_insert((c, c)).1 = c;
        }
    }
    span
}

/// Does `step` store every element of slot `s` without reading it first: `s` is its output, it
/// is not among its inputs, and its kernel binds no variables (a symbolic shape may store less
/// than the buffer holds) — or only internal ones its store does not mention (an image-major
/// slice's kernel reading its slice of a value from outside its segment, `slice.rs`)? Copies
/// are left alone.
fn written_whole_at(step: &CapturedStep, s: usize) -> bool {
    let store_fixed = step
        .ast
        .as_ref()
        .is_some_and(|a| matches!(a.op(), AstOp::Store { st, .. } if st.vars().is_empty()));
    let concrete = step.kernel.as_ref().is_some_and(|k| {
        k.vars.is_empty() || (store_fixed && k.vars.iter().all(|(n, _, _)| is_internal_var(n)))
    });
    step.program.is_some() && concrete && step.slots[0] == s && !step.slots[1..].contains(&s)
}
