//! [`InterpProgram`]: a kernel lowered once, run many times.
//!
//! Invariant: a program is immutable after compilation; every run gets its own register file and
//! its own lock on the buffers, so runs on different buffers proceed concurrently, and runs that
//! share a written buffer take turns.

use alloc::format;
use alloc::sync::Arc;

use super::instr::{exec, Fault, FaultKind};
use super::lower::{lower, scalar_reg, Lowered};
use super::memory::{Held, InterpAllocator};
use crate::codegen::uops::LinearKernel;
use crate::device::{BufId, Program};
use crate::error::{Error, Result};
use crate::ops::Scalar;

/// A kernel compiled for [`Interp`](super::Interp).
pub struct InterpProgram {
    kernel: LinearKernel,
    lowered: Lowered,
    mem: Arc<InterpAllocator>,
}

impl InterpProgram {
    /// Lowers `kernel` to run on buffers of `mem`.
    pub(crate) fn new(kernel: &LinearKernel, mem: Arc<InterpAllocator>) -> Result<InterpProgram> {
        Ok(InterpProgram {
            lowered: lower(kernel)?,
            kernel: kernel.clone(),
            mem,
        })
    }

    /// The kernel this program runs.
    pub fn kernel(&self) -> &LinearKernel {
        &self.kernel
    }

    fn err(&self, m: impl core::fmt::Display) -> Error {
        Error::Device(format!("interp: kernel {}: {m}", self.kernel.name))
    }

    /// The initial register file with the variables filled in, after checking them.
    fn registers(&self, vars: &[i64]) -> Result<alloc::vec::Vec<u64>> {
        let k = &self.kernel;
        if vars.len() != k.vars.len() {
            return Err(self.err(format_args!(
                "{} variable values given, the kernel takes {}",
                vars.len(),
                k.vars.len()
            )));
        }
        for ((name, min, max), v) in k.vars.iter().zip(vars) {
            if v < min || v > max {
                return Err(self.err(format_args!(
                    "variable {name} = {v} is outside [{min}, {max}]"
                )));
            }
        }
        let mut regs = self.lowered.regs.clone();
        for s in &self.lowered.vars {
            regs[s.reg] = scalar_reg(Scalar::from_i64(vars[s.pos], s.dtype), s.dtype);
        }
        Ok(regs)
    }

    fn fault(&self, f: Fault) -> Error {
        let Some(dt) = self.kernel.bufs.get(f.slot).map(|b| b.dtype) else {
            return self.err(format_args!(
                "uop {}: index {} out of range for local {} ({} elements)",
                f.uop,
                f.index,
                f.slot - self.kernel.bufs.len(),
                f.len
            ));
        };
        let what = self.kernel.uops[f.uop].kind.clone();
        match f.kind {
            FaultKind::OutOfRange => self.err(format_args!(
                "uop {} ({what}): index {} out of range for buffer {} ({} elements of {dt})",
                f.uop, f.index, f.slot, f.len
            )),
            FaultKind::ReadOnly => self.err(format_args!(
                "uop {} ({what}): buffer {} is held read-only",
                f.uop, f.slot
            )),
        }
    }
}

impl Program for InterpProgram {
    fn run(&self, bufs: &[BufId], vars: &[i64]) -> Result<()> {
        if bufs.len() != self.kernel.bufs.len() {
            return Err(self.err(format_args!(
                "{} buffers given, the kernel takes {}",
                bufs.len(),
                self.kernel.bufs.len()
            )));
        }
        let mut regs = self.registers(vars)?;
        let held = Held::new(&self.mem, bufs, &self.lowered.written).map_err(|e| self.err(e))?;
        let mut mem = held.lock();
        // Each run's own scratch (zeroed; the kernel stores before it loads).
        mem.scratch = self
            .lowered
            .locals
            .iter()
            .map(|&n| alloc::vec![0u8; n])
            .collect();
        let n = exec(&self.lowered.code, &mut regs, &mut mem).map_err(|f| self.fault(f))?;
        *EXECUTED.lock() += n;
        Ok(())
    }
}

// One lock, not an atomic: 64-bit atomics do not exist on every target the core builds for.
static EXECUTED: spin::Mutex<u64> = spin::Mutex::new(0);

/// Interpreter operations (ALU ops, loads, stores) executed so far in this process, over every
/// program run: the work a kernel did at its variable values (loops run to the bound value).
pub fn executed_ops() -> u64 {
    *EXECUTED.lock()
}
