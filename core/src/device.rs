//! The device traits every runtime plugs in through, and [`Buffer`], a device allocation that
//! frees itself.
//!
//! Invariant: programs address memory through [`BufId`] slots, never through `&mut` borrows, so a
//! device can be driven from any thread and by the JIT's replay; devices report failures as the
//! core's [`Error`](crate::Error).

use alloc::sync::Arc;
use alloc::vec::Vec;

use crate::ast::Ast;
use crate::codegen::kernel::Opt;
use crate::codegen::opt::OptConfig;
use crate::codegen::strided_copy::StridedCopy;
use crate::codegen::uops::{BufParam, LinearKernel};
use crate::dtype::DType;
use crate::error::Result;
use crate::schedule::LayoutOption;

/// A handle to one allocation on a device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufId(pub u64);

/// Allocates device memory and copies bytes in and out.
pub trait Allocator: Send + Sync {
    /// Allocates `bytes` bytes (zeroed), aligned for any dtype.
    fn alloc(&self, bytes: usize) -> Result<BufId>;
    /// Allocates `bytes` bytes like [`Allocator::alloc`], but its contents may be anything (stale
    /// bytes of a freed buffer): for a buffer the caller writes entirely before reading it, such
    /// as a kernel's output, so an allocator that recycles memory need not zero it first (64 MB
    /// of zeroing cost a third of an elementwise kernel's time). The default zeroes.
    fn alloc_for_overwrite(&self, bytes: usize) -> Result<BufId> {
        self.alloc(bytes)
    }
    /// Copies `src` into the start of buffer `b`.
    fn copy_in(&self, b: BufId, src: &[u8]) -> Result<()>;
    /// Copies the start of buffer `b` into `dst`.
    fn copy_out(&self, b: BufId, dst: &mut [u8]) -> Result<()>;
    /// Releases `b`.
    fn free(&self, b: BufId);
    /// Appends to `out` a handle for each of `bufs`, what [`Program::run_handles`] takes: valid
    /// while the buffer lives. A replay resolves each of its buffers once this way instead of
    /// once per kernel argument. The default hands out the ids, which `run_handles`'s default
    /// turns back into ids; a device overrides both or neither.
    fn handles(&self, bufs: &[BufId], out: &mut Vec<u64>) -> Result<()> {
        out.extend(bufs.iter().map(|b| b.0));
        Ok(())
    }
}

/// A compiled kernel.
pub trait Program: Send + Sync {
    /// Runs the kernel on buffers (in the kernel's parameter order) with variable values (in the
    /// kernel's variable order).
    fn run(&self, bufs: &[BufId], vars: &[i64]) -> Result<()>;

    /// [`Program::run`] on buffers given by their handles ([`Allocator::handles`]).
    ///
    /// # Safety
    /// Each handle must come from `handles` of the allocator of the device that compiled this
    /// program, for a buffer that is not freed before the call returns and is as large as the
    /// kernel's parameter at its position needs.
    unsafe fn run_handles(&self, handles: &[u64], vars: &[i64]) -> Result<()> {
        // The default handles are the ids; a few of them stay on the stack.
        let mut stack = [BufId(0); 16];
        if let Some(ids) = stack.get_mut(..handles.len()) {
            for (id, &h) in ids.iter_mut().zip(handles) {
                *id = BufId(h);
            }
            return self.run(ids, vars);
        }
        let ids: Vec<BufId> = handles.iter().map(|&h| BufId(h)).collect();
        self.run(&ids, vars)
    }
}

/// A place kernels run: memory plus a way to turn UOps into programs.
pub trait Device: Send + Sync {
    /// The device's name (`INTERP`, `CLANG`, ...).
    fn name(&self) -> &str;
    /// Its memory.
    fn allocator(&self) -> &dyn Allocator;
    /// Turns a lowered kernel into something that runs.
    fn compile(&self, k: &LinearKernel) -> Result<Arc<dyn Program>>;
    /// Turns several kernels into programs at once (one per kernel, in order): realize hands a
    /// schedule's uncompiled kernels here before running any of them. The default compiles them
    /// one by one; a device whose compiler costs a process per call batches or parallelizes.
    fn compile_many(&self, ks: &[&LinearKernel]) -> Result<Vec<Arc<dyn Program>>> {
        ks.iter().map(|k| self.compile(k)).collect()
    }
    /// How the kernel optimizer shapes kernels for this device; `None` (the default) lowers
    /// kernels unoptimized.
    fn opt_config(&self) -> Option<OptConfig> {
        None
    }
    /// The opts to lower `ast` (over buffers `bufs`, output first) with, when the device picks
    /// them itself — e.g. by timing the candidates of [`crate::codegen::search_space`]. `None`
    /// (the default) leaves the choice to the hand-coded optimizer. Asked only when
    /// [`Device::opt_config`] is `Some`; the opts must be order-preserving ones, so results do
    /// not depend on the answer.
    fn choose_opts(&self, ast: &Ast, bufs: &[BufParam]) -> Option<Vec<Opt>> {
        let _ = (ast, bufs);
        None
    }

    /// Does the device measure the layouts of reduce kernels (then the scheduler builds every
    /// alternative and asks [`Device::choose_layout`])? Default: no — the layout rules decide
    /// alone, and no alternative is built.
    fn measures_layouts(&self) -> bool {
        false
    }

    /// The index of the layout to give a reduce kernel among `options` (the scheduler's rules'
    /// choice is option 0; see [`crate::schedule::LayoutOption`]), e.g. by timing each on
    /// scratch buffers; `None` (the default): the rules' choice. Asked only when
    /// [`Device::measures_layouts`]; every option computes bit-identical results, so results do
    /// not depend on the answer.
    fn choose_layout(&self, options: &[LayoutOption]) -> Option<usize> {
        let _ = options;
        None
    }

    /// A program performing `copy` (a kernel that only moves data, see
    /// [`crate::codegen::strided_copy`]) without compiling anything, when the device can run one
    /// directly on its memory. The realizer asks for one only where a compile would cost more
    /// than the copy's speed could repay (a kernel over constant buffers alone, which runs once:
    /// see `realize.rs`); the program takes the kernel's buffers (output, then source) and no
    /// variables, and must write exactly what the compiled kernel writes. `None` (the default):
    /// the kernel is compiled.
    fn copy_program(&self, copy: &StridedCopy) -> Option<Arc<dyn Program>> {
        let _ = copy;
        None
    }

    /// Does the device have hardware fused multiply-add? Then a reduce's multiply-accumulate
    /// lowers to [`AluOp::Fma`](crate::ops::AluOp::Fma) (one rounding) instead of `MulAcc` (two
    /// roundings), optimized or not, so the choice never depends on the kernel optimizer.
    /// Default: no.
    fn fused_mulacc(&self) -> bool {
        false
    }

    /// How many cores a kernel may be split across (1, the default: kernels run on one core).
    /// An image-major replay runs slices of this many images, one per core.
    fn parallelism(&self) -> usize {
        1
    }
}

/// An allocation on a device, freed when dropped.
pub struct Buffer {
    device: Arc<dyn Device>,
    id: BufId,
    dtype: DType,
    len: usize,
    /// Its owner promised its contents never change ([`Buffer::mark_constant`]).
    constant: core::sync::atomic::AtomicBool,
    /// How many writes it has had ([`Buffer::generation`]).
    writes: core::sync::atomic::AtomicUsize,
}

impl Buffer {
    /// Allocates room for `len` elements of `dtype` on `device`, zeroed.
    pub fn new(device: Arc<dyn Device>, dtype: DType, len: usize) -> Result<Buffer> {
        Buffer::allocate(device, dtype, len, false)
    }

    /// Allocates room for `len` elements of `dtype` on `device` with unspecified contents, for
    /// a caller that writes every element before anything reads one
    /// ([`Allocator::alloc_for_overwrite`]).
    pub fn for_overwrite(device: Arc<dyn Device>, dtype: DType, len: usize) -> Result<Buffer> {
        Buffer::allocate(device, dtype, len, true)
    }

    fn allocate(
        device: Arc<dyn Device>,
        dtype: DType,
        len: usize,
        overwrite: bool,
    ) -> Result<Buffer> {
        let bytes = len
            .checked_mul(dtype.itemsize())
            .ok_or_else(|| crate::Error::overflow(alloc::format!("buffer of {len} x {dtype}")))?;
        let a = device.allocator();
        let id = if overwrite {
            a.alloc_for_overwrite(bytes.max(1))?
        } else {
            a.alloc(bytes.max(1))?
        };
        Ok(Buffer {
            device,
            id,
            dtype,
            len,
            constant: core::sync::atomic::AtomicBool::new(false),
            writes: core::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Records that the buffer's contents will not change from now on (a model's weights), a
    /// hint for the scheduler: a layout copy of a constant is made once per capture (a replay
    /// skips it, see [`crate::jit::Capture::freeze_constants`]), so it pays even when a kernel
    /// reads each element once (`schedule/layout.rs`). Performance only: a schedule made after
    /// the buffer changed anyway still reads its current contents.
    pub fn mark_constant(&self) {
        self.constant
            .store(true, core::sync::atomic::Ordering::Relaxed);
    }

    /// A count of the writes to the buffer: [`Buffer::copy_in`], and every kernel that stores
    /// into it when the realizer or a capture's replay runs it (the paths that write a buffer
    /// a user can hold). A [`crate::jit::Jit`] compares it to know whether a weight changed
    /// since its frozen steps last ran. It wraps around (a `usize`: 32-bit atomics are what
    /// microcontrollers have); two readings equal across exactly 2^32 writes would be missed.
    pub fn generation(&self) -> usize {
        self.writes.load(core::sync::atomic::Ordering::Acquire)
    }

    /// Counts a write to the buffer (see [`Buffer::generation`]).
    pub fn note_written(&self) {
        self.writes
            .fetch_add(1, core::sync::atomic::Ordering::AcqRel);
    }

    /// Was [`Buffer::mark_constant`] called?
    pub fn is_constant(&self) -> bool {
        self.constant.load(core::sync::atomic::Ordering::Relaxed)
    }

    /// The device-side handle.
    pub fn id(&self) -> BufId {
        self.id
    }

    /// The device it lives on.
    pub fn device(&self) -> &Arc<dyn Device> {
        &self.device
    }

    /// Element dtype.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Is it empty?
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Size in bytes.
    pub fn nbytes(&self) -> usize {
        self.len * self.dtype.itemsize()
    }

    /// Copies host bytes in (`src.len()` must be `nbytes()`).
    pub fn copy_in(&self, src: &[u8]) -> Result<()> {
        self.device.allocator().copy_in(self.id, src)?;
        self.note_written();
        Ok(())
    }

    /// Copies the contents out into a new byte vector.
    pub fn to_bytes(&self) -> Result<alloc::vec::Vec<u8>> {
        // A host read of a watched input taints the capture in progress.
        crate::jit::trace::note_reads([self]);
        let mut out = alloc::vec![0u8; self.nbytes()];
        self.device.allocator().copy_out(self.id, &mut out)?;
        Ok(out)
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        self.device.allocator().free(self.id);
    }
}

impl core::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(
            f,
            "Buffer({} x {} on {})",
            self.len,
            self.dtype,
            self.device.name()
        )
    }
}
