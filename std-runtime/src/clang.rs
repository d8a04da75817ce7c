//! The Clang device: kernels rendered to C, compiled by [`Compiler`] into the disk cache, loaded,
//! and called on host memory.
//!
//! Invariant: a buffer's memory never moves while it is allocated (programs receive raw pointers
//! to it), and it is 64-byte aligned so any dtype and vector load is aligned.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use picograd_core::codegen::c::{render_kernel, render_kernel_split, CRenderOpts};
use picograd_core::codegen::opt::OptConfig;
use picograd_core::codegen::split::outer_split;
use picograd_core::codegen::uops::LinearKernel;
use picograd_core::device::{Allocator, BufId, Device, Program};
use picograd_core::{Error, Result};

use crate::compiler::{CompiledLib, Compiler, EntryFn};
use crate::pool::Pool;

const ALIGN: usize = 64;

struct Block {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: a block is plain heap memory owned by the allocator's map; access is serialized by
// the map's lock for copies, and kernels get pointers only for the duration of a run.
unsafe impl Send for Block {}

/// Host memory for the Clang device.
#[derive(Default)]
pub struct HostAllocator {
    blocks: Mutex<HashMap<u64, Block>>,
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

    fn ptr(&self, b: BufId) -> Result<*mut u8> {
        self.with_block(b, |blk| Ok(blk.ptr))
    }
}

impl Allocator for HostAllocator {
    fn alloc(&self, bytes: usize) -> Result<BufId> {
        let layout = Layout::from_size_align(bytes.max(1), ALIGN)
            .map_err(|e| Error::Device(format!("alloc {bytes} bytes: {e}")))?;
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::Device(format!(
                "out of memory allocating {bytes} bytes"
            )));
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.blocks
            .lock()
            .map_err(|_| Error::Device("host allocator lock poisoned".into()))?
            .insert(id, Block { ptr, layout });
        Ok(BufId(id))
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

    fn free(&self, b: BufId) {
        if let Ok(mut blocks) = self.blocks.lock() {
            if let Some(blk) = blocks.remove(&b.0) {
                // SAFETY: allocated with this layout in `alloc`.
                unsafe { dealloc(blk.ptr, blk.layout) };
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
}

/// Below about four million operations, waking workers costs more than it saves: a split
/// kernel waits for a worker's wake-up (tens of µs on a shared or virtual machine), longer than
/// a matrix-vector product of an MLP layer at batch 1 (784×512: about 1.2M) takes on one core.
const MIN_SPLIT_WORK: u64 = 1 << 22;

impl Clang {
    /// A Clang device using the process's shared compiler. Errors when no C compiler is found.
    pub fn new() -> Result<Clang> {
        Ok(Clang {
            compiler: Compiler::shared()?,
            alloc: Arc::new(HostAllocator::default()),
            opts: CRenderOpts::default(),
            opt: crate::tuning::host_opt_config(),
            fused: crate::tuning::host_fma(),
            threads: crate::tuning::thread_count(),
            min_split_work: MIN_SPLIT_WORK,
        })
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
        let splittable = outer_split(k).is_some();
        if self.threads > 1 && splittable && work >= self.min_split_work {
            self.threads
        } else {
            1
        }
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
    /// Runs every core's share, each with its `core_id, core_count` after the variables.
    fn run_split(&self, ptrs: Vec<usize>, vals: Vec<i32>) {
        let (entry, cores) = (self.entry, self.cores);
        Pool::global().run(
            cores,
            Arc::new(move |id: usize| {
                let ptrs: Vec<*mut core::ffi::c_void> = ptrs.iter().map(|&p| p as _).collect();
                let mut vals = vals.clone();
                vals.extend([id as i32, cores as i32]);
                // SAFETY: as in `run`; the caller waits for every core, so the buffers outlive
                // the call, and each core writes only its own share of the output.
                unsafe { entry(ptrs.as_ptr(), vals.as_ptr()) };
            }),
        );
    }
}

impl Program for ClangProgram {
    fn run(&self, bufs: &[BufId], vars: &[i64]) -> Result<()> {
        if bufs.len() != self.nbufs || vars.len() != self.vars.len() {
            return Err(Error::Device(format!(
                "kernel {} takes {} buffers and {} variables, got {} and {}",
                self.name,
                self.nbufs,
                self.vars.len(),
                bufs.len(),
                vars.len()
            )));
        }
        let ptrs = bufs
            .iter()
            .map(|b| self.alloc.ptr(*b).map(|p| p.cast()))
            .collect::<Result<Vec<*mut core::ffi::c_void>>>()?;
        let mut vals = Vec::with_capacity(vars.len());
        for (v, (lo, hi)) in vars.iter().zip(&self.vars) {
            if v < lo || v > hi {
                return Err(Error::Device(format!(
                    "kernel {}: variable value {v} outside [{lo}, {hi}]",
                    self.name
                )));
            }
            vals.push(*v as i32);
        }
        if self.cores > 1 {
            self.run_split(ptrs.iter().map(|&p| p as usize).collect(), vals);
            return Ok(());
        }
        // SAFETY: the entry has the generated signature; every pointer is a live, aligned
        // allocation sized for the kernel (the scheduler sized it), and values are in bounds.
        unsafe { (self.entry)(ptrs.as_ptr(), vals.as_ptr()) };
        Ok(())
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

    fn fused_mulacc(&self) -> bool {
        self.fused
    }

    fn compile(&self, k: &LinearKernel) -> Result<Arc<dyn Program>> {
        let cores = self.cores_for(k);
        let src = if cores > 1 {
            render_kernel_split(k, &self.opts)
        } else {
            render_kernel(k, &self.opts)
        };
        picograd_core::context::log(4, &src);
        let lib = self.compiler.compile(&src)?;
        let entry = lib.entry(&k.name)?;
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
