//! Running a schedule: lower every item's AST to UOps (once per distinct AST, through
//! [`crate::codegen::lower`]) and compile the
//! kernels the device has no program for yet, all at once; then for each item, allocate its
//! output and run.
//! Also the counters the tests and `PICOGRAD_DEBUG=1` read.
//!
//! Invariant: a base is realized only after every item it depends on has run; lowering and
//! compiling are cached, so a repeated computation pays only for running.

use alloc::format;
use alloc::string::String;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;

use hashbrown::HashSet;
use spin::Mutex;

use crate::ast::{Ast, AstOp};
use crate::codegen::lower::{lower, max_size};
use crate::codegen::strided_copy::StridedCopy;
use crate::codegen::uops::LinearKernel;
use crate::context::{debug, log};
use crate::device::{Buffer, Device, Program};
use crate::error::{Error, Result};
use crate::lazy::{LazyBuffer, LazyOp};
use crate::lru::Lru;
use crate::schedule::{schedule, ScheduleItem};

/// Work counters, summed over every kernel run in this process.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Kernels run.
    pub kernels: u64,
    /// Reduce accumulations executed.
    pub reduce_ops: u64,
    /// Arithmetic operations executed.
    pub flops: u64,
    /// Bytes moved (buffer sizes of the kernels run).
    pub bytes: u64,
    /// ASTs lowered to UOps (cache misses).
    pub lowered: u64,
    /// Kernels compiled for a device (cache misses).
    pub compiled: u64,
    /// Schedule items produced (kernels and copies planned).
    pub scheduled: u64,
    /// Kernels given a device's strided-copy program instead of a compile
    /// ([`Device::copy_program`]).
    pub strided_copies: u64,
}

// One lock, not atomics: 64-bit atomics do not exist on every target the core builds for.
static COUNTERS: Mutex<Counters> = Mutex::new(Counters {
    kernels: 0,
    reduce_ops: 0,
    flops: 0,
    bytes: 0,
    lowered: 0,
    compiled: 0,
    scheduled: 0,
    strided_copies: 0,
});

/// The counters so far (tests take differences around the work they measure; other tests on
/// other threads add to them too, so such tests should use [`count_work`]).
pub fn counters() -> Counters {
    Counters {
        lowered: crate::codegen::lower::lowered_count(),
        ..*COUNTERS.lock()
    }
}

type ProgramCache = Lru<(usize, LinearKernel), (Weak<dyn Device>, Arc<dyn Program>)>;
/// The program cache is bounded like the lowering cache (least recently used entries go
/// first): a process that meets ever new kernels keeps at most this many programs — and so
/// compiled libraries — alive through it (a JIT capture keeps its own programs as long as it
/// lives).
pub use crate::codegen::lower::DEFAULT_CACHE_CAPACITY;
static PROGRAM_CACHE: Mutex<Option<ProgramCache>> = Mutex::new(None);

/// Sets how many lowered kernels and compiled programs the realizer keeps (each; at least 1;
/// default [`DEFAULT_CACHE_CAPACITY`]); entries beyond it are forgotten at once.
pub fn set_cache_capacity(capacity: usize) {
    PROGRAM_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(capacity))
        .set_capacity(capacity);
    crate::codegen::lower::set_cache_capacity(capacity);
}

/// How many compiled programs the realizer holds now (for tests and diagnostics).
pub fn cached_programs() -> usize {
    PROGRAM_CACHE.lock().as_ref().map_or(0, Lru::len)
}

/// The work a schedule would do, without running it: (kernels, reduce ops, flops, bytes).
pub fn count_work(items: &[ScheduleItem]) -> Result<Counters> {
    let mut c = Counters::default();
    for it in items {
        let k = lower(it)?;
        c.kernels += 1;
        c.reduce_ops += k.cost.reduce_ops;
        c.flops += k.cost.flops;
        c.bytes += k.cost.bytes;
    }
    Ok(c)
}

/// The program cached for `k` on `device`. Entries are keyed by the device's address, so each
/// remembers its device weakly: a dead device's entry is stale (a new device may reuse the
/// address) and is dropped instead of returned.
fn cached_program(device: &Arc<dyn Device>, k: &LinearKernel) -> Option<Arc<dyn Program>> {
    let key = (Arc::as_ptr(device) as *const u8 as usize, k.clone());
    let mut cache = PROGRAM_CACHE.lock();
    let cache = cache.get_or_insert_with(|| Lru::new(DEFAULT_CACHE_CAPACITY));
    match cache.get(&key) {
        Some((dev, p)) if dev.strong_count() > 0 => Some(p),
        Some(_) => {
            cache.remove(&key);
            None
        }
        None => None,
    }
}

fn cache_program(device: &Arc<dyn Device>, k: LinearKernel, p: Arc<dyn Program>) {
    let key = (Arc::as_ptr(device) as *const u8 as usize, k);
    PROGRAM_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(DEFAULT_CACHE_CAPACITY))
        .insert(key, (Arc::downgrade(device), p));
}

fn program(device: &Arc<dyn Device>, k: &LinearKernel) -> Result<Arc<dyn Program>> {
    if let Some(p) = cached_program(device, k) {
        return Ok(p);
    }
    let p = device.compile(k)?;
    COUNTERS.lock().compiled += 1;
    cache_program(device, k.clone(), p.clone());
    Ok(p)
}

/// Compiles every kernel of `items` that will run and has no program yet, all at once per
/// device ([`Device::compile_many`]), so a device can overlap or batch the compiles instead of
/// paying for them one at a time between runs.
fn prepare(items: &[ScheduleItem], recording: bool) -> Result<()> {
    let mut pending: Vec<(Arc<dyn Device>, Vec<LinearKernel>)> = Vec::new();
    // (device, kernel) pairs already pending: a schedule may hold thousands of kernels.
    let mut queued: HashSet<(usize, LinearKernel)> = HashSet::new();
    let mut copies = 0u64;
    let runs_kernel = |it: &&ScheduleItem| {
        !it.is_copy && it.out.realized().is_none() && (recording || !is_zero_fill(it))
    };
    for it in items.iter().filter(runs_kernel) {
        let device = it.out.device().clone();
        let k = lower(it)?;
        if cached_program(&device, &k).is_some() {
            continue;
        }
        if !queued.insert((Arc::as_ptr(&device) as *const u8 as usize, k.clone())) {
            continue;
        }
        if let Some(p) = copy_instead(it, &device) {
            copies += 1;
            cache_program(&device, k, p);
            continue;
        }
        match pending.iter_mut().find(|(d, _)| Arc::ptr_eq(d, &device)) {
            Some((_, ks)) => ks.push(k),
            None => pending.push((device, alloc::vec![k])),
        }
    }
    if copies > 0 {
        COUNTERS.lock().strided_copies += copies;
        log(
            1,
            &format!(
                "{copies} movement kernels over constants run as strided copies (not compiled)"
            ),
        );
    }
    for (device, ks) in pending {
        let refs: Vec<&LinearKernel> = ks.iter().collect();
        let progs = device.compile_many(&refs)?;
        if progs.len() != ks.len() {
            return Err(Error::internal(format!(
                "{}: compile_many returned {} programs for {} kernels",
                device.name(),
                progs.len(),
                ks.len()
            )));
        }
        COUNTERS.lock().compiled += progs.len() as u64;
        for (k, p) in ks.into_iter().zip(progs) {
            cache_program(&device, k, p);
        }
    }
    Ok(())
}

/// A program running `item` as a strided copy, when the device offers one and compiling the
/// kernel could not pay: the kernel only moves data ([`StridedCopy::from_ast`]) into a fresh
/// buffer, from a buffer marked constant ([`Buffer::mark_constant`], a model's weights). Such
/// a kernel (a weight layout such as a panel copy) runs once — a capture freezes it — so its run
/// time hardly matters, while compiling it costs a compiler's fixed work per function (about
/// 20 ms of clang CPU for each of resnet18's twelve, 2026-11-28). The program is cached under
/// the kernel like a compiled one, so another item lowering to the same kernel reuses it
/// (bit-identical either way).
fn copy_instead(item: &ScheduleItem, device: &Arc<dyn Device>) -> Option<Arc<dyn Program>> {
    let fresh = !matches!(item.out.op(), Some((LazyOp::Assign, _)));
    let [input] = item.inputs.as_slice() else {
        return None;
    };
    let src = input.realized()?;
    if !fresh || !src.is_constant() || !Arc::ptr_eq(src.device(), device) {
        return None;
    }
    let copy = StridedCopy::from_ast(&item.ast)?;
    let fits = copy.src_len().is_ok_and(|n| n <= src.len())
        && copy.itemsize() == src.dtype().itemsize()
        && copy.out_len() == max_size(item.out.shape());
    if !fits {
        return None;
    }
    device.copy_program(&copy)
}

/// Whether `item` stores the constant zero (+0.0, 0, false) into a fresh buffer: the allocator
/// hands out zeroed memory, so such an item needs no kernel (no compile on a cold start).
fn is_zero_fill(item: &ScheduleItem) -> bool {
    let fresh = !matches!(item.out.op(), Some((LazyOp::Assign, _)));
    let zero_const = |a: &Ast| matches!(a.op(), AstOp::Const { val, .. } if val.bits() == 0);
    fresh
        && item.inputs.is_empty()
        && matches!(item.ast.op(), AstOp::Store { .. })
        && matches!(item.ast.src(), [c] if zero_const(c) && c.dtype() == item.out.dtype())
}

/// The output of a zero-fill item ([`is_zero_fill`]): a freshly allocated, zeroed buffer.
fn run_zero_fill(item: &ScheduleItem) -> Result<Arc<Buffer>> {
    let out = Buffer::new(
        item.out.device().clone(),
        item.out.dtype(),
        max_size(item.out.shape()),
    )?;
    if debug() >= 1 {
        let shape = crate::lazy::fmt_shape(item.out.shape());
        log(
            1,
            &format!("*** {:<8} zero fill {shape}", out.device().name()),
        );
    }
    Ok(Arc::new(out))
}

fn run_copy(item: &ScheduleItem) -> Result<Arc<Buffer>> {
    let src = item
        .inputs
        .first()
        .and_then(LazyBuffer::realized)
        .ok_or_else(|| Error::internal("copy: source is not realized"))?;
    let out = Buffer::new(item.out.device().clone(), item.out.dtype(), src.len())?;
    out.copy_in(&src.to_bytes()?)?;
    Ok(Arc::new(out))
}

type Ran = (
    Arc<Buffer>,
    Option<LinearKernel>,
    Option<Arc<dyn Program>>,
    Vec<i64>,
);

/// The values of `k`'s variables (in its order) from the item's bound values. The program
/// checks them against the bounds too; a variable left unbound is an error here.
pub fn kernel_var_values(k: &LinearKernel, vals: &crate::symbolic::VarVals) -> Result<Vec<i64>> {
    k.vars
        .iter()
        .map(|(name, lo, hi)| {
            let v = vals.iter().find(|(n, _)| n == name).map(|(_, v)| *v);
            match v {
                Some(v) if (*lo..=*hi).contains(&v) => Ok(v),
                Some(v) => Err(Error::Symbolic(format!(
                    "kernel {}: variable {name} = {v} is outside its bounds [{lo}, {hi}]",
                    k.name
                ))),
                None => Err(Error::Symbolic(format!(
                    "kernel {}: variable {name} is not bound to a value (bind it with \
                     Variable::bind)",
                    k.name
                ))),
            }
        })
        .collect()
}

fn run_kernel(item: &ScheduleItem) -> Result<Ran> {
    let k = lower(item)?;
    let device = item.out.device().clone();
    let out = match item.out.op() {
        // An assign writes into its target's buffer.
        Some((LazyOp::Assign, srcs)) => srcs[0]
            .realized()
            .ok_or_else(|| Error::internal("assign: the target is not realized"))?,
        _ => {
            let (dtype, len) = (item.out.dtype(), max_size(item.out.shape()));
            // The kernel stores every element of a concretely shaped output (its store view is
            // the output's contiguous shape), so that buffer need not be zeroed first; a
            // symbolic shape allocates for its bound maximum and may write less.
            let out = if item.out.shape().iter().all(|d| d.is_const()) {
                Buffer::for_overwrite(device.clone(), dtype, len)?
            } else {
                Buffer::new(device.clone(), dtype, len)?
            };
            Arc::new(out)
        }
    };
    let mut ids = alloc::vec![out.id()];
    let mut written = alloc::vec![out.clone()];
    for (i, b) in item.inputs.iter().enumerate() {
        let buf = b.realized().ok_or_else(|| {
            Error::internal(format!("kernel {}: input {b:?} is not realized", k.name))
        })?;
        if k.bufs.get(i + 1).is_some_and(|p| p.writable) {
            written.push(buf.clone());
        }
        if !Arc::ptr_eq(buf.device(), &device) {
            return Err(Error::Device(format!(
                "kernel {}: input on {} but kernel on {}",
                k.name,
                buf.device().name(),
                device.name()
            )));
        }
        ids.push(buf.id());
    }
    let vars = kernel_var_values(&k, &item.var_vals)?;
    let prog = program(&device, &k)?;
    let clock = crate::context::context().clock_ns;
    let t0 = clock.map(|c| c());
    prog.run(&ids, &vars)?;
    written.iter().for_each(|b| b.note_written());
    {
        let mut c = COUNTERS.lock();
        c.kernels += 1;
        c.reduce_ops += k.cost.reduce_ops;
        c.flops += k.cost.flops;
        c.bytes += k.cost.bytes;
    }
    if debug() >= 1 {
        let us = match (clock, t0) {
            (Some(c), Some(t)) => format!("{:9.1} us", (c() - t) as f64 / 1e3),
            _ => String::from("        - us"),
        };
        log(
            1,
            &format!(
                "*** {:<8} {:<28} flops {:>10} bytes {:>10} {us}",
                device.name(),
                k.name,
                k.cost.flops,
                k.cost.bytes
            ),
        );
    }
    Ok((out, Some(k), Some(prog), vars))
}

fn schedule_counted(outs: &[LazyBuffer]) -> Result<Vec<ScheduleItem>> {
    let items = schedule(outs)?;
    COUNTERS.lock().scheduled += items.len() as u64;
    if crate::jit::trace::any_active() {
        // Realizing outside a capture what reads a watched input taints the capture in progress.
        let leaves: Vec<Arc<Buffer>> = items
            .iter()
            .flat_map(|it| it.inputs.iter().filter_map(LazyBuffer::realized))
            .collect();
        crate::jit::trace::note_reads(leaves.iter().map(|b| &**b));
    }
    Ok(items)
}

/// Computes every base `outs` need, kernel by kernel.
pub fn realize(outs: &[LazyBuffer]) -> Result<()> {
    let items = schedule_counted(outs)?;
    if debug() >= 2 {
        log(2, &format!("schedule: {} items", items.len()));
        for it in &items {
            log(2, &format!("{}", it.ast));
        }
    }
    run_schedule(&items)
}

/// Runs scheduled items in order, recording each output as realized.
pub fn run_schedule(items: &[ScheduleItem]) -> Result<()> {
    run_recorded(items, None)
}

/// One executed step, as a capture records it: the program (or a copy) and the buffers it ran
/// on, output first.
#[derive(Clone)]
pub struct ExecItem {
    /// The kernel's AST (for a copy: `None`).
    pub ast: Option<Ast>,
    /// The lowered kernel (for a copy: `None`).
    pub kernel: Option<LinearKernel>,
    /// The compiled program (for a copy: `None`).
    pub program: Option<Arc<dyn Program>>,
    /// The buffers, output first, then inputs in the kernel's order.
    pub bufs: Vec<Arc<Buffer>>,
    /// Whether the step allocated its output (false for an in-place `Assign`, which writes
    /// into a buffer that existed before it).
    pub fresh: bool,
    /// [`ScheduleItem::plain`]: the kernel before layout transforms, and how many of `bufs`'s
    /// inputs it reads.
    pub plain: Option<(Ast, usize)>,
    /// [`ScheduleItem::layout_copy`].
    pub layout_copy: bool,
    /// The variable values the kernel ran with, in its variable order.
    pub vars: Vec<i64>,
    /// The bound values of the whole item ([`ScheduleItem::var_vals`]).
    pub var_vals: crate::symbolic::VarVals,
}

/// Schedules and runs everything `outs` need, returning the steps that ran (for captures).
pub fn realize_recorded(outs: &[LazyBuffer]) -> Result<Vec<ExecItem>> {
    let items = schedule_counted(outs)?;
    let mut rec = Vec::new();
    run_recorded(&items, Some(&mut rec))?;
    Ok(rec)
}

fn run_recorded(items: &[ScheduleItem], mut rec: Option<&mut Vec<ExecItem>>) -> Result<()> {
    // A capture replays every step, so there even a zero fill stays a kernel (a later step may
    // write into its buffer in place).
    let recording = rec.is_some();
    prepare(items, recording)?;
    for it in items {
        if it.out.realized().is_some() {
            continue;
        }
        let (buf, kernel, program, vars) = if it.is_copy {
            (run_copy(it)?, None, None, Vec::new())
        } else if !recording && is_zero_fill(it) {
            (run_zero_fill(it)?, None, None, Vec::new())
        } else {
            run_kernel(it)?
        };
        if let Some(r) = rec.as_deref_mut() {
            let mut bufs = alloc::vec![buf.clone()];
            for b in &it.inputs {
                bufs.push(
                    b.realized()
                        .ok_or_else(|| Error::internal("capture: input not realized"))?,
                );
            }
            let ast = (!it.is_copy).then(|| it.ast.clone());
            let fresh = !matches!(it.out.op(), Some((LazyOp::Assign, _)));
            r.push(ExecItem {
                ast,
                kernel,
                program,
                bufs,
                fresh,
                plain: it.plain.clone(),
                layout_copy: it.layout_copy,
                vars,
                var_vals: it.var_vals.clone(),
            });
        }
        it.out.set_realized(buf)?;
    }
    Ok(())
}

/// Debug text of a schedule's kernels (their UOps), for tests and tools.
pub fn describe(items: &[ScheduleItem]) -> Result<Vec<String>> {
    items
        .iter()
        .map(|i| lower(i).map(|k| format!("{k}")))
        .collect()
}
