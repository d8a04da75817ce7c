//! Interp: the device that runs UOps directly in Rust — no compiler, no std, no libc. It is the
//! core's fallback device and the oracle the C backend is checked against.
//!
//! Invariant: numeric results are those of the C renderer (see DESIGN.md, "Numeric semantics"):
//! ints wrap, `/` truncates, `%` takes the dividend's sign, x/0 and x%0 give 0, float → int casts
//! truncate and saturate with NaN → 0, f16/bf16 compute in f32 and round to nearest-even on store
//! and on casts, and no operation is fused except the explicit `Fma` (one rounding, libm's
//! `fma`/`fmaf`), which kernels contain only when lowered for a device with hardware FMA. A kernel is lowered once (module `lower`) into closures
//! specialised per dtype (module `instr`); a run never dispatches on a dtype per element.
//!
//! Decisions the C renderer must share:
//! - float `max(a, b)` is NaN when either operand is NaN (the first NaN operand), else
//!   `a > b ? a : b` (so `max(0.0, -0.0)` is `-0.0`, the second operand);
//! - bools compute as 0/1 converted back to bool: `+`/max are or, `*`/`/` are and, `-` is xor;
//! - a cast to f16/bf16 converts to f32 first, then rounds to nearest-even (so f64 → f16 rounds
//!   twice, as `(float)x` followed by the f16 conversion does in C);
//! - loop counters compare as i64; an index is the register's value as i64, so a negative or
//!   too-large index (u64 above `i64::MAX` included) is out of range;
//! - `Store` takes an optional fourth source, a bool gate; `Load` takes an optional third;
//! - an ungated access outside its buffer is an [`Error::Device`](crate::Error::Device) naming the
//!   kernel, the UOp, the buffer parameter and the index; a store to a buffer not marked
//!   `writable` is rejected at compile time.

mod elem;
mod instr;
mod lanes;
mod lower;
mod memory;
mod program;

use alloc::sync::Arc;

pub use memory::InterpAllocator;
pub use program::{executed_ops, InterpProgram};

use crate::codegen::uops::LinearKernel;
use crate::device::{Allocator, Device, Program};
use crate::error::Result;

/// The interpreter device (`INTERP`). Cheap to share: programs it compiles keep its memory alive.
#[derive(Default)]
pub struct Interp {
    mem: Arc<InterpAllocator>,
    /// Lower kernels with fused multiply-accumulates (to stand in for an FMA device).
    fused: bool,
}

impl Interp {
    /// A device with empty memory.
    pub fn new() -> Interp {
        Interp::default()
    }

    /// The same device lowering reduce multiply-accumulates fused (`true`: as a device with
    /// hardware FMA does, so it computes bit for bit what such a device computes).
    pub fn with_fused_mulacc(mut self, fused: bool) -> Interp {
        self.fused = fused;
        self
    }

    /// Lowers `k` into an [`InterpProgram`] (what [`Device::compile`] returns, with its type).
    pub fn compile_program(&self, k: &LinearKernel) -> Result<InterpProgram> {
        InterpProgram::new(k, self.mem.clone())
    }

    /// Its memory, with its concrete type.
    pub fn memory(&self) -> &InterpAllocator {
        &self.mem
    }
}

impl Device for Interp {
    fn name(&self) -> &str {
        "INTERP"
    }

    fn allocator(&self) -> &dyn Allocator {
        &*self.mem
    }

    fn compile(&self, k: &LinearKernel) -> Result<Arc<dyn Program>> {
        Ok(Arc::new(self.compile_program(k)?))
    }

    fn fused_mulacc(&self) -> bool {
        self.fused
    }
}
