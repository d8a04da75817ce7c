//! Lowering: the one sequence of passes every kernel goes through on its way from a scheduled
//! AST to the UOps a device runs, and the cache of its results. The realizer, export and the
//! measured search all lower through here.
//!
//! The passes, in order (see [`lower_ast_with`]):
//! 1. `kernel` — the AST arranged into axes `[global | reduce]` ([`Kernel::new`]);
//! 2. `opts` — the optimizations: a device's chosen ones, else the hand-coded strategies for the
//!    target's [`OptConfig`] ([`super::strategy::hand_coded`]), else none;
//! 3. `linearize` — the kernel flattened to UOps ([`linearize`]);
//! 4. when the kernel is optimized (a configuration or chosen opts given), the passes of
//!    [`OPT_UOP_PASSES`] (`pad_bounds`: loops split at their padding gates, see
//!    [`super::pad_bounds`]);
//! 5. the UOp passes of [`UOP_PASSES`] (`hoist`: loop-invariant code motion), in table order.
//!
//! Invariant: in debug builds the verifier ([`super::verify`]) checks the IR after every pass
//! and fails with [`Error::Internal`](crate::error::Error::Internal) naming the pass that broke
//! it; release builds skip the checks, never the passes. Cached kernels are keyed by everything
//! the passes read, so a cache hit is the kernel the passes would produce.

use alloc::format;
use alloc::vec::Vec;

use spin::Mutex;

use super::hoist::hoist;
use super::kernel::{Kernel, Opt};
use super::linearizer::linearize;
use super::opt::OptConfig;
use super::pad_bounds::pad_bounds_within;
use super::strategy::hand_coded;
use super::uops::{BufParam, LinearKernel, UOp};
use super::verify::{verify_kernel, verify_uops};
use crate::ast::Ast;
use crate::context::{debug, log};
use crate::error::Result;
use crate::lru::Lru;
use crate::schedule::ScheduleItem;
use crate::shape::Sint;

/// A pass over a kernel's UOps: takes them and returns them rewritten.
pub type UOpPass = fn(Vec<UOp>) -> Vec<UOp>;

/// The passes run on a kernel's UOps after the linearizer, in this order, each by name (the
/// verifier names the pass that broke an invariant).
pub const UOP_PASSES: &[(&str, UOpPass)] = &[("hoist", hoist)];

/// A pass run on optimized kernels only, given the code budget (the configuration's
/// `max_unrolled`, unbounded for chosen opts without one).
pub type OptUOpPass = fn(Vec<UOp>, usize) -> Vec<UOp>;

/// The passes run before [`UOP_PASSES`] on optimized kernels only: the unoptimized lowering is
/// the reference they are checked against (`core/tests/pad_bounds.rs`).
pub const OPT_UOP_PASSES: &[(&str, OptUOpPass)] = &[("pad_bounds", pad_bounds_within)];

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
/// hand-coded ones when given; an opt that does not fit the kernel is an error. This is the
/// sequence of passes of the module doc, verified between passes in debug builds.
pub fn lower_ast_with(
    ast: &Ast,
    bufs: Vec<BufParam>,
    cfg: Option<&OptConfig>,
    chosen: Option<&[Opt]>,
    fused: bool,
) -> Result<LinearKernel> {
    let mut kernel = Kernel::new(ast)?;
    check_kernel("kernel", &kernel)?;
    let opts = apply_opts(&mut kernel, cfg, chosen)?;
    check_kernel("opts", &kernel)?;
    if debug() >= 3 && !opts.is_empty() {
        log(3, &format!("opts {opts:?} -> {}", kernel.describe()));
    }
    let dual_mac = cfg.is_some_and(|c| c.dual_mac);
    let mut lk = linearize(&kernel, bufs, kernel.name(), fused, dual_mac)?;
    check_uops("linearize", &lk)?;
    let optimized = cfg.is_some() || chosen.is_some();
    let opt_passes = if optimized { OPT_UOP_PASSES } else { &[] };
    let budget = cfg.map_or(usize::MAX, |c| c.max_unrolled);
    for (name, pass) in opt_passes {
        lk.uops = pass(core::mem::take(&mut lk.uops), budget);
        check_uops(name, &lk)?;
    }
    for (name, pass) in UOP_PASSES {
        lk.uops = pass(core::mem::take(&mut lk.uops));
        check_uops(name, &lk)?;
    }
    Ok(lk)
}

/// The `opts` pass: `chosen` when given, else the hand-coded choice for `cfg`, else none.
fn apply_opts(
    kernel: &mut Kernel,
    cfg: Option<&OptConfig>,
    chosen: Option<&[Opt]>,
) -> Result<Vec<Opt>> {
    match (chosen, cfg) {
        (Some(opts), _) => {
            opts.iter().try_for_each(|o| kernel.apply_opt(*o))?;
            Ok(opts.to_vec())
        }
        (None, Some(cfg)) => Ok(hand_coded(kernel, cfg)),
        (None, None) => Ok(Vec::new()),
    }
}

fn check_kernel(pass: &str, k: &Kernel) -> Result<()> {
    if cfg!(debug_assertions) {
        verify_kernel(pass, k)
    } else {
        Ok(())
    }
}

fn check_uops(pass: &str, lk: &LinearKernel) -> Result<()> {
    if cfg!(debug_assertions) {
        verify_uops(pass, lk)
    } else {
        Ok(())
    }
}

/// The largest element count of a (possibly symbolic) shape.
pub(crate) fn max_size(shape: &[Sint]) -> usize {
    shape.iter().map(|d| d.vmax().max(0) as usize).product()
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

/// How many lowered kernels (and, in the realizer, compiled programs) are kept by default
/// (least recently used entries go first).
pub const DEFAULT_CACHE_CAPACITY: usize = 4096;
static LOWER_CACHE: Mutex<Option<Lru<LowerKey, LinearKernel>>> = Mutex::new(None);
// One lock, not an atomic: 64-bit atomics do not exist on every target the core builds for.
static LOWERED: Mutex<u64> = Mutex::new(0);

/// Sets how many lowered kernels are kept (at least 1); entries beyond it are forgotten at once.
pub fn set_cache_capacity(capacity: usize) {
    LOWER_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(capacity))
        .set_capacity(capacity);
}

/// ASTs lowered so far in this process (cache misses of [`lower`]).
pub fn lowered_count() -> u64 {
    *LOWERED.lock()
}

/// Lowers an item's AST to UOps, optimized as its device asks — with the device's own choice
/// of opts when it makes one ([`Device::choose_opts`](crate::device::Device::choose_opts)), else
/// hand-coded for the device's [`OptConfig`] (cached by AST, buffer parameters, options and
/// choice).
pub fn lower(item: &ScheduleItem) -> Result<LinearKernel> {
    let device = item.out.device();
    let cfg = device.opt_config();
    let bufs = buf_params(item);
    let chosen = cfg.and_then(|_| device.choose_opts(&item.ast, &bufs));
    let key = (item.ast.clone(), bufs, cfg, chosen, device.fused_mulacc());
    if let Some(k) = with_cache(|c| c.get(&key)) {
        return Ok(k);
    }
    let lk = lower_ast_with(
        &item.ast,
        key.1.clone(),
        key.2.as_ref(),
        key.3.as_deref(),
        key.4,
    )?;
    *LOWERED.lock() += 1;
    if debug() >= 3 {
        log(3, &format!("{}", lk));
    }
    with_cache(|c| c.insert(key, lk.clone()));
    Ok(lk)
}

fn with_cache<R>(f: impl FnOnce(&mut Lru<LowerKey, LinearKernel>) -> R) -> R {
    f(LOWER_CACHE
        .lock()
        .get_or_insert_with(|| Lru::new(DEFAULT_CACHE_CAPACITY)))
}
