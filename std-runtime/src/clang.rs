//! The Clang device: kernels rendered to C, compiled by [`Compiler`] into the disk cache, loaded,
//! and called on host memory. Several kernels asked for at once (a schedule's) are compiled as a
//! few translation units in parallel, since each compiler run costs a driver and a linker process.
//! Kernels codegen vectorized compile at `-O1` ([`Effort::Light`]), the rest at `-O2`: a unit
//! holds kernels of one effort, so a schedule mixing both costs at most one more compiler run.
//!
//! Invariants: a buffer's memory never moves while it is allocated (programs receive raw pointers
//! to it), and it is 64-byte aligned so any dtype and vector load is aligned. A kernel compiled
//! in a batch is never compiled again alone by the same device: its stand-alone source maps to
//! the batch's library. Large freed blocks are kept for reuse (zeroed again when handed out,
//! except to a kernel's output, which the kernel overwrites entirely): a fresh large allocation
//! is mapped memory whose every page faults on first touch, which made a 64 MB elementwise
//! output ~5× slower to write than reused memory.

use std::alloc::Layout;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use picograd_core::ast::Ast;
use picograd_core::codegen::c::{
    render_kernel, render_kernel_split, render_program_split, CRenderOpts,
};
use picograd_core::codegen::kernel::Opt;
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::split::split_loops;
use picograd_core::codegen::strided_copy::StridedCopy;
use picograd_core::codegen::uops::{BufParam, LinearKernel, UOpKind};
use picograd_core::device::{Allocator, BufId, Device, Program};
use picograd_core::schedule::LayoutOption;
use picograd_core::{Error, Result};

use crate::compiler::{CompiledLib, Compiler, Effort, EntryFn};
use crate::pool::Pool;
use crate::search::Search;

const ALIGN: usize = 64;

/// `layout.size()` bytes at `ptr` (aligned to [`ALIGN`]), inside the allocation `raw` that
/// `calloc` returned (`free` takes it back).
struct Block {
    ptr: *mut u8,
    raw: *mut u8,
    layout: Layout,
}

impl Block {
    /// Fresh zeroed memory for `layout`, or `None` when out of memory. From `calloc`, over-sized
    /// by the alignment: large blocks then come as the kernel's fresh zero pages, not zeroed
    /// again (an aligned `alloc_zeroed` clears every byte itself: a model's weights were
    /// written twice on upload, 2026-11-28).
    fn zeroed(layout: Layout) -> Option<Block> {
        let bytes = layout.size().checked_add(layout.align())?;
        // SAFETY: calloc with a non-zero size; the result is checked for null.
        let raw = unsafe { libc::calloc(1, bytes) }.cast::<u8>();
        if raw.is_null() {
            return None;
        }
        // SAFETY: the offset is below `align`, within the `size + align` bytes allocated.
        let ptr = unsafe { raw.add(raw.align_offset(layout.align())) };
        Some(Block { ptr, raw, layout })
    }
}

// SAFETY: a block is plain heap memory owned by the allocator's map; access is serialized by
// the map's lock for copies, and kernels get pointers only for the duration of a run.
unsafe impl Send for Block {}

/// Blocks of at least this many bytes are kept for reuse when freed.
const SPARE_MIN: usize = 256 << 10;
/// At most this many bytes of freed blocks are kept.
const SPARE_CAP: usize = 512 << 20;

/// Freed large blocks by size, for reuse.
#[derive(Default)]
struct Spare {
    by_size: HashMap<usize, Vec<Block>>,
    bytes: usize,
}

/// Hashes a buffer id by Fibonacci hashing (a multiplication by 2⁶⁴/φ): distinct ids stay
/// distinct in the low bits the table indexes with, and the high bits it also reads are mixed.
/// Ids come from a counter, never from input, so no one can choose colliding keys.
#[derive(Default)]
struct IdHash(u64);

impl Hasher for IdHash {
    fn write(&mut self, bytes: &[u8]) {
        // Only `u64` keys are hashed; any other key folds its bytes in the same way.
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0 ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Host memory for the Clang device.
#[derive(Default)]
pub struct HostAllocator {
    /// By id, hashed by one multiplication ([`IdHash`]): ids are distinct sequential integers,
    /// and a JIT replay looks up every buffer of every kernel it runs (SipHash, and later a
    /// B-tree's key scans, were a visible part of its per-kernel dispatch).
    blocks: Mutex<HashMap<u64, Block, BuildHasherDefault<IdHash>>>,
    spare: Mutex<Spare>,
    next: AtomicU64,
}

impl HostAllocator {
    fn with_block<T>(&self, b: BufId, f: impl FnOnce(&Block) -> Result<T>) -> Result<T> {
        let blocks = self
            .blocks
            .lock()
            .map_err(|_| Error::Device("host allocator lock poisoned".into()))?;
        let block = blocks
            .get(&b.0)
            .ok_or_else(|| Error::Device(format!("no host buffer {}", b.0)))?;
        f(block)
    }

    /// The memory of each buffer of one kernel call, under one lock (dispatch cost matters
    /// when a JIT replays many small kernels).
    #[cfg(test)]
    fn ptrs(&self, bufs: &[BufId]) -> Result<Vec<*mut core::ffi::c_void>> {
        let mut out = vec![core::ptr::null_mut(); bufs.len()];
        self.ptrs_into(bufs, &mut out)?;
        Ok(out)
    }

    /// [`HostAllocator::ptrs`] into `out` (as long as `bufs`), so a kernel call with few
    /// buffers needs no heap allocation.
    fn ptrs_into(&self, bufs: &[BufId], out: &mut [*mut core::ffi::c_void]) -> Result<()> {
        let blocks = self
            .blocks
            .lock()
            .map_err(|_| Error::Device("host allocator lock poisoned".into()))?;
        for (b, o) in bufs.iter().zip(out.iter_mut()) {
            *o = blocks
                .get(&b.0)
                .map(|blk| blk.ptr.cast())
                .ok_or_else(|| Error::Device(format!("no host buffer {}", b.0)))?;
        }
        Ok(())
    }

    /// The address and size in bytes of buffer `b`.
    fn block_span(&self, b: BufId) -> Result<(*mut u8, usize)> {
        self.with_block(b, |blk| Ok((blk.ptr, blk.layout.size())))
    }

    /// A kept block of exactly `layout`'s size, zeroed unless `overwrite`, if there is one.
    fn reuse(&self, layout: Layout, overwrite: bool) -> Option<Block> {
        if layout.size() < SPARE_MIN {
            return None;
        }
        let mut spare = self.spare.lock().ok()?;
        let blk = spare.by_size.get_mut(&layout.size())?.pop()?;
        spare.bytes -= layout.size();
        drop(spare);
        if !overwrite {
            // SAFETY: the block is `layout.size()` bytes of memory nobody else references.
            unsafe { std::ptr::write_bytes(blk.ptr, 0, layout.size()) };
        }
        Some(blk)
    }

    /// Keeps a freed block for reuse, or returns it when it is small or the store is full.
    fn keep(&self, blk: Block) -> Option<Block> {
        let size = blk.layout.size();
        let Ok(mut spare) = self.spare.lock() else {
            return Some(blk);
        };
        if size < SPARE_MIN || spare.bytes + size > SPARE_CAP {
            return Some(blk);
        }
        spare.bytes += size;
        spare.by_size.entry(size).or_default().push(blk);
        None
    }

    /// A block of `bytes`: a kept one (zeroed unless `overwrite`) or fresh zeroed memory. Every
    /// byte of either is initialized: blocks are born zeroed and only ever written.
    fn alloc_block(&self, bytes: usize, overwrite: bool) -> Result<BufId> {
        let layout = Layout::from_size_align(bytes.max(1), ALIGN)
            .map_err(|e| Error::Device(format!("alloc {bytes} bytes: {e}")))?;
        let blk = match self.reuse(layout, overwrite) {
            Some(blk) => blk,
            None => Block::zeroed(layout)
                .ok_or_else(|| Error::Device(format!("out of memory allocating {bytes} bytes")))?,
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.blocks
            .lock()
            .map_err(|_| Error::Device("host allocator lock poisoned".into()))?
            .insert(id, blk);
        Ok(BufId(id))
    }
}

impl Allocator for HostAllocator {
    fn alloc(&self, bytes: usize) -> Result<BufId> {
        self.alloc_block(bytes, false)
    }

    /// Reuses a kept block as it is: a kernel output is written entirely anyway.
    fn alloc_for_overwrite(&self, bytes: usize) -> Result<BufId> {
        self.alloc_block(bytes, true)
    }

    fn copy_in(&self, b: BufId, src: &[u8]) -> Result<()> {
        self.with_block(b, |blk| {
            if src.len() > blk.layout.size() {
                return Err(Error::Device(format!(
                    "copy_in of {} bytes into a buffer of {}",
                    src.len(),
                    blk.layout.size()
                )));
            }
            // SAFETY: bounds checked above; the block is live while the lock is held.
            unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), blk.ptr, src.len()) };
            Ok(())
        })
    }

    fn copy_out(&self, b: BufId, dst: &mut [u8]) -> Result<()> {
        self.with_block(b, |blk| {
            if dst.len() > blk.layout.size() {
                return Err(Error::Device(format!(
                    "copy_out of {} bytes from a buffer of {}",
                    dst.len(),
                    blk.layout.size()
                )));
            }
            // SAFETY: bounds checked above; the block is live while the lock is held.
            unsafe { std::ptr::copy_nonoverlapping(blk.ptr, dst.as_mut_ptr(), dst.len()) };
            Ok(())
        })
    }

    /// A block's address (blocks never move while they live).
    fn handles(&self, bufs: &[BufId], out: &mut Vec<u64>) -> Result<()> {
        let start = out.len();
        out.resize(start + bufs.len(), 0);
        let mut ptrs = vec![core::ptr::null_mut(); bufs.len()];
        self.ptrs_into(bufs, &mut ptrs)?;
        for (o, p) in out[start..].iter_mut().zip(ptrs) {
            *o = p as usize as u64;
        }
        Ok(())
    }

    fn free(&self, b: BufId) {
        if let Ok(mut blocks) = self.blocks.lock() {
            if let Some(blk) = blocks.remove(&b.0).and_then(|blk| self.keep(blk)) {
                // SAFETY: `raw` came from calloc in `Block::zeroed` and is freed once.
                unsafe { libc::free(blk.raw.cast()) };
            }
        }
    }
}

/// The Clang device.
pub struct Clang {
    compiler: &'static Compiler,
    alloc: Arc<HostAllocator>,
    opts: CRenderOpts,
    /// The kernel optimizer's settings (`None` with `PICOGRAD_NOOPT=1`).
    opt: Option<OptConfig>,
    /// Lower multiply-accumulates fused (the host has FMA; `PICOGRAD_NOFMA=1` turns it off).
    fused: bool,
    /// Cores a large kernel is split across (`PICOGRAD_THREADS`).
    threads: usize,
    /// Kernels with less work than this (flops + bytes / 4) run on one core.
    min_split_work: u64,
    /// Kernels compiled in a batch: stand-alone source -> where it lives.
    batched: Mutex<HashMap<String, Batched>>,
    /// The measured search choosing each kernel's opts (`PICOGRAD_SEARCH`); `None`: the
    /// hand-coded optimizer decides.
    search: Option<Arc<Search>>,
}

/// Where a kernel compiled in a batch lives: the batch's library (held weakly, so it is unloaded
/// when no program uses it), the batch's source (to load it again, from the disk cache, after it
/// was unloaded) and the kernel's symbol in it.
#[derive(Clone)]
struct Batched {
    lib: std::sync::Weak<CompiledLib>,
    unit: Arc<str>,
    effort: Effort,
    symbol: String,
}

/// How many batch entries [`Clang`] keeps before forgetting those of unloaded batches.
const MAX_BATCHED_ENTRIES: usize = 4096;

/// Below about a million operations a kernel is not split: handing a part to a worker (a
/// channel hand-off while it polls, a wake-up of tens of µs when it sleeps) costs more than the
/// part saves. From there up — an
/// MLP layer at batch 1 (784×512: about 1.2M) gains from two cores while the workers poll
/// between back-to-back kernels — and a late worker costs nothing, since the caller claims
/// the parts it has not taken (`pool.rs`).
const MIN_SPLIT_WORK: u64 = 1 << 20;

impl Clang {
    /// A Clang device using the process's shared compiler. Errors when no C compiler is found.
    pub fn new() -> Result<Clang> {
        Ok(Clang {
            compiler: Compiler::shared()?,
            alloc: Arc::new(HostAllocator::default()),
            opts: crate::tuning::host_render_opts(),
            opt: crate::tuning::host_opt_config(),
            fused: crate::tuning::host_fma(),
            threads: crate::tuning::thread_count(),
            min_split_work: MIN_SPLIT_WORK,
            batched: Mutex::new(HashMap::new()),
            search: Search::from_env().map(Arc::new),
        })
    }

    /// The same device compiling with `compiler` (e.g. one with its own cache directory).
    pub fn with_compiler(mut self, compiler: &'static Compiler) -> Clang {
        self.compiler = compiler;
        self
    }

    /// The same device choosing kernel opts with `search` (`None`: hand-coded only, whatever
    /// `PICOGRAD_SEARCH` says).
    pub fn with_search(mut self, search: Option<Search>) -> Clang {
        self.search = search.map(Arc::new);
        self
    }

    /// The measured search in use, if any.
    pub fn search(&self) -> Option<&Search> {
        self.search.as_deref()
    }

    /// Everything besides the kernel that decides how fast a kernel runs here, for keying
    /// searched choices: the compiler, its flags and target, the renderer and the thread split.
    fn identity(&self) -> String {
        let c = self.compiler;
        format!(
            "{} | {} | {:?} | {:?} | {} | {:?} | threads {} from {}",
            c.path().display(),
            c.version(),
            c.flags_for(Effort::Full),
            c.flags_for(Effort::Light),
            c.target(),
            self.opts,
            self.threads,
            self.min_split_work
        )
    }

    /// The same device splitting kernels with at least `min_work` work (flops + bytes / 4)
    /// across `threads` cores (1: never split).
    pub fn with_threads(mut self, threads: usize, min_work: u64) -> Clang {
        self.threads = threads.max(1);
        self.min_split_work = min_work;
        self
    }

    /// How many cores `k` runs on: split kernels need a splittable loop and enough work.
    fn cores_for(&self, k: &LinearKernel) -> usize {
        let work = k.cost.flops.saturating_add(k.cost.bytes / 4);
        let splittable = split_loops(k, self.threads).is_some();
        if self.threads > 1 && splittable && work >= self.min_split_work {
            self.threads
        } else {
            1
        }
    }

    /// The same device rendering kernels with `opts` (e.g. another vector width).
    pub fn with_render_opts(mut self, opts: CRenderOpts) -> Clang {
        self.opts = opts;
        self
    }

    /// The same device with other optimizer settings (`None`: kernels unoptimized).
    pub fn with_opt_config(mut self, opt: Option<OptConfig>) -> Clang {
        self.opt = opt;
        self
    }

    /// The same device lowering reduce multiply-accumulates fused (one rounding) or not. Fused
    /// needs a CPU with FMA to be fast (it is correct anywhere: `__builtin_fmaf` falls back to
    /// libm's `fmaf`).
    pub fn with_fused_mulacc(mut self, fused: bool) -> Clang {
        self.fused = fused;
        self
    }

    /// The compiler in use.
    pub fn compiler(&self) -> &'static Compiler {
        self.compiler
    }
}

struct ClangProgram {
    _lib: Arc<CompiledLib>,
    entry: EntryFn,
    alloc: Arc<HostAllocator>,
    nbufs: usize,
    vars: Vec<(i64, i64)>,
    name: String,
    /// Cores the kernel is split across; above 1 the entry takes `core_id, core_count` after
    /// the variables.
    cores: usize,
}

impl ClangProgram {
    /// Runs every core's share, each with its `core_id, core_count` after the variables. A
    /// share allocates nothing when the variables fit [`ON_STACK`] (a JIT replays about a
    /// hundred split kernels per model call).
    fn run_split(&self, ptrs: &[*mut core::ffi::c_void], vals: &[i32]) {
        let (entry, cores) = (self.entry, self.cores);
        let ptrs = SharedPtrs(ptrs.to_vec());
        let vals = vals.to_vec();
        Pool::global().run(
            cores,
            Arc::new(move |id: usize| {
                let mut stack = [0i32; ON_STACK + 2];
                let mut heap = Vec::new();
                let all: &mut [i32] = if vals.len() + 2 <= stack.len() {
                    &mut stack[..vals.len() + 2]
                } else {
                    heap.resize(vals.len() + 2, 0);
                    &mut heap
                };
                let n = vals.len();
                all[..n].copy_from_slice(&vals);
                all[n] = id as i32;
                all[n + 1] = cores as i32;
                // SAFETY: as in `run`; the caller waits for every core, so the buffers outlive
                // the call, and each core writes only its own share of the output.
                unsafe { entry(ptrs.as_ptr(), all.as_ptr()) };
            }),
        );
    }
}

/// A kernel call's buffer addresses, shared with the pool's workers for the call's duration.
struct SharedPtrs(Vec<*mut core::ffi::c_void>);

impl SharedPtrs {
    /// The addresses as the kernel's argument array (a method, so a closure captures the whole
    /// wrapper, not its field).
    fn as_ptr(&self) -> *const *mut core::ffi::c_void {
        self.0.as_ptr()
    }
}

// SAFETY: the addresses are only passed to the kernel, whose cores each write their own share
// of the output; `Pool::run` returns only after every core has finished with them.
unsafe impl Send for SharedPtrs {}
// SAFETY: as above: the cores only read the addresses.
unsafe impl Sync for SharedPtrs {}

impl ClangProgram {
    /// Checks the argument counts: a program called with the wrong number of buffers or
    /// variables would read past its arrays.
    fn check_counts(&self, nbufs: usize, nvars: usize) -> Result<()> {
        if nbufs != self.nbufs || nvars != self.vars.len() {
            return Err(Error::Device(format!(
                "kernel {} takes {} buffers and {} variables, got {nbufs} and {nvars}",
                self.name,
                self.nbufs,
                self.vars.len(),
            )));
        }
        Ok(())
    }

    /// Runs the kernel on buffer addresses `ptrs` (checked counts; live, sized buffers).
    fn run_ptrs(&self, ptrs: &[*mut core::ffi::c_void], vars: &[i64]) -> Result<()> {
        let mut val_stack = [0i32; ON_STACK];
        let mut val_heap = Vec::new();
        let vals: &mut [i32] = if vars.len() <= ON_STACK {
            &mut val_stack[..vars.len()]
        } else {
            val_heap.resize(vars.len(), 0);
            &mut val_heap
        };
        for ((v, (lo, hi)), out) in vars.iter().zip(&self.vars).zip(vals.iter_mut()) {
            if v < lo || v > hi {
                return Err(Error::Device(format!(
                    "kernel {}: variable value {v} outside [{lo}, {hi}]",
                    self.name
                )));
            }
            *out = *v as i32;
        }
        if self.cores > 1 {
            self.run_split(ptrs, vals);
            return Ok(());
        }
        // SAFETY: the entry has the generated signature; every pointer is a live, aligned
        // allocation sized for the kernel (the scheduler sized it), and values are in bounds.
        unsafe { (self.entry)(ptrs.as_ptr(), vals.as_ptr()) };
        Ok(())
    }
}

/// A JIT replays many small kernels: a call with few buffers and variables (the usual case)
/// keeps them on the stack.
const ON_STACK: usize = 16;

impl Program for ClangProgram {
    fn run(&self, bufs: &[BufId], vars: &[i64]) -> Result<()> {
        self.check_counts(bufs.len(), vars.len())?;
        let mut ptr_stack = [core::ptr::null_mut(); ON_STACK];
        let mut ptr_heap = Vec::new();
        let ptrs: &mut [*mut core::ffi::c_void] = if bufs.len() <= ON_STACK {
            &mut ptr_stack[..bufs.len()]
        } else {
            ptr_heap.resize(bufs.len(), core::ptr::null_mut());
            &mut ptr_heap
        };
        self.alloc.ptrs_into(bufs, ptrs)?;
        self.run_ptrs(ptrs, vars)
    }

    /// The handles are the blocks' addresses ([`HostAllocator`]'s `handles`): no lookup, no
    /// lock.
    unsafe fn run_handles(&self, handles: &[u64], vars: &[i64]) -> Result<()> {
        self.check_counts(handles.len(), vars.len())?;
        // A handle is the address as a `u64`, which on a 64-bit host is a pointer's layout:
        // the handles are the entry's pointer array as they are.
        #[cfg(target_pointer_width = "64")]
        {
            // SAFETY: `u64` and pointers have the same size and alignment here, and each
            // handle is a block's address (the caller's contract).
            let ptrs = unsafe {
                core::slice::from_raw_parts(
                    handles.as_ptr().cast::<*mut core::ffi::c_void>(),
                    handles.len(),
                )
            };
            self.run_ptrs(ptrs, vars)
        }
        #[cfg(not(target_pointer_width = "64"))]
        {
            let ptrs: Vec<*mut core::ffi::c_void> = handles
                .iter()
                .map(|&h| h as usize as *mut core::ffi::c_void)
                .collect();
            self.run_ptrs(&ptrs, vars)
        }
    }
}

/// A kernel that only moves data, run as a strided copy in Rust instead of compiled
/// ([`Device::copy_program`]): the same bytes, without a compiler run.
struct CopyProgram {
    copy: StridedCopy,
    alloc: Arc<HostAllocator>,
}

impl CopyProgram {
    /// Runs the copy from `src` into `dst`, each valid for `src_bytes` and `dst_bytes`.
    ///
    /// # Safety
    /// `dst` and `src` must be live host blocks of at least the given sizes that nothing else
    /// accesses during the call.
    unsafe fn run_on(&self, dst: (*mut u8, usize), src: (*mut u8, usize)) -> Result<()> {
        let n = self.copy.itemsize();
        let (out_bytes, in_bytes) = (self.copy.out_len() * n, self.copy.src_len()? * n);
        if dst.1 < out_bytes || src.1 < in_bytes {
            return Err(Error::Device(format!(
                "strided copy needs {out_bytes} bytes out and {in_bytes} in, got {} and {}",
                dst.1, src.1
            )));
        }
        if dst.0 == src.0 {
            return Err(Error::Device("strided copy onto its own source".into()));
        }
        // SAFETY: distinct live blocks (checked above) of at least these sizes (the caller's
        // contract and the check above); distinct blocks never overlap.
        let (out, inp) = unsafe {
            (
                std::slice::from_raw_parts_mut(dst.0, out_bytes),
                std::slice::from_raw_parts(src.0, in_bytes),
            )
        };
        self.copy.run(inp, out)
    }

    fn check_counts(nbufs: usize, nvars: usize) -> Result<()> {
        if nbufs != 2 || nvars != 0 {
            return Err(Error::Device(format!(
                "a strided copy takes 2 buffers and no variables, got {nbufs} and {nvars}"
            )));
        }
        Ok(())
    }
}

impl Program for CopyProgram {
    fn run(&self, bufs: &[BufId], vars: &[i64]) -> Result<()> {
        Self::check_counts(bufs.len(), vars.len())?;
        let (dst, src) = (
            self.alloc.block_span(bufs[0])?,
            self.alloc.block_span(bufs[1])?,
        );
        // SAFETY: both are the allocator's live blocks with their real sizes; a kernel's
        // buffers are not used by anything else while it runs.
        unsafe { self.run_on(dst, src) }
    }

    /// The handles are the blocks' addresses; their sizes are the kernel's (the caller's
    /// contract).
    unsafe fn run_handles(&self, handles: &[u64], vars: &[i64]) -> Result<()> {
        Self::check_counts(handles.len(), vars.len())?;
        let n = self.copy.itemsize();
        let dst = (handles[0] as usize as *mut u8, self.copy.out_len() * n);
        let src = (handles[1] as usize as *mut u8, self.copy.src_len()? * n);
        // SAFETY: each handle is a live block at least as large as the kernel's parameter
        // (this function's contract), which is what `out_len` and `src_len` ask for.
        unsafe { self.run_on(dst, src) }
    }
}

impl Device for Clang {
    fn name(&self) -> &str {
        "CLANG"
    }

    fn allocator(&self) -> &dyn Allocator {
        &*self.alloc
    }

    fn opt_config(&self) -> Option<OptConfig> {
        self.opt
    }

    fn parallelism(&self) -> usize {
        self.threads
    }

    fn choose_opts(&self, ast: &Ast, bufs: &[BufParam]) -> Option<Vec<Opt>> {
        let search = self.search.as_ref()?;
        search.choose(self, &self.identity(), ast, bufs)
    }

    fn measures_layouts(&self) -> bool {
        self.search.is_some() && self.opt.is_some()
    }

    fn choose_layout(&self, options: &[LayoutOption]) -> Option<usize> {
        let search = self.search.as_ref()?;
        search.choose_layout(self, &self.identity(), options)
    }

    fn fused_mulacc(&self) -> bool {
        self.fused
    }

    /// Host memory is right here: a movement kernel runs as a copy loop in Rust.
    fn copy_program(&self, copy: &StridedCopy) -> Option<Arc<dyn Program>> {
        Some(Arc::new(CopyProgram {
            copy: copy.clone(),
            alloc: self.alloc.clone(),
        }))
    }

    fn compile(&self, k: &LinearKernel) -> Result<Arc<dyn Program>> {
        let cores = self.cores_for(k);
        let src = self.render_alone(k, cores)?;
        picograd_core::context::log(4, &src);
        let found = lock(&self.batched).get(&src).cloned();
        let (lib, symbol) = match found {
            Some(b) => match b.lib.upgrade() {
                Some(lib) => (lib, b.symbol),
                None => (self.compiler.compile_with(&b.unit, b.effort)?, b.symbol),
            },
            None => (
                self.compiler.compile_with(&src, effort_for(k))?,
                k.name.clone(),
            ),
        };
        self.program(k, lib, &symbol, cores)
    }

    fn compile_many(&self, ks: &[&LinearKernel]) -> Result<Vec<Arc<dyn Program>>> {
        if ks.len() < 2 {
            return ks.iter().map(|k| self.compile(k)).collect();
        }
        let t0 = std::time::Instant::now();
        let plan = plan_units(ks, self.threads);
        // One thread per share; a share's units (at most two, one per effort) compile in turn.
        let libs = std::thread::scope(|s| {
            let handles: Vec<_> = plan
                .iter()
                .map(|share| {
                    s.spawn(|| {
                        share
                            .iter()
                            .map(|u| self.compile_group(ks, u))
                            .collect::<Result<Vec<_>>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
                .collect::<Result<Vec<_>>>()
        })?;
        let units: Vec<&Unit> = plan.iter().flatten().collect();
        picograd_core::context::log(
            1,
            &format!(
                "compiled {} kernels as {} translation units ({} at -O1) in {:.1} ms",
                ks.len(),
                units.len(),
                units.iter().filter(|u| u.effort == Effort::Light).count(),
                t0.elapsed().as_secs_f64() * 1e3
            ),
        );
        let mut progs: Vec<Option<Arc<dyn Program>>> = vec![None; ks.len()];
        for (u, lib) in units.into_iter().zip(libs.into_iter().flatten()) {
            for &i in &u.idx {
                progs[i] = Some(self.program(
                    ks[i],
                    lib.clone(),
                    &batch_symbol(ks[i], i),
                    self.cores_for(ks[i]),
                )?);
            }
        }
        // Every index is in exactly one group, so every slot is filled.
        progs
            .into_iter()
            .map(|p| {
                p.ok_or_else(|| Error::internal("clang: a kernel was left out of every batch"))
            })
            .collect()
    }
}

impl Clang {
    /// The translation unit `k` compiles to on its own.
    fn render_alone(&self, k: &LinearKernel, cores: usize) -> Result<String> {
        if cores > 1 {
            render_kernel_split(k, cores, &self.opts)
        } else {
            render_kernel(k, &self.opts)
        }
    }

    /// Compiles kernels `unit.idx` of `ks` as one translation unit at the unit's effort (each
    /// under its [`batch_symbol`]) and remembers each kernel's stand-alone source as compiled
    /// by it.
    fn compile_group(&self, ks: &[&LinearKernel], unit: &Unit) -> Result<Arc<CompiledLib>> {
        let idx = &unit.idx;
        let renamed: Vec<(LinearKernel, usize)> = idx
            .iter()
            .map(|&i| {
                let mut k = ks[i].clone();
                k.name = batch_symbol(ks[i], i);
                (k, self.cores_for(ks[i]))
            })
            .collect();
        let refs: Vec<(&LinearKernel, usize)> = renamed.iter().map(|(k, s)| (k, *s)).collect();
        let src = render_program_split(&refs, &self.opts)?;
        picograd_core::context::log(4, &src);
        let lib = self.compiler.compile_with(&src, unit.effort)?;
        let effort = unit.effort;
        let unit: Arc<str> = src.into();
        let mut batched = lock(&self.batched);
        // Bounded: past this, the entries of unloaded batches go (such a kernel, needed again,
        // is compiled on its own).
        if batched.len() > MAX_BATCHED_ENTRIES {
            batched.retain(|_, b| b.lib.strong_count() > 0);
        }
        for &i in idx {
            let alone = self.render_alone(ks[i], self.cores_for(ks[i]))?;
            let b = Batched {
                lib: Arc::downgrade(&lib),
                unit: unit.clone(),
                effort,
                symbol: batch_symbol(ks[i], i),
            };
            batched.insert(alone, b);
        }
        Ok(lib)
    }

    /// A program running `symbol` of `lib`, which was compiled from `k` for `cores` cores.
    fn program(
        &self,
        k: &LinearKernel,
        lib: Arc<CompiledLib>,
        symbol: &str,
        cores: usize,
    ) -> Result<Arc<dyn Program>> {
        let entry = lib.entry(symbol)?;
        Ok(Arc::new(ClangProgram {
            _lib: lib,
            entry,
            alloc: self.alloc.clone(),
            nbufs: k.bufs.len(),
            vars: k.vars.iter().map(|(_, lo, hi)| (*lo, *hi)).collect(),
            name: k.name.clone(),
            cores,
        }))
    }
}

/// The name kernel `i` of a batch has in the batch's translation unit: distinct even when two
/// kernels share a name.
fn batch_symbol(k: &LinearKernel, i: usize) -> String {
    format!("{}_b{i}", k.name)
}

/// How hard the C compiler works on `k`: [`Effort::Light`] when codegen accumulates its
/// reduction in vectors (its hot loop is already vectorized and unrolled: the compiler's own
/// vectorizers and `-O2`'s extra passes add nothing there), [`Effort::Full`] otherwise (scalar
/// code the compiler vectorizes and schedules itself). Both give the same bits: neither level
/// reassociates or contracts floating-point arithmetic.
pub fn effort_for(k: &LinearKernel) -> Effort {
    let vector_acc =
        |u: &picograd_core::codegen::uops::UOp| matches!(u.kind, UOpKind::VecAcc { .. });
    if k.uops.iter().any(vector_acc) {
        Effort::Light
    } else {
        Effort::Full
    }
}

/// Relative compile cost of one UOp at each effort, for balancing only: on resnet18's conv
/// kernels `-O1` took 0.6× of `-O2`'s CPU time (timed, noisy) and 0.73× of its instructions
/// (callgrind on clang, 2026-11-27).
fn uop_cost(effort: Effort) -> usize {
    match effort {
        Effort::Full => 5,
        Effort::Light => 3,
    }
}

/// What each kernel function costs to compile besides its UOps, in [`uop_cost`] units: the
/// pass pipeline's fixed work per function. resnet18's 17 copy and pad kernels (34–91 UOps)
/// took about 26 ms of clang CPU each at `-O2`, twice what their UOps alone estimate, and its
/// conv kernels about 0.07 ms per unit; without this term the plan gave the share holding them
/// too much: resnet18's cold compile 1,222–1,490 ms (mean 1,388, 7 runs) against 1,081–1,364
/// (mean 1,227) with it, 2 threads, idle machine, 2026-11-28.
const FUNCTION_COST: usize = 200;

/// The estimated compile cost of `k`, in [`uop_cost`] units.
fn compile_cost(k: &LinearKernel) -> usize {
    k.uops.len().max(1) * uop_cost(effort_for(k)) + FUNCTION_COST
}

/// What one more compiler run costs, in [`uop_cost`] units: a driver, `cc1` and linker start
/// (about 0.1 s of CPU, 2026-11-27), about what `-O2` spends on 500 UOps of conv kernel. A
/// share splits off its light kernels only when compiling them at `-O1` saves more than that.
const UNIT_OVERHEAD: usize = 500 * 5;

/// Kernels compiled as one translation unit at one effort (indices into the batch, ascending).
#[derive(Debug, PartialEq, Eq)]
struct Unit {
    effort: Effort,
    idx: Vec<usize>,
}

/// Splits a batch into at most `jobs` shares of similar estimated compile cost
/// ([`compile_cost`]), one compile thread each; a share holds one unit per effort it contains (its
/// light kernels go to its `-O2` unit when they are too few to repay a run, [`UNIT_OVERHEAD`]).
/// The kernels are laid out by effort (full first), then by cost (largest first), and cut into
/// consecutive shares, so at most one share straddles the two efforts: at most `jobs + 1`
/// compiler runs. Deterministic, so the same schedule makes the same translation units (and
/// hits the same disk-cache entries) in every process.
fn plan_units(ks: &[&LinearKernel], jobs: usize) -> Vec<Vec<Unit>> {
    let cost = |i: usize| compile_cost(ks[i]);
    let mut order: Vec<usize> = (0..ks.len()).collect();
    order.sort_by_key(|&i| (effort_for(ks[i]), std::cmp::Reverse(cost(i)), i));
    let total: usize = order.iter().map(|&i| cost(i)).sum();
    let jobs = jobs.clamp(1, ks.len().max(1));
    let mut shares: Vec<Vec<usize>> = vec![Vec::new()];
    let (mut done, mut here) = (0usize, 0usize);
    for i in order {
        let c = cost(i);
        // Close the share when it reached its fair part of what is left, or when adding
        // this kernel would overshoot that part by more than leaving it out falls short.
        let left = shares.len() < jobs;
        let fair = (total - done).div_ceil(jobs + 1 - shares.len());
        let (over, short) = ((here + c).saturating_sub(fair), fair.saturating_sub(here));
        if left && here > 0 && (short == 0 || over > short) {
            shares.push(Vec::new());
            done += here;
            here = 0;
        }
        here += c;
        if let Some(s) = shares.last_mut() {
            s.push(i);
        }
    }
    shares
        .into_iter()
        .filter(|s| !s.is_empty())
        .map(|mut s| {
            s.sort_unstable();
            let (light, full): (Vec<usize>, Vec<usize>) =
                s.iter().partition(|&&i| effort_for(ks[i]) == Effort::Light);
            let saving: usize = light
                .iter()
                .map(|&i| {
                    ks[i].uops.len().max(1) * (uop_cost(Effort::Full) - uop_cost(Effort::Light))
                })
                .sum();
            match (full.is_empty(), light.is_empty()) {
                (true, _) => vec![Unit {
                    effort: Effort::Light,
                    idx: light,
                }],
                (false, true) => vec![Unit {
                    effort: Effort::Full,
                    idx: full,
                }],
                // Too few light kernels to pay for their own compiler run: all at -O2.
                (false, false) if saving <= UNIT_OVERHEAD => vec![Unit {
                    effort: Effort::Full,
                    idx: s,
                }],
                (false, false) => vec![
                    Unit {
                        effort: Effort::Full,
                        idx: full,
                    },
                    Unit {
                        effort: Effort::Light,
                        idx: light,
                    },
                ],
            }
        })
        .collect()
}

fn panicked() -> Error {
    Error::Device("a kernel compile thread panicked".into())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use picograd_core::codegen::uops::UOp;
    use picograd_core::DType;

    /// A kernel of `n` UOps, with a vector accumulator (an [`Effort::Light`] kernel) or not.
    fn fake(n: usize, vector: bool) -> LinearKernel {
        let op = |kind| UOp {
            kind,
            dtype: DType::F32,
            src: Vec::new(),
        };
        let mut uops = vec![op(UOpKind::Loop); n.saturating_sub(1)];
        uops.push(match vector {
            true => op(UOpKind::VecAcc {
                init: picograd_core::ops::Scalar::from_f64(0.0, DType::F32),
                lanes: 8,
            }),
            false => op(UOpKind::EndLoop),
        });
        LinearKernel {
            name: format!("k{n}"),
            uops,
            bufs: Vec::new(),
            vars: Vec::new(),
            cost: Default::default(),
        }
    }

    /// The plan covers every kernel exactly once; a light unit holds only light kernels, and
    /// light units exist when the light kernels are many; at most `jobs` shares and `jobs + 1`
    /// units; shares within one kernel's cost of the fair share; the same plan every time.
    #[test]
    fn plans_cover_every_kernel_once_in_balanced_shares() {
        let sizes = [
            600, 35, 598, 91, 500, 34, 522, 26, 328, 603, 185, 49, 550, 73, 121, 7,
        ];
        for mix in 0..4u32 {
            let ks: Vec<LinearKernel> = sizes
                .iter()
                .enumerate()
                .map(|(i, &n)| fake(n, mix < 3 && (i as u32 + mix) % 3 != 0 || i == 15))
                .collect();
            let refs: Vec<&LinearKernel> = ks.iter().collect();
            for jobs in 1..=5 {
                let plan = plan_units(&refs, jobs);
                assert_eq!(plan, plan_units(&refs, jobs), "deterministic");
                assert!(
                    !plan.is_empty() && plan.len() <= jobs,
                    "{jobs} jobs: {plan:?}"
                );
                let units: Vec<&Unit> = plan.iter().flatten().collect();
                assert!(units.len() <= jobs + 1, "{jobs} jobs: {plan:?}");
                assert!(plan.iter().filter(|s| s.len() > 1).count() <= 1);
                let mut seen: Vec<usize> = units.iter().flat_map(|u| u.idx.clone()).collect();
                seen.sort_unstable();
                assert_eq!(seen, (0..ks.len()).collect::<Vec<_>>(), "{plan:?}");
                for u in &units {
                    // A light unit holds light kernels only; a full one may take a few.
                    if u.effort == Effort::Light {
                        assert!(u.idx.iter().all(|&i| effort_for(&ks[i]) == Effort::Light));
                    }
                    assert!(u.idx.windows(2).all(|w| w[0] < w[1]));
                }
                let light_total: usize = (0..ks.len())
                    .filter(|&i| effort_for(&ks[i]) == Effort::Light)
                    .map(|i| ks[i].uops.len() * 2)
                    .sum();
                if light_total > UNIT_OVERHEAD * jobs {
                    assert!(units.iter().any(|u| u.effort == Effort::Light), "{plan:?}");
                }
                let cost = |i: usize| compile_cost(&ks[i]);
                let total: usize = (0..ks.len()).map(cost).sum();
                let biggest = (0..ks.len()).map(cost).max().unwrap_or(0);
                let fair = total.div_ceil(plan.len());
                for share in &plan {
                    let c: usize = share.iter().flat_map(|u| &u.idx).map(|&i| cost(i)).sum();
                    assert!(
                        c <= fair + biggest,
                        "{jobs} jobs, share {c} > {fair} + {biggest}"
                    );
                }
            }
        }
    }

    /// The effort follows codegen's vectors: a vector accumulator compiles light, anything
    /// else (scalar code clang vectorizes itself) at full effort.
    #[test]
    fn vector_accumulators_compile_light() {
        assert_eq!(effort_for(&fake(10, true)), Effort::Light);
        assert_eq!(effort_for(&fake(10, false)), Effort::Full);
    }

    /// Fresh blocks of every size class (small heap chunks, and large ones the C library maps)
    /// start at an [`ALIGN`]-aligned address and read as zeros, also after small blocks that
    /// held other bytes were freed (the C library hands their memory out again).
    #[test]
    fn fresh_blocks_are_aligned_and_zeroed() {
        let a = HostAllocator::default();
        for round in 0..2 {
            let mut held = Vec::new();
            for n in [1, 3, 64, 1000, 4097, SPARE_MIN - 1, 3 << 20] {
                let b = a.alloc(n).unwrap();
                let p = a.ptrs(&[b]).unwrap()[0] as usize;
                assert_eq!(p % ALIGN, 0, "round {round}: {n} bytes at {p:#x}");
                let mut out = vec![1u8; n];
                a.copy_out(b, &mut out).unwrap();
                assert!(out.iter().all(|&x| x == 0), "round {round}: {n} bytes");
                a.copy_in(b, &vec![0xefu8; n]).unwrap();
                held.push(b);
            }
            for b in held {
                a.free(b);
            }
        }
    }

    /// A reused large block is handed out zeroed, like a fresh one, and is really reused; for a
    /// kernel output ([`Allocator::alloc_for_overwrite`]) it is reused too.
    #[test]
    fn reused_blocks_come_back_zeroed() {
        let a = HostAllocator::default();
        let n = SPARE_MIN + 64;
        let b = a.alloc(n).unwrap();
        let first = a.ptrs(&[b]).unwrap()[0];
        a.copy_in(b, &vec![0xabu8; n]).unwrap();
        a.free(b);
        let c = a.alloc(n).unwrap();
        assert_eq!(a.ptrs(&[c]).unwrap()[0], first, "the freed block is reused");
        let mut out = vec![1u8; n];
        a.copy_out(c, &mut out).unwrap();
        assert!(out.iter().all(|&x| x == 0));
        // A kernel output takes the kept block as it is; freed again, it comes back zeroed.
        a.copy_in(c, &vec![0xcdu8; n]).unwrap();
        a.free(c);
        let d = a.alloc_for_overwrite(n).unwrap();
        assert_eq!(
            a.ptrs(&[d]).unwrap()[0],
            first,
            "reused for a kernel output"
        );
        a.free(d);
        let e = a.alloc(n).unwrap();
        a.copy_out(e, &mut out).unwrap();
        assert!(out.iter().all(|&x| x == 0));
        // Small blocks go back to the system allocator.
        let s = a.alloc(64).unwrap();
        a.free(s);
        assert_eq!(a.spare.lock().unwrap().bytes, 0);
    }
}
