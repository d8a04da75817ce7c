//! Running a schedule: lower every item's AST to UOps (once per distinct AST) and compile the
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
use crate::codegen::kernel::{Kernel, Opt};
use crate::codegen::linearizer::linearize;
use crate::codegen::opt::{hand_coded, OptConfig};
use crate::codegen::uops::{BufParam, LinearKernel};
use crate::context::{debug, log};
use crate::device::{Buffer, Device, Program};
use crate::error::{Error, Result};
use crate::lazy::{LazyBuffer, LazyOp};
use crate::lru::Lru;
use crate::schedule::{schedule, ScheduleItem};
use crate::shape::Sint;

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
});

/// The counters so far (tests take differences around the work they measure; other tests on
/// other threads add to them too, so such tests should use [`count_work`]).
pub fn counters() -> Counters {
    *COUNTERS.lock()
}

type ProgramCache = Lru<(usize, LinearKernel), (Weak<dyn Device>, Arc<dyn Program>)>;
/// (AST, buffer parameters, optimizer settings, the device's own choice of opts if it made
/// one, fused MULACC). The buffer parameters belong to the key: one AST can read buffers of
/// different sizes (a slice of a two-direction RNN weight and a one-direction one load through
/// the same view), and the lowered kernel records those sizes (export checks every slot against
/// them, and they decide 32- or 64-bit indexing).
type LowerKey = (
    Ast,
    Vec<BufParam>,
    Option<OptConfig>,
    Option<Vec<Opt>>,
    bool,
);
/// Both caches are bounded (least recently used entries go first): a process that meets ever
/// new kernels keeps at most this many programs — and so compiled libraries — alive through
/// them (a JIT capture keeps its own programs as long as it lives).
pub const DEFAULT_CACHE_CAPACITY: usize = 4096;
static LOWER_CACHE: Mutex<Option<Lru<LowerKey, LinearKernel>>> = Mutex::new(None);
static PROGRAM_CACHE: Mutex<Option<ProgramCache>> = Mutex::new(None);

/// Sets how many lowered kernels and compiled programs the realizer keeps (each; at least 1;
/// default [`DEFAULT_CACHE_CAPACITY`]); entries beyond it are forgotten at once.
pub fn set_cache_capacity(capacity: usize) {
    PROGRAM_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(capacity))
        .set_capacity(capacity);
    LOWER_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(capacity))
        .set_capacity(capacity);
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

fn max_size(shape: &[Sint]) -> usize {
    shape.iter().map(|d| d.vmax().max(0) as usize).product()
}

/// Lowers a kernel AST to UOps over buffers `bufs` (output first), optimized by `cfg` when
/// given, with fused multiply-accumulates when `fused` (see [`linearize`]). Export calls this to
/// lower captured kernels for a device's own description.
pub fn lower_ast(
    ast: &Ast,
    bufs: Vec<BufParam>,
    cfg: Option<&OptConfig>,
    fused: bool,
) -> Result<LinearKernel> {
    lower_ast_with(ast, bufs, cfg, None, fused)
}

/// Like [`lower_ast`], but with `chosen` opts (a device's search result) applied instead of the
/// hand-coded ones when given; an opt that does not fit the kernel is an error.
pub fn lower_ast_with(
    ast: &Ast,
    bufs: Vec<BufParam>,
    cfg: Option<&OptConfig>,
    chosen: Option<&[Opt]>,
    fused: bool,
) -> Result<LinearKernel> {
    let mut kernel = Kernel::new(ast)?;
    let opts = match (chosen, cfg) {
        (Some(opts), _) => {
            opts.iter().try_for_each(|o| kernel.apply_opt(*o))?;
            opts.to_vec()
        }
        (None, Some(cfg)) => hand_coded(&mut kernel, cfg),
        (None, None) => Vec::new(),
    };
    if debug() >= 3 && !opts.is_empty() {
        log(3, &format!("opts {opts:?} -> {}", kernel.describe()));
    }
    linearize(&kernel, bufs, kernel.name(), fused)
}

/// The buffers of an item's kernel: the output, then the inputs (each at its largest size).
pub fn buf_params(item: &ScheduleItem) -> Vec<BufParam> {
    let mut bufs = alloc::vec![BufParam {
        dtype: item.out.dtype(),
        size: max_size(item.out.shape()),
        writable: true
    }];
    bufs.extend(item.inputs.iter().map(|b| BufParam {
        dtype: b.dtype(),
        size: max_size(b.shape()),
        writable: false,
    }));
    bufs
}

/// Lowers an item's AST to UOps, optimized as its device asks — with the device's own choice
/// of opts when it makes one ([`Device::choose_opts`]), else hand-coded (cached by AST, buffer
/// parameters, options and choice).
pub fn lower(item: &ScheduleItem) -> Result<LinearKernel> {
    let device = item.out.device();
    let cfg = device.opt_config();
    let bufs = buf_params(item);
    let chosen = cfg.and_then(|_| device.choose_opts(&item.ast, &bufs));
    let key = (item.ast.clone(), bufs, cfg, chosen, device.fused_mulacc());
    if let Some(k) = LOWER_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(DEFAULT_CACHE_CAPACITY))
        .get(&key)
    {
        return Ok(k);
    }
    let lk = lower_ast_with(
        &item.ast,
        key.1.clone(),
        key.2.as_ref(),
        key.3.as_deref(),
        key.4,
    )?;
    COUNTERS.lock().lowered += 1;
    if debug() >= 3 {
        log(3, &format!("{}", lk));
    }
    LOWER_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(DEFAULT_CACHE_CAPACITY))
        .insert(key, lk.clone());
    Ok(lk)
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
        match pending.iter_mut().find(|(d, _)| Arc::ptr_eq(d, &device)) {
            Some((_, ks)) => ks.push(k),
            None => pending.push((device, alloc::vec![k])),
        }
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

type Ran = (Arc<Buffer>, Option<LinearKernel>, Option<Arc<dyn Program>>);

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
    for b in &item.inputs {
        let buf = b.realized().ok_or_else(|| {
            Error::internal(format!("kernel {}: input {b:?} is not realized", k.name))
        })?;
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
    let prog = program(&device, &k)?;
    let clock = crate::context::context().clock_ns;
    let t0 = clock.map(|c| c());
    prog.run(&ids, &[])?;
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
    Ok((out, Some(k), Some(prog)))
}

fn schedule_counted(outs: &[LazyBuffer]) -> Result<Vec<ScheduleItem>> {
    let items = schedule(outs)?;
    COUNTERS.lock().scheduled += items.len() as u64;
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
    /// [`ScheduleItem::plain`]: the kernel before layout transforms, and how many of `bufs`'s
    /// inputs it reads.
    pub plain: Option<(Ast, usize)>,
    /// [`ScheduleItem::layout_copy`].
    pub layout_copy: bool,
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
        let (buf, kernel, program) = if it.is_copy {
            (run_copy(it)?, None, None)
        } else if !recording && is_zero_fill(it) {
            (run_zero_fill(it)?, None, None)
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
            r.push(ExecItem {
                ast,
                kernel,
                program,
                bufs,
                plain: it.plain.clone(),
                layout_copy: it.layout_copy,
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
