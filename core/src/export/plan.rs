//! The static memory plan of a capture: which buffers are inputs, outputs, weights and
//! intermediates, which steps run at export time (they depend on weights only), which kernels
//! update a dying input in place, and where every arena buffer lives.
//!
//! Invariants: a buffer is live from the step that first touches it to the step that last does
//! (inputs in the arena from the start, outputs in the arena to the end); two buffers live at
//! the same step never share bytes unless one is the in-place successor of the other, which is
//! only allowed when the kernel reads the dying input solely at the index it stores to, before
//! storing there, with no accumulator, or reads all of it before its first store (no loop around
//! both). Buffers of different C storage types live in different
//! arenas (one typed array each), so the C never reads memory through a type it was not
//! declared with.

use alloc::format;
use alloc::vec;
use alloc::vec::Vec;

use super::place::{place, Block};
use crate::codegen::uops::{LinearKernel, UOp, UOpKind};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::jit::Capture;

/// What a buffer is to the exported model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The `n`-th input.
    Input(usize),
    /// The `n`-th output.
    Output(usize),
    /// A constant: read, never written at run time (including results of steps folded at
    /// export time).
    Weight,
    /// Written and read by the run, dead afterwards.
    Intermediate,
    /// Touched by no step that runs (e.g. a weight only a folded step read).
    Unused,
}

/// Where a buffer's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Home {
    /// The caller passes it to `model_run`.
    Caller,
    /// A constant array of its own (flash, or RAM filled by the weight loader).
    Weights,
    /// Bytes `offset..offset+bytes` of arena number `arena`.
    Arena {
        /// Index into [`MemoryPlan::arenas`].
        arena: usize,
        /// Byte offset (a multiple of 16).
        offset: usize,
    },
    /// Nowhere (unused).
    None,
}

/// One buffer slot of the capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufferPlan {
    /// The capture's slot number.
    pub slot: usize,
    /// Its role.
    pub role: Role,
    /// Element dtype.
    pub dtype: DType,
    /// Number of elements.
    pub elements: usize,
    /// Size in bytes.
    pub bytes: usize,
    /// Where it lives.
    pub home: Home,
}

/// One typed arena.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArenaPlan {
    /// The C storage type of its elements (`float`, `int32_t`, ...).
    pub ctype: &'static str,
    /// Its size in bytes.
    pub bytes: usize,
    /// The largest total of simultaneously live bytes among its buffers.
    pub lower_bound_bytes: usize,
}

/// A step that runs in `model_run`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepPlan {
    /// Index into the capture's steps.
    pub step: usize,
    /// The input slot whose memory the output reuses (an in-place update), if any.
    pub in_place: Option<usize>,
}

/// The whole plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryPlan {
    /// One entry per capture slot, in slot order.
    pub buffers: Vec<BufferPlan>,
    /// The arenas, one per C storage type used by arena buffers.
    pub arenas: Vec<ArenaPlan>,
    /// The steps that run, in order.
    pub steps: Vec<StepPlan>,
    /// Capture steps evaluated at export time (their outputs became weights).
    pub folded: Vec<usize>,
    /// Total arena bytes.
    pub arena_bytes: usize,
    /// Sum over arenas of their lower bounds.
    pub lower_bound_bytes: usize,
}

fn unsupported(what: alloc::string::String) -> Error {
    Error::Unsupported(format!("export: {what}"))
}

/// Plans a capture's memory. With `io_in_arena`, inputs and outputs live in the arena too;
/// otherwise the caller passes them.
pub fn plan(capture: &Capture, io_in_arena: bool) -> Result<MemoryPlan> {
    let (constant, computes) = crate::jit::constants(
        capture.steps(),
        capture.slots().len(),
        &capture.input_slots(),
        &capture.output_slots(),
        true,
    );
    // Steps computing constants from constants only run at export time; the capture already
    // holds their results.
    let folded: Vec<usize> = (0..computes.len()).filter(|&i| computes[i]).collect();
    let steps: Vec<usize> = (0..capture.steps().len())
        .filter(|s| !folded.contains(s))
        .collect();
    let roles = roles(capture, &constant, &steps)?;
    check_steps(capture, &roles, &steps)?;
    let spans = spans(capture, &roles, &steps);
    let mut buffers: Vec<BufferPlan> = capture
        .slots()
        .iter()
        .enumerate()
        .map(|(slot, b)| BufferPlan {
            slot,
            role: roles[slot],
            dtype: b.dtype(),
            elements: b.len(),
            bytes: b.nbytes(),
            home: home_of(roles[slot], io_in_arena),
        })
        .collect();
    let (steps, merged) = in_place(capture, &buffers, &spans, &steps);
    let arenas = assign_arenas(&mut buffers, &spans, &merged);
    Ok(MemoryPlan {
        arena_bytes: arenas.iter().map(|a| a.bytes).sum(),
        lower_bound_bytes: arenas.iter().map(|a| a.lower_bound_bytes).sum(),
        buffers,
        arenas,
        steps,
        folded,
    })
}

fn home_of(role: Role, io_in_arena: bool) -> Home {
    let arena = Home::Arena {
        arena: usize::MAX,
        offset: 0,
    };
    match role {
        Role::Input(_) | Role::Output(_) if !io_in_arena => Home::Caller,
        Role::Input(_) | Role::Output(_) | Role::Intermediate => arena,
        Role::Weight => Home::Weights,
        Role::Unused => Home::None,
    }
}

fn roles(capture: &Capture, constant: &[bool], steps: &[usize]) -> Result<Vec<Role>> {
    let (ins, outs) = (capture.input_slots(), capture.output_slots());
    let touched = |s: usize| steps.iter().any(|&i| capture.steps()[i].slots.contains(&s));
    let mut roles = Vec::with_capacity(constant.len());
    for (s, &c) in constant.iter().enumerate() {
        roles.push(if let Some(i) = ins.iter().position(|&x| x == s) {
            Role::Input(i)
        } else if let Some(o) = outs.iter().position(|&x| x == s) {
            Role::Output(o)
        } else if !touched(s) {
            Role::Unused
        } else if c {
            Role::Weight
        } else {
            Role::Intermediate
        });
    }
    for (o, &s) in outs.iter().enumerate() {
        if roles[s] != Role::Output(o) || constant[s] {
            return Err(unsupported(format!(
                "output {o} is not computed by the captured kernels (it is an input, a weight \
                 or another output); return a computed tensor (e.g. `x * 1`)"
            )));
        }
    }
    Ok(roles)
}

/// Rejects stateful captures and kernels whose parameters do not match their buffers.
fn check_steps(capture: &Capture, roles: &[Role], steps: &[usize]) -> Result<()> {
    let mut written = vec![false; roles.len()];
    for &i in steps {
        let st = &capture.steps()[i];
        for &s in &st.slots[1..] {
            let must_write = matches!(roles[s], Role::Intermediate | Role::Output(_));
            if must_write && !written[s] {
                return Err(unsupported(format!(
                    "step {i} reads slot {s} before any step writes it (a stateful capture, \
                     e.g. an in-place update); export needs a pure function of its inputs"
                )));
            }
        }
        if let Role::Input(n) = roles[st.slots[0]] {
            return Err(unsupported(format!("step {i} writes input {n}")));
        }
        written[st.slots[0]] = true;
        if let Some(k) = &st.kernel {
            check_params(capture, k, &st.slots, i)?;
        }
    }
    Ok(())
}

fn check_params(capture: &Capture, k: &LinearKernel, slots: &[usize], i: usize) -> Result<()> {
    if k.bufs.len() != slots.len() {
        return Err(unsupported(format!(
            "kernel {} (step {i}) has {} buffer parameters but ran on {} buffers",
            k.name,
            k.bufs.len(),
            slots.len()
        )));
    }
    for (p, (b, &s)) in k.bufs.iter().zip(slots).enumerate() {
        let buf = &capture.slots()[s];
        if b.dtype.c_storage() != buf.dtype().c_storage() || b.size > buf.len() {
            return Err(unsupported(format!(
                "kernel {} (step {i}) parameter {p} is {} x {} but slot {s} holds {} x {}",
                k.name,
                b.size,
                b.dtype,
                buf.len(),
                buf.dtype()
            )));
        }
    }
    Ok(())
}

/// Live span `(first, last)` of every slot over the running steps' positions (`None` when no
/// running step touches it). Inputs start at 0; outputs end after the last step.
fn spans(capture: &Capture, roles: &[Role], steps: &[usize]) -> Vec<Option<(usize, usize)>> {
    let mut spans: Vec<Option<(usize, usize)>> = vec![None; roles.len()];
    for (p, &i) in steps.iter().enumerate() {
        for &s in &capture.steps()[i].slots {
            let span = spans[s].get_or_insert((p, p));
            span.1 = p;
        }
    }
    for (s, r) in roles.iter().enumerate() {
        match r {
            Role::Input(_) => spans[s] = Some((0, spans[s].map_or(0, |x| x.1))),
            Role::Output(_) => spans[s] = spans[s].map(|x| (x.0, steps.len())),
            _ => {}
        }
    }
    spans
}

/// Finds in-place updates; returns the step plans and, per slot, the slot whose memory it uses.
fn in_place(
    capture: &Capture,
    buffers: &[BufferPlan],
    spans: &[Option<(usize, usize)>],
    steps: &[usize],
) -> (Vec<StepPlan>, Vec<usize>) {
    let mut root: Vec<usize> = (0..buffers.len()).collect();
    let mut plans = Vec::with_capacity(steps.len());
    for (p, &i) in steps.iter().enumerate() {
        let st = &capture.steps()[i];
        let out = st.slots[0];
        let reuse = st
            .kernel
            .as_ref()
            .and_then(|k| (1..st.slots.len()).find(|&j| can_reuse(buffers, spans, st, k, p, j)));
        let in_place = reuse.map(|j| st.slots[j]);
        if let Some(inp) = in_place {
            root[out] = root[inp];
        }
        plans.push(StepPlan { step: i, in_place });
    }
    (plans, root)
}

fn can_reuse(
    buffers: &[BufferPlan],
    spans: &[Option<(usize, usize)>],
    st: &crate::jit::CapturedStep,
    k: &LinearKernel,
    p: usize,
    j: usize,
) -> bool {
    let (out, inp) = (&buffers[st.slots[0]], &buffers[st.slots[j]]);
    let in_arena = |b: &BufferPlan| matches!(b.home, Home::Arena { .. });
    in_arena(out)
        && in_arena(inp)
        && inp.role == Role::Intermediate
        && spans[out.slot].is_some_and(|s| s.0 == p)
        && spans[inp.slot].is_some_and(|s| s.1 == p)
        && st.slots.iter().filter(|&&s| s == inp.slot).count() == 1
        && out.dtype.c_storage() == inp.dtype.c_storage()
        && ((out.bytes == inp.bytes && elementwise_in_place(k, j)) || reads_before_writes(k, j))
}

/// The UOp positions of output 0's and parameter `j`'s buffer definitions in `k`.
fn out_and_param(k: &LinearKernel, j: usize) -> Option<(usize, usize)> {
    let global = |want: usize| {
        k.uops
            .iter()
            .position(|x| matches!(x.kind, UOpKind::DefineGlobal { idx, .. } if idx == want))
    };
    Some((global(0)?, global(j)?))
}

/// Does kernel `k` read parameter `j` only at the very index it stores output 0 to, before that
/// store, with no accumulator and no other output? Then output 0 may share `j`'s memory.
pub fn elementwise_in_place(k: &LinearKernel, j: usize) -> bool {
    let u = &k.uops;
    let has_acc = u.iter().any(|x| x.kind.is_acc());
    if has_acc || k.bufs.iter().skip(1).any(|b| b.writable) {
        return false;
    }
    let Some((g_out, g_in)) = out_and_param(k, j) else {
        return false;
    };
    // A vector load or store covers `lanes` elements from its index: a load matches only a
    // store of as many lanes at the same index.
    let width = |x: &UOp| match x.kind {
        UOpKind::VecLoad { lanes, stride } => (usize::from(lanes) - 1) * usize::from(stride) + 1,
        UOpKind::VecStore { lanes } => usize::from(lanes),
        _ => 1,
    };
    let is_store = |x: &UOp| matches!(x.kind, UOpKind::Store | UOpKind::VecStore { .. });
    let stores: Vec<(usize, u32, usize)> = u
        .iter()
        .enumerate()
        .filter(|(_, x)| is_store(x))
        .map(|(p, x)| (p, x.src[1], width(x)))
        .collect();
    let plain_stores = u
        .iter()
        .filter(|x| is_store(x))
        .all(|x| x.src[0] as usize == g_out && x.src.len() == 3);
    let loads_ok = u.iter().enumerate().all(|(p, x)| {
        let load = matches!(x.kind, UOpKind::Load | UOpKind::VecLoad { .. });
        if !load || x.src[0] as usize != g_in {
            return true;
        }
        let same: Vec<usize> = stores
            .iter()
            .filter(|s| s.1 == x.src[1] && s.2 == width(x))
            .map(|s| s.0)
            .collect();
        !same.is_empty() && same.iter().all(|&s| p < s)
    });
    plain_stores && loads_ok
}

/// Does kernel `k` finish every read of parameter `j` before its first store, with output 0
/// its only output? Then output 0 may take `j`'s memory even when it reads every element of `j`
/// for every output (a matrix-vector product whose outputs all stay in registers until the
/// reduce is done): every load of `j` comes before the first store in the UOps, and no loop
/// open at that store was open at such a load (a loop around both would read `j` again after
/// a store).
pub fn reads_before_writes(k: &LinearKernel, j: usize) -> bool {
    let u = &k.uops;
    if k.bufs.iter().skip(1).any(|b| b.writable) {
        return false;
    }
    let Some((g_out, g_in)) = out_and_param(k, j) else {
        return false;
    };
    let is_store = |x: &UOp| matches!(x.kind, UOpKind::Store | UOpKind::VecStore { .. });
    if u.iter().any(|x| is_store(x) && x.src[0] as usize != g_out) {
        return false;
    }
    // Walk in program order with the stack of open loops; at the first store, no load of `j`
    // may come later and none of the loops open there may hold a load of `j`.
    let mut open: Vec<usize> = Vec::new();
    let mut holds_load: Vec<bool> = Vec::new();
    let mut loaded = false;
    for (p, x) in u.iter().enumerate() {
        match x.kind {
            UOpKind::Loop => {
                open.push(p);
                holds_load.push(false);
            }
            UOpKind::EndLoop => {
                open.pop();
                holds_load.pop();
            }
            UOpKind::Load | UOpKind::VecLoad { .. } if x.src[0] as usize == g_in => {
                holds_load.iter_mut().for_each(|h| *h = true);
                loaded = true;
            }
            _ if is_store(x) => {
                // Everything after this store must not read `j`.
                let later = u[p..].iter().any(|y| {
                    matches!(y.kind, UOpKind::Load | UOpKind::VecLoad { .. })
                        && y.src[0] as usize == g_in
                });
                return loaded && !later && !holds_load.iter().any(|&h| h);
            }
            _ => {}
        }
    }
    false
}

/// Groups arena buffers (by their in-place root) into typed arenas and places them.
fn assign_arenas(
    buffers: &mut [BufferPlan],
    spans: &[Option<(usize, usize)>],
    root: &[usize],
) -> Vec<ArenaPlan> {
    let mut ctypes: Vec<&'static str> = Vec::new();
    let in_arena: Vec<usize> = (0..buffers.len())
        .filter(|&s| matches!(buffers[s].home, Home::Arena { .. }) && spans[s].is_some())
        .collect();
    for &s in &in_arena {
        let c = buffers[s].dtype.c_storage();
        if !ctypes.contains(&c) {
            ctypes.push(c);
        }
    }
    let mut arenas = Vec::new();
    for (a, &ctype) in ctypes.iter().enumerate() {
        let members: Vec<usize> = in_arena
            .iter()
            .copied()
            .filter(|&s| buffers[s].dtype.c_storage() == ctype)
            .collect();
        arenas.push(place_arena(buffers, spans, root, &members, a, ctype));
    }
    arenas
}

fn place_arena(
    buffers: &mut [BufferPlan],
    spans: &[Option<(usize, usize)>],
    root: &[usize],
    members: &[usize],
    arena: usize,
    ctype: &'static str,
) -> ArenaPlan {
    let roots: Vec<usize> = {
        let mut r: Vec<usize> = members.iter().map(|&s| root[s]).collect();
        r.sort_unstable();
        r.dedup();
        r
    };
    let blocks: Vec<Block> = roots
        .iter()
        .map(|&r| {
            let group = members.iter().filter(|&&s| root[s] == r);
            let (mut start, mut end, mut bytes) = (usize::MAX, 0, 1);
            for &s in group {
                let (a, b) = spans[s].unwrap_or((0, 0));
                (start, end, bytes) = (start.min(a), end.max(b), bytes.max(buffers[s].bytes));
            }
            Block { bytes, start, end }
        })
        .collect();
    let placed = place(&blocks);
    for &s in members {
        let b = roots.iter().position(|&r| r == root[s]).unwrap_or(0);
        buffers[s].home = Home::Arena {
            arena,
            offset: placed.offsets[b],
        };
    }
    ArenaPlan {
        ctype,
        bytes: placed.arena_bytes,
        lower_bound_bytes: placed.lower_bound_bytes,
    }
}
