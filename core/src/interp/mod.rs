//! Interp: the device that runs UOps directly in Rust — no compiler, no std, no libc. It is the
//! core's fallback device and the oracle the C backend is checked against.
//!
//! Invariant: numeric results are those of the C renderer (see DESIGN.md, "Numeric semantics"):
//! ints wrap, `/` truncates, `%` takes the dividend's sign, x/0 and x%0 give 0, float → int casts
//! truncate and saturate with NaN → 0, f16/bf16 compute in f32 and round to nearest-even on store
//! and on casts, and no operation is fused. A kernel is lowered once ([`lower`]) into closures
//! specialised per dtype ([`instr`]); a run never dispatches on a dtype per element.

mod elem;
mod instr;
mod lower;
mod memory;
mod program;

use alloc::sync::Arc;

pub use memory::InterpAllocator;
pub use program::InterpProgram;

use crate::codegen::uops::LinearKernel;
use crate::device::{Allocator, Device, Program};
use crate::error::Result;

/// The interpreter device (`INTERP`). Cheap to share: programs it compiles keep its memory alive.
#[derive(Default)]
pub struct Interp {
    mem: Arc<InterpAllocator>,
}

impl Interp {
    /// A device with empty memory.
    pub fn new() -> Interp {
        Interp::default()
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
}
