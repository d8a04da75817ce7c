//! Captures and the JIT. A [`Capture`] records the kernels a computation ran, the buffer slots
//! they ran on, and which slots are the inputs and outputs (by position); replaying it runs the
//! same compiled programs on new input buffers with no scheduling, lowering or compiling. The
//! [`Jit`] wraps a function: the first call runs it and captures, later calls replay. Export
//! lowers a capture to C the same way.
//!
//! Where a batch's intermediates outgrow the cores' L2 and consecutive steps treat each image
//! apart, [`Jit`] and [`SignatureCache`] replay those steps one slice of images at a time
//! ([`Capture::image_major`], the `slice` module; the same bits).
//!
//! A [`SignatureCache`] keeps one capture per input signature (shapes, dtypes, device) for a
//! function that may meet several, falls back to running the function when it reads its inputs'
//! values on the host ([`trace`]), and hands out outputs no later call overwrites.
//!
//! Invariants: every buffer a capture touches is held by its slot table, so replays reuse the
//! intermediate and output memory of the first run — intermediates whose lives do not overlap
//! in one buffer ([`share`]), so a tensor the function computed and kept without returning it
//! holds garbage after a replay; a replay's outputs alias the capture's output slots, so the
//! next replay overwrites them (copy them out, or `contiguous()` them, to keep them). Weights
//! are the slots no step writes; steps over weights alone run again only after a weight was
//! written ([`Capture::freeze_constants`]). A tensor updated in place inside the
//! function must own its buffer before the first call (`Tensor::try_own`, as `nn` parameters
//! do): otherwise its first `assign` moves it to a private copy after the capture's reads were
//! built, and replays would keep reading the old buffer.

use alloc::sync::Arc;
use alloc::vec::Vec;

use hashbrown::HashMap;
use spin::Mutex;

use crate::codegen::uops::LinearKernel;
use crate::device::{BufId, Buffer, Program};
use crate::dtype::DType;
use crate::error::{Error, Result};
use crate::lazy::{fmt_shape, LazyBuffer};
use crate::realize::realize_recorded;
use crate::shape::Sint;
use crate::symbolic::{Specialization, VarVals, Watch};
use crate::tensor::Tensor;

mod cache;
mod share;
mod slice;
pub(crate) mod trace;

pub use cache::{CacheStats, SignatureCache, DEFAULT_SIGNATURES};

/// One recorded step: a kernel (or a copy when `program` is `None`) over buffer slots.
#[derive(Clone)]
pub struct CapturedStep {
    /// The kernel's AST (`None` for a device copy), so export can lower it for another target.
    pub ast: Option<crate::ast::Ast>,
    /// The lowered kernel (`None` for a device copy).
    pub kernel: Option<LinearKernel>,
    /// The program that ran it.
    pub program: Option<Arc<dyn Program>>,
    /// Slot of each buffer parameter, output first.
    pub slots: Vec<usize>,
    /// The kernel before the scheduler's layout transforms and how many input slots it reads
    /// (`None`: not transformed); see [`Capture::relowered`].
    pub plain: Option<(crate::ast::Ast, usize)>,
    /// Is the step a layout copy (made by the scheduler for the target that recorded)?
    pub layout_copy: bool,
    /// The variable values the step ran with when recorded; a replay overrides those its
    /// inputs' shapes bind anew.
    pub var_vals: crate::symbolic::VarVals,
}

/// A recorded computation: steps over slots, with inputs and outputs by position.
pub struct Capture {
    steps: Vec<CapturedStep>,
    slots: Vec<Arc<Buffer>>,
    inputs: Vec<(usize, Vec<Sint>, DType)>,
    outputs: Vec<(usize, Vec<Sint>)>,
    /// Slots some step allocates (not inputs, weights or buffers written in place): a detached
    /// replay gives these new buffers, so earlier results keep their values.
    fresh: Vec<usize>,
    /// The bound values the function read as numbers while it built the graph: the capture
    /// is valid only where the inputs bind those values (see [`crate::symbolic::Watch`]).
    spec: Specialization,
    /// Steps a replay skips, by index (empty: none): their results depend on weights alone and
    /// are still in their slots (see [`Capture::freeze_constants`]).
    frozen: Vec<bool>,
    /// Where each step's variable values come from (`None`: the step has no variables), by
    /// position in [`Capture::input_vars`]: a replay then looks up no names and allocates
    /// nothing per kernel (a decoder's ~15 kernels per token each bind the position).
    var_plan: Vec<Option<Vec<VarSrc>>>,
    /// The names the inputs' shapes bind, sorted (as a replay's [`VarVals`] lists them).
    input_vars: Vec<Arc<str>>,
    /// What a replay runs, flattened (see [`Dispatch`]); rebuilt when `frozen` changes.
    dispatch: Dispatch,
    /// The frozen steps and when a replay runs them again (`None`: nothing is frozen).
    guard: Option<Guard>,
    /// Has [`Capture::settle`] looked at it (an image-major form is made once, at the first
    /// replay)?
    settled: core::sync::atomic::AtomicBool,
}

/// The steps a replay runs (frozen ones left out) with their buffer slots concatenated: a
/// replay turns every slot into its handle in one pass, and each kernel call then takes its
/// arguments as a slice, touching nothing else of its step.
struct Dispatch {
    calls: Vec<Call>,
    /// Every call's buffer slots, in call order.
    arg_slots: Vec<usize>,
    /// The positions in `arg_slots` of slot `s`: `at[at_start[s]..at_start[s + 1]]`.
    at: Vec<usize>,
    at_start: Vec<usize>,
    /// The handles of the capture's own slots in `arg_slots` order, resolved at the first
    /// replay (`Some(empty)`: the slots live on several devices). A capture's slots hold their
    /// buffers for its whole life, so their handles stay valid.
    own: Mutex<Option<Vec<u64>>>,
    /// Per slot, the slot whose buffer a replay runs it in ([`share::homes`]).
    homes: Vec<usize>,
}

/// One step of a [`Dispatch`].
struct Call {
    /// The step's index.
    step: usize,
    /// Its program (`None`: a copy from its second slot to its first).
    program: Option<Arc<dyn Program>>,
    /// Its slots' range in [`Dispatch::arg_slots`].
    args: core::ops::Range<usize>,
    /// Does its kernel take variables?
    has_vars: bool,
    /// The slots it writes (its output, and any other parameter its kernel stores into), whose
    /// buffers' write counts it bumps ([`Buffer::note_written`]).
    writes: Vec<usize>,
}

impl Dispatch {
    fn new(steps: &[CapturedStep], frozen: &[bool], slots: &Slotting<'_>) -> Dispatch {
        let nslots = slots.bufs.len();
        let mut calls = Vec::with_capacity(steps.len());
        let mut arg_slots = Vec::new();
        for (i, st) in steps.iter().enumerate() {
            if frozen.get(i).copied().unwrap_or(false) {
                continue;
            }
            let start = arg_slots.len();
            arg_slots.extend_from_slice(&st.slots);
            calls.push(Call {
                step: i,
                program: st.program.clone(),
                args: start..arg_slots.len(),
                has_vars: st.kernel.as_ref().is_some_and(|k| !k.vars.is_empty()),
                writes: written_slots(st),
            });
        }
        let mut at_start = alloc::vec![0usize; nslots + 1];
        for &s in &arg_slots {
            at_start[s + 1] += 1;
        }
        for s in 0..nslots {
            at_start[s + 1] += at_start[s];
        }
        let mut next = at_start.clone();
        let mut at = alloc::vec![0usize; arg_slots.len()];
        for (pos, &s) in arg_slots.iter().enumerate() {
            at[next[s]] = pos;
            next[s] += 1;
        }
        Dispatch {
            calls,
            arg_slots,
            at,
            at_start,
            own: Mutex::new(None),
            homes: share::homes(
                steps,
                frozen,
                slots.bufs,
                &slots.inputs,
                &slots.outputs,
                slots.fresh,
            ),
        }
    }
}

/// The slots a step writes: its output, and the other parameters its kernel marks writable.
fn written_slots(st: &CapturedStep) -> Vec<usize> {
    let writable = |i: usize| match &st.kernel {
        Some(k) => k.bufs.get(i).is_some_and(|b| b.writable),
        None => i == 0,
    };
    (0..st.slots.len())
        .filter(|&i| i == 0 || writable(i))
        .map(|i| st.slots[i])
        .collect()
}

/// The frozen steps of a capture ([`Capture::freeze_constants`]) and what decides whether a
/// replay runs them again: the weights they read, with the write counts those had
/// ([`Buffer::generation`]) when the steps last ran.
struct Guard {
    /// The frozen steps, as a replay runs them.
    refresh: Dispatch,
    /// The slots no step writes (weights) that a frozen step reads.
    weights: Vec<usize>,
    /// Their write counts when the frozen steps last ran.
    seen: Mutex<Vec<usize>>,
    /// How many replays ran the frozen steps again.
    refreshes: core::sync::atomic::AtomicUsize,
}

/// A capture's slot table and the roles [`share::homes`] needs.
struct Slotting<'a> {
    bufs: &'a [Arc<Buffer>],
    inputs: Vec<usize>,
    outputs: Vec<usize>,
    fresh: &'a [usize],
}

impl<'a> Slotting<'a> {
    fn new(
        bufs: &'a [Arc<Buffer>],
        inputs: &[(usize, Vec<Sint>, DType)],
        outputs: &[(usize, Vec<Sint>)],
        fresh: &'a [usize],
    ) -> Slotting<'a> {
        Slotting {
            bufs,
            inputs: inputs.iter().map(|x| x.0).collect(),
            outputs: outputs.iter().map(|x| x.0).collect(),
            fresh,
        }
    }
}

/// Where a kernel variable's value comes from in a replay.
#[derive(Clone, Copy)]
enum VarSrc {
    /// The replay's `at`-th input value (by sorted name), checked against the kernel's bounds.
    Input { at: usize, lo: i64, hi: i64 },
    /// No input binds it: the value the step was recorded with (checked when planned).
    Recorded(i64),
}

/// [`Capture::var_plan`] for `steps` whose inputs bind the variables `input_vars`. A step whose
/// recorded values do not cover a variable no input binds gets `None`, and a replay reports
/// the error [`step_vars`] gives.
fn var_plan(steps: &[CapturedStep], input_vars: &[Arc<str>]) -> Vec<Option<Vec<VarSrc>>> {
    let plan = |k: &LinearKernel, recorded: &VarVals| {
        k.vars
            .iter()
            .map(|(name, lo, hi)| {
                if let Some(at) = input_vars.iter().position(|n| n == name) {
                    return Some(VarSrc::Input {
                        at,
                        lo: *lo,
                        hi: *hi,
                    });
                }
                let v = recorded.iter().find(|(n, _)| n == name)?.1;
                (*lo..=*hi).contains(&v).then_some(VarSrc::Recorded(v))
            })
            .collect::<Option<Vec<_>>>()
    };
    steps
        .iter()
        .map(|st| match &st.kernel {
            Some(k) if !k.vars.is_empty() => plan(k, &st.var_vals),
            _ => None,
        })
        .collect()
}

/// The names bound by the shapes of a capture's inputs, sorted.
fn input_vars(inputs: &[(usize, Vec<Sint>, DType)]) -> Vec<Arc<str>> {
    let mut vals = VarVals::new();
    for d in inputs.iter().flat_map(|(_, shape, _)| shape) {
        // A conflict was an error when the inputs were recorded; the names are what matter.
        let _ = d.merge_bound_into(&mut vals);
    }
    vals.into_iter().map(|(n, _)| n).collect()
}

/// The slot table of a capture being recorded: buffers by position, and each buffer's slot by
/// (buffer id, device address), so finding a slot costs the same however many there are.
#[derive(Default)]
struct Slots {
    bufs: Vec<Arc<Buffer>>,
    index: HashMap<(BufId, usize), usize>,
}

impl Slots {
    fn slot_of(&mut self, b: &Arc<Buffer>) -> usize {
        let key = (b.id(), Arc::as_ptr(b.device()) as *const u8 as usize);
        *self.index.entry(key).or_insert_with(|| {
            self.bufs.push(b.clone());
            self.bufs.len() - 1
        })
    }
}

fn realized_node(t: &Tensor) -> Result<LazyBuffer> {
    let node = t.lazy().contiguous();
    // A realized base (the usual input) needs no schedule: replays pay per call for this.
    if node.realized().is_none() {
        crate::realize::realize(core::slice::from_ref(&node))?;
    }
    Ok(node)
}

impl Capture {
    /// Realizes `outputs` (computed from `inputs`) while recording every step that runs.
    /// Inputs are realized first, outside the record.
    pub fn record(inputs: &[&Tensor], outputs: &[&Tensor]) -> Result<(Capture, Vec<Tensor>)> {
        let mut slots = Slots::default();
        let mut ins = Vec::new();
        for t in inputs {
            let node = realized_node(t)?;
            let buf = node
                .realized()
                .ok_or_else(|| Error::internal("capture: input not realized"))?;
            ins.push((slots.slot_of(&buf), node.shape().to_vec(), node.dtype()));
        }
        let out_nodes: Vec<LazyBuffer> = outputs.iter().map(|t| t.lazy().contiguous()).collect();
        let rec = realize_recorded(&out_nodes)?;
        let mut fresh = Vec::new();
        let steps: Vec<CapturedStep> = rec
            .into_iter()
            .map(|e| CapturedStep {
                slots: {
                    let s: Vec<usize> = e.bufs.iter().map(|b| slots.slot_of(b)).collect();
                    if e.fresh {
                        fresh.push(s[0]);
                    }
                    s
                },
                ast: e.ast,
                kernel: e.kernel,
                program: e.program,
                plain: e.plain,
                layout_copy: e.layout_copy,
                var_vals: e.var_vals,
            })
            .collect();
        let mut outs = Vec::new();
        let mut results = Vec::new();
        for n in &out_nodes {
            let buf = n
                .realized()
                .ok_or_else(|| Error::internal("capture: output not realized"))?;
            outs.push((slots.slot_of(&buf), n.shape().to_vec()));
            results.push(Tensor::from_lazy(n.clone()));
        }
        let in_vars = input_vars(&ins);
        let dispatch = Dispatch::new(
            &steps,
            &[],
            &Slotting::new(&slots.bufs, &ins, &outs, &fresh),
        );
        Ok((
            Capture {
                inputs: ins,
                outputs: outs,
                var_plan: var_plan(&steps, &in_vars),
                input_vars: in_vars,
                dispatch,
                guard: None,
                settled: Default::default(),
                slots: slots.bufs,
                steps,
                fresh,
                spec: Specialization::default(),
                frozen: Vec::new(),
            },
            results,
        ))
    }

    /// Runs the recorded steps on new inputs (same shapes and dtypes, same device). The
    /// outputs alias the capture's output slots: the next replay overwrites them.
    pub fn replay(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (bufs, vals) = self.bind_inputs(inputs, None)?;
        self.run_steps(bufs, &vals)
    }

    /// [`Capture::replay`] with the values the inputs' shapes bind already computed (by
    /// [`shape_vals`], to choose the capture).
    fn replay_with(&self, inputs: &[&Tensor], vals: VarVals) -> Result<Vec<Tensor>> {
        let (bufs, vals) = self.bind_inputs(inputs, Some(vals))?;
        self.run_steps(bufs, &vals)
    }

    /// Like [`Capture::replay`], but every output a step computes lands in a newly allocated
    /// buffer, so the results stay valid whatever runs later (the intermediates are still the
    /// capture's own: two detached replays of one capture must not run at the same time).
    pub fn replay_detached(&self, inputs: &[&Tensor]) -> Result<Vec<Tensor>> {
        let (mut bufs, vals) = self.bind_inputs(inputs, None)?;
        for (slot, shape) in &self.outputs {
            let slot = *slot;
            if self.fresh.contains(&slot) && Arc::ptr_eq(&bufs[slot], &self.slots[slot]) {
                let old = &self.slots[slot];
                let (dev, dtype, len) = (old.device().clone(), old.dtype(), old.len());
                // As the realizer does: a symbolic shape may be written only up to its bound.
                let new = if shape.iter().all(|d| d.is_const()) {
                    Buffer::for_overwrite(dev, dtype, len)?
                } else {
                    Buffer::new(dev, dtype, len)?
                };
                bufs[slot] = Arc::new(new);
            }
        }
        self.run_steps(bufs, &vals)
    }

    /// The slot table with `inputs` in the input slots, after checking them against the
    /// capture's shapes (symbolic dimensions match whatever value they are bound to), dtypes
    /// and devices; and the values the inputs' shapes bind (`known`, when the caller computed
    /// them from the same inputs).
    fn bind_inputs(
        &self,
        inputs: &[&Tensor],
        known: Option<VarVals>,
    ) -> Result<(Vec<Arc<Buffer>>, VarVals)> {
        if inputs.len() != self.inputs.len() {
            return Err(Error::shape(
                "jit",
                alloc::format!(
                    "captured with {} inputs, called with {}",
                    self.inputs.len(),
                    inputs.len()
                ),
            ));
        }
        let mut bufs: Vec<Arc<Buffer>> = self.slots.clone();
        let computed = known.is_none();
        let mut vals = known.unwrap_or_default();
        for (i, (t, (slot, shape, dtype))) in inputs.iter().zip(&self.inputs).enumerate() {
            let node = realized_node(t)?;
            let same_shape = node.shape().len() == shape.len()
                && node.shape().iter().zip(shape).all(|(a, b)| a.eq_unbound(b));
            if !same_shape || node.dtype() != *dtype {
                return Err(Error::shape(
                    "jit",
                    alloc::format!(
                        "input {i} is {} {} but was captured as {} {dtype}",
                        fmt_shape(node.shape()),
                        node.dtype(),
                        fmt_shape(shape)
                    ),
                ));
            }
            let buf = node
                .realized()
                .ok_or_else(|| Error::internal("jit: input not realized"))?;
            if !Arc::ptr_eq(buf.device(), bufs[*slot].device()) {
                return Err(Error::Device(alloc::format!(
                    "jit: input {i} is on {} but was captured on {}",
                    buf.device().name(),
                    bufs[*slot].device().name()
                )));
            }
            bufs[*slot] = buf;
            if computed {
                node.shape()
                    .iter()
                    .try_for_each(|d| d.merge_bound_into(&mut vals))?;
            }
        }
        // A replay inside another capture's function reads that function's inputs outside it.
        trace::note_reads(self.inputs.iter().map(|(slot, _, _)| &*bufs[*slot]));
        Ok((bufs, vals))
    }

    /// Runs every step over the slot table `bufs` with the variable values `vals` (a step's
    /// recorded values for the variables `vals` does not name); the outputs are nodes over
    /// their slots, their shapes bound to `vals`.
    fn run_steps(&self, bufs: Vec<Arc<Buffer>>, vals: &VarVals) -> Result<Vec<Tensor>> {
        if let Some(g) = &self.guard {
            self.refresh(g, &bufs, vals)?;
        }
        self.run_calls(&self.dispatch, &bufs, vals)?;
        let outs = self.outputs.iter().map(|(slot, shape)| {
            let shape = shape
                .iter()
                .map(|d| d.rebind(vals))
                .collect::<Result<Vec<_>>>()?;
            Ok(Tensor::from_lazy(LazyBuffer::from_shared_buffer(
                bufs[*slot].clone(),
                &shape,
            )))
        });
        outs.collect()
    }

    /// Runs the frozen steps again when a weight they read was written since they last ran.
    fn refresh(&self, g: &Guard, bufs: &[Arc<Buffer>], vals: &VarVals) -> Result<()> {
        let mut seen = g.seen.lock();
        let same = g
            .weights
            .iter()
            .zip(seen.iter())
            .all(|(&s, &n)| bufs[s].generation() == n);
        if same {
            return Ok(());
        }
        self.run_calls(&g.refresh, bufs, vals)?;
        for (n, &s) in seen.iter_mut().zip(&g.weights) {
            *n = bufs[s].generation();
        }
        g.refreshes
            .fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Runs the calls of `d` over the slot table `bufs`.
    fn run_calls(&self, d: &Dispatch, bufs: &[Arc<Buffer>], vals: &VarVals) -> Result<()> {
        // Buffers as their handles, all arguments at once: a replay of many small kernels
        // should do little per kernel and allocate nothing.
        let args = self.replay_args(d, bufs)?;
        let mut ids: Vec<BufId> = Vec::new();
        let mut vars: Vec<i64> = Vec::new();
        // The plan holds when the inputs bind the names they bound at the recording (always,
        // unless an input's shape mentions a variable only in some calls).
        let planned = vals.len() == self.input_vars.len()
            && vals.iter().zip(&self.input_vars).all(|((n, _), m)| n == m);
        for call in &d.calls {
            let Some(p) = &call.program else {
                let (dst, src) = (
                    d.arg_slots[call.args.start],
                    d.arg_slots[call.args.start + 1],
                );
                // A shared buffer may be larger than the slot's value.
                let mut bytes = bufs[d.homes[src]].to_bytes()?;
                bytes.truncate(bufs[src].nbytes());
                bufs[d.homes[dst]].copy_in(&bytes)?;
                bufs[dst].note_written();
                continue;
            };
            vars.clear();
            if call.has_vars {
                let step = &self.steps[call.step];
                let plan = self.var_plan.get(call.step).and_then(Option::as_deref);
                match (plan, &step.kernel) {
                    (Some(plan), k) if planned => fill_vars(&mut vars, plan, vals, k)?,
                    (_, Some(k)) => vars = step_vars(k, &step.var_vals, vals)?,
                    (_, None) => {}
                }
            }
            if args.is_empty() && !call.args.is_empty() {
                ids.clear();
                let home = |s: usize| &bufs[d.homes[s]];
                ids.extend(d.arg_slots[call.args.clone()].iter().map(|&s| home(s).id()));
                p.run(&ids, &vars)?;
            } else {
                // SAFETY: `args` holds handles of `bufs` from the allocator of the one device
                // they all live on, which compiled every program of the capture (recording
                // compiles on the buffers' device, `recompiled` refuses another); `bufs` keeps
                // each buffer alive until this replay returns, sized as when recorded.
                unsafe { p.run_handles(&args[call.args.clone()], &vars)? };
            }
            call.writes.iter().for_each(|&s| bufs[s].note_written());
        }
        Ok(())
    }

    /// Each call's buffer handles for a replay over the slot table `bufs`, flattened as
    /// [`Dispatch::arg_slots`] (empty: the slots live on several devices, use ids): the
    /// capture's own handles, with the slots this replay put other buffers in (its inputs, a
    /// detached replay's outputs) resolved again.
    fn replay_args(&self, d: &Dispatch, bufs: &[Arc<Buffer>]) -> Result<Vec<u64>> {
        let mut args = {
            let mut own = d.own.lock();
            if own.is_none() {
                *own = Some(match slot_handles(&self.slots)? {
                    Some(h) => d.arg_slots.iter().map(|&s| h[d.homes[s]]).collect(),
                    None => Vec::new(),
                });
            }
            own.clone().unwrap_or_default()
        };
        if args.is_empty() {
            return Ok(args);
        }
        let changed: Vec<usize> = (0..bufs.len())
            .filter(|&s| !Arc::ptr_eq(&bufs[s], &self.slots[s]))
            .collect();
        if changed.is_empty() {
            return Ok(args);
        }
        let dev = self.slots[0].device();
        if changed.iter().any(|&s| !Arc::ptr_eq(bufs[s].device(), dev)) {
            return Ok(Vec::new());
        }
        let ids: Vec<BufId> = changed.iter().map(|&s| bufs[s].id()).collect();
        let mut handles = Vec::with_capacity(ids.len());
        dev.allocator().handles(&ids, &mut handles)?;
        for (&s, &h) in changed.iter().zip(&handles) {
            for &pos in &d.at[d.at_start[s]..d.at_start[s + 1]] {
                args[pos] = h;
            }
        }
        Ok(args)
    }

    /// The same capture with every kernel lowered again from its AST by `cfg` (`None`:
    /// unoptimized) and `fused` (multiply-accumulates with one rounding, see
    /// [`Device::fused_mulacc`](crate::device::Device::fused_mulacc)) — how export shapes
    /// kernels for a device rather than for the desktop that recorded them. Programs are kept
    /// (they compute the same values up to the rounding of fused multiply-adds). For a target
    /// without caches (`cfg` `None` or `l2_bytes` 0) the scheduler's layout transforms are
    /// undone: layout copies are dropped and the kernels that read them go back to their plain
    /// form, so the target's memory holds no copy (the results are the same bits). For a target
    /// with a dual multiply-accumulate (`cfg.dual_mac`) the int8 intermediates a packed sum
    /// reads strided are stored channel-interleaved ([`crate::schedule::interleave`]): the
    /// kernels' layout then differs from the kept programs', each consistent in itself (replay
    /// the target's kernels with [`Capture::recompiled`]).
    pub fn relowered(
        &self,
        cfg: Option<&crate::codegen::opt::OptConfig>,
        fused: bool,
    ) -> Result<Capture> {
        self.relowered_with(cfg, fused, &|_| None)
    }

    /// [`Capture::relowered`], with the opts `chosen` gives for a kernel's AST (as lowered)
    /// applied instead of the hand-coded ones (`None`: hand-coded); see
    /// [`crate::codegen::lower::lower_ast_with`].
    pub fn relowered_with(
        &self,
        cfg: Option<&crate::codegen::opt::OptConfig>,
        fused: bool,
        chosen: &dyn Fn(&crate::ast::Ast) -> Option<Vec<crate::codegen::kernel::Opt>>,
    ) -> Result<Capture> {
        let undo = cfg.is_none_or(|c| c.l2_bytes == 0);
        let kept: Vec<&CapturedStep> = self
            .steps
            .iter()
            .filter(|st| !(undo && st.layout_copy))
            .collect();
        let mut staged: Vec<crate::schedule::interleave::Step> = kept
            .iter()
            .map(|st| match (&st.plain, undo) {
                (Some((plain, n)), true) => (Some(plain.clone()), st.slots[..=*n].to_vec()),
                _ => (st.ast.clone(), st.slots.clone()),
            })
            .collect();
        if cfg.is_some_and(|c| c.dual_mac) {
            // The target packs int8 sums: intermediates a packed sum reads strided are stored
            // channel-interleaved (a layout only the kernels see; the programs recorded on the
            // desktop keep theirs, consistently among themselves).
            let sizes: Vec<usize> = self.slots.iter().map(|b| b.len()).collect();
            let mut fixed = self.input_slots();
            fixed.extend(self.output_slots());
            fixed.extend(self.weight_slots());
            crate::schedule::interleave::apply(&mut staged, &sizes, &fixed)?;
        }
        let steps = kept
            .into_iter()
            .zip(staged)
            .map(|(st, (ast, slots))| {
                let kernel = match (&ast, &st.kernel) {
                    (Some(ast), Some(k)) => {
                        let bufs = k.bufs[..slots.len()].to_vec();
                        let opts = chosen(ast);
                        let mut lk = crate::codegen::lower::lower_ast_with(
                            ast,
                            bufs,
                            cfg,
                            opts.as_deref(),
                            fused,
                        )?;
                        // An undone kernel is named after its own (untransformed) shape.
                        if !(undo && st.plain.is_some()) {
                            lk.name.clone_from(&k.name);
                        }
                        Some(lk)
                    }
                    _ => st.kernel.clone(),
                };
                let plain = if undo { None } else { st.plain.clone() };
                Ok(CapturedStep {
                    ast,
                    kernel,
                    program: st.program.clone(),
                    slots,
                    plain,
                    layout_copy: st.layout_copy && !undo,
                    var_vals: st.var_vals.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Capture {
            slots: self.slots.clone(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            fresh: self.fresh.clone(),
            spec: self.spec.clone(),
            frozen: Vec::new(),
            var_plan: var_plan(&steps, &self.input_vars),
            input_vars: self.input_vars.clone(),
            dispatch: Dispatch::new(&steps, &[], &self.slotting()),
            guard: None,
            settled: Default::default(),
            steps,
        })
    }

    /// The same capture with every kernel compiled again by `dev` (the device its buffers live
    /// on): replays then run the kernels as lowered — after [`Capture::relowered`], the
    /// target's kernels and layouts on this device (how tests check a target's kernels on the
    /// interpreter). Errors when a compile fails.
    pub fn recompiled(&self, dev: &Arc<dyn crate::device::Device>) -> Result<Capture> {
        if let Some(b) = self.slots.iter().find(|b| !Arc::ptr_eq(b.device(), dev)) {
            return Err(Error::Device(alloc::format!(
                "recompiled: the capture's buffers live on {}, not on {}",
                b.device().name(),
                dev.name()
            )));
        }
        let steps = self
            .steps
            .iter()
            .map(|st| {
                let program = match &st.kernel {
                    Some(k) => Some(dev.compile(k)?),
                    None => st.program.clone(),
                };
                Ok(CapturedStep {
                    ast: st.ast.clone(),
                    kernel: st.kernel.clone(),
                    program,
                    slots: st.slots.clone(),
                    plain: st.plain.clone(),
                    layout_copy: st.layout_copy,
                    var_vals: st.var_vals.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let guard = guard(&steps, &self.frozen, &self.slotting());
        // The frozen slots hold what the steps computed when they last ran here.
        if let (Some(new), Some(old)) = (&guard, &self.guard) {
            *new.seen.lock() = old.seen.lock().clone();
        }
        Ok(Capture {
            dispatch: Dispatch::new(&steps, &self.frozen, &self.slotting()),
            guard,
            settled: Default::default(),
            steps,
            slots: self.slots.clone(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            fresh: self.fresh.clone(),
            spec: self.spec.clone(),
            // The same steps and kernels: the same frozen steps and variable values.
            frozen: self.frozen.clone(),
            var_plan: self.var_plan.clone(),
            input_vars: self.input_vars.clone(),
        })
    }

    /// Turns every f64 fused multiply-add back into a multiply-accumulate with two roundings:
    /// device FPUs with FMA are single precision, and a double `fma` there is a libm call.
    pub(crate) fn unfuse_f64(&mut self) {
        use crate::codegen::uops::UOpKind;
        use crate::ops::AluOp;
        let kernels = self.steps.iter_mut().filter_map(|s| s.kernel.as_mut());
        for u in kernels.flat_map(|k| k.uops.iter_mut()) {
            if u.kind == UOpKind::Alu(AluOp::Fma) && u.dtype == DType::F64 {
                u.kind = UOpKind::Alu(AluOp::MulAcc);
            }
        }
    }

    /// The bound values the captured function read as numbers (a shape or a constant computed
    /// from them): replays at other values of those variables must capture again.
    pub fn specialization(&self) -> &Specialization {
        &self.spec
    }

    /// Whether a replay on `inputs` may run this capture: its specialization agrees with the
    /// values the inputs' shapes bind.
    pub fn fits(&self, inputs: &[&Tensor]) -> Result<bool> {
        Ok(self.spec.fits(&shape_vals(inputs)?))
    }

    /// The recorded steps, in order.
    pub fn steps(&self) -> &[CapturedStep] {
        &self.steps
    }

    /// Every buffer slot.
    pub fn slots(&self) -> &[Arc<Buffer>] {
        &self.slots
    }

    /// Input slots, in argument order.
    pub fn input_slots(&self) -> Vec<usize> {
        self.inputs.iter().map(|i| i.0).collect()
    }

    /// Output slots, in result order.
    pub fn output_slots(&self) -> Vec<usize> {
        self.outputs.iter().map(|o| o.0).collect()
    }

    /// Input shapes, in argument order.
    pub fn input_shapes(&self) -> Vec<&[Sint]> {
        self.inputs.iter().map(|i| i.1.as_slice()).collect()
    }

    /// Output shapes, in result order.
    pub fn output_shapes(&self) -> Vec<&[Sint]> {
        self.outputs.iter().map(|o| o.1.as_slice()).collect()
    }

    /// Makes replays skip the steps whose results depend on weights alone — the scheduler's
    /// layout copies of weights (blocked or panelled conv and matmul weights), and any other
    /// kernel over weights only — while those weights are unchanged, and returns how many.
    /// Their results stay in their slots from the recording; a replay compares each weight's
    /// write count ([`Buffer::generation`]) with the one it had when they last ran and runs
    /// them again first when one moved (an optimizer's update, `copy_in`, another capture's
    /// replay writing it). [`Jit`] and [`SignatureCache`] freeze every capture they record.
    /// A step is constant when every slot it reads is a weight
    /// (never written, not an input) or the output of a constant step, its output slot is
    /// written by it alone and is neither an input nor an output of the capture, and it binds
    /// no variables (the rule export and replay memory use too, `jit::constants`).
    /// Export is unaffected: it runs every step.
    pub fn freeze_constants(&mut self) -> usize {
        let (_, frozen) = constants(
            &self.steps,
            self.slots.len(),
            &self.input_slots(),
            &self.output_slots(),
            false,
        );
        let count = frozen.iter().filter(|&&f| f).count();
        self.dispatch = Dispatch::new(&self.steps, &frozen, &self.slotting());
        self.guard = guard(&self.steps, &frozen, &self.slotting());
        self.frozen = frozen;
        count
    }

    /// The same capture made image-major where that keeps a batch's values in cache: runs of
    /// steps that treat each image apart run one slice of images at a time, their private values
    /// in slice-sized buffers (see the `slice` module; the same bits). `None` when no run of
    /// steps qualifies or its values fit the cores' L2 anyway. Nothing of it is frozen ([`Jit`]
    /// and [`SignatureCache`] make it at a capture's first replay and freeze the same steps).
    pub fn image_major(&self) -> Result<Option<Capture>> {
        let Some(&(first, ref shape, _)) = self.inputs.first() else {
            return Ok(None);
        };
        let dev = self.slots[first].device().clone();
        if self.slots.iter().any(|b| !Arc::ptr_eq(b.device(), &dev)) {
            return Ok(None);
        }
        let lead = |s: &[Sint]| s.first().and_then(|d| d.as_const());
        let batch = lead(shape).filter(|&n| self.inputs.iter().all(|(_, s, _)| lead(s) == Some(n)));
        let Some(sliced) = slice::image_major(
            &self.steps,
            &self.slots,
            &self.input_slots(),
            batch,
            &self.output_slots(),
            &self.fresh,
            &dev,
        )?
        else {
            return Ok(None);
        };
        if crate::context::debug() >= 2 {
            crate::context::log(
                2,
                &alloc::format!(
                    "image-major replay: {} segment(s), {} steps -> {}",
                    sliced.segments,
                    self.steps.len(),
                    sliced.steps.len()
                ),
            );
        }
        let steps = sliced.steps;
        let slotting = Slotting::new(&sliced.slots, &self.inputs, &self.outputs, &sliced.fresh);
        let dispatch = Dispatch::new(&steps, &[], &slotting);
        Ok(Some(Capture {
            var_plan: var_plan(&steps, &self.input_vars),
            input_vars: self.input_vars.clone(),
            dispatch,
            guard: None,
            settled: Default::default(),
            inputs: self.inputs.clone(),
            outputs: self.outputs.clone(),
            spec: self.spec.clone(),
            frozen: Vec::new(),
            slots: sliced.slots,
            fresh: sliced.fresh,
            steps,
        }))
    }

    /// The capture a replay should run from now on, made once at the first replay (not at the
    /// recording: a function called once would compile kernels it never runs): its image-major
    /// form ([`Capture::image_major`]) with the same steps frozen, or `None` to keep this one.
    pub(crate) fn settle(&self) -> Result<Option<Capture>> {
        use core::sync::atomic::Ordering;
        if self.settled.swap(true, Ordering::AcqRel) {
            return Ok(None);
        }
        let Some(mut sliced) = self.image_major()? else {
            return Ok(None);
        };
        sliced.settled.store(true, Ordering::Release);
        if self.frozen.iter().any(|&f| f) {
            sliced.freeze_constants();
            // The frozen slots hold what the steps computed when they last ran here.
            if let (Some(new), Some(old)) = (&sliced.guard, &self.guard) {
                *new.seen.lock() = old.seen.lock().clone();
            }
        }
        Ok(Some(sliced))
    }

    fn slotting(&self) -> Slotting<'_> {
        Slotting::new(&self.slots, &self.inputs, &self.outputs, &self.fresh)
    }

    /// How many replays ran the frozen steps again because a weight they read had been written
    /// ([`Capture::freeze_constants`]).
    pub fn refreshes(&self) -> usize {
        self.guard.as_ref().map_or(0, |g| {
            g.refreshes.load(core::sync::atomic::Ordering::Relaxed)
        })
    }

    /// How many slots a replay runs in another slot's buffer: intermediates whose lives do not
    /// overlap share memory (see the `share` module), so a replay touches less memory than the
    /// recording did.
    pub fn shared_slots(&self) -> usize {
        let h = &self.dispatch.homes;
        (0..h.len()).filter(|&s| h[s] != s).count()
    }

    /// How many steps a replay runs (every step, less those [`Capture::freeze_constants`]
    /// froze).
    pub fn replayed_steps(&self) -> usize {
        (0..self.steps.len())
            .filter(|&i| !self.frozen.get(i).copied().unwrap_or(false))
            .count()
    }

    /// Slots that are read and never written (weights), excluding inputs.
    pub fn weight_slots(&self) -> Vec<usize> {
        let written: Vec<usize> = self.steps.iter().map(|s| s.slots[0]).collect();
        let inputs = self.input_slots();
        (0..self.slots.len())
            .filter(|s| !written.contains(s) && !inputs.contains(s))
            .collect()
    }
}

/// Which slots hold values computed from weights alone, and which steps compute them: a slot no
/// step writes that is not an input (a weight) is constant, and so is the output of a step
/// that reads only constant slots, is the only step writing its output, does not write an
/// input or an output of the capture, and — unless `with_vars` — binds no variables. Export
/// runs these steps once at export time ([`crate::export`]), [`Capture::freeze_constants`]
/// skips them in replays (without variables: a replay may bind them anew), and a replay shares
/// no buffer with their slots ([`share`]), so one rule serves all three.
pub(crate) fn constants(
    steps: &[CapturedStep],
    nslots: usize,
    inputs: &[usize],
    outputs: &[usize],
    with_vars: bool,
) -> (Vec<bool>, Vec<bool>) {
    let mut writes = alloc::vec![0usize; nslots];
    for st in steps {
        if let Some(&out) = st.slots.first() {
            writes[out] += 1;
        }
    }
    let mut constant: Vec<bool> = (0..nslots)
        .map(|s| writes[s] == 0 && !inputs.contains(&s))
        .collect();
    let mut computes = alloc::vec![false; steps.len()];
    for (i, st) in steps.iter().enumerate() {
        let Some((&out, reads)) = st.slots.split_first() else {
            continue;
        };
        let binds = st.kernel.as_ref().is_some_and(|k| !k.vars.is_empty());
        if writes[out] == 1
            && !outputs.contains(&out)
            && !inputs.contains(&out)
            && (with_vars || !binds)
            && reads.iter().all(|&r| constant[r])
        {
            computes[i] = true;
            constant[out] = true;
        }
    }
    (constant, computes)
}

/// The guard of the steps `frozen` marks (`None` when none is): their dispatch, the weights
/// they read (slots no step writes, not inputs) and those weights' write counts now.
fn guard(steps: &[CapturedStep], frozen: &[bool], slots: &Slotting<'_>) -> Option<Guard> {
    if !frozen.iter().any(|&f| f) {
        return None;
    }
    let written: Vec<usize> = steps.iter().map(|st| st.slots[0]).collect();
    let mut weights: Vec<usize> = steps
        .iter()
        .zip(frozen)
        .filter(|(_, &f)| f)
        .flat_map(|(st, _)| st.slots[1..].iter().copied())
        .filter(|s| !written.contains(s) && !slots.inputs.contains(s))
        .collect();
    weights.sort_unstable();
    weights.dedup();
    let seen = weights
        .iter()
        .map(|&s| slots.bufs[s].generation())
        .collect();
    let others: Vec<bool> = frozen.iter().map(|&f| !f).collect();
    Some(Guard {
        refresh: Dispatch::new(steps, &others, slots),
        weights,
        seen: Mutex::new(seen),
        refreshes: core::sync::atomic::AtomicUsize::new(0),
    })
}

/// Each slot's handle ([`crate::device::Allocator::handles`]) when every slot lives on one
/// device (`None` otherwise): a replay resolves each buffer once, not once per kernel argument.
fn slot_handles(bufs: &[Arc<Buffer>]) -> Result<Option<Vec<u64>>> {
    let Some(first) = bufs.first() else {
        return Ok(Some(Vec::new()));
    };
    let dev = first.device();
    if !bufs.iter().all(|b| Arc::ptr_eq(b.device(), dev)) {
        return Ok(None);
    }
    let ids: Vec<BufId> = bufs.iter().map(|b| b.id()).collect();
    let mut out = Vec::with_capacity(ids.len());
    dev.allocator().handles(&ids, &mut out)?;
    Ok(Some(out))
}

/// Fills `out` with a step's variable values by its plan: the replay's input values `vals`
/// (named as the plan was made with) or the recorded ones.
fn fill_vars(
    out: &mut Vec<i64>,
    plan: &[VarSrc],
    vals: &VarVals,
    k: &Option<LinearKernel>,
) -> Result<()> {
    out.clear();
    for (j, src) in plan.iter().enumerate() {
        out.push(match *src {
            VarSrc::Recorded(v) => v,
            VarSrc::Input { at, lo, hi } => {
                let v = vals[at].1;
                if !(lo..=hi).contains(&v) {
                    let (kernel, name) = k.as_ref().map_or(("?", "?"), |k| {
                        (&*k.name, k.vars.get(j).map_or("?", |(n, _, _)| &**n))
                    });
                    return Err(Error::Symbolic(alloc::format!(
                        "jit: kernel {kernel}: variable {name} = {v} is outside its bounds \
                         [{lo}, {hi}]"
                    )));
                }
                v
            }
        });
    }
    Ok(())
}

/// The values of `k`'s variables for a replay: from the replay's inputs (`vals`) where they
/// bind the name, else the value the step was recorded with; outside the bounds is an error.
fn step_vars(k: &LinearKernel, recorded: &VarVals, vals: &VarVals) -> Result<Vec<i64>> {
    k.vars
        .iter()
        .map(|(name, lo, hi)| {
            let find = |vs: &VarVals| vs.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
            match find(vals).or_else(|| find(recorded)) {
                Some(v) if (*lo..=*hi).contains(&v) => Ok(v),
                Some(v) => Err(Error::Symbolic(alloc::format!(
                    "jit: kernel {}: variable {name} = {v} is outside its bounds [{lo}, {hi}]",
                    k.name
                ))),
                None => Err(Error::Symbolic(alloc::format!(
                    "jit: kernel {}: variable {name} has no value",
                    k.name
                ))),
            }
        })
        .collect()
}

/// The values the inputs' shapes bind, by name.
pub(crate) fn shape_vals(inputs: &[&Tensor]) -> Result<VarVals> {
    let mut vals = VarVals::new();
    for t in inputs {
        t.lazy()
            .shape()
            .iter()
            .try_for_each(|d| d.merge_bound_into(&mut vals))?;
    }
    Ok(vals)
}

/// Runs `f` on `inputs` and records what it computes; the capture is specialized to the bound
/// values `f` read as numbers while it ran.
fn capture_fn<F>(f: F, inputs: &[Tensor]) -> Result<(Capture, Vec<Tensor>)>
where
    F: FnOnce(&[Tensor]) -> Result<Vec<Tensor>>,
{
    let watch = Watch::begin();
    let outs = f(inputs)?;
    let spec = watch.specialization();
    drop(watch);
    let out_refs: Vec<&Tensor> = outs.iter().collect();
    let in_refs: Vec<&Tensor> = inputs.iter().collect();
    let (mut cap, results) = Capture::record(&in_refs, &out_refs)?;
    cap.spec = spec;
    Ok((cap, results))
}

/// A shape with its bound variables unbound: what a capture's inputs must match.
pub(crate) fn unbound(shape: &[Sint]) -> Vec<Sint> {
    shape.iter().map(Sint::unbind).collect()
}

/// A function whose kernels are captured on the first call and replayed afterwards.
///
/// The function returns `Result`, so errors inside it (a shape that does not fit, a failed
/// `backward`) propagate with `?` out of [`Jit::call`] instead of panicking; and it is `FnMut`,
/// so it may own or mutably borrow what it updates (an optimizer) without a `RefCell`. It runs
/// once, on the first call; later calls replay the kernels it ran. Over a symbolic dimension, a
/// function that read the dimension's value as a number (`shape()`, a reshape to `&[isize]`, an
/// op that computes a constant from the shape) made a capture valid only at that value: a call
/// binding another value runs the function again and captures anew (the last
/// [`DEFAULT_SIGNATURES`] captures are kept), so no replay computes with a stale constant.
///
/// ```
/// use picograd_core::{jit::Jit, Tensor};
/// let f = Jit::new(|x: &[Tensor]| Ok(vec![x[0].try_add(&x[0])?]));
/// for i in 0..3 {
///     let x = Tensor::from_slice(&[i as f32, 1.0], &[2]);
///     let y = f.call(&[x]).unwrap();
///     assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![2.0 * i as f32, 2.0]);
/// }
/// assert_eq!(f.replays(), 2);
/// // An error inside the function comes out of the first call.
/// let bad = Jit::new(|x: &[Tensor]| Ok(vec![x[0].try_reshape(&[5])?]));
/// let e = bad.call(&[Tensor::from_slice(&[1.0f32, 2.0], &[2])]).err().unwrap();
/// assert!(e.to_string().contains("reshape"));
/// ```
pub struct Jit<F> {
    f: Mutex<F>,
    /// Captures, most recent last: one unless the function specialized to bound values.
    captures: Mutex<Vec<Arc<Capture>>>,
    replays: Mutex<u64>,
    recorded: Mutex<u64>,
}

impl<F: FnMut(&[Tensor]) -> Result<Vec<Tensor>>> Jit<F> {
    /// Wraps `f`.
    pub fn new(f: F) -> Jit<F> {
        Jit {
            f: Mutex::new(f),
            captures: Mutex::new(Vec::new()),
            replays: Mutex::new(0),
            recorded: Mutex::new(0),
        }
    }

    /// Calls the function: captures on the first call, replays the capture afterwards (a
    /// capture specialized to other bound values is not replayed: the function runs and is
    /// captured again). An error from the function or from a replay is returned; after a failed
    /// capture the next call runs the function again.
    pub fn call(&self, inputs: &[Tensor]) -> Result<Vec<Tensor>> {
        let refs: Vec<&Tensor> = inputs.iter().collect();
        let caps = self.captures.lock().clone();
        if let Some(first) = caps.first() {
            let vals = shape_vals(&refs)?;
            let fit = caps.iter().rev().find(|c| c.spec.fits(&vals));
            // No specialized capture fits: replay the first one when it is not specialized at
            // all (its replay checks the inputs and errors on a wrong signature).
            if let Some(c) = fit.or((first.spec == Specialization::default()).then_some(first)) {
                *self.replays.lock() += 1;
                if let Some(settled) = c.settle()? {
                    let settled = Arc::new(settled);
                    let mut held = self.captures.lock();
                    if let Some(slot) = held.iter_mut().find(|h| Arc::ptr_eq(h, c)) {
                        *slot = settled.clone();
                    }
                    drop(held);
                    return settled.replay_with(&refs, vals);
                }
                return c.replay_with(&refs, vals);
            }
        }
        if let Some(first) = caps.first() {
            // Another capture serves the same signature only: a wrong one is the error a replay
            // gives.
            first.bind_inputs(&refs, None)?;
        }
        // `f` must read the very buffers the capture records as inputs.
        let realized = inputs
            .iter()
            .map(|t| realized_node(t).map(Tensor::from_lazy))
            .collect::<Result<Vec<_>>>()?;
        let (mut cap, results) = capture_fn(&mut *self.f.lock(), &realized)?;
        cap.freeze_constants();
        let mut held = self.captures.lock();
        if held.len() >= DEFAULT_SIGNATURES {
            held.remove(0);
        }
        held.push(Arc::new(cap));
        *self.recorded.lock() += 1;
        Ok(results)
    }

    /// How many calls ran the function and captured it (1, plus one per call at bound values
    /// no specialized capture fits).
    pub fn captures(&self) -> u64 {
        *self.recorded.lock()
    }

    /// How many calls replayed the capture.
    pub fn replays(&self) -> u64 {
        *self.replays.lock()
    }

    /// The most recent capture, once a call has made it.
    pub fn capture(&self) -> Option<Arc<Capture>> {
        self.captures.lock().last().cloned()
    }
}
